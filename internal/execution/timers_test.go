package execution

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// fired records the timers a runner handled, by execution and timer id.
type fired struct {
	mu    sync.Mutex
	count map[string]int
	ch    chan string
}

func newFired() *fired { return &fired{count: map[string]int{}, ch: make(chan string, 100)} }

func (f *fired) add(id uuid.UUID, timerID string) {
	f.mu.Lock()
	f.count[id.String()+"/"+timerID]++
	f.mu.Unlock()
	f.ch <- timerID
}

func (f *fired) times(id uuid.UUID, timerID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[id.String()+"/"+timerID]
}

// sleeper schedules a timer on its first run and completes when the timer is due.
func sleeper(f *fired, delay time.Duration, scheduled chan<- uuid.UUID) *funcRunner {
	return &funcRunner{typ: "Sleeper", run: func(ctx context.Context, lease *Lease) error {
		due, err := lease.DueTimers(ctx)
		if err != nil {
			return err
		}
		cp := lease.Base()
		cp.Release = true
		if len(due) == 0 {
			cp.Status = driver.ExecutionWaitingForAsync
			cp.Timers = []*driver.TimerParams{{ID: "nap", Name: "nap", Delay: delay}}
			if err := lease.Checkpoint(ctx, cp); err != nil {
				return err
			}
			scheduled <- lease.Row.ID
			return nil
		}
		cp.Status, cp.FireTimers = driver.ExecutionCompleted, []string{due[0].TimerID}
		if err := lease.Checkpoint(ctx, cp); err != nil {
			return err
		}
		f.add(lease.Row.ID, due[0].TimerID)
		return nil
	}}
}

// TestTimerFiresAfterRestart schedules a timer on one engine, stops it, and starts another on
// the same database: the timer still fires there, once.
func TestTimerFiresAfterRestart(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		f, scheduled := newFired(), make(chan uuid.UUID, 10)
		first := newTestEngine(t, drv.Executor(), "first", sleeper(f, 500*time.Millisecond, scheduled))
		id := insertPending(t, first, "Sleeper")
		require.Equal(t, id, receive(t, scheduled, "the timer scheduled"))
		timers, err := first.PendingTimers(ctx, id)
		require.NoError(t, err)
		require.Len(t, timers, 1)
		require.NoError(t, first.Stop(ctx))

		// The new engine polls rarely: it learns of the timer from the database when it starts.
		second := New(Config{Exec: drv.Executor(), WorkerID: "second", Lease: 30 * time.Second, PendingPollInterval: time.Hour,
			RetryPollInterval: time.Hour, TimeoutCheckInterval: time.Hour, DeadlineCheckInterval: time.Hour})
		require.NoError(t, second.Register(sleeper(f, 500*time.Millisecond, scheduled)))
		require.NoError(t, second.Start(ctx))
		t.Cleanup(func() { _ = second.Stop(context.Background()) })
		require.Equal(t, "nap", receive(t, f.ch, "the timer fired"))
		row, err := drv.Executor().ExecutionGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCompleted, row.Status)
		require.Nil(t, row.WakeAt)
		require.False(t, time.Now().Before(timers[0].FireAt), "not before it was due")
		timers, err = second.PendingTimers(ctx, id)
		require.NoError(t, err)
		require.Empty(t, timers)

		// Nothing takes it up again.
		require.NoError(t, second.Stop(ctx))
		rows, err := drv.Executor().ExecutionClaim(ctx, &driver.ExecutionClaimParams{
			Kind: driver.ClaimPending, Max: 10, Lease: time.Minute, WorkerID: "third", Now: ptrTo(time.Now().Add(time.Hour)),
		})
		require.NoError(t, err)
		require.Empty(t, rows)
		require.Equal(t, 1, f.times(id, "nap"))
	})
}

// TestTimerCancelledByOperator cancels an execution's pending timer: it never fires.
func TestTimerCancelledByOperator(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		f, scheduled := newFired(), make(chan uuid.UUID, 10)
		e := newTestEngine(t, drv.Executor(), "w1", sleeper(f, time.Hour, scheduled))
		id := insertPending(t, e, "Sleeper")
		require.Equal(t, id, receive(t, scheduled, "the timer scheduled"))
		require.NoError(t, e.CancelTimer(ctx, id, "nap"))
		require.ErrorIs(t, e.CancelTimer(ctx, id, "nap"), driver.ErrConflict)
		require.ErrorIs(t, e.CancelTimer(ctx, id, "other"), driver.ErrNotFound)
		timers, err := e.PendingTimers(ctx, id)
		require.NoError(t, err)
		require.Empty(t, timers)
	})
}

// TestWaitTimeoutTakesBranch opens several waits, one with a timeout: when it expires the runner
// (not the engine) sees it through ExpiredWaits and takes its escalation branch, closing every
// wait; the wait without a timeout never expires.
func TestWaitTimeoutTakesBranch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		opened, branch := make(chan uuid.UUID, 10), make(chan string, 10)
		runner := &funcRunner{typ: "Approval", run: func(ctx context.Context, lease *Lease) error {
			expired, err := lease.ExpiredWaits(ctx)
			if err != nil {
				return err
			}
			cp := lease.Base()
			cp.Release = true
			if lease.Row.Step == "" {
				cp.Status, cp.Step = driver.ExecutionWaitingForAsync, "waiting"
				cp.OpenWaits = []*driver.WaitParams{
					{ID: "manager", Kind: driver.WaitSignal, Name: "approve", Timeout: 300 * time.Millisecond},
					{ID: "charge", Kind: driver.WaitReply, Name: "charge"},
				}
				if err := lease.Checkpoint(ctx, cp); err != nil {
					return err
				}
				opened <- lease.Row.ID
				return nil
			}
			for _, w := range expired {
				if w.WaitID != "manager" {
					continue
				}
				all, err := lease.Waits(ctx)
				if err != nil {
					return err
				}
				cp.Status, cp.Step = driver.ExecutionCompleted, "escalated"
				for _, open := range all {
					cp.CloseWaits = append(cp.CloseWaits, open.WaitID)
				}
				if err := lease.Checkpoint(ctx, cp); err != nil {
					return err
				}
				branch <- w.WaitID
				return nil
			}
			return lease.Checkpoint(ctx, cp)
		}}
		e := newTestEngine(t, drv.Executor(), "w1", runner)
		id := insertPending(t, e, "Approval")
		require.Equal(t, id, receive(t, opened, "the waits opened"))
		waits, err := e.OpenWaits(ctx, id)
		require.NoError(t, err)
		require.Len(t, waits, 2)
		require.Equal(t, "manager", receive(t, branch, "the escalation branch"))
		row, err := drv.Executor().ExecutionGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCompleted, row.Status)
		require.Equal(t, "escalated", row.Step)
		require.Empty(t, row.ErrorCode, "not parked in the troubleshooting queue")
		waits, err = e.OpenWaits(ctx, id)
		require.NoError(t, err)
		require.Empty(t, waits)
	})
}

func ptrTo[T any](v T) *T { return &v }

// TestTimerNotLateByPollInterval runs an engine that polls once an hour: a timer due in 200ms
// still fires soon after it is due, woken in memory.
func TestTimerNotLateByPollInterval(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		f, scheduled := newFired(), make(chan uuid.UUID, 10)
		e := New(Config{Exec: drv.Executor(), WorkerID: "w1", Lease: 30 * time.Second, PendingPollInterval: time.Hour,
			RetryPollInterval: time.Hour, TimeoutCheckInterval: time.Hour, DeadlineCheckInterval: time.Hour})
		require.NoError(t, e.Register(sleeper(f, 200*time.Millisecond, scheduled)))
		require.NoError(t, e.Start(ctx))
		t.Cleanup(func() { _ = e.Stop(context.Background()) })
		id := uuid.Must(uuid.NewV7())
		leases, err := e.Insert(ctx, []*driver.ExecutionInsertParams{{ID: id, Model: "workflow", Type: "Sleeper", Domain: "d",
			Lease: 30 * time.Second, WorkerID: "w1"}})
		require.NoError(t, err)
		require.NoError(t, e.RunLeased(ctx, leases[0]))
		require.Equal(t, id, receive(t, scheduled, "the timer scheduled"))
		start := time.Now()
		require.Equal(t, "nap", receive(t, f.ch, "the timer fired"))
		t.Logf("fired %s after it was scheduled", time.Since(start))
		require.Equal(t, 1, f.times(id, "nap"))
	})
}

// claimHook runs after every empty pending claim of the executor it wraps.
type claimHook struct {
	driver.Executor
	afterEmptyPending func()
}

func (h *claimHook) ExecutionClaim(ctx context.Context, params *driver.ExecutionClaimParams) ([]*driver.ExecutionRow, error) {
	rows, err := h.Executor.ExecutionClaim(ctx, params)
	if err == nil && len(rows) == 0 && params.Kind == driver.ClaimPending {
		h.afterEmptyPending()
	}
	return rows, err
}

// TestTimerDueDuringAnEmptyClaimIsNotLost makes a timer fall due while the pending poller's claim
// runs: the claim finds nothing, and the poller's question "what wakes next?" comes after the timer
// is due. The poller must still take the timer up, not wait for its next poll (an hour here).
func TestTimerDueDuringAnEmptyClaimIsNotLost(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		fake := clock.NewFake(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
		var armed atomic.Bool
		exec := &claimHook{Executor: drv.Executor(), afterEmptyPending: func() {
			if armed.CompareAndSwap(true, false) {
				fake.Advance(time.Hour + time.Second) // the timer falls due while the claim ran
			}
		}}
		f, scheduled := newFired(), make(chan uuid.UUID, 10)
		e := New(Config{Exec: exec, WorkerID: "w1", Lease: 30 * time.Second, PendingPollInterval: time.Hour,
			RetryPollInterval: time.Hour, TimeoutCheckInterval: time.Hour, DeadlineCheckInterval: time.Hour,
			Clock: fake.Now, Now: func() *time.Time { now := fake.Now(); return &now }})
		// An hour-long timer: its in-memory wake-up is an hour away in real time too.
		require.NoError(t, e.Register(sleeper(f, time.Hour, scheduled)))
		require.NoError(t, e.Start(ctx))
		t.Cleanup(func() { _ = e.Stop(context.Background()) })
		id := uuid.Must(uuid.NewV7())
		leases, err := e.Insert(ctx, []*driver.ExecutionInsertParams{{ID: id, Model: "workflow", Type: "Sleeper", Domain: "d",
			Lease: 30 * time.Second, WorkerID: "w1"}})
		require.NoError(t, err)
		require.NoError(t, e.RunLeased(ctx, leases[0]))
		require.Equal(t, id, receive(t, scheduled, "the timer scheduled"))
		armed.Store(true)
		e.wakeups.poke() // a pending poll, as any wake-up causes
		require.Equal(t, "nap", receive(t, f.ch, "the timer fired"))
		require.Equal(t, 1, f.times(id, "nap"))
	})
}
