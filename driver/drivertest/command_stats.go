package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

func exerciseCommandQueueDepths(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("CountsByState", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		depths, err := b.exec.CommandQueueDepths(ctx)
		require.NoError(t, err)
		require.Empty(t, depths)

		// These read the database clock, so the fixtures sit hours away from it.
		now := time.Now()
		at := func(offset time.Duration) *driver.CommandInsertParams {
			p := newCommand("d1", "q1", "T")
			p.VisibleAt = ptr(now.Add(offset))
			return p
		}
		parked := at(-4 * time.Hour)
		insert(t, b.exec, nil, parked)
		require.Len(t, claim(t, b.exec, "q1", 1, time.Hour, nil), 1)
		require.Len(t, complete(t, b.exec, nil, &driver.CommandCompletion{ID: parked.ID, Fence: 1, Status: driver.CommandStatusInTSQ, Event: "MOVED_TO_TSQ"}), 1)

		running, ready1, ready2, scheduled := at(-3*time.Hour), at(-2*time.Hour), at(-time.Hour), at(time.Hour)
		done := at(-5 * time.Hour)
		done.Kind, done.Status = driver.CommandKindReply, driver.CommandStatusCompleted
		reply := newCommand("d0", "q0", "Reply")
		reply.Kind, reply.VisibleAt = driver.CommandKindReply, ptr(now.Add(-time.Hour))
		onlyDone := newCommand("d2", "q2", "T")
		onlyDone.Status = driver.CommandStatusCancelled
		insert(t, b.exec, nil, running, ready1, ready2, scheduled, done, reply, onlyDone)
		require.Equal(t, running.ID, claim(t, b.exec, "q1", 1, time.Hour, nil)[0].ID)

		depths, err = b.exec.CommandQueueDepths(ctx)
		require.NoError(t, err)
		require.Equal(t, []*driver.QueueDepth{
			{Queue: "q0", Domain: "d0", Kind: driver.CommandKindReply, Ready: 1},
			{Queue: "q1", Domain: "d1", Kind: driver.CommandKindCommand, Ready: 2, Scheduled: 1, Running: 1, InTSQ: 1},
		}, depths)
	})
}

func exerciseCommandStats(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("CountsAndPercentiles", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old := newCommand("shop", "elsewhere", "Pay")
		insert(t, b.exec, ptr(t0.Add(-time.Hour)), old)

		var pays []*driver.CommandInsertParams
		for range 6 {
			pays = append(pays, newCommand("shop", "q", "Pay"))
		}
		refund := newCommand("shop", "q", "Refund")
		pending := newCommand("shop", "elsewhere", "Pay")
		reply := newCommand("shop", "replies", "Pay")
		reply.Kind, reply.Status = driver.CommandKindReply, driver.CommandStatusCompleted
		other := newCommand("billing", "elsewhere", "Invoice")
		insert(t, b.exec, &t0, append(pays, refund, pending, reply, other)...)

		t1 := t0.Add(time.Second)
		require.Len(t, claim(t, b.exec, "q", 10, time.Hour, &t1), 7)
		durations := []time.Duration{40 * time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, 30 * time.Millisecond, 20 * time.Millisecond}
		for i, d := range durations {
			require.Len(t, complete(t, b.exec, ptr(t1.Add(d)), &driver.CommandCompletion{ID: pays[i].ID, Fence: 1, Status: driver.CommandStatusCompleted, Event: "COMPLETED"}), 1)
		}
		require.Len(t, complete(t, b.exec, ptr(t1.Add(time.Second)), &driver.CommandCompletion{ID: pays[5].ID, Fence: 1, Status: driver.CommandStatusFailed, Event: "FAILED"}), 1)
		require.Len(t, complete(t, b.exec, ptr(t1.Add(5*time.Millisecond)), &driver.CommandCompletion{ID: refund.ID, Fence: 1, Status: driver.CommandStatusCompleted, Event: "COMPLETED"}), 1)

		stats, err := b.exec.CommandStats(ctx, &driver.CommandStatsParams{Since: t0})
		require.NoError(t, err)
		require.Len(t, stats, 3)

		require.Equal(t, "billing", stats[0].Domain)
		require.Equal(t, "Invoice", stats[0].Type)
		require.Equal(t, map[driver.CommandStatus]int64{driver.CommandStatusPending: 1}, stats[0].Counts)
		require.Zero(t, stats[0].Completed)
		require.Zero(t, stats[0].P50)
		require.Zero(t, stats[0].P99)

		pay := stats[1]
		require.Equal(t, "shop", pay.Domain)
		require.Equal(t, "Pay", pay.Type)
		require.Equal(t, map[driver.CommandStatus]int64{
			driver.CommandStatusCompleted: 5, driver.CommandStatusFailed: 1, driver.CommandStatusPending: 1,
		}, pay.Counts, "replies and commands created before Since are left out")
		require.Equal(t, int64(5), pay.Completed)
		// percentile_cont: linear interpolation between the closest ranks of 10, 20, 30, 40, 100ms.
		require.InDelta(t, float64(30*time.Millisecond), float64(pay.P50), float64(time.Microsecond))
		require.InDelta(t, float64(97600*time.Microsecond), float64(pay.P99), float64(time.Microsecond))

		require.Equal(t, "Refund", stats[2].Type)
		require.Equal(t, int64(1), stats[2].Completed)
		require.InDelta(t, float64(5*time.Millisecond), float64(stats[2].P50), float64(time.Microsecond))
		require.InDelta(t, float64(5*time.Millisecond), float64(stats[2].P99), float64(time.Microsecond))

		stats, err = b.exec.CommandStats(ctx, &driver.CommandStatsParams{Since: t0.Add(-2 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, int64(2), stats[1].Counts[driver.CommandStatusPending], "the old command counts with an earlier Since")

		stats, err = b.exec.CommandStats(ctx, &driver.CommandStatsParams{Since: t0.Add(time.Hour)})
		require.NoError(t, err)
		require.Empty(t, stats)
	})
}

func exerciseCommandCountRunning(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("LiveLeasesOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		n, err := b.exec.CommandCountRunning(ctx, "q")
		require.NoError(t, err)
		require.Zero(t, n)

		// The count reads the database clock, so the fixtures sit hours away from it.
		now := time.Now()
		live1, live2, pending := newCommand("d", "q", "T"), newCommand("d", "q", "T"), newCommand("d", "q", "T")
		live1.VisibleAt, live2.VisibleAt = ptr(now.Add(-10*time.Minute)), ptr(now.Add(-10*time.Minute))
		pending.VisibleAt = ptr(now.Add(time.Hour))
		insert(t, b.exec, nil, live1, live2, pending)
		require.Len(t, claim(t, b.exec, "q", 2, time.Hour, nil), 2)

		expired := newCommand("d", "q", "T")
		expired.VisibleAt = ptr(now.Add(-3 * time.Hour))
		insert(t, b.exec, nil, expired)
		// Claimed two hours ago for one hour: still RUNNING, but its lease has run out.
		require.Len(t, claim(t, b.exec, "q", 1, time.Hour, ptr(now.Add(-2*time.Hour))), 1)
		require.Equal(t, driver.CommandStatusRunning, get(t, b.exec, expired.ID).Status)

		elsewhere := newCommand("d", "other", "T")
		insert(t, b.exec, nil, elsewhere)
		require.Len(t, claim(t, b.exec, "other", 1, time.Hour, nil), 1)

		n, err = b.exec.CommandCountRunning(ctx, "q")
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
	})
}
