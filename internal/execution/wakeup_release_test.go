package execution

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// A timer that falls due while its execution is leased (its in-memory wake-up finds nothing to
// claim) is taken up once the runner lets go, not at the next poll.
func TestTimerDueWhileLeasedRunsOnRelease(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		runs := make(chan []string, 4)
		var e *Engine
		var t2At time.Time
		runner := &funcRunner{typ: "LateTimer", run: func(ctx context.Context, lease *Lease) error {
			due, err := lease.DueTimers(ctx)
			if err != nil {
				return err
			}
			var ids []string
			for _, d := range due {
				ids = append(ids, d.TimerID)
			}
			cp := lease.Base()
			cp.Status, cp.Release = driver.ExecutionWaitingForAsync, true
			if len(runs) == 0 && slices.Equal(ids, []string{"t1"}) {
				// Hold the lease until t2's in-memory wake-up went by (nothing to claim), then
				// fire t1 alone.
				deadline := time.Now().Add(5 * time.Second)
				tick := time.NewTicker(2 * time.Millisecond)
				defer tick.Stop()
				for time.Now().Before(t2At) || pendingWakeups(e, t2At) > 0 || e.wakeups.count.Load() == lease.wakeups {
					if time.Now().After(deadline) {
						t.Logf("stuck: now-t2 %s, pending wake-ups %d, count %d, lease %d", time.Since(t2At), pendingWakeups(e, t2At), e.wakeups.count.Load(), lease.wakeups)
						return context.DeadlineExceeded
					}
					<-tick.C
				}
			}
			cp.FireTimers = ids
			runs <- ids
			return lease.Checkpoint(ctx, cp)
		}}
		e = New(Config{Exec: drv.Executor(), WorkerID: "w1", Lease: time.Minute, PendingPollInterval: time.Hour,
			RetryPollInterval: time.Hour, TimeoutCheckInterval: time.Hour, DeadlineCheckInterval: time.Hour})
		require.NoError(t, e.Register(runner))
		leases, err := e.Insert(ctx, []*driver.ExecutionInsertParams{{ID: uuid.Must(uuid.NewV7()), Model: "workflow",
			Type: "LateTimer", Domain: "test", State: json.RawMessage(`{}`), Lease: time.Minute}})
		require.NoError(t, err)
		t1At := time.Now().Add(200 * time.Millisecond)
		t2At = t1At.Add(300 * time.Millisecond)
		cp := leases[0].Base()
		cp.Status, cp.Release = driver.ExecutionWaitingForAsync, true
		cp.Timers = []*driver.TimerParams{{ID: "t1", FireAt: &t1At}, {ID: "t2", FireAt: &t2At}}
		require.NoError(t, leases[0].Checkpoint(ctx, cp))
		require.NoError(t, e.Start(ctx))
		t.Cleanup(func() { _ = e.Stop(context.Background()) })

		select {
		case ids := <-runs:
			if slices.Equal(ids, []string{"t1", "t2"}) {
				t.Log("the runner first ran after t2 fell due (a slow machine): nothing to check")
				return
			}
			require.Equal(t, []string{"t1"}, ids)
		case <-time.After(10 * time.Second):
			t.Fatal("t1 never fired")
		}
		select {
		case ids := <-runs:
			require.Equal(t, []string{"t2"}, ids)
		case <-time.After(10 * time.Second):
			t.Fatal("t2, due while the execution was leased, was not taken up when it was released")
		}
	})
}

// pendingWakeups is how many in-memory wake-ups for times up to t the engine has scheduled and
// not yet taken.
func pendingWakeups(e *Engine, t time.Time) int {
	last := t.UnixNano()/int64(wakeupGranularity) + 1
	e.wakeups.mu.Lock()
	defer e.wakeups.mu.Unlock()
	n := 0
	for slot := range e.wakeups.timers {
		if slot <= last {
			n++
		}
	}
	return n
}
