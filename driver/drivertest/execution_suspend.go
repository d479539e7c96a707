package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

func suspend(t *testing.T, exec driver.Executor, now time.Time, id uuid.UUID) *driver.ExecutionRow {
	t.Helper()
	row, err := exec.ExecutionSuspend(context.Background(), &driver.ExecutionSuspendParams{ID: id, Actor: "ops", Reason: "hold on", Now: &now})
	require.NoError(t, err)
	return row
}

func resume(t *testing.T, exec driver.Executor, now time.Time, id uuid.UUID) *driver.ExecutionRow {
	t.Helper()
	row, err := exec.ExecutionResume(context.Background(), &driver.ExecutionResumeParams{ID: id, Actor: "ops", Reason: "go on", Now: &now})
	require.NoError(t, err)
	return row
}

// lastLog returns the last entry of an execution's log.
func lastLog(t *testing.T, exec driver.Executor, id uuid.UUID) driver.ExecutionLogEntry {
	t.Helper()
	log := logList(t, exec, id)
	require.NotEmpty(t, log)
	return log[len(log)-1]
}

func exerciseExecutionSuspend(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("IdleSuspendsAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newExecution("Pay")
		insertExecutions(t, b.exec, &t0, p)
		t1 := t0.Add(time.Second)
		row := suspend(t, b.exec, t1, p.ID)
		require.Equal(t, driver.ExecutionSuspended, row.Status)
		require.Equal(t, driver.ExecutionPending, row.SuspendedFrom)
		require.False(t, row.SuspendRequested)
		require.Equal(t, int64(1), row.Fence, "the suspension fences out any earlier holder")
		require.Nil(t, row.WakeAt, "out of the pending poller's way until the resume")
		requireExecution(t, row, getExecution(t, b.exec, p.ID))

		entry := lastLog(t, b.exec, p.ID)
		require.Equal(t, driver.LogEntryLifecycle, entry.EntryType)
		require.Equal(t, driver.LogSuspended, entry.Name)
		require.Equal(t, "ops", entry.Actor)
		require.Equal(t, "hold on", entry.Reason)

		audit, err := b.exec.AuditLogList(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: p.ID.String()})
		require.NoError(t, err)
		require.Len(t, audit, 1)
		require.Equal(t, driver.AuditExecutionSuspend, audit[0].Action)
		require.Equal(t, "ops", audit[0].Actor)
		require.Equal(t, "hold on", audit[0].Reason)

		// Suspending again, or a terminal execution, is a conflict.
		_, err = b.exec.ExecutionSuspend(ctx, &driver.ExecutionSuspendParams{ID: p.ID, Actor: "ops", Now: &t1})
		require.ErrorIs(t, err, driver.ErrConflict)
		require.ErrorContains(t, err, "SUSPENDED")
		done := newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, done)
		park(t, b.exec, t0, done.ID, driver.ExecutionCompleted, nil)
		_, err = b.exec.ExecutionSuspend(ctx, &driver.ExecutionSuspendParams{ID: done.ID, Actor: "ops", Now: &t1})
		require.ErrorIs(t, err, driver.ErrConflict)
		_, err = b.exec.ExecutionSuspend(ctx, &driver.ExecutionSuspendParams{ID: uuid.New(), Actor: "ops", Now: &t1})
		require.ErrorIs(t, err, driver.ErrNotFound)
		_, err = b.exec.ExecutionSuspend(ctx, &driver.ExecutionSuspendParams{ID: p.ID})
		require.ErrorContains(t, err, "actor is required")
	})

	t.Run("LeasedIsRequestedThenSuspendedOnRelease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		t1 := t0.Add(time.Second)
		row := suspend(t, b.exec, t1, p.ID)
		require.Equal(t, driver.ExecutionExecuting, row.Status, "a runner holds it: only asked")
		require.True(t, row.SuspendRequested)
		require.Equal(t, int64(1), row.Fence)

		// A checkpoint that keeps running reports the request and leaves it pending.
		step := &driver.ExecutionCheckpoint{ID: p.ID, Fence: 1, Status: driver.ExecutionExecuting, Step: "a",
			Log: []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "STEP", Name: "a", StepStatus: "COMPLETED"}}}
		require.Len(t, checkpoint(t, b.exec, t1, step), 1)
		require.True(t, step.SuspendRequested)
		require.True(t, getExecution(t, b.exec, p.ID).SuspendRequested)

		// The heartbeat reports it too.
		requested, err := b.exec.ExecutionHeartbeat(ctx, &driver.ExecutionHeartbeatParams{ID: p.ID, Fence: 1, Lease: time.Minute, Now: &t1})
		require.NoError(t, err)
		require.True(t, requested)

		// The release stores SUSPENDED, remembering a running execution as runnable.
		release := &driver.ExecutionCheckpoint{ID: p.ID, Fence: 1, Status: driver.ExecutionExecuting, Step: "b", Release: true,
			Log: []*driver.ExecutionLogEntry{{Seq: 2, EntryType: "STEP", Name: "b", StepStatus: "COMPLETED"}}}
		require.Len(t, checkpoint(t, b.exec, t1, release), 1)
		require.True(t, release.SuspendRequested)
		row = getExecution(t, b.exec, p.ID)
		require.Equal(t, driver.ExecutionSuspended, row.Status)
		require.Equal(t, driver.ExecutionPending, row.SuspendedFrom)
		require.False(t, row.SuspendRequested)
		require.Nil(t, row.LeaseUntil)
		require.Nil(t, row.WakeAt)
		log := logList(t, b.exec, p.ID)
		require.Len(t, log, 3)
		require.Equal(t, "b", log[1].Name)
		require.Equal(t, driver.LogSuspended, log[2].Name)
		require.Equal(t, 3, log[2].Seq)
		require.Equal(t, "ops", log[2].Actor)
		require.Equal(t, "hold on", log[2].Reason)

		// Resume: runnable again at once.
		t2 := t1.Add(time.Hour)
		row = resume(t, b.exec, t2, p.ID)
		require.Equal(t, driver.ExecutionPending, row.Status)
		require.Empty(t, row.SuspendedFrom)
		require.Equal(t, "b", row.Step)
		requireTimePtr(t, t2, row.WakeAt, "wake_at")
		require.Equal(t, []uuid.UUID{p.ID}, executionIDs(claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t2)))
		require.Equal(t, driver.LogResumed, lastLog(t, b.exec, p.ID).Name)

		audit, err := b.exec.AuditLogList(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: p.ID.String()})
		require.NoError(t, err)
		require.Len(t, audit, 2)
		require.Equal(t, driver.AuditExecutionResume, audit[0].Action)
		require.Equal(t, "go on", audit[0].Reason)
		require.Equal(t, driver.AuditExecutionSuspend, audit[1].Action)
	})

	t.Run("TerminalCheckpointDropsRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		suspend(t, b.exec, t0, p.ID)
		done := &driver.ExecutionCheckpoint{ID: p.ID, Fence: 1, Status: driver.ExecutionCompleted, Release: true}
		require.Len(t, checkpoint(t, b.exec, t0, done), 1)
		row := getExecution(t, b.exec, p.ID)
		require.Equal(t, driver.ExecutionCompleted, row.Status)
		require.False(t, row.SuspendRequested)
		require.Empty(t, logList(t, b.exec, p.ID))
	})

	t.Run("ResumeCancelsPendingRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		suspend(t, b.exec, t0, p.ID)
		row := resume(t, b.exec, t0, p.ID)
		require.Equal(t, driver.ExecutionExecuting, row.Status)
		require.False(t, row.SuspendRequested)
		release := &driver.ExecutionCheckpoint{ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true}
		require.Len(t, checkpoint(t, b.exec, t0, release), 1)
		require.False(t, release.SuspendRequested)
		require.Equal(t, driver.ExecutionWaitingForAsync, getExecution(t, b.exec, p.ID).Status)

		// Nothing to resume now.
		_, err := b.exec.ExecutionResume(ctx, &driver.ExecutionResumeParams{ID: p.ID, Actor: "ops", Now: &t0})
		require.ErrorIs(t, err, driver.ErrConflict)
		require.ErrorContains(t, err, "WAITING_FOR_ASYNC")
		_, err = b.exec.ExecutionResume(ctx, &driver.ExecutionResumeParams{ID: uuid.New(), Actor: "ops", Now: &t0})
		require.ErrorIs(t, err, driver.ErrNotFound)
	})

	t.Run("SkippedByClaimsAndDueLists", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pending, retrying, waiting := newExecution("Pay"), newLeasedExecution("Pay", time.Minute), newLeasedExecution("Pay", time.Minute)
		pending.DeadlineAt = ptr(t0.Add(time.Minute))
		insertExecutions(t, b.exec, &t0, pending, retrying, waiting)
		require.Len(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: retrying.ID, Fence: 1, Status: driver.ExecutionWaitingForRetry, NextRetryAt: ptr(t0.Add(time.Second)), Release: true,
		}), 1)
		require.Len(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: waiting.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, CurrentWait: "reply",
			NextWaitTimeoutAt: ptr(t0.Add(time.Second)), ErrorCode: "E", ErrorMessage: "m", Release: true,
		}), 1)
		for _, id := range []uuid.UUID{pending.ID, retrying.ID, waiting.ID} {
			suspend(t, b.exec, t0, id)
		}
		later := t0.Add(time.Hour)
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, later))
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimRetry, nil, 10, time.Minute, later))
		for _, kind := range []driver.ExecutionDueKind{driver.DueWaitTimeout, driver.DueDeadline} {
			due, err := b.exec.ExecutionListDue(ctx, &driver.ExecutionListDueParams{Kind: kind, Max: 10, Now: &later})
			require.NoError(t, err)
			require.Empty(t, due, kind)
		}

		// A response during the suspension is recorded, not run.
		seq, err := b.exec.ExecutionResponseInsert(ctx, &driver.ExecutionResponseInsertParams{ExecutionID: waiting.ID, Name: "reply", Now: &later})
		require.NoError(t, err)
		require.Equal(t, int64(1), seq)
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, later))
		require.Equal(t, driver.ExecutionSuspended, getExecution(t, b.exec, waiting.ID).Status)

		// Resume restores the wait with its timeout and error, and wakes it for the response.
		row := resume(t, b.exec, later, waiting.ID)
		require.Equal(t, driver.ExecutionWaitingForAsync, row.Status)
		require.Equal(t, "reply", row.CurrentWait)
		requireTimePtr(t, t0.Add(time.Second), row.NextWaitTimeoutAt, "next_wait_timeout_at")
		require.Equal(t, "E", row.ErrorCode)
		require.Equal(t, "m", row.ErrorMessage)
		requireTimePtr(t, later, row.WakeAt, "wake_at")
		claimed := claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, later)
		require.Equal(t, []uuid.UUID{waiting.ID}, executionIDs(claimed))
		require.Equal(t, driver.ExecutionWaitingForAsync, claimed[0].ClaimedFrom)
		responses, err := b.exec.ExecutionResponseList(ctx, waiting.ID, 0)
		require.NoError(t, err)
		require.Len(t, responses, 1)

		// The retry comes back due (and woken); the deadline is due again.
		row = resume(t, b.exec, later, retrying.ID)
		require.Equal(t, driver.ExecutionWaitingForRetry, row.Status)
		requireTimePtr(t, t0.Add(time.Second), row.NextRetryAt, "next_retry_at")
		require.Equal(t, []uuid.UUID{retrying.ID}, executionIDs(claimExecutions(t, b.exec, driver.ClaimRetry, nil, 10, time.Minute, later)))
		resume(t, b.exec, later, pending.ID)
		due, err := b.exec.ExecutionListDue(ctx, &driver.ExecutionListDueParams{Kind: driver.DueDeadline, Max: 10, Now: &later})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{pending.ID}, executionIDs(due))
	})

	t.Run("ResumeLeavesAQuietWaitAsleep", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		require.Len(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, CurrentWait: "reply",
			NextWaitTimeoutAt: ptr(t0.Add(time.Hour)), Release: true,
		}), 1)
		suspend(t, b.exec, t0, p.ID)
		row := resume(t, b.exec, t0.Add(time.Minute), p.ID)
		require.Equal(t, driver.ExecutionWaitingForAsync, row.Status)
		require.Nil(t, row.WakeAt)
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t0.Add(time.Minute)))
	})
}

func exerciseExecutionHeartbeat(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("ExtendsLeaseWhileFenceHolds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		t1 := t0.Add(50 * time.Second)
		requested, err := b.exec.ExecutionHeartbeat(ctx, &driver.ExecutionHeartbeatParams{ID: p.ID, Fence: 1, Lease: time.Minute, Now: &t1})
		require.NoError(t, err)
		require.False(t, requested)
		row := getExecution(t, b.exec, p.ID)
		requireTimePtr(t, t1.Add(time.Minute), row.LeaseUntil, "lease_until")
		requireTimePtr(t, t1.Add(time.Minute), row.WakeAt, "wake_at")
		// Past the first lease's end, nobody else takes it.
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t0.Add(90*time.Second)))

		// A wrong fence fails and changes nothing.
		_, err = b.exec.ExecutionHeartbeat(ctx, &driver.ExecutionHeartbeatParams{ID: p.ID, Fence: 2, Lease: time.Hour, Now: &t1})
		require.ErrorIs(t, err, driver.ErrNotFound)
		requireTimePtr(t, t1.Add(time.Minute), getExecution(t, b.exec, p.ID).LeaseUntil, "lease_until")
		_, err = b.exec.ExecutionHeartbeat(ctx, &driver.ExecutionHeartbeatParams{ID: uuid.New(), Fence: 1, Lease: time.Hour, Now: &t1})
		require.ErrorIs(t, err, driver.ErrNotFound)

		// A released execution is not leased again by a late heartbeat.
		park(t, b.exec, t1, p.ID, driver.ExecutionWaitingForAsync, nil)
		_, err = b.exec.ExecutionHeartbeat(ctx, &driver.ExecutionHeartbeatParams{ID: p.ID, Fence: 1, Lease: time.Hour, Now: &t1})
		require.ErrorIs(t, err, driver.ErrNotFound)
		require.Nil(t, getExecution(t, b.exec, p.ID).LeaseUntil)
	})
}
