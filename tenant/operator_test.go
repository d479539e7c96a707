package tenant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/tenant"
	"github.com/commandbus/commandbus/workflow"
)

// An operator cancels a QUEUED execution through the operations every tool uses (REST, CLI,
// console): it ends CANCELLED at once, logged and audited, without ever holding a slot, and the
// slot its tenant frees later goes to the next queued one. Other actions on a queued execution
// are refused as invalid (not "busy": no runner holds it).
func TestOperatorCancelsQueuedExecution(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		b := newBundle(t, drv, options{})
		b.create(t, "free", tenant.TierFree)
		ids := b.start(t, "free", 3)
		waitStatus(t, drv, ids[0], driver.ExecutionWaitingForAsync) // holds the only slot
		queued := row(t, drv, ids[1])
		require.Equal(t, driver.ExecutionQueued, queued.Status)
		ops := b.rt.OperationsFor(queued)
		require.NotNil(t, ops)

		err := ops.CompleteOverride(ctx, ids[1], nil, operator())
		require.ErrorIs(t, err, commandbus.ErrInvalidState, "a queued execution is not busy")
		require.ErrorContains(t, err, "QUEUED")
		require.NotErrorIs(t, err, workflow.ErrBusy)
		var invalid *commandbus.ValidationError
		require.ErrorAs(t, ops.CancelOverride(ctx, ids[1], true, commandbus.OperatorAction{Reason: "no actor"}), &invalid)
		require.Equal(t, "actor", invalid.Field)
		require.Equal(t, driver.ExecutionQueued, row(t, drv, ids[1]).Status, "bad input changes nothing")

		require.NoError(t, ops.CancelOverride(ctx, ids[1], true, operator()))
		x := row(t, drv, ids[1])
		require.Equal(t, driver.ExecutionCancelled, x.Status)
		require.Equal(t, commandbus.CodeCancelled, x.ErrorCode)
		require.Contains(t, x.ErrorMessage, "ops@example.com")
		require.Nil(t, x.LeaseUntil)
		require.Nil(t, x.WakeAt)
		entries, err := drv.Executor().ExecutionLogList(ctx, ids[1])
		require.NoError(t, err)
		last := entries[len(entries)-1]
		require.Equal(t, "TSQ_CANCEL", last.EntryType)
		require.Equal(t, "ops@example.com", last.Actor)
		require.Equal(t, operator().Reason, last.Reason)
		require.JSONEq(t, `{"runCompensations":true}`, string(last.Request))
		audit, err := drv.Executor().AuditLogList(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: ids[1].String()})
		require.NoError(t, err)
		require.Len(t, audit, 1)
		require.Equal(t, "TSQ_CANCEL", audit[0].Action)
		require.Equal(t, "ops@example.com", audit[0].Actor)

		require.Equal(t, 1.0, gathered(t, b.reg, "commandbus_executions_ended_total"), "counted as ended")
		got, err := b.tenants.Get(ctx, "free")
		require.NoError(t, err)
		require.Equal(t, 1, got.Active, "the cancelled one never took a slot")
		require.Equal(t, 1, got.Queued)

		// Cancelling again is refused: it has ended.
		require.ErrorIs(t, ops.CancelOverride(ctx, ids[1], false, operator()), commandbus.ErrInvalidState)

		// The running one is still cancelled through its lease, and its slot goes to ids[2].
		require.NoError(t, ops.CancelOverride(ctx, ids[0], false, operator()))
		require.Equal(t, driver.ExecutionCancelled, row(t, drv, ids[0]).Status)
		waitStatus(t, drv, ids[2], driver.ExecutionWaitingForAsync)
		got, err = b.tenants.Get(ctx, "free")
		require.NoError(t, err)
		require.Equal(t, 1, got.Active)
		require.Equal(t, 0, got.Queued)
	})
}

// The same for a sequential process, and an execution of another type is not cancelled through
// this type's operations.
func TestOperatorCancelsQueuedProcess(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		gate := make(chan struct{})
		var orders *process.Manager[order]
		b := newBundle(t, drv, options{register: func(rt *orchestration.Runtime) error {
			if err := rt.LimitCapacity("order"); err != nil {
				return err
			}
			var err error
			orders, err = process.NewManager(rt, process.Process[order](orderProcess{gate: gate}))
			return err
		}})
		t.Cleanup(func() { close(gate) }) // before the client stops (cleanups run last first)
		b.create(t, "acme", tenant.TierFree)
		first, err := orders.Start(ctx, order{N: 1}, process.WithTenant("acme"))
		require.NoError(t, err)
		second, err := orders.Start(ctx, order{N: 2}, process.WithTenant("acme"))
		require.NoError(t, err)
		job := b.start(t, "acme", 1)[0]
		waitStatus(t, drv, first, driver.ExecutionExecuting)
		require.Equal(t, driver.ExecutionQueued, row(t, drv, second).Status)
		require.Equal(t, driver.ExecutionQueued, row(t, drv, job).Status)

		require.ErrorIs(t, orders.CancelOverride(ctx, job, false, operator()), commandbus.ErrNotFound, "a workflow is not an order")
		require.Equal(t, driver.ExecutionQueued, row(t, drv, job).Status)

		require.NoError(t, orders.CancelOverride(ctx, second, false, operator()))
		x := row(t, drv, second)
		require.Equal(t, driver.ExecutionCancelled, x.Status)
		require.Equal(t, commandbus.CodeCancelled, x.ErrorCode)
		got, err := b.tenants.Get(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, 1, got.Active)
		require.Equal(t, 1, got.Queued)
	})
}

// Lowering a limit pre-empts nothing: the executions already admitted keep their slots until
// they end, and nothing more is admitted until the tenant holds fewer than the new limit.
func TestLoweredLimitPreemptsNothing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		b := newBundle(t, drv, options{})
		b.create(t, "acme", tenant.TierPro)
		ids := b.start(t, "acme", 3)
		for _, id := range ids {
			waitStatus(t, drv, id, driver.ExecutionWaitingForAsync)
		}
		one := 1
		_, _, err := b.tenants.Update(ctx, "acme", tenant.UpdateRequest{MaxActiveOverride: &one, Actor: "test", Reason: "downgrade"})
		require.NoError(t, err)
		got, err := b.tenants.Get(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, 1, got.MaxActive)
		require.Equal(t, 3, got.Active, "the running executions keep their slots")
		for _, id := range ids {
			require.Equal(t, driver.ExecutionWaitingForAsync, row(t, drv, id).Status)
		}
		next := b.start(t, "acme", 1)[0]
		require.Equal(t, driver.ExecutionQueued, row(t, drv, next).Status)

		for i, id := range ids {
			_, err := b.jobs.Signal(ctx, id, "go", nil, "")
			require.NoError(t, err)
			waitStatus(t, drv, id, driver.ExecutionCompleted)
			if i < len(ids)-1 {
				require.Equal(t, driver.ExecutionQueued, row(t, drv, next).Status, "still %d held against a limit of 1", len(ids)-1-i)
			}
		}
		waitStatus(t, drv, next, driver.ExecutionWaitingForAsync)
	})
}

// A cancel of a queued execution racing the release that admits it: whichever commits first
// wins, the execution ends CANCELLED either way, and the tenant's slots end free.
func TestCancelQueuedRacesAdmission(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		b := newBundle(t, drv, options{})
		b.create(t, "free", tenant.TierFree)
		const rounds = 5
		for range rounds {
			ids := b.start(t, "free", 2)
			waitStatus(t, drv, ids[0], driver.ExecutionWaitingForAsync)
			require.Equal(t, driver.ExecutionQueued, row(t, drv, ids[1]).Status)
			ops := b.rt.OperationsFor(row(t, drv, ids[1]))
			done := make(chan error, 1)
			go func() {
				_, err := b.jobs.Signal(ctx, ids[0], "go", nil, "")
				done <- err
			}()
			deadline := time.Now().Add(10 * time.Second)
			for {
				err := ops.CancelOverride(ctx, ids[1], false, operator())
				if !errors.Is(err, workflow.ErrBusy) || time.Now().After(deadline) {
					require.NoError(t, err)
					break
				}
				time.Sleep(5 * time.Millisecond) // a runner holds it: retry, with a deadline
			}
			require.NoError(t, <-done)
			waitStatus(t, drv, ids[0], driver.ExecutionCompleted)
			require.Equal(t, driver.ExecutionCancelled, row(t, drv, ids[1]).Status)
			got, err := b.tenants.Get(ctx, "free")
			require.NoError(t, err)
			require.Equal(t, 0, got.Active, "no slot is left held")
			require.Equal(t, 0, got.Queued)
		}
	})
}
