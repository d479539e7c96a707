package drivertest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

// acquireAt leases an execution to runner at now and returns its row (its new fence).
func acquireAt(t *testing.T, exec driver.Executor, id uuid.UUID, now time.Time) *driver.ExecutionRow {
	t.Helper()
	row, err := exec.ExecutionAcquire(context.Background(), &driver.ExecutionAcquireParams{ID: id, Lease: time.Minute, WorkerID: runner, Now: &now})
	require.NoError(t, err)
	return row
}

func sendSignal(t *testing.T, exec driver.Executor, id uuid.UUID, signalID, name string, now time.Time) *driver.ExecutionSignalSendResult {
	t.Helper()
	res, err := exec.ExecutionSignalSend(context.Background(), &driver.ExecutionSignalSendParams{
		ExecutionID: id, SignalID: signalID, Name: name, Payload: json.RawMessage(`{"ok": true}`), Now: &now,
	})
	require.NoError(t, err)
	return res
}

func pendingSignalIDs(t *testing.T, exec driver.Executor, id uuid.UUID) []string {
	t.Helper()
	rows, err := exec.ExecutionSignalListPending(context.Background(), id)
	require.NoError(t, err)
	out := []string{}
	for _, r := range rows {
		out = append(out, r.SignalID)
	}
	return out
}

func timerIDs(t *testing.T, exec driver.Executor, id uuid.UUID, due bool, now time.Time) []string {
	t.Helper()
	rows, err := exec.ExecutionTimerList(context.Background(), &driver.ExecutionTimerListParams{ExecutionID: id, Due: due, Now: &now})
	require.NoError(t, err)
	out := []string{}
	for _, r := range rows {
		require.Equal(t, driver.TimerPending, r.Status)
		out = append(out, r.TimerID)
	}
	return out
}

func waitIDs(t *testing.T, exec driver.Executor, id uuid.UUID, expired bool, now time.Time) []string {
	t.Helper()
	rows, err := exec.ExecutionWaitList(context.Background(), &driver.ExecutionWaitListParams{ExecutionID: id, Expired: expired, Now: &now})
	require.NoError(t, err)
	out := []string{}
	for _, r := range rows {
		out = append(out, r.WaitID)
	}
	return out
}

func exerciseExecutionSignals(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("SendDuplicateAndList", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newExecution("Flow")
		insertExecutions(t, b.exec, &t0, p)
		t1 := t0.Add(time.Second)
		res := sendSignal(t, b.exec, p.ID, "approve-1", "approve", t1)
		require.Equal(t, &driver.ExecutionSignalSendResult{SignalID: "approve-1"}, res)
		res = sendSignal(t, b.exec, p.ID, "approve-1", "approve", t1.Add(time.Second))
		require.True(t, res.Duplicate, "the same signal id again is a no-op")

		generated, err := b.exec.ExecutionSignalSend(ctx, &driver.ExecutionSignalSendParams{ExecutionID: p.ID, Name: "note", Now: &t1})
		require.NoError(t, err)
		require.NotEmpty(t, generated.SignalID, "an id is generated")
		require.False(t, generated.Duplicate)

		rows, err := b.exec.ExecutionSignalListPending(ctx, p.ID)
		require.NoError(t, err)
		require.Len(t, rows, 2)
		byID := map[string]*driver.ExecutionSignalRow{}
		for _, r := range rows {
			byID[r.SignalID] = r
		}
		approve := byID["approve-1"]
		require.NotNil(t, approve)
		require.Equal(t, p.ID, approve.ExecutionID)
		require.Equal(t, "approve", approve.Name)
		require.JSONEq(t, `{"ok": true}`, string(approve.Payload))
		requireTime(t, t1, approve.ReceivedAt, "received_at")
		require.Nil(t, approve.ConsumedAt)
		require.Empty(t, byID[generated.SignalID].Payload, "no payload stays empty")
		requireTimePtr(t, t1, getExecution(t, b.exec, p.ID).WakeAt, "a signal wakes the execution")
	})

	t.Run("KeepsTheSendersTraceparent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newExecution("Flow")
		insertExecutions(t, b.exec, &t0, p)
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		_, err := b.exec.ExecutionSignalSend(ctx, &driver.ExecutionSignalSendParams{ExecutionID: p.ID, SignalID: "traced",
			Name: "approve", Traceparent: tp, Now: &t0})
		require.NoError(t, err)
		sendSignal(t, b.exec, p.ID, "untraced", "approve", t0.Add(time.Second))
		rows, err := b.exec.ExecutionSignalListPending(ctx, p.ID)
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.Equal(t, "traced", rows[0].SignalID)
		require.Equal(t, tp, rows[0].Traceparent, "the sender's traceparent is stored with the signal")
		require.Empty(t, rows[1].Traceparent, "a signal sent outside a trace has none")
	})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newExecution("Flow")
		insertExecutions(t, b.exec, &t0, p)
		_, err := b.exec.ExecutionSignalSend(ctx, &driver.ExecutionSignalSendParams{ExecutionID: p.ID, Now: &t0})
		require.ErrorContains(t, err, "name is required")
		_, err = b.exec.ExecutionSignalSend(ctx, &driver.ExecutionSignalSendParams{ExecutionID: p.ID, Name: "x", Payload: json.RawMessage(`{`), Now: &t0})
		require.ErrorContains(t, err, "not valid JSON")
		require.Empty(t, pendingSignalIDs(t, b.exec, p.ID), "nothing recorded on bad input")
	})

	t.Run("UnknownAndEnded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.exec.ExecutionSignalSend(ctx, &driver.ExecutionSignalSendParams{ExecutionID: uuid.New(), Name: "x", Now: &t0})
		require.ErrorIs(t, err, driver.ErrNotFound)

		p := newLeasedExecution("Flow", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		park(t, b.exec, t0, p.ID, driver.ExecutionCompleted, nil)
		_, err = b.exec.ExecutionSignalSend(ctx, &driver.ExecutionSignalSendParams{ExecutionID: p.ID, Name: "x", Now: &t0})
		require.ErrorIs(t, err, driver.ErrConflict)
		require.ErrorContains(t, err, "ended")
		require.Empty(t, pendingSignalIDs(t, b.exec, p.ID))
	})

	t.Run("BufferedThenConsumed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Flow", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		park(t, b.exec, t0, p.ID, driver.ExecutionWaitingForAsync, nil)
		require.Nil(t, getExecution(t, b.exec, p.ID).WakeAt)

		// Sent before the runner waits for it: kept, and the execution is woken.
		t1 := t0.Add(time.Second)
		sendSignal(t, b.exec, p.ID, "s1", "approve", t1)
		sendSignal(t, b.exec, p.ID, "s2", "reject", t1.Add(time.Millisecond))
		requireTimePtr(t, t1.Add(time.Millisecond), getExecution(t, b.exec, p.ID).WakeAt, "wake_at")
		row := acquireAt(t, b.exec, p.ID, t1)
		require.Equal(t, []string{"s1", "s2"}, pendingSignalIDs(t, b.exec, p.ID), "in the order received")

		// A fenced-out checkpoint consumes nothing.
		require.Empty(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: row.Fence - 1, Status: driver.ExecutionExecuting, ConsumeSignals: []string{"s1"},
		}))
		require.Equal(t, []string{"s1", "s2"}, pendingSignalIDs(t, b.exec, p.ID))

		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: row.Fence, Status: driver.ExecutionWaitingForAsync, Release: true, ConsumeSignals: []string{"s1"},
		}))
		require.Equal(t, []string{"s2"}, pendingSignalIDs(t, b.exec, p.ID), "a consumed signal is not returned again")
		require.Nil(t, getExecution(t, b.exec, p.ID).WakeAt, "an unconsumed signal the runner saw does not wake it again")
	})

	t.Run("ArrivesWhileLeased", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Flow", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		t1, t2 := t0.Add(time.Second), t0.Add(2*time.Second)
		sendSignal(t, b.exec, p.ID, "s1", "approve", t1)
		requireTimePtr(t, t0.Add(time.Minute), getExecution(t, b.exec, p.ID).WakeAt, "a live lease keeps wake_at")
		park(t, b.exec, t2, p.ID, driver.ExecutionWaitingForAsync, nil)
		requireTimePtr(t, t2, getExecution(t, b.exec, p.ID).WakeAt, "the release wakes it for the signal")

		row := acquireAt(t, b.exec, p.ID, t2)
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t2, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: row.Fence, Status: driver.ExecutionWaitingForAsync, Release: true,
		}))
		require.Nil(t, getExecution(t, b.exec, p.ID).WakeAt, "woken once for it")
	})
}

func exerciseExecutionTimers(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("WakeAtEarliestPending", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Flow", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true, WakeAt: ptr(t0.Add(time.Hour)),
			Timers: []*driver.TimerParams{
				{ID: "late", Name: "reminder", FireAt: ptr(t0.Add(10 * time.Second))},
				{ID: "soon", Name: "reminder", Delay: 5 * time.Second},
			},
		}))
		requireTimePtr(t, t0.Add(5*time.Second), getExecution(t, b.exec, p.ID).WakeAt, "the earliest timer")
		rows, err := b.exec.ExecutionTimerList(ctx, &driver.ExecutionTimerListParams{ExecutionID: p.ID})
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.Equal(t, "soon", rows[0].TimerID, "earliest first")
		require.Equal(t, "reminder", rows[0].Name)
		requireTime(t, t0.Add(5*time.Second), rows[0].FireAt, "fire_at from the delay")
		requireTime(t, t0, rows[0].CreatedAt, "created_at")
		require.Nil(t, rows[0].FiredAt)
		require.Empty(t, timerIDs(t, b.exec, p.ID, true, t0.Add(4*time.Second)), "not due yet")

		// Claimed when due; scheduling an existing id again changes nothing.
		t5 := t0.Add(5 * time.Second)
		claimed := claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t5)
		require.Equal(t, []uuid.UUID{p.ID}, executionIDs(claimed))
		require.Equal(t, []string{"soon"}, timerIDs(t, b.exec, p.ID, true, t5))
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t5, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: claimed[0].Fence, Status: driver.ExecutionWaitingForAsync, Release: true,
			FireTimers: []string{"soon"},
			Timers:     []*driver.TimerParams{{ID: "soon", Delay: time.Hour}, {ID: "late", Delay: time.Hour}},
		}))
		require.Equal(t, []string{"late"}, timerIDs(t, b.exec, p.ID, false, t5), "a fired timer is not pending")
		require.Empty(t, timerIDs(t, b.exec, p.ID, true, t0.Add(9*time.Second)), "a fired timer is never due again")
		require.Equal(t, []string{"late"}, timerIDs(t, b.exec, p.ID, true, t0.Add(10*time.Second)), "its fire_at is kept")
		requireTimePtr(t, t0.Add(10*time.Second), getExecution(t, b.exec, p.ID).WakeAt, "the next pending timer")

		// A fenced-out checkpoint schedules, fires and cancels nothing.
		require.Empty(t, checkpoint(t, b.exec, t5, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: claimed[0].Fence - 1, Status: driver.ExecutionWaitingForAsync, Release: true,
			CancelTimers: []string{"late"}, Timers: []*driver.TimerParams{{ID: "new", Delay: time.Second}},
		}))
		require.Equal(t, []string{"late"}, timerIDs(t, b.exec, p.ID, false, t5))

		// Cancelling the last pending timer leaves the execution asleep.
		row := acquireAt(t, b.exec, p.ID, t5)
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t5, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: row.Fence, Status: driver.ExecutionWaitingForAsync, Release: true, CancelTimers: []string{"late"},
		}))
		require.Empty(t, timerIDs(t, b.exec, p.ID, false, t5))
		require.Nil(t, getExecution(t, b.exec, p.ID).WakeAt)
	})

	t.Run("DueMany", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, q, r := newLeasedExecution("Flow", time.Minute), newLeasedExecution("Flow", time.Minute), newLeasedExecution("Flow", time.Minute)
		insertExecutions(t, b.exec, &t0, p, q, r)
		schedule := func(x *driver.ExecutionInsertParams, delays ...time.Duration) *driver.ExecutionCheckpoint {
			cp := &driver.ExecutionCheckpoint{ID: x.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true}
			for i, d := range delays {
				cp.Timers = append(cp.Timers, &driver.TimerParams{ID: fmt.Sprintf("t%d", i), Delay: d})
			}
			return cp
		}
		require.Len(t, checkpoint(t, b.exec, t0, schedule(p, 2*time.Second, time.Second, time.Hour), schedule(q, time.Second), schedule(r, time.Hour)), 3)
		t2 := t0.Add(2 * time.Second)
		rows, err := b.exec.ExecutionTimerListDueMany(ctx, &driver.ExecutionTimerListDueManyParams{ExecutionIDs: []uuid.UUID{p.ID, q.ID, r.ID, uuid.New()}, Now: &t2})
		require.NoError(t, err)
		got := map[uuid.UUID][]string{}
		for _, row := range rows {
			got[row.ExecutionID] = append(got[row.ExecutionID], row.TimerID)
		}
		require.Equal(t, map[uuid.UUID][]string{p.ID: {"t1", "t0"}, q.ID: {"t0"}}, got, "due ones, earliest first")
		rows, err = b.exec.ExecutionTimerListDueMany(ctx, &driver.ExecutionTimerListDueManyParams{Now: &t2})
		require.NoError(t, err)
		require.Empty(t, rows)
	})

	t.Run("NextWake", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		next := func(now time.Time, types ...string) *time.Time {
			t.Helper()
			at, err := b.exec.ExecutionNextWake(ctx, &driver.ExecutionNextWakeParams{Types: types, Now: &now})
			require.NoError(t, err)
			return at
		}
		require.Nil(t, next(t0))
		p, q := newLeasedExecution("Flow", time.Minute), newLeasedExecution("Other", time.Hour)
		insertExecutions(t, b.exec, &t0, p, q)
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true,
			Timers: []*driver.TimerParams{{ID: "t", Delay: 5 * time.Second}},
		}))
		requireTimePtr(t, t0.Add(5*time.Second), next(t0), "the timer")
		requireTimePtr(t, t0.Add(5*time.Second), next(t0, "Flow"), "the timer")
		requireTimePtr(t, t0.Add(time.Hour), next(t0, "Other"), "the other type's lease end")
		requireTimePtr(t, t0.Add(time.Hour), next(t0.Add(5*time.Second)), "only later wake-ups")
		require.Nil(t, next(t0, "Nobody"))
		// A wake-up that fell due within the lookback is still reported (the poller's claim ran
		// before it was due).
		lookback := func(now time.Time, d time.Duration) *time.Time {
			t.Helper()
			at, err := b.exec.ExecutionNextWake(ctx, &driver.ExecutionNextWakeParams{Types: []string{"Flow"}, Now: &now, Lookback: d})
			require.NoError(t, err)
			return at
		}
		require.Nil(t, lookback(t0.Add(6*time.Second), 0))
		requireTimePtr(t, t0.Add(5*time.Second), lookback(t0.Add(6*time.Second), 2*time.Second), "the timer due a second ago")
	})

	t.Run("MixedBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		plain, timed, fenced := newLeasedExecution("Flow", time.Minute), newLeasedExecution("Flow", time.Minute), newLeasedExecution("Flow", time.Minute)
		insertExecutions(t, b.exec, &t0, plain, timed, fenced)
		applied := checkpoint(t, b.exec, t0,
			&driver.ExecutionCheckpoint{ID: plain.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true,
				Log: []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "STEP", Name: "a"}}},
			&driver.ExecutionCheckpoint{ID: timed.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true,
				Log:    []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "STEP", Name: "b"}},
				Timers: []*driver.TimerParams{{ID: "t", Delay: time.Second}}},
			&driver.ExecutionCheckpoint{ID: fenced.ID, Fence: 7, Status: driver.ExecutionWaitingForAsync, Release: true,
				Timers: []*driver.TimerParams{{ID: "t", Delay: time.Second}}},
		)
		require.ElementsMatch(t, []uuid.UUID{plain.ID, timed.ID}, applied)
		require.Nil(t, getExecution(t, b.exec, plain.ID).WakeAt)
		requireTimePtr(t, t0.Add(time.Second), getExecution(t, b.exec, timed.ID).WakeAt, "the timer")
		require.Equal(t, driver.ExecutionExecuting, getExecution(t, b.exec, fenced.ID).Status)
		require.Empty(t, timerIDs(t, b.exec, fenced.ID, false, t0))
		for _, id := range []uuid.UUID{plain.ID, timed.ID} {
			log, err := b.exec.ExecutionLogList(ctx, id)
			require.NoError(t, err)
			require.Len(t, log, 1, "the log entries of checkpoints with and without timers")
		}
	})

	t.Run("FireOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Flow", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionExecuting, Timers: []*driver.TimerParams{{ID: "t", FireAt: &t0}},
		}))
		require.Equal(t, []string{"t"}, timerIDs(t, b.exec, p.ID, true, t0))
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionExecuting, FireTimers: []string{"t"},
		}))
		// Firing again, cancelling, or scheduling the same id changes nothing.
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true,
			FireTimers: []string{"t"}, CancelTimers: []string{"t"}, Timers: []*driver.TimerParams{{ID: "t", FireAt: &t0}},
		}))
		require.Empty(t, timerIDs(t, b.exec, p.ID, true, t0.Add(time.Hour)))
		require.Nil(t, getExecution(t, b.exec, p.ID).WakeAt)
		err := b.exec.ExecutionTimerCancel(ctx, &driver.ExecutionTimerCancelParams{ExecutionID: p.ID, TimerID: "t"})
		require.ErrorIs(t, err, driver.ErrConflict)
	})

	t.Run("OperatorCancel", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Flow", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true,
			Timers: []*driver.TimerParams{{ID: "a", Delay: time.Minute}, {ID: "b", Delay: 2 * time.Minute}},
		}))
		err := b.exec.ExecutionTimerCancel(ctx, &driver.ExecutionTimerCancelParams{ExecutionID: p.ID, TimerID: "nope"})
		require.ErrorIs(t, err, driver.ErrNotFound)
		err = b.exec.ExecutionTimerCancel(ctx, &driver.ExecutionTimerCancelParams{ExecutionID: uuid.New(), TimerID: "a"})
		require.ErrorIs(t, err, driver.ErrNotFound)
		require.NoError(t, b.exec.ExecutionTimerCancel(ctx, &driver.ExecutionTimerCancelParams{ExecutionID: p.ID, TimerID: "a"}))
		require.Equal(t, []string{"b"}, timerIDs(t, b.exec, p.ID, false, t0))
		require.Empty(t, timerIDs(t, b.exec, p.ID, true, t0.Add(time.Minute)), "a cancelled timer is never due")
		err = b.exec.ExecutionTimerCancel(ctx, &driver.ExecutionTimerCancelParams{ExecutionID: p.ID, TimerID: "a"})
		require.ErrorIs(t, err, driver.ErrConflict)
	})
}

func exerciseExecutionWaits(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("OpenCloseListExpire", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Flow", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true,
			OpenWaits: []*driver.WaitParams{
				{ID: "approval", Kind: driver.WaitSignal, Name: "approve", Timeout: 30 * time.Second},
				{ID: "reply", Kind: driver.WaitReply, Name: "charge"},
				{ID: "child", Kind: driver.WaitChild, TimeoutAt: ptr(t0.Add(time.Hour))},
			},
		}))
		rows, err := b.exec.ExecutionWaitList(ctx, &driver.ExecutionWaitListParams{ExecutionID: p.ID, Now: &t0})
		require.NoError(t, err)
		require.Len(t, rows, 3)
		byID := map[string]*driver.ExecutionWaitRow{}
		for _, r := range rows {
			byID[r.WaitID] = r
			requireTime(t, t0, r.OpenedAt, "opened_at")
			require.Equal(t, p.ID, r.ExecutionID)
		}
		require.Equal(t, driver.WaitSignal, byID["approval"].Kind)
		require.Equal(t, "approve", byID["approval"].Name)
		requireTimePtr(t, t0.Add(30*time.Second), byID["approval"].TimeoutAt, "timeout_at")
		require.Nil(t, byID["reply"].TimeoutAt)
		requireTimePtr(t, t0.Add(30*time.Second), getExecution(t, b.exec, p.ID).WakeAt, "the earliest wait timeout")
		require.Empty(t, waitIDs(t, b.exec, p.ID, true, t0.Add(29*time.Second)))

		// When the timeout passes the execution is taken up and the runner sees the wait expired.
		t30 := t0.Add(30 * time.Second)
		claimed := claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t30)
		require.Equal(t, []uuid.UUID{p.ID}, executionIDs(claimed))
		require.Equal(t, []string{"approval"}, waitIDs(t, b.exec, p.ID, true, t30))
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t30, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: claimed[0].Fence, Status: driver.ExecutionWaitingForAsync, Release: true,
			CloseWaits: []string{"approval", "unknown"},
			OpenWaits:  []*driver.WaitParams{{ID: "reply", Kind: driver.WaitReply, Name: "reopened"}},
		}))
		rows, err = b.exec.ExecutionWaitList(ctx, &driver.ExecutionWaitListParams{ExecutionID: p.ID, Now: &t30})
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.Equal(t, []string{"child", "reply"}, []string{rows[0].WaitID, rows[1].WaitID})
		require.Equal(t, "charge", rows[1].Name, "opening an open wait again is a no-op")
		requireTimePtr(t, t0.Add(time.Hour), getExecution(t, b.exec, p.ID).WakeAt, "the next wait timeout")
	})

	t.Run("InvalidOps", func(t *testing.T) {
		t.Parallel()
		cp := &driver.ExecutionCheckpoint{
			Timers:     []*driver.TimerParams{{Delay: time.Second}, {ID: "t", Delay: -time.Second}},
			OpenWaits:  []*driver.WaitParams{{ID: "w", Kind: "NAP"}},
			FireTimers: []string{""},
		}
		err := cp.ValidateSignalOps()
		require.ErrorContains(t, err, "timer: id is required")
		require.ErrorContains(t, err, "negative delay")
		require.ErrorContains(t, err, `unknown kind "NAP"`)
		require.ErrorContains(t, err, "empty timer, signal or wait id")
		require.True(t, cp.HasSignalOps())
		require.False(t, (&driver.ExecutionCheckpoint{}).HasSignalOps())

		// The driver rejects the whole batch and writes nothing.
		b := setup(t)
		p, q := newLeasedExecution("Flow", time.Minute), newLeasedExecution("Flow", time.Minute)
		insertExecutions(t, b.exec, &t0, p, q)
		_, err = b.exec.ExecutionCheckpointMany(ctx, &driver.ExecutionCheckpointManyParams{Now: &t0, Checkpoints: []*driver.ExecutionCheckpoint{
			{ID: q.ID, Fence: 1, Status: driver.ExecutionCompleted, Release: true, Timers: []*driver.TimerParams{{ID: "ok", Delay: time.Second}}},
			{ID: p.ID, Fence: 1, Status: driver.ExecutionCompleted, Release: true, OpenWaits: []*driver.WaitParams{{ID: "w", Kind: "NAP"}}},
		}})
		require.ErrorContains(t, err, `unknown kind "NAP"`)
		require.Equal(t, driver.ExecutionExecuting, getExecution(t, b.exec, p.ID).Status)
		require.Equal(t, driver.ExecutionExecuting, getExecution(t, b.exec, q.ID).Status)
		require.Empty(t, timerIDs(t, b.exec, q.ID, false, t0))
	})
}

func exerciseExecutionSignalsEnded(t *testing.T, setup setupFunc) {
	t.Run("EndedExecutionSleeps", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Flow", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		sendSignal(t, b.exec, p.ID, "s1", "approve", t0)
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionCompleted, Release: true,
			Timers: []*driver.TimerParams{{ID: "t", Delay: time.Second}},
		}))
		require.Nil(t, getExecution(t, b.exec, p.ID).WakeAt, "an ended execution is not woken by signals or timers")
	})
}
