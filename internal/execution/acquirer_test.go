package execution

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// TestAcquireLoadGroups acquires many executions at once, each several times over: every
// execution is leased exactly once, the other callers find it busy, an unknown id is not found,
// and each lease carries its own log.
func TestAcquireLoadGroups(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		exec := drv.Executor()
		e := New(Config{Exec: exec, WorkerID: "w1", Lease: time.Minute, PendingPollInterval: time.Hour,
			RetryPollInterval: time.Hour, TimeoutCheckInterval: time.Hour, DeadlineCheckInterval: time.Hour})
		require.NoError(t, e.Start(ctx))
		t.Cleanup(func() { _ = e.Stop(context.Background()) })

		const executions, callers = 20, 3
		params := make([]*driver.ExecutionInsertParams, executions)
		for i := range params {
			params[i] = &driver.ExecutionInsertParams{
				ID: uuid.Must(uuid.NewV7()), Model: "process", Type: "T", Domain: "d", State: json.RawMessage(`{}`),
				Log: []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "STEP", Name: "step-of-" + uuid.NewString()}},
			}
		}
		_, err := e.Insert(ctx, params)
		require.NoError(t, err)

		type result struct {
			id    uuid.UUID
			lease *Lease
			err   error
		}
		results := make(chan result, executions*callers+1)
		var wg sync.WaitGroup
		for _, p := range params {
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lease, err := e.AcquireLoad(ctx, p.ID)
					results <- result{p.ID, lease, err}
				}()
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.AcquireLoad(ctx, uuid.New())
			results <- result{err: err}
		}()
		wg.Wait()
		close(results)

		leased := map[uuid.UUID]*Lease{}
		busy := map[uuid.UUID]int{}
		notFound := 0
		for r := range results {
			switch {
			case r.err == nil:
				require.Nil(t, leased[r.id], "execution %s leased twice", r.id)
				leased[r.id] = r.lease
			case errors.Is(r.err, ErrBusy):
				busy[r.id]++
			case errors.Is(r.err, driver.ErrNotFound):
				notFound++
			default:
				t.Fatalf("AcquireLoad %s: %v", r.id, r.err)
			}
		}
		require.Equal(t, 1, notFound)
		require.Len(t, leased, executions)
		for _, p := range params {
			lease := leased[p.ID]
			require.Equal(t, callers-1, busy[p.ID])
			require.Equal(t, "w1", lease.Row.WorkerID)
			log, err := lease.Log(ctx)
			require.NoError(t, err)
			require.Len(t, log, 1)
			require.Equal(t, p.Log[0].Name, log[0].Name, "each lease carries its own log")
			require.NoError(t, lease.Release(ctx))
		}
	})
}
