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

// TestLogCache resumes an execution whose log this engine cached when it let go: the log it
// reads is the cached prefix (the same entries, not read again) followed by what another
// instance appended meanwhile, exactly the log in the database.
func TestLogCache(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		newEngine := func(worker string) *Engine {
			return New(Config{Exec: drv.Executor(), WorkerID: worker, Lease: time.Minute})
		}
		a, b := newEngine("a"), newEngine("b")
		id := uuid.Must(uuid.NewV7())
		leases, err := a.Insert(ctx, []*driver.ExecutionInsertParams{{
			ID: id, Model: "process", Type: "T", Domain: "d", State: json.RawMessage(`{}`), Lease: time.Minute, WorkerID: "a",
		}})
		require.NoError(t, err)
		first := &driver.ExecutionLogEntry{EntryType: "STEP", Name: "one", StepStatus: "COMPLETED", Response: json.RawMessage(`{"n":1}`)}
		cp := leases[0].Base()
		cp.Status, cp.Release, cp.Log = driver.ExecutionWaitingForAsync, true, []*driver.ExecutionLogEntry{first}
		require.NoError(t, leases[0].Checkpoint(ctx, cp))

		// Another instance appends an entry.
		lb, err := b.AcquireLoad(ctx, id)
		require.NoError(t, err)
		_, err = lb.Log(ctx)
		require.NoError(t, err)
		cp = lb.Base()
		cp.Release, cp.Log = true, []*driver.ExecutionLogEntry{{EntryType: "STEP", Name: "two", StepStatus: "COMPLETED"}}
		require.NoError(t, lb.Checkpoint(ctx, cp))

		for _, acquire := range []func() (*Lease, error){
			func() (*Lease, error) { return a.AcquireLoad(ctx, id) },
			func() (*Lease, error) { // the pollers' path: claim, then Load
				row, err := drv.Executor().ExecutionAcquire(ctx, &driver.ExecutionAcquireParams{ID: id, Lease: time.Minute, WorkerID: "a"})
				if err != nil {
					return nil, err
				}
				l := a.newLease(row)
				return l, l.Load(ctx)
			},
		} {
			la, err := acquire()
			require.NoError(t, err)
			log, err := la.Log(ctx)
			require.NoError(t, err)
			stored, err := drv.Executor().ExecutionLogList(ctx, id)
			require.NoError(t, err)
			require.Len(t, log, 2)
			require.Same(t, first, log[0], "the cached entry is reused, not read again")
			require.Equal(t, stored[1], log[1])
			require.Equal(t, []string{"one", "two"}, []string{log[0].Name, log[1].Name})
			// Releasing caches the longer log; a terminal checkpoint forgets it.
			require.NoError(t, la.Release(ctx))
			cached, after := a.logs.get(id)
			require.Len(t, cached, 2)
			require.Equal(t, int64(2), after)
		}
		la, err := a.AcquireLoad(ctx, id)
		require.NoError(t, err)
		cp = la.Base()
		cp.Status, cp.Release = driver.ExecutionCompleted, true
		require.NoError(t, la.Checkpoint(ctx, cp))
		cached, _ := a.logs.get(id)
		require.Nil(t, cached)
	})
}

// TestAcquiredLeaseReadsStoredResponses: an acquire does not read responses, so a lease whose
// row shows unapplied ones reads them when asked, and one whose row shows none does not query.
func TestAcquiredLeaseReadsStoredResponses(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		exec := drv.Executor()
		e := New(Config{Exec: exec, WorkerID: "w1", Lease: time.Minute})
		quiet, answered := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
		var params []*driver.ExecutionInsertParams
		for _, id := range []uuid.UUID{quiet, answered} {
			params = append(params, &driver.ExecutionInsertParams{ID: id, Model: "process", Type: "T", Domain: "d", State: json.RawMessage(`{}`)})
		}
		_, err := e.Insert(ctx, params)
		require.NoError(t, err)
		for _, name := range []string{"first", "second"} {
			_, err := exec.ExecutionResponseInsert(ctx, &driver.ExecutionResponseInsertParams{ExecutionID: answered, Name: name, Payload: json.RawMessage(`{}`)})
			require.NoError(t, err)
		}

		lease, err := e.AcquireLoad(ctx, answered)
		require.NoError(t, err)
		responses, err := lease.Responses(ctx)
		require.NoError(t, err)
		require.Len(t, responses, 2)
		require.Equal(t, "first", responses[0].Name)
		require.Equal(t, "second", responses[1].Name)

		lease, err = e.AcquireLoad(ctx, quiet)
		require.NoError(t, err)
		responses, err = lease.Responses(ctx)
		require.NoError(t, err)
		require.Empty(t, responses)
	})
}
