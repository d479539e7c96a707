package process_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/process"
)

// staysFor fails the test if cond stops holding within d: the pollers run every 20ms, so a
// window of several intervals shows they leave the execution alone.
func staysFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		require.True(t, cond(), what)
		time.Sleep(10 * time.Millisecond)
	}
}

func auditActions(t *testing.T, drv driver.Driver, id uuid.UUID) []string {
	t.Helper()
	rows, err := drv.Executor().AuditLogList(context.Background(), &driver.AuditLogListParams{EntityType: "execution", EntityID: id.String()})
	require.NoError(t, err)
	out := make([]string, len(rows))
	for i, r := range rows {
		out[len(rows)-1-i] = r.Action + " " + r.Actor // oldest first
	}
	return out
}

func TestSuspendBetweenStepsHoldsTheExecutionUntilResume(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		b := setupOrder(t, drv, &orderProcess{})
		ctx := context.Background()
		id, err := b.manager.Start(ctx, orderState{OrderID: "7"})
		require.NoError(t, err)
		waitStatus(t, b.manager, id, driver.ExecutionWaitingForAsync)

		var ops process.Operations = b.manager
		require.NoError(t, ops.Suspend(ctx, id, operator))
		inst, err := b.manager.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionSuspended, inst.Status)
		require.Equal(t, driver.ExecutionWaitingForAsync, inst.SuspendedFrom)
		require.ErrorIs(t, b.manager.Suspend(ctx, id, operator), commandbus.ErrInvalidState, "already suspended")

		// The confirmation arrives while suspended: recorded, not applied, nothing runs.
		require.NoError(t, b.manager.ProcessAsyncResponse(ctx, id, confirmed{By: "bank"}))
		staysFor(t, 200*time.Millisecond, "the execution stays suspended", func() bool {
			inst, err := b.manager.Get(ctx, id)
			require.NoError(t, err)
			return inst.Status == driver.ExecutionSuspended && inst.ResponsesReceived == 1 && !inst.State.Confirmed
		})
		require.Zero(t, b.proc.calls.get("ship"))

		require.NoError(t, ops.Resume(ctx, id, operator))
		inst = waitStatus(t, b.manager, id, driver.ExecutionCompleted)
		require.Equal(t, "confirmed by bank", inst.State.Note)
		require.Equal(t, 1, b.proc.calls.get("reserve"))
		require.Equal(t, 1, b.proc.calls.get("ship"))
		require.Equal(t, []string{
			"LIFECYCLE created PROCESS_CREATED",
			"STEP reserve COMPLETED", "SIDE_EFFECT token RECORDED", "WAIT awaitConfirmation PENDING",
			"LIFECYCLE SUSPENDED SUSPENDED", "LIFECYCLE RESUMED",
			"ASYNC_RESPONSE Confirmed APPLIED", "WAIT awaitConfirmation SATISFIED", "STEP ship COMPLETED",
		}, logLines(inst.Log))
		require.Equal(t, operator.Actor, inst.Log[4].Actor)
		require.Equal(t, operator.Reason, inst.Log[4].Reason)
		require.Equal(t, []string{"EXECUTION_SUSPEND alice@ops", "EXECUTION_RESUME alice@ops"}, auditActions(t, drv, id))

		require.ErrorIs(t, b.manager.Resume(ctx, id, operator), commandbus.ErrInvalidState, "nothing to resume")
		require.ErrorIs(t, b.manager.Suspend(ctx, id, operator), commandbus.ErrInvalidState, "completed")
		require.ErrorIs(t, b.manager.Suspend(ctx, uuid.New(), operator), commandbus.ErrNotFound)
		require.Error(t, b.manager.Suspend(ctx, id, commandbus.OperatorAction{}), "an actor is required")
	})
}

// gatedProcess runs "slow", which signals entered and blocks until gate closes, then "after".
type gatedProcess struct {
	calls   *counter
	entered chan struct{}
	gate    chan struct{}
	typ     string
}

func (p *gatedProcess) Type() string   { return p.typ }
func (p *gatedProcess) Domain() string { return "payments" }

func (p *gatedProcess) Execute(x *process.Execution[orderState]) error {
	if _, err := process.Step(x, "slow", func(ctx context.Context) (string, error) {
		if p.calls.inc("slow") == 1 {
			close(p.entered)
		}
		select {
		case <-p.gate:
			return "done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}); err != nil {
		return err
	}
	_, err := process.Step(x, "after", func(ctx context.Context) (string, error) {
		p.calls.inc("after")
		return "after", nil
	})
	return err
}

func newGated(typ string) *gatedProcess {
	return &gatedProcess{calls: newCounter(), entered: make(chan struct{}), gate: make(chan struct{}), typ: typ}
}

func TestSuspendWhileAStepRunsFinishesTheStepAndStops(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := newClient(t, drv, testConfig(t, clock.NewFake(testStart), nil))
		proc := newGated("Gated")
		m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, orderState{OrderID: "G"}, process.Deferred())
		require.NoError(t, err)
		<-proc.entered

		require.NoError(t, m.Suspend(ctx, id, operator))
		inst, err := m.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionExecuting, inst.Status, "the step still runs")
		require.True(t, inst.SuspendRequested)

		close(proc.gate)
		inst = waitStatus(t, m, id, driver.ExecutionSuspended)
		require.Equal(t, driver.ExecutionPending, inst.SuspendedFrom, "remembered as runnable")
		require.Equal(t, 1, proc.calls.get("slow"))
		require.Zero(t, proc.calls.get("after"), "no step starts after the request")
		require.Equal(t, []string{"LIFECYCLE created PROCESS_CREATED", "STEP slow COMPLETED", "LIFECYCLE SUSPENDED SUSPENDED"}, logLines(inst.Log))
		staysFor(t, 200*time.Millisecond, "the execution stays suspended", func() bool {
			return proc.calls.get("after") == 0
		})

		require.NoError(t, m.Resume(ctx, id, operator))
		inst = waitStatus(t, m, id, driver.ExecutionCompleted)
		require.Equal(t, 1, proc.calls.get("slow"), "the finished step is not run again")
		require.Equal(t, 1, proc.calls.get("after"))
	})
}

func TestResumeCancelsASuspendRequestNotYetHonoured(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := newClient(t, drv, testConfig(t, clock.NewFake(testStart), nil))
		proc := newGated("GatedCancel")
		m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, orderState{OrderID: "G"}, process.Deferred())
		require.NoError(t, err)
		<-proc.entered
		require.NoError(t, m.Suspend(ctx, id, operator))
		require.NoError(t, m.Resume(ctx, id, operator))
		close(proc.gate)
		waitStatus(t, m, id, driver.ExecutionCompleted)
		require.Equal(t, 1, proc.calls.get("after"))
	})
}

func TestDeadlinePassingDuringSuspensionAppliesAfterResume(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		fake := clock.NewFake(testStart)
		client := newClient(t, drv, testConfig(t, fake, nil))
		proc := &deadlineProcess{orderProcess: orderProcess{calls: newCounter()}, action: process.DeadlineFail}
		m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, orderState{OrderID: "D"}, process.WithDeadline(testStart.Add(time.Minute)))
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionWaitingForAsync)
		require.NoError(t, m.Suspend(ctx, id, operator))

		fake.Advance(10 * time.Minute) // past the deadline and the wait's timeout
		staysFor(t, 200*time.Millisecond, "the deadline does not apply while suspended", func() bool {
			inst, err := m.Get(ctx, id)
			require.NoError(t, err)
			return inst.Status == driver.ExecutionSuspended
		})

		require.NoError(t, m.Resume(ctx, id, operator))
		inst := waitStatus(t, m, id, driver.ExecutionFailed)
		require.Equal(t, process.CodeDeadlineExceeded, inst.ErrorCode)
	})
}

// A step that runs longer than the lease keeps its execution: its runner heartbeats, and a second
// client polling the same database does not take the execution over. The shared fake clock moves
// by half a lease at a time, each time only after a heartbeat renewed the lease from the new now:
// without heartbeats the lease would run out at the third move and either runner would claim the
// execution again, running the step a second time.
func TestLongStepKeepsItsLeaseAgainstAnotherRunner(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		const lease = 600 * time.Millisecond
		fake := clock.NewFake(testStart)
		proc := newGated("LongStep")
		var managers []*process.Manager[orderState]
		for _, worker := range []string{"runner-a", "runner-b"} {
			cfg := testConfig(t, fake, nil)
			cfg.WorkerID = worker
			cfg.Process.ExecutionLease = commandbus.Duration(lease)
			client := newClient(t, drv, cfg)
			m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
			require.NoError(t, err)
			start(t, client)
			managers = append(managers, m)
		}
		id, err := managers[0].Start(ctx, orderState{OrderID: "L"}, process.Deferred())
		require.NoError(t, err)
		<-proc.entered
		first, err := managers[0].Get(ctx, id)
		require.NoError(t, err)
		require.NotNil(t, first.LeaseUntil)

		var inst *process.Instance[orderState]
		for range 5 {
			fake.Advance(lease / 2)
			renewed := fake.Now().Add(lease)
			eventually(t, 15*time.Second, "a heartbeat to renew the lease", func() bool {
				inst, err = managers[0].Get(ctx, id)
				require.NoError(t, err)
				return inst.LeaseUntil != nil && !inst.LeaseUntil.Before(renewed)
			})
		}
		require.True(t, fake.Now().After(first.LeaseUntil.Add(lease)), "the first lease is long over")
		require.Equal(t, first.Fence, inst.Fence, "nobody took the execution over")
		require.Equal(t, first.WorkerID, inst.WorkerID)
		require.Equal(t, 1, proc.calls.get("slow"))

		close(proc.gate)
		waitStatus(t, managers[0], id, driver.ExecutionCompleted)
		require.Equal(t, 1, proc.calls.get("slow"), "the step's effect happened once")
		require.Equal(t, 1, proc.calls.get("after"))
	})
}

func TestWaitTimeoutPassingDuringSuspensionAppliesAfterResume(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		b := setupOrder(t, drv, &orderProcess{})
		ctx := context.Background()
		id, err := b.manager.Start(ctx, orderState{OrderID: "W"})
		require.NoError(t, err)
		waitStatus(t, b.manager, id, driver.ExecutionWaitingForAsync)
		require.NoError(t, b.manager.Suspend(ctx, id, operator))

		b.fake.Advance(6 * time.Minute) // past the wait's five-minute timeout
		staysFor(t, 200*time.Millisecond, "the wait does not time out while suspended", func() bool {
			inst, err := b.manager.Get(ctx, id)
			require.NoError(t, err)
			return inst.Status == driver.ExecutionSuspended
		})

		require.NoError(t, b.manager.Resume(ctx, id, operator))
		inst := waitStatus(t, b.manager, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, process.CodeWaitTimeout, inst.ErrorCode)
	})
}

// undoProcess runs two steps with compensations, then fails on a business rule; the first
// compensation to run ("undo-b") signals entered and blocks until gate closes.
type undoProcess struct {
	calls   *counter
	entered chan struct{}
	gate    chan struct{}
}

func (p *undoProcess) Type() string   { return "SuspendUndo" }
func (p *undoProcess) Domain() string { return "payments" }

func (p *undoProcess) Execute(x *process.Execution[orderState]) error {
	for _, name := range []string{"a", "b"} {
		if _, err := process.Step(x, name, func(ctx context.Context) (bool, error) {
			return true, nil
		}, process.Compensate(func(x *process.Execution[orderState]) error {
			if p.calls.inc("undo-"+name) == 1 && name == "b" {
				close(p.entered)
				<-p.gate
			}
			return nil
		})); err != nil {
			return err
		}
	}
	_, err := process.Step(x, "c", func(ctx context.Context) (bool, error) {
		return false, commandbus.BusinessRule("REFUSED", "refused")
	})
	return err
}

func TestSuspendDuringCompensationResumesCompensating(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := newClient(t, drv, testConfig(t, clock.NewFake(testStart), nil))
		proc := &undoProcess{calls: newCounter(), entered: make(chan struct{}), gate: make(chan struct{})}
		m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, orderState{OrderID: "U"}, process.Deferred())
		require.NoError(t, err)
		<-proc.entered
		require.NoError(t, m.Suspend(ctx, id, operator))
		close(proc.gate)

		inst := waitStatus(t, m, id, driver.ExecutionSuspended)
		require.Equal(t, driver.ExecutionCompensating, inst.SuspendedFrom)
		require.Zero(t, proc.calls.get("undo-a"), "no compensation starts after the request")

		require.NoError(t, m.Resume(ctx, id, operator))
		inst = waitStatus(t, m, id, driver.ExecutionCompensated)
		require.Equal(t, 1, proc.calls.get("undo-b"))
		require.Equal(t, 1, proc.calls.get("undo-a"))
		require.Equal(t, "REFUSED", inst.ErrorCode)
	})
}
