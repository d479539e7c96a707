package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/workflow"
)

type approval struct {
	By string `json:"by"`
}

// bookAfterApproval reads the gate's signal payload.
func bookAfterApproval(calls *counter) workflow.StepFunc {
	return counted(calls, func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		var a approval
		if err := sc.Result("approve", &a); err != nil {
			return nil, err
		}
		return "booked, approved by " + a.By, nil
	})
}

// unlessBusy repeats an operator action while a runner holds the execution (it is woken by the
// pollers now and then), as an operator would.
func unlessBusy(t *testing.T, action func() error) {
	t.Helper()
	var err error
	eventually(t, "the action while no runner holds the execution", func() bool {
		err = action()
		return !errors.Is(err, workflow.ErrBusy)
	})
	require.NoError(t, err)
}

func TestSignalsTimersAndChildren(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()

		t.Run("SignalAfterAndBeforeTheGate", func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(testStart)
			client, rt := newRuntime(t, drv, fake)
			calls := &counter{}
			m, err := workflow.Register(rt, workflow.New("approval", 1).
				Step("prepare", noop).
				WaitSignal("approve", "approved", workflow.DependsOn("prepare")).
				Step("book", bookAfterApproval(calls), workflow.DependsOn("approve")))
			require.NoError(t, err)
			start(t, client)

			after, err := m.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			inst := waitStatus(t, m, after, driver.ExecutionWaitingForAsync)
			require.Equal(t, "WAITING", steps(inst)["approve"].Status)
			require.Equal(t, "approve", inst.CurrentWait)
			waits, err := rt.OpenWaits(ctx, after)
			require.NoError(t, err)
			require.Len(t, waits, 1)
			require.Equal(t, driver.WaitSignal, waits[0].Kind)

			dup, err := m.Signal(ctx, after, "approved", approval{By: "ada"}, "sig-1")
			require.NoError(t, err)
			require.False(t, dup)
			inst = waitStatus(t, m, after, driver.ExecutionCompleted)
			require.JSONEq(t, `"booked, approved by ada"`, string(steps(inst)["book"].Result))
			dup, err = m.Signal(ctx, after, "approved", approval{By: "eve"}, "sig-1")
			require.ErrorIs(t, err, commandbus.ErrInvalidState, "an ended execution takes no signal")
			require.False(t, dup)

			// Sent before the gate opens (the start is delayed an hour), twice with one id.
			before, err := m.Start(ctx, nil, workflow.StartAt(testStart.Add(time.Hour)))
			require.NoError(t, err)
			dup, err = m.Signal(ctx, before, "approved", approval{By: "bob"}, "sig-2")
			require.NoError(t, err)
			require.False(t, dup)
			dup, err = m.Signal(ctx, before, "approved", approval{By: "mallory"}, "sig-2")
			require.NoError(t, err)
			require.True(t, dup, "the same signal id has one effect")
			pending, err := rt.PendingSignals(ctx, before)
			require.NoError(t, err)
			require.Len(t, pending, 1, "buffered until the gate opens")
			// The signal woke the execution; it looked, saw its start is an hour away and let go.
			// Only then does the test move the clock: a jump past a live lease would let a second
			// runner take it, which real time does not do.
			eventually(t, "the early wake-up is over", func() bool {
				row, err := drv.Executor().ExecutionGet(ctx, before)
				require.NoError(t, err)
				return row.LeaseUntil == nil && (row.WakeAt == nil || row.WakeAt.After(testStart))
			})
			fake.Advance(time.Hour)
			inst = waitStatus(t, m, before, driver.ExecutionCompleted)
			require.JSONEq(t, `"booked, approved by bob"`, string(steps(inst)["book"].Result))
			pending, err = rt.PendingSignals(ctx, before)
			require.NoError(t, err)
			require.Empty(t, pending, "the gate consumed it")
			require.Equal(t, 2, calls.get("book"))
		})

		t.Run("GateTimeoutTakesABranch", func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(testStart)
			client, rt := newRuntime(t, drv, fake)
			calls := &counter{}
			timedOut := func(sc *workflow.StepContext) bool { return sc.TimedOut("approve") }
			m, err := workflow.Register(rt, workflow.New("escalating", 1).
				WaitSignal("approve", "approved", workflow.SignalTimeout(time.Minute, workflow.TimeoutBranch)).
				Step("escalate", counted(calls, noop), workflow.DependsOn("approve"), workflow.When(timedOut)).
				Step("book", counted(calls, noop), workflow.DependsOn("approve"), workflow.When(func(sc *workflow.StepContext) bool { return !timedOut(sc) })))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			waitStatus(t, m, id, driver.ExecutionWaitingForAsync)
			fake.Advance(time.Minute)
			st := steps(waitStatus(t, m, id, driver.ExecutionCompleted))
			require.JSONEq(t, `{"timedOut":true}`, string(st["approve"].Result))
			require.Equal(t, "COMPLETED", st["escalate"].Status)
			require.Equal(t, "SKIPPED", st["book"].Status)
		})

		t.Run("GateTimeoutParksThenRetryWaitsAgain", func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(testStart)
			client, rt := newRuntime(t, drv, fake)
			calls := &counter{}
			m, err := workflow.Register(rt, workflow.New("strict-approval", 1).
				WaitSignal("approve", "approved", workflow.SignalTimeout(time.Minute, workflow.TimeoutTSQ)).
				Step("book", bookAfterApproval(calls), workflow.DependsOn("approve")))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			waitStatus(t, m, id, driver.ExecutionWaitingForAsync)
			fake.Advance(time.Minute)
			inst := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
			require.Equal(t, workflow.CodeSignalTimeout, inst.ErrorCode)
			unlessBusy(t, func() error { return m.Retry(ctx, id, operator) })
			waitStatus(t, m, id, driver.ExecutionWaitingForAsync)
			_, err = m.Signal(ctx, id, "approved", approval{By: "ada"}, "")
			require.NoError(t, err)
			waitStatus(t, m, id, driver.ExecutionCompleted)
			require.Equal(t, 1, calls.get("book"))
		})

		t.Run("TimerSurvivesARestartAndCanBeCancelled", func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(testStart)
			calls := &counter{}
			def := func() *workflow.Definition {
				return workflow.New("cooling-off", 1).Sleep("coolOff", time.Hour).Step("notify", counted(calls, noop), workflow.DependsOn("coolOff"))
			}
			client1, rt1 := newRuntime(t, drv, fake)
			m1, err := workflow.Register(rt1, def())
			require.NoError(t, err)
			require.NoError(t, client1.Start(ctx))
			id, err := m1.Start(ctx, nil)
			require.NoError(t, err)
			cancelled, err := m1.Start(ctx, nil)
			require.NoError(t, err)
			waitStatus(t, m1, id, driver.ExecutionWaitingForAsync)
			waitStatus(t, m1, cancelled, driver.ExecutionWaitingForAsync)
			require.NoError(t, client1.Stop(ctx))

			// Another instance takes over; the timer is in the database, not in a goroutine.
			client2, rt2 := newRuntime(t, drv, fake)
			m2, err := workflow.Register(rt2, def())
			require.NoError(t, err)
			start(t, client2)
			timers, err := rt2.Timers(ctx, id)
			require.NoError(t, err)
			require.Len(t, timers, 1)
			require.Equal(t, testStart.Add(time.Hour), timers[0].FireAt.UTC())
			unlessBusy(t, func() error { return rt2.CancelTimer(ctx, cancelled, "coolOff", operator) })
			st := steps(waitStatus(t, m2, cancelled, driver.ExecutionCompleted))
			require.JSONEq(t, `{"cancelled":true}`, string(st["coolOff"].Result))
			require.Equal(t, 1, calls.get("notify"), "a cancelled timer ends the sleep at once")

			require.Equal(t, driver.ExecutionWaitingForAsync, waitStatus(t, m2, id, driver.ExecutionWaitingForAsync).Status, "not before its time")
			fake.Advance(time.Hour)
			waitStatus(t, m2, id, driver.ExecutionCompleted)
			require.Equal(t, 2, calls.get("notify"), "each execution notified once")
			timers, err = rt2.Timers(ctx, id)
			require.NoError(t, err)
			require.Empty(t, timers, "the timer fired once")
		})

		t.Run("ChildrenAndCascadeCancel", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, clock.NewFake(testStart))
			kyc, err := workflow.Register(rt, workflow.New("kyc-check", 1).
				Step("collect", func(ctx context.Context, sc *workflow.StepContext) (any, error) {
					var in map[string]string
					return in, sc.DecodeInput(&in)
				}).
				WaitSignal("reviewed", "reviewed", workflow.DependsOn("collect")))
			require.NoError(t, err)
			parent, err := workflow.Register(rt, workflow.New("account-opening", 1).
				Child("kyc", "kyc-check", func(sc *workflow.StepContext) (any, error) {
					return map[string]string{"customer": "c-9"}, nil
				}).
				Step("open", noop, workflow.DependsOn("kyc")))
			require.NoError(t, err)
			start(t, client)

			id, err := parent.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			waitStatus(t, parent, id, driver.ExecutionWaitingForAsync)
			children, err := drv.Executor().ExecutionList(ctx, &driver.ExecutionListParams{ParentID: id})
			require.NoError(t, err)
			require.Len(t, children, 1)
			child := children[0]
			require.Equal(t, "kyc-check", child.Type)
			require.JSONEq(t, `{"customer":"c-9"}`, string(child.State))
			waitStatus(t, kyc, child.ID, driver.ExecutionWaitingForAsync)
			_, err = kyc.Signal(ctx, child.ID, "reviewed", json.RawMessage(`{"ok":true}`), "")
			require.NoError(t, err)
			waitStatus(t, kyc, child.ID, driver.ExecutionCompleted)
			st := steps(waitStatus(t, parent, id, driver.ExecutionCompleted))
			require.Equal(t, "COMPLETED", st["open"].Status, "the child's end resumed the parent")

			cancelled, err := parent.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			waitStatus(t, parent, cancelled, driver.ExecutionWaitingForAsync)
			children, err = drv.Executor().ExecutionList(ctx, &driver.ExecutionListParams{ParentID: cancelled})
			require.NoError(t, err)
			require.Len(t, children, 1)
			unlessBusy(t, func() error { return parent.CancelOverride(ctx, cancelled, false, operator) })
			inst := waitStatus(t, kyc, children[0].ID, driver.ExecutionCancelled)
			require.Equal(t, driver.CodeParentCancelled, inst.ErrorCode, "cancelling the parent cancels its child")
		})
	})
}

// A workflow's timeout applies its deadline action: the troubleshooting queue by default,
// compensations, or FAILED at once.
func TestWorkflowDeadlineActions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		fake := clock.NewFake(testStart)
		client, rt := newRuntime(t, drv, fake)
		var undone int32
		managers := map[workflow.DeadlineAction]*workflow.Manager{}
		for _, action := range []workflow.DeadlineAction{workflow.DeadlineTSQ, workflow.DeadlineCompensate, workflow.DeadlineFail} {
			m, err := workflow.Register(rt, workflow.New("deadline-"+string(action), 1).Timeout(time.Hour).OnDeadline(action).
				Step("book", noop, workflow.Compensate(func(context.Context, *workflow.StepContext) error { undone++; return nil })).
				WaitSignal("confirm", "confirmed", workflow.DependsOn("book")))
			require.NoError(t, err)
			managers[action] = m
		}
		_, err := workflow.Register(rt, workflow.New("bad-deadline", 1).OnDeadline("RETRY").Step("a", noop))
		require.ErrorContains(t, err, `the deadline action "RETRY" is not TSQ, COMPENSATE or FAIL`)
		start(t, client)
		ids := map[workflow.DeadlineAction]uuid.UUID{}
		for action, m := range managers {
			id, err := m.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			waitStatus(t, m, id, driver.ExecutionWaitingForAsync)
			ids[action] = id
		}
		fake.Advance(time.Hour + time.Second)
		inst := waitStatus(t, managers[workflow.DeadlineTSQ], ids[workflow.DeadlineTSQ], driver.ExecutionWaitingForTSQ)
		require.Equal(t, commandbus.CodeDeadlineExceeded, inst.ErrorCode)
		inst = waitStatus(t, managers[workflow.DeadlineCompensate], ids[workflow.DeadlineCompensate], driver.ExecutionCompensated)
		require.Equal(t, commandbus.CodeDeadlineExceeded, inst.ErrorCode)
		inst = waitStatus(t, managers[workflow.DeadlineFail], ids[workflow.DeadlineFail], driver.ExecutionFailed)
		require.Equal(t, commandbus.CodeDeadlineExceeded, inst.ErrorCode)
		require.EqualValues(t, 1, undone, "only the COMPENSATE action unwound the booking")
	})
}
