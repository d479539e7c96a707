package execution

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// funcRunner runs executions of one type with a function.
type funcRunner struct {
	typ string
	run func(ctx context.Context, lease *Lease) error
}

func (r funcRunner) Type() string                                     { return r.typ }
func (r funcRunner) Run(ctx context.Context, lease *Lease) error      { return r.run(ctx, lease) }
func (r funcRunner) Deadline(ctx context.Context, lease *Lease) error { return lease.Release(ctx) }

// startedEngine starts an engine that polls often, stopped when the test ends.
func startedEngine(t *testing.T, drv driver.Driver, runners ...Runner) *Engine {
	t.Helper()
	e := New(Config{Exec: drv.Executor(), WorkerID: "w1", Lease: time.Minute, PendingPollInterval: 10 * time.Millisecond,
		RetryPollInterval: time.Hour, TimeoutCheckInterval: time.Hour, DeadlineCheckInterval: time.Hour})
	for _, r := range runners {
		require.NoError(t, e.Register(r))
	}
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	return e
}

// waitEnded polls an execution until it is terminal.
func waitEnded(t *testing.T, exec driver.Executor, id uuid.UUID) *driver.ExecutionRow {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		row, err := exec.ExecutionGet(context.Background(), id)
		require.NoError(t, err)
		if row.Status.Terminal() {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s is still %s", id, row.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestParentRunnerSeesChildOutcomeOnce: a parent starts a child in its checkpoint and waits; the
// child's completion reaches the parent's runner as one response, which wakes it to complete.
func TestParentRunnerSeesChildOutcomeOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		childID := uuid.Must(uuid.NewV7())
		var (
			mu   sync.Mutex
			seen []*driver.ExecutionResponseRow
		)
		parent := funcRunner{typ: "Parent", run: func(ctx context.Context, lease *Lease) error {
			log, err := lease.Log(ctx)
			if err != nil {
				return err
			}
			responses, err := lease.Responses(ctx)
			if err != nil {
				return err
			}
			cp := lease.Base()
			cp.Release = true
			if len(log) == 0 {
				cp.Status, cp.CurrentWait = driver.ExecutionWaitingForAsync, "child"
				cp.Log = []*driver.ExecutionLogEntry{{EntryType: "STEP", Name: "spawn", StepStatus: "COMPLETED"}}
				cp.Children = []*driver.ExecutionInsertParams{{ID: childID, Type: "Child", State: json.RawMessage(`{"n":7}`)}}
				return lease.Checkpoint(ctx, cp)
			}
			mu.Lock()
			seen = append(seen, responses...)
			mu.Unlock()
			if len(responses) == 0 {
				return lease.Checkpoint(ctx, cp) // woken without news: keep waiting
			}
			cp.Status, cp.CurrentWait = driver.ExecutionCompleted, ""
			cp.ResponsesApplied = responses[len(responses)-1].Seq
			return lease.Checkpoint(ctx, cp)
		}}
		child := funcRunner{typ: "Child", run: func(ctx context.Context, lease *Lease) error {
			cp := lease.Base()
			cp.Status, cp.Release, cp.State = driver.ExecutionCompleted, true, json.RawMessage(`{"n":8}`)
			return lease.Checkpoint(ctx, cp)
		}}
		e := startedEngine(t, drv, parent, child)
		parentID := uuid.Must(uuid.NewV7())
		_, err := e.Insert(ctx, []*driver.ExecutionInsertParams{{ID: parentID, Model: "test", Type: "Parent", Domain: "d"}})
		require.NoError(t, err)

		row := waitEnded(t, drv.Executor(), parentID)
		require.Equal(t, driver.ExecutionCompleted, row.Status)
		childRow := waitEnded(t, drv.Executor(), childID)
		require.Equal(t, parentID, childRow.ParentID)
		require.Equal(t, parentID, childRow.RootID)
		require.Equal(t, "test", childRow.Model, "the child takes what it leaves empty from its parent")

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, seen, 1, "the parent's runner sees the child's outcome once")
		require.Equal(t, driver.ChildResponseName(childID), seen[0].Name)
		var outcome driver.ChildOutcome
		require.NoError(t, json.Unmarshal(seen[0].Payload, &outcome))
		require.Equal(t, childID, outcome.ChildID)
		require.Equal(t, driver.ExecutionCompleted, outcome.Status)
		require.JSONEq(t, `{"n":8}`, string(outcome.State))
	})
}

// TestContinueAsNewChain: an execution continues as new twice; each link is recorded both ways
// and logged, and the last one completes.
func TestContinueAsNewChain(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		type round struct {
			N int `json:"n"`
		}
		loop := funcRunner{typ: "Loop", run: func(ctx context.Context, lease *Lease) error {
			var r round
			if err := json.Unmarshal(lease.Row.State, &r); err != nil {
				return err
			}
			cp := lease.Base()
			cp.Status, cp.Release = driver.ExecutionCompleted, true
			if r.N < 3 {
				next, _ := json.Marshal(round{N: r.N + 1})
				cp.ContinueAsNew = &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7()), State: next}
			}
			return lease.Checkpoint(ctx, cp)
		}}
		e := startedEngine(t, drv, loop)
		first := uuid.Must(uuid.NewV7())
		_, err := e.Insert(ctx, []*driver.ExecutionInsertParams{{ID: first, Model: "test", Type: "Loop", Domain: "d",
			State: json.RawMessage(`{"n":1}`), Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
		require.NoError(t, err)

		id := first
		for n := 1; ; n++ {
			row := waitEnded(t, drv.Executor(), id)
			require.Equal(t, driver.ExecutionCompleted, row.Status)
			require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, n), string(row.State))
			require.Equal(t, first, row.RootID)
			require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", row.Traceparent, "the successor inherits the trace")
			if n == 3 {
				require.Equal(t, uuid.Nil, row.ContinuedAs, "the last round completes")
				break
			}
			require.NotEqual(t, uuid.Nil, row.ContinuedAs)
			log, err := drv.Executor().ExecutionLogList(ctx, id)
			require.NoError(t, err)
			last := log[len(log)-1]
			require.Equal(t, driver.EntryContinuedAsNew, last.Name)
			require.JSONEq(t, `{"successorId":"`+row.ContinuedAs.String()+`"}`, string(last.Response))
			next, err := drv.Executor().ExecutionGet(ctx, row.ContinuedAs)
			require.NoError(t, err)
			require.Equal(t, id, next.ContinuedFrom)
			id = next.ID
		}
	})
}

// TestCheckpointRejectsInvalidChildren: a child with a lease or a successor on a checkpoint that
// does not complete is refused before anything is written.
func TestCheckpointRejectsInvalidChildren(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		e := New(Config{Exec: drv.Executor(), WorkerID: "w1", Lease: time.Minute})
		id := uuid.Must(uuid.NewV7())
		leases, err := e.Insert(ctx, []*driver.ExecutionInsertParams{{ID: id, Model: "test", Type: "T", Domain: "d", Lease: time.Minute, WorkerID: "w1"}})
		require.NoError(t, err)
		lease := leases[0]

		leased := &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7()), Lease: time.Minute}
		cp := lease.Base()
		cp.Children = []*driver.ExecutionInsertParams{leased, {}, leased}
		cp.ContinueAsNew = &driver.ExecutionInsertParams{ID: id}
		err = lease.Checkpoint(ctx, cp)
		require.ErrorContains(t, err, "has a lease: children start pending")
		require.ErrorContains(t, err, "has no id")
		require.ErrorContains(t, err, "is given twice")
		require.ErrorContains(t, err, "cannot continue as itself")
		require.ErrorContains(t, err, "it must be COMPLETED")
		_, err = drv.Executor().ExecutionGet(ctx, leased.ID)
		require.ErrorIs(t, err, driver.ErrNotFound)
		require.NoError(t, lease.Release(ctx), "the lease is still good")
	})
}

// TestStampTraceparent: commands without a traceparent get the execution's, in a map of their
// own; a command that has one keeps it.
func TestStampTraceparent(t *testing.T) {
	shared := map[string]string{"user": "u1"}
	plain := &driver.CommandInsertParams{Headers: shared}
	bare := &driver.CommandInsertParams{}
	own := &driver.CommandInsertParams{Headers: map[string]string{"traceparent": "00-own-01"}}
	stampTraceparent([]*driver.CommandInsertParams{plain, bare, own}, "00-execution-01")
	require.Equal(t, map[string]string{"user": "u1", "traceparent": "00-execution-01"}, plain.Headers)
	require.Equal(t, map[string]string{"user": "u1"}, shared, "the caller's map is not changed")
	require.Equal(t, map[string]string{"traceparent": "00-execution-01"}, bare.Headers)
	require.Equal(t, "00-own-01", own.Headers["traceparent"])

	untouched := &driver.CommandInsertParams{}
	stampTraceparent([]*driver.CommandInsertParams{untouched}, "")
	require.Nil(t, untouched.Headers, "an execution without a trace adds none")
}
