package execution

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// newTestEngine returns a started engine on exec with a short pending poll interval (so an
// execution whose timer this engine does not know is still taken up soon) and a runner.
func newTestEngine(t *testing.T, exec driver.Executor, worker string, runner Runner) *Engine {
	t.Helper()
	e := New(Config{Exec: exec, WorkerID: worker, Lease: 30 * time.Second, PendingPollInterval: 100 * time.Millisecond,
		RetryPollInterval: time.Hour, TimeoutCheckInterval: time.Hour, DeadlineCheckInterval: time.Hour})
	require.NoError(t, e.Register(runner))
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	return e
}

func insertPending(t *testing.T, e *Engine, typ string) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := e.Insert(context.Background(), []*driver.ExecutionInsertParams{{ID: id, Model: "workflow", Type: typ, Domain: "d", State: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	return id
}

// receive returns the next value of ch, failing the test after a generous deadline.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// signalGate completes an execution when its "go" signal is there, and otherwise opens a wait for
// it and lets go. before, when set, runs first on every run (a test holds the runner there).
func signalGate(t *testing.T, before func(lease *Lease), waiting chan<- uuid.UUID, done chan<- string) *funcRunner {
	return &funcRunner{typ: "Gate", run: func(ctx context.Context, lease *Lease) error {
		if before != nil {
			before(lease)
		}
		signals, err := lease.Signals(ctx)
		if err != nil {
			return err
		}
		for _, s := range signals {
			if s.Name != "go" {
				continue
			}
			cp := lease.Base()
			cp.Status, cp.Release = driver.ExecutionCompleted, true
			cp.ConsumeSignals, cp.CloseWaits = []string{s.SignalID}, []string{"go"}
			if err := lease.Checkpoint(ctx, cp); err != nil {
				return err
			}
			done <- s.SignalID
			return nil
		}
		cp := lease.Base()
		cp.Status, cp.Release = driver.ExecutionWaitingForAsync, true
		cp.OpenWaits = []*driver.WaitParams{{ID: "go", Kind: driver.WaitSignal, Name: "go"}}
		if err := lease.Checkpoint(ctx, cp); err != nil {
			return err
		}
		waiting <- lease.Row.ID
		return nil
	}}
}

// TestSignalResumesWaitingRunner sends a signal to an execution that waits for it: the runner
// resumes and consumes it, and the execution completes with nothing pending.
func TestSignalResumesWaitingRunner(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		waiting, done := make(chan uuid.UUID, 10), make(chan string, 10)
		e := newTestEngine(t, drv.Executor(), "w1", signalGate(t, nil, waiting, done))
		id := insertPending(t, e, "Gate")
		require.Equal(t, id, receive(t, waiting, "the runner waiting"))
		waits, err := e.OpenWaits(ctx, id)
		require.NoError(t, err)
		require.Len(t, waits, 1)
		require.Equal(t, driver.WaitSignal, waits[0].Kind)

		// Another signal does not resume it for good: it stays buffered and the runner waits on.
		_, err = e.SendSignal(ctx, &driver.ExecutionSignalSendParams{ExecutionID: id, SignalID: "n1", Name: "note"})
		require.NoError(t, err)
		require.Equal(t, id, receive(t, waiting, "the runner waiting again"))

		res, err := e.SendSignal(ctx, &driver.ExecutionSignalSendParams{ExecutionID: id, SignalID: "g1", Name: "go", Payload: json.RawMessage(`{"by":"ann"}`)})
		require.NoError(t, err)
		require.False(t, res.Duplicate)
		require.Equal(t, "g1", receive(t, done, "the runner resumed"))
		row, err := drv.Executor().ExecutionGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCompleted, row.Status)
		pending, err := e.PendingSignals(ctx, id)
		require.NoError(t, err)
		require.Len(t, pending, 1, "the note stays unconsumed")
		require.Equal(t, "n1", pending[0].SignalID)
		waits, err = e.OpenWaits(ctx, id)
		require.NoError(t, err)
		require.Empty(t, waits)

		_, err = e.SendSignal(ctx, &driver.ExecutionSignalSendParams{ExecutionID: id, Name: "go"})
		require.ErrorIs(t, err, driver.ErrConflict, "an ended execution takes no signal")
		_, err = e.SendSignal(ctx, &driver.ExecutionSignalSendParams{ExecutionID: uuid.New(), Name: "go"})
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
}

// TestSignalBeforeWait sends the signal while the runner is still busy before its wait: once
// before it reads its signals (it finds the signal buffered and never waits), and once after it
// read them but before it let go (its release wakes it again at once).
func TestSignalBeforeWait(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		waiting, done := make(chan uuid.UUID, 10), make(chan string, 10)
		running, proceed := make(chan uuid.UUID, 10), make(chan struct{})
		var mu sync.Mutex
		hold := map[uuid.UUID]bool{}
		before := func(lease *Lease) {
			mu.Lock()
			h := hold[lease.Row.ID]
			delete(hold, lease.Row.ID)
			mu.Unlock()
			if h {
				running <- lease.Row.ID
				<-proceed
			}
		}
		e := New(Config{Exec: drv.Executor(), WorkerID: "w1", Lease: 30 * time.Second, PendingPollInterval: time.Hour,
			RetryPollInterval: time.Hour, TimeoutCheckInterval: time.Hour, DeadlineCheckInterval: time.Hour})
		require.NoError(t, e.Register(signalGate(t, before, waiting, done)))
		require.NoError(t, e.Start(ctx))
		t.Cleanup(func() { _ = e.Stop(context.Background()) })

		id := uuid.Must(uuid.NewV7())
		mu.Lock()
		hold[id] = true
		mu.Unlock()
		_, err := e.Insert(ctx, []*driver.ExecutionInsertParams{{ID: id, Model: "workflow", Type: "Gate", Domain: "d", State: json.RawMessage(`{}`)}})
		require.NoError(t, err)
		e.wakeups.poke()
		require.Equal(t, id, receive(t, running, "the runner started"))
		_, err = e.SendSignal(ctx, &driver.ExecutionSignalSendParams{ExecutionID: id, SignalID: "early", Name: "go"})
		require.NoError(t, err)
		proceed <- struct{}{}
		require.Equal(t, "early", receive(t, done, "the buffered signal applied"))
		select {
		case <-waiting:
			t.Fatal("the runner waited for a signal it already had")
		default:
		}
	})
}

// TestSignalWhileReleasing delivers a signal after the runner read its signals but before it let
// go: the release wakes the execution again at once and the runner applies it.
func TestSignalWhileReleasing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		done := make(chan string, 10)
		read, proceed := make(chan uuid.UUID, 10), make(chan struct{}, 10)
		runner := &funcRunner{typ: "Late", run: func(ctx context.Context, lease *Lease) error {
			signals, err := lease.Signals(ctx)
			if err != nil {
				return err
			}
			cp := lease.Base()
			cp.Release = true
			if len(signals) > 0 {
				cp.Status, cp.ConsumeSignals = driver.ExecutionCompleted, []string{signals[0].SignalID}
				if err := lease.Checkpoint(ctx, cp); err != nil {
					return err
				}
				done <- signals[0].SignalID
				return nil
			}
			read <- lease.Row.ID
			<-proceed
			cp.Status = driver.ExecutionWaitingForAsync
			return lease.Checkpoint(ctx, cp)
		}}
		e := newTestEngine(t, drv.Executor(), "w1", runner)
		id := insertPending(t, e, "Late")
		require.Equal(t, id, receive(t, read, "the runner read its signals"))
		_, err := e.SendSignal(ctx, &driver.ExecutionSignalSendParams{ExecutionID: id, SignalID: "s", Name: "go"})
		require.NoError(t, err)
		proceed <- struct{}{}
		require.Equal(t, "s", receive(t, done, "the late signal applied"))
	})
}
