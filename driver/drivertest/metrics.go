package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

func exerciseMetrics(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("Queues", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, second, running := newCommand("shop", "shop__commands", "Pay"), newCommand("shop", "shop__commands", "Pay"), newCommand("shop", "shop__commands", "Pay")
		insert(t, b.exec, ptr(t0.Add(-time.Minute)), running)
		insert(t, b.exec, &t0, first, second)
		later := newCommand("shop", "shop__commands", "Pay")
		later.VisibleAt = ptr(t0.Add(time.Hour))
		done := newCommand("billing", "billing__commands", "Invoice")
		insert(t, b.exec, &t0, later, done)
		require.Len(t, claim(t, b.exec, "shop__commands", 1, time.Minute, &t0), 1, "the oldest, running")
		require.Len(t, claim(t, b.exec, "billing__commands", 1, time.Minute, &t0), 1)
		require.Len(t, complete(t, b.exec, &t0, &driver.CommandCompletion{ID: done.ID, Fence: 1, Status: driver.CommandStatusCompleted, Event: "COMPLETED"}), 1)

		at := t0.Add(2 * time.Minute) // the running command's lease ended at t0+1m
		queues, err := b.exec.MetricsQueues(ctx, &at)
		require.NoError(t, err)
		require.Len(t, queues, 1, "a queue with nothing unfinished is not reported")
		q := queues[0]
		require.Equal(t, "shop__commands", q.Queue)
		require.Equal(t, "shop", q.Domain)
		require.Equal(t, [4]int64{2, 1, 1, 1}, [4]int64{q.Ready, q.Scheduled, q.Running, q.ExpiredLeases}, "ready, scheduled, running, expired")
		require.NotNil(t, q.OldestReady)
		require.True(t, t0.Equal(*q.OldestReady), "the oldest ready command became visible at t0, got %s", q.OldestReady)

		queues, err = b.exec.MetricsQueues(ctx, &t0)
		require.NoError(t, err)
		require.Zero(t, queues[0].ExpiredLeases, "the lease holds until t0+1m")
	})

	t.Run("Executions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pending, leased, parked, done := newExecution("Pay"), newLeasedExecution("Pay", time.Minute), newLeasedExecution("Pay", time.Hour), newLeasedExecution("Pay", time.Hour)
		saga := newExecution("Refund")
		saga.Model = "saga"
		insertExecutions(t, b.exec, &t0, pending, leased, parked, done, saga)
		park(t, b.exec, t0, parked.ID, driver.ExecutionWaitingForTSQ, nil)
		park(t, b.exec, t0, done.ID, driver.ExecutionCompleted, nil)

		at := t0.Add(2 * time.Minute)
		got, err := b.exec.MetricsExecutions(ctx, &at)
		require.NoError(t, err)
		type row struct {
			model, typ string
			status     driver.ExecutionStatus
			count      int64
			expired    int64
		}
		var rows []row
		for _, m := range got {
			rows = append(rows, row{m.Model, m.Type, m.Status, m.Count, m.ExpiredLeases})
		}
		require.Equal(t, []row{
			{"process", "Pay", driver.ExecutionExecuting, 1, 1},
			{"process", "Pay", driver.ExecutionPending, 1, 0},
			{"process", "Pay", driver.ExecutionWaitingForTSQ, 1, 0},
			{"saga", "Refund", driver.ExecutionPending, 1, 0},
		}, rows, "non-terminal executions by model, type and status, ordered")
	})

	t.Run("OutboxHorizon", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if b.drv.Name() != "postgres" {
			_, err := b.exec.MetricsOutboxHorizon(ctx)
			require.ErrorIs(t, err, driver.ErrNoHorizon)
			return
		}
		// An open writing transaction holds the horizon: a message committed after it began
		// is held.
		tx, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		outboxInsert(t, tx, nil, newOutboxMessage("amqp", "q", ""))
		outboxInsert(t, b.exec, nil, newOutboxMessage("amqp", "q", ""))
		h, err := b.exec.MetricsOutboxHorizon(ctx)
		require.NoError(t, err)
		require.GreaterOrEqual(t, h.HeldMessages, int64(1))
		require.Positive(t, h.OldestTransaction)
	})
}
