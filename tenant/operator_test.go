package tenant_test

import (
	"context"
	"testing"

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
