package drivertest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

// normalizeLog returns log entries by value with UTC times and JSON compacted, for comparison.
func normalizeLog(entries []*driver.ExecutionLogEntry) []driver.ExecutionLogEntry {
	out := make([]driver.ExecutionLogEntry, len(entries))
	for i, e := range entries {
		out[i] = *e
		out[i].At = e.At.UTC()
		if e.StartedAt != nil {
			started := e.StartedAt.UTC()
			out[i].StartedAt = &started
		}
		out[i].Request, out[i].Response = compactJSON(e.Request), compactJSON(e.Response)
	}
	return out
}

// compactJSON normalizes JSON the way both drivers may return it (PostgreSQL's jsonb reformats
// it); nil stays nil.
func compactJSON(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

func logList(t *testing.T, exec driver.Executor, id uuid.UUID) []driver.ExecutionLogEntry {
	t.Helper()
	log, err := exec.ExecutionLogList(context.Background(), id)
	require.NoError(t, err)
	return normalizeLog(log)
}

func exerciseExecutionClaim(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("StampsLeaseAndFence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newExecution("Pay")
		p.DeadlineAt = ptr(t0.Add(time.Hour))
		insertExecutions(t, b.exec, &t0, p)
		t1 := t0.Add(time.Second)
		rows, err := b.exec.ExecutionClaim(ctx, &driver.ExecutionClaimParams{
			Kind: driver.ClaimPending, Max: 10, Lease: 30 * time.Second, WorkerID: "runner-a", Now: &t1,
		})
		require.NoError(t, err)
		require.Len(t, rows, 1)

		want := createdExecution(p, t0)
		want.Status, want.Fence, want.WorkerID, want.UpdatedAt = driver.ExecutionExecuting, 1, "runner-a", t1
		want.LeaseUntil, want.WakeAt = ptr(t1.Add(30*time.Second)), ptr(t1.Add(30*time.Second))
		requireExecution(t, want, getExecution(t, b.exec, p.ID))
		want.ClaimedFrom = driver.ExecutionPending
		requireExecution(t, want, rows[0])
	})

	t.Run("PendingTakesNewWokenAndExpired", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		early := newExecution("Pay")
		insertExecutions(t, b.exec, ptr(t0.Add(-3*time.Minute)), early)
		expired := newLeasedExecution("Pay", time.Minute) // wakes at its lease's end, t0-1m
		insertExecutions(t, b.exec, ptr(t0.Add(-2*time.Minute)), expired)
		compensating, async, retrying, done := newLeasedExecution("Pay", time.Hour), newLeasedExecution("Pay", time.Hour),
			newLeasedExecution("Pay", time.Hour), newLeasedExecution("Pay", time.Hour)
		live := newLeasedExecution("Pay", 2*time.Hour)
		insertExecutions(t, b.exec, ptr(t0.Add(-time.Hour)), compensating, async, retrying, done, live)
		park(t, b.exec, t0.Add(-time.Hour), compensating.ID, driver.ExecutionCompensating, ptr(t0.Add(-30*time.Second)))
		park(t, b.exec, t0.Add(-time.Hour), async.ID, driver.ExecutionWaitingForAsync, nil)
		require.Len(t, checkpoint(t, b.exec, t0.Add(-time.Hour), &driver.ExecutionCheckpoint{
			ID: retrying.ID, Fence: 1, Status: driver.ExecutionWaitingForRetry, NextRetryAt: ptr(t0.Add(-time.Hour)), Release: true,
		}), 1)
		park(t, b.exec, t0.Add(-time.Hour), done.ID, driver.ExecutionCompleted, nil)
		later := newExecution("Pay")
		insertExecutions(t, b.exec, ptr(t0.Add(time.Second)), later)

		// Earliest wake first: Max 1 shows the order.
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimPending, nil, 0, time.Minute, t0), "max 0 claims nothing")
		first := claimExecutions(t, b.exec, driver.ClaimPending, nil, 1, time.Minute, t0)
		require.Equal(t, []uuid.UUID{early.ID}, executionIDs(first))
		require.Equal(t, driver.ExecutionPending, first[0].ClaimedFrom)
		require.False(t, first[0].StaleLease, "a new execution held no lease")
		require.Equal(t, driver.ExecutionExecuting, first[0].Status)

		second := claimExecutions(t, b.exec, driver.ClaimPending, nil, 1, time.Minute, t0)
		require.Equal(t, []uuid.UUID{expired.ID}, executionIDs(second))
		require.Equal(t, driver.ExecutionExecuting, second[0].ClaimedFrom, "a dead runner's execution")
		require.True(t, second[0].StaleLease, "taken from an expired lease")
		require.Equal(t, int64(2), second[0].Fence)

		// A claim keeps COMPENSATING.
		third := claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t0)
		require.Equal(t, []uuid.UUID{compensating.ID}, executionIDs(third))
		require.Equal(t, driver.ExecutionCompensating, third[0].ClaimedFrom)
		require.Equal(t, driver.ExecutionCompensating, third[0].Status)
		require.Equal(t, int64(2), third[0].Fence)

		// Not woken (waiting, retrying, done), leased or not yet due: nothing else.
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t0))
		require.Equal(t, []uuid.UUID{later.ID}, executionIDs(claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t0.Add(time.Second))))
		// The claims' own leases hold to their end, then their executions are taken again.
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t0.Add(time.Minute-time.Microsecond)))
		require.ElementsMatch(t, []uuid.UUID{early.ID, expired.ID, compensating.ID},
			executionIDs(claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t0.Add(time.Minute))))
		for _, id := range []uuid.UUID{async.ID, retrying.ID, done.ID, live.ID} {
			require.Equal(t, int64(1), getExecution(t, b.exec, id).Fence, "not claimed")
		}
	})

	t.Run("Retry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		retrying := func(retryAt time.Time, release bool) *driver.ExecutionInsertParams {
			p := newLeasedExecution("Pay", 2*time.Hour)
			insertExecutions(t, b.exec, ptr(t0.Add(-time.Hour)), p)
			require.Len(t, checkpoint(t, b.exec, t0.Add(-time.Hour), &driver.ExecutionCheckpoint{
				ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForRetry, NextRetryAt: &retryAt, Retries: 1, Release: release,
			}), 1)
			return p
		}
		second, first := retrying(t0.Add(-time.Minute), true), retrying(t0.Add(-2*time.Minute), true)
		notDue := retrying(t0.Add(time.Minute), true)
		leased := retrying(t0.Add(-time.Hour), false)
		// A due retry time counts only in WAITING_FOR_RETRY.
		executing := newLeasedExecution("Pay", time.Hour)
		insertExecutions(t, b.exec, ptr(t0.Add(-time.Hour)), executing)
		require.Len(t, checkpoint(t, b.exec, t0.Add(-time.Hour), &driver.ExecutionCheckpoint{
			ID: executing.ID, Fence: 1, Status: driver.ExecutionExecuting, NextRetryAt: ptr(t0.Add(-time.Hour)), Release: true,
		}), 1)

		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t0), "retries are not woken")
		rows := claimExecutions(t, b.exec, driver.ClaimRetry, nil, 1, time.Minute, t0)
		require.Equal(t, []uuid.UUID{first.ID}, executionIDs(rows), "earliest retry first")
		require.Equal(t, driver.ExecutionWaitingForRetry, rows[0].ClaimedFrom)
		require.Equal(t, driver.ExecutionExecuting, rows[0].Status)
		require.Equal(t, int64(2), rows[0].Fence)
		require.Equal(t, 1, rows[0].Retries)
		requireTimePtr(t, t0.Add(time.Minute), rows[0].LeaseUntil, "lease_until")
		requireTimePtr(t, t0.Add(time.Minute), rows[0].WakeAt, "wake_at")
		require.Equal(t, []uuid.UUID{second.ID}, executionIDs(claimExecutions(t, b.exec, driver.ClaimRetry, nil, 10, time.Minute, t0)))
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimRetry, nil, 10, time.Minute, t0))
		require.Equal(t, []uuid.UUID{notDue.ID}, executionIDs(claimExecutions(t, b.exec, driver.ClaimRetry, nil, 10, time.Minute, t0.Add(time.Minute))))
		// The leased one is taken once its lease ends (t0+1h).
		require.Equal(t, []uuid.UUID{leased.ID}, executionIDs(claimExecutions(t, b.exec, driver.ClaimRetry, nil, 10, time.Minute, t0.Add(time.Hour))))
		require.Equal(t, int64(1), getExecution(t, b.exec, executing.ID).Fence)
	})

	t.Run("RetryTakesLeasedOnceExpired", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		require.Len(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForRetry, RetryDelay: time.Second,
		}), 1)
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimRetry, nil, 10, time.Minute, t0.Add(30*time.Second)), "the lease holds")
		rows := claimExecutions(t, b.exec, driver.ClaimRetry, nil, 10, time.Minute, t0.Add(time.Minute))
		require.Equal(t, []uuid.UUID{p.ID}, executionIDs(rows))
		require.Equal(t, driver.ExecutionWaitingForRetry, rows[0].ClaimedFrom)
	})

	t.Run("Types", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pay, ship, refund := newExecution("Pay"), newExecution("Ship"), newExecution("Refund")
		insertExecutions(t, b.exec, &t0, pay, ship, refund)
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimPending, []string{"Missing"}, 10, time.Minute, t0))
		require.ElementsMatch(t, []uuid.UUID{pay.ID, refund.ID},
			executionIDs(claimExecutions(t, b.exec, driver.ClaimPending, []string{"Refund", "Pay"}, 10, time.Minute, t0)))
		require.Equal(t, []uuid.UUID{ship.ID}, executionIDs(claimExecutions(t, b.exec, driver.ClaimPending, []string{}, 10, time.Minute, t0)),
			"no types is every type")

		retry := newLeasedExecution("Pay", time.Hour)
		insertExecutions(t, b.exec, &t0, retry)
		require.Len(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: retry.ID, Fence: 1, Status: driver.ExecutionWaitingForRetry, NextRetryAt: &t0, Release: true,
		}), 1)
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimRetry, []string{"Ship"}, 10, time.Minute, t0))
		require.Equal(t, []uuid.UUID{retry.ID}, executionIDs(claimExecutions(t, b.exec, driver.ClaimRetry, []string{"Pay"}, 10, time.Minute, t0)))
	})

	t.Run("UnknownKind", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.exec.ExecutionClaim(ctx, &driver.ExecutionClaimParams{Kind: "everything", Max: 1, Lease: time.Minute, Now: &t0})
		require.Error(t, err)
	})
}

func exerciseExecutionAcquire(t *testing.T, setup setupFunc) {
	ctx := context.Background()
	acquire := func(exec driver.Executor, id uuid.UUID, worker string, now time.Time) (*driver.ExecutionRow, error) {
		return exec.ExecutionAcquire(ctx, &driver.ExecutionAcquireParams{ID: id, Lease: time.Minute, WorkerID: worker, Now: &now})
	}

	t.Run("LeasesWithoutChangingStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newExecution("Pay")
		insertExecutions(t, b.exec, &t0, p)
		t1 := t0.Add(time.Second)
		got, err := acquire(b.exec, p.ID, "runner-a", t1)
		require.NoError(t, err)
		want := createdExecution(p, t0)
		want.Fence, want.WorkerID, want.UpdatedAt = 1, "runner-a", t1
		want.LeaseUntil, want.WakeAt = ptr(t1.Add(time.Minute)), ptr(t1.Add(time.Minute))
		requireExecution(t, want, getExecution(t, b.exec, p.ID))
		want.ClaimedFrom = driver.ExecutionPending
		requireExecution(t, want, got)

		// A live lease conflicts, to its very end.
		_, err = acquire(b.exec, p.ID, "runner-b", t1.Add(time.Minute-time.Microsecond))
		require.ErrorIs(t, err, driver.ErrConflict)
		got, err = acquire(b.exec, p.ID, "runner-b", t1.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, int64(2), got.Fence)
		require.Equal(t, "runner-b", got.WorkerID)
		require.Equal(t, driver.ExecutionPending, got.Status)
		require.Equal(t, driver.ExecutionPending, got.ClaimedFrom)
	})

	t.Run("AfterRelease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Hour)
		insertExecutions(t, b.exec, &t0, p)
		_, err := acquire(b.exec, p.ID, "operator", t0)
		require.ErrorIs(t, err, driver.ErrConflict)
		park(t, b.exec, t0, p.ID, driver.ExecutionWaitingForTSQ, nil)
		got, err := acquire(b.exec, p.ID, "operator", t0)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionWaitingForTSQ, got.Status)
		require.Equal(t, driver.ExecutionWaitingForTSQ, got.ClaimedFrom)
		require.Equal(t, int64(2), got.Fence)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := acquire(b.exec, uuid.New(), "runner-a", t0)
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
}

func exerciseExecutionCheckpointMany(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("ColumnRules", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Minute)
		p.DeadlineAt = ptr(t0.Add(time.Hour))
		insertExecutions(t, b.exec, &t0, p)
		want := createdExecution(p, t0)

		// No state keeps the state; no lease and no release keeps the lease and the wake-up
		// (WakeAt counts only with a release); times given are stored as given; no deadline
		// keeps the deadline.
		t1 := t0.Add(time.Second)
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionExecuting, Step: "charge", CurrentWait: "card", WakeAt: ptr(t0.Add(time.Hour)),
			NextRetryAt: ptr(t0.Add(5 * time.Minute)), NextWaitTimeoutAt: ptr(t0.Add(6 * time.Minute)),
			Retries: 2, ResponsesApplied: 0, ErrorCode: "E1", ErrorMessage: "declined",
		}))
		want.Step, want.CurrentWait, want.Retries, want.ErrorCode, want.ErrorMessage = "charge", "card", 2, "E1", "declined"
		want.NextRetryAt, want.NextWaitTimeoutAt, want.UpdatedAt = ptr(t0.Add(5*time.Minute)), ptr(t0.Add(6*time.Minute)), t1
		requireExecution(t, want, getExecution(t, b.exec, p.ID))

		// Delays count from now and win over times given; a lease renews the lease and the
		// wake-up; a deadline given replaces it; empty strings clear.
		t2 := t0.Add(2 * time.Second)
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t2, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, State: json.RawMessage(`{"n":2,"paid":true}`),
			NextRetryAt: ptr(t0.Add(time.Hour)), RetryDelay: 10 * time.Second,
			NextWaitTimeoutAt: ptr(t0.Add(time.Hour)), WaitTimeout: 20 * time.Second,
			DeadlineAt: ptr(t0.Add(2 * time.Hour)), Lease: 45 * time.Second, ResponsesApplied: 3,
		}))
		want.Status, want.State, want.Step, want.CurrentWait, want.Retries = driver.ExecutionWaitingForAsync, json.RawMessage(`{"paid":true,"n":2}`), "", "", 0
		want.ErrorCode, want.ErrorMessage, want.ResponsesApplied = "", "", 3
		want.NextRetryAt, want.NextWaitTimeoutAt = ptr(t2.Add(10*time.Second)), ptr(t2.Add(20*time.Second))
		want.DeadlineAt, want.LeaseUntil, want.WakeAt = ptr(t0.Add(2*time.Hour)), ptr(t2.Add(45*time.Second)), ptr(t2.Add(45*time.Second))
		want.UpdatedAt = t2
		requireExecution(t, want, getExecution(t, b.exec, p.ID))

		// Release ends the lease (the fence and worker stay) and wakes at WakeAt; the runner may
		// still write with its fence.
		t3 := t0.Add(3 * time.Second)
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t3, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForRetry, Release: true, WakeAt: ptr(t3.Add(time.Hour)),
			Lease: time.Minute, ResponsesApplied: 3,
		}))
		want.Status, want.NextRetryAt, want.NextWaitTimeoutAt = driver.ExecutionWaitingForRetry, nil, nil
		want.LeaseUntil, want.WakeAt, want.UpdatedAt = nil, ptr(t3.Add(time.Hour)), t3
		requireExecution(t, want, getExecution(t, b.exec, p.ID))
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t3, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForRetry, Release: true, ResponsesApplied: 3,
		}))
		want.WakeAt = nil
		requireExecution(t, want, getExecution(t, b.exec, p.ID))
	})

	t.Run("Fencing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, other := newLeasedExecution("Pay", time.Minute), newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, p, other)
		// The lease ran out and another runner took the execution over.
		t1 := t0.Add(2 * time.Minute)
		taken, err := b.exec.ExecutionAcquire(ctx, &driver.ExecutionAcquireParams{ID: p.ID, Lease: time.Minute, WorkerID: "runner-b", Now: &t1})
		require.NoError(t, err)
		require.Equal(t, int64(2), taken.Fence)

		staleCommand, currentCommand := newCommand("d", "q", "Charge"), newCommand("d", "q", "Charge")
		staleCommand.IdempotencyKey, currentCommand.IdempotencyKey = "charge-stale", "charge-current"
		message := func(id string) *driver.OutboxInsertParams {
			return &driver.OutboxInsertParams{Category: driver.OutboxCategoryEvent, Transport: "kafka", Topic: "events",
				Key: p.ID.String(), Type: "ExecutionCompleted", MessageID: id, Payload: json.RawMessage(`{"id":"` + id + `"}`)}
		}
		stale := &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionCompleted, State: json.RawMessage(`{"stale":true}`), Release: true,
			Log:      []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "STEP", Name: "stale"}},
			Commands: []*driver.CommandInsertParams{staleCommand},
			Outbox:   []*driver.OutboxInsertParams{message("stale")},
		}
		// A checkpoint of another execution in the same batch applies.
		current := &driver.ExecutionCheckpoint{
			ID: other.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Lease: time.Minute,
			Log:      []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "COMMAND", Name: "charge"}},
			Commands: []*driver.CommandInsertParams{currentCommand},
			Outbox:   []*driver.OutboxInsertParams{message("current-1"), message("current-2")},
		}
		var written []int64 // what the checkpoints report they wrote, after the commit
		var reported []driver.WrittenMessage
		applied, err := b.exec.ExecutionCheckpointMany(ctx, &driver.ExecutionCheckpointManyParams{Checkpoints: []*driver.ExecutionCheckpoint{stale, current},
			Now: &t1, OutboxHandoff: &driver.OutboxHandoff{Holder: "relay/handoff", Lease: time.Minute, Written: func(msgs []driver.WrittenMessage) {
				for _, m := range msgs {
					require.Equal(t, p.ID.String(), m.Key, "the key the message was written with")
					written = append(written, m.ID)
				}
				reported = append(reported, msgs...)
			}}})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{other.ID}, applied)
		outboxIDs := func() ([]string, []int64) {
			t.Helper()
			rows, err := b.exec.OutboxList(ctx, &driver.OutboxListParams{Limit: 10})
			require.NoError(t, err)
			var ids []string
			var rowIDs []int64
			for _, r := range rows {
				ids = append(ids, r.MessageID)
				rowIDs = append(rowIDs, r.ID)
			}
			slices.Sort(ids)
			slices.Sort(rowIDs)
			return ids, rowIDs
		}
		// Only the applied checkpoint's messages are written, in its transaction, and reported.
		messageIDs, rowIDs := outboxIDs()
		require.Equal(t, []string{"current-1", "current-2"}, messageIDs)
		require.Equal(t, rowIDs, written)
		// Each is reported with the message as written (the relay publishes it from memory), its
		// time, and the key's latest unpublished message before it: none for the first; for the
		// second, none (PostgreSQL: one statement wrote both) or the first.
		require.Len(t, reported, 2)
		for i, m := range []*driver.OutboxInsertParams{current.Outbox[0], current.Outbox[1]} {
			require.Same(t, m, reported[i].Message, "message %d", i)
			require.True(t, t1.Equal(reported[i].CreatedAt), "message %d written at %v", i, reported[i].CreatedAt)
		}
		require.Zero(t, reported[0].Previous)
		require.Contains(t, []int64{0, reported[0].ID}, reported[1].Previous)
		for _, m := range reported {
			row, err := b.exec.OutboxGet(ctx, m.ID)
			require.NoError(t, err)
			require.Equal(t, "relay/handoff", row.LockedBy, "leased to the hand-off: no claim takes it meanwhile")
			requireTimePtr(t, t1.Add(time.Minute), row.LockedUntil, "locked_until")
		}

		// Nothing of the stale checkpoint is written: not the row, not its log, not its command.
		unchanged := *taken
		unchanged.ClaimedFrom, unchanged.StaleLease = "", false
		requireExecution(t, &unchanged, getExecution(t, b.exec, p.ID))
		require.Empty(t, logList(t, b.exec, p.ID))
		requireNotFound(t, b.exec, staleCommand.ID)
		require.Equal(t, driver.ExecutionWaitingForAsync, getExecution(t, b.exec, other.ID).Status)
		require.Equal(t, []driver.ExecutionLogEntry{{ExecutionID: other.ID, Seq: 1, At: t1, EntryType: "COMMAND", Name: "charge"}}, logList(t, b.exec, other.ID))
		requireCommand(t, sentCommand(currentCommand, t1), get(t, b.exec, currentCommand.ID))

		// A missing execution is fenced out too; an empty batch does nothing.
		require.Empty(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{ID: uuid.New(), Fence: 1, Status: driver.ExecutionCompleted}))
		applied, err = b.exec.ExecutionCheckpointMany(ctx, &driver.ExecutionCheckpointManyParams{})
		require.NoError(t, err)
		require.Empty(t, applied)

		// The new holder writes; its message follows the two unpublished ones of its key.
		stale.Fence = 2
		reported = nil
		applied, err = b.exec.ExecutionCheckpointMany(ctx, &driver.ExecutionCheckpointManyParams{Checkpoints: []*driver.ExecutionCheckpoint{stale},
			Now: &t1, OutboxHandoff: &driver.OutboxHandoff{Holder: "relay/handoff", Lease: time.Minute,
				Written: func(msgs []driver.WrittenMessage) { reported = append(reported, msgs...) }}})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{p.ID}, applied)
		require.Len(t, reported, 1)
		require.Equal(t, rowIDs[1], reported[0].Previous)
		require.Same(t, stale.Outbox[0], reported[0].Message)
		require.Equal(t, driver.ExecutionCompleted, getExecution(t, b.exec, p.ID).Status)
		require.Len(t, logList(t, b.exec, p.ID), 1)
		get(t, b.exec, staleCommand.ID)
		messageIDs, _ = outboxIDs()
		require.Equal(t, []string{"current-1", "current-2", "stale"}, messageIDs)
	})

	t.Run("StaleAndCurrentOfOneExecutionInOneBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		t1 := t0.Add(2 * time.Minute)
		_, err := b.exec.ExecutionAcquire(ctx, &driver.ExecutionAcquireParams{ID: p.ID, Lease: time.Minute, WorkerID: "runner-b", Now: &t1})
		require.NoError(t, err)
		staleCommand := newCommand("d", "q", "Charge")
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t1,
			&driver.ExecutionCheckpoint{
				ID: p.ID, Fence: 1, Status: driver.ExecutionFailed,
				Log:      []*driver.ExecutionLogEntry{{Seq: 5, EntryType: "STEP", Name: "stale"}},
				Commands: []*driver.CommandInsertParams{staleCommand},
			},
			&driver.ExecutionCheckpoint{
				ID: p.ID, Fence: 2, Status: driver.ExecutionExecuting,
				Log: []*driver.ExecutionLogEntry{{Seq: 6, EntryType: "STEP", Name: "current"}},
			},
		))
		require.Equal(t, driver.ExecutionExecuting, getExecution(t, b.exec, p.ID).Status)
		require.Equal(t, []driver.ExecutionLogEntry{{ExecutionID: p.ID, Seq: 6, At: t1, EntryType: "STEP", Name: "current"}}, logList(t, b.exec, p.ID))
		requireNotFound(t, b.exec, staleCommand.ID)
	})

	t.Run("ReleaseWithUnappliedResponsesWakesNow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		respond := func(now time.Time) int64 {
			t.Helper()
			seq, err := b.exec.ExecutionResponseInsert(ctx, &driver.ExecutionResponseInsertParams{
				ExecutionID: p.ID, Name: "reply", Payload: json.RawMessage(`{"ok":true}`), Now: &now,
			})
			require.NoError(t, err)
			return seq
		}

		// A response arriving while a runner holds the lease does not wake the execution.
		t1 := t0.Add(10 * time.Second)
		require.Equal(t, int64(1), respond(t1))
		got := getExecution(t, b.exec, p.ID)
		require.Equal(t, int64(1), got.ResponsesReceived)
		requireTimePtr(t, t0.Add(time.Minute), got.WakeAt, "wake_at stays the lease's end")
		requireTime(t, t1, got.UpdatedAt, "updated_at")
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t1))

		// The runner releases without having applied it: woken now, WakeAt notwithstanding.
		t2 := t0.Add(20 * time.Second)
		require.Len(t, checkpoint(t, b.exec, t2, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true, WakeAt: ptr(t2.Add(time.Hour)),
		}), 1)
		got = getExecution(t, b.exec, p.ID)
		require.Nil(t, got.LeaseUntil)
		requireTimePtr(t, t2, got.WakeAt, "wake_at")
		rows := claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t2)
		require.Equal(t, []uuid.UUID{p.ID}, executionIDs(rows))
		require.Equal(t, driver.ExecutionWaitingForAsync, rows[0].ClaimedFrom)
		require.Equal(t, driver.ExecutionExecuting, rows[0].Status)
		require.Equal(t, int64(2), rows[0].Fence)

		// Released having applied it: not woken.
		t3 := t0.Add(30 * time.Second)
		require.Len(t, checkpoint(t, b.exec, t3, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 2, Status: driver.ExecutionWaitingForAsync, Release: true, ResponsesApplied: 1,
		}), 1)
		got = getExecution(t, b.exec, p.ID)
		require.Nil(t, got.WakeAt)
		require.Equal(t, int64(1), got.ResponsesApplied)
		require.Empty(t, claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t3.Add(time.Hour)))

		// A response to an execution nobody holds wakes it at once.
		t4 := t0.Add(40 * time.Second)
		require.Equal(t, int64(2), respond(t4))
		requireTimePtr(t, t4, getExecution(t, b.exec, p.ID).WakeAt, "wake_at")
		require.Len(t, claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t4), 1)

		// So does one to an execution whose runner's lease ran out.
		t5 := t4.Add(time.Minute)
		require.Equal(t, int64(3), respond(t5))
		requireTimePtr(t, t5, getExecution(t, b.exec, p.ID).WakeAt, "wake_at")
	})

	t.Run("RenewingLeaseDoesNotWake", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, p)
		_, err := b.exec.ExecutionResponseInsert(ctx, &driver.ExecutionResponseInsertParams{ExecutionID: p.ID, Name: "reply", Now: &t0})
		require.NoError(t, err)
		t1 := t0.Add(time.Second)
		require.Len(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionExecuting, Lease: time.Minute,
		}), 1)
		requireTimePtr(t, t1.Add(time.Minute), getExecution(t, b.exec, p.ID).WakeAt, "wake_at is the renewed lease's end")
	})

	t.Run("TerminalStampsCompletedAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, status := range []driver.ExecutionStatus{driver.ExecutionCompleted, driver.ExecutionCompensated, driver.ExecutionCancelled, driver.ExecutionFailed} {
			p := newLeasedExecution("Pay", time.Hour)
			insertExecutions(t, b.exec, &t0, p)
			t1, t2 := t0.Add(time.Second), t0.Add(2*time.Second)
			require.Len(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{ID: p.ID, Fence: 1, Status: status}), 1)
			requireTimePtr(t, t1, getExecution(t, b.exec, p.ID).CompletedAt, string(status))
			require.Len(t, checkpoint(t, b.exec, t2, &driver.ExecutionCheckpoint{ID: p.ID, Fence: 1, Status: status, Release: true}), 1)
			requireTimePtr(t, t1, getExecution(t, b.exec, p.ID).CompletedAt, "the first completion stays")
			// Reopened (an operator retry): no longer completed.
			require.Len(t, checkpoint(t, b.exec, t2, &driver.ExecutionCheckpoint{ID: p.ID, Fence: 1, Status: driver.ExecutionExecuting}), 1)
			require.Nil(t, getExecution(t, b.exec, p.ID).CompletedAt, string(status))
		}
		for _, status := range []driver.ExecutionStatus{driver.ExecutionPending, driver.ExecutionExecuting, driver.ExecutionWaitingForAsync,
			driver.ExecutionWaitingForRetry, driver.ExecutionWaitingForTSQ, driver.ExecutionCompensating} {
			p := newLeasedExecution("Pay", time.Hour)
			insertExecutions(t, b.exec, &t0, p)
			require.Len(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{ID: p.ID, Fence: 1, Status: status}), 1)
			require.Nil(t, getExecution(t, b.exec, p.ID).CompletedAt, string(status))
		}
	})

	t.Run("Commands", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Hour)
		insertExecutions(t, b.exec, &t0, p)
		existing := newCommand("payments", "payments__commands", "Charge")
		existing.IdempotencyKey = "charge-1"
		insert(t, b.exec, &t0, existing)

		t1 := t0.Add(time.Second)
		dupOfExisting := newCommand("payments", "payments__commands", "Charge")
		dupOfExisting.IdempotencyKey = "charge-1"
		keyed := newCommand("payments", "payments__commands", "Charge")
		keyed.IdempotencyKey, keyed.CorrelationID, keyed.ReplyTo, keyed.Actor = "charge-2", p.ID, "d__replies", "process"
		keyed.Headers = map[string]string{"step": "charge"}
		unkeyed := newCommand("payments", "payments__commands", "Notify")
		unkeyed.VisibleAt = ptr(t1.Add(time.Minute))
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true,
			Commands: []*driver.CommandInsertParams{dupOfExisting, keyed, unkeyed},
		}))
		requireNotFound(t, b.exec, dupOfExisting.ID)
		requireCommand(t, sentCommand(existing, t0), get(t, b.exec, existing.ID))
		requireCommand(t, sentCommand(keyed, t1), get(t, b.exec, keyed.ID))
		requireCommand(t, sentCommand(unkeyed, t1), get(t, b.exec, unkeyed.ID))

		// A later checkpoint sending the same key again (a replayed step) is deduplicated too.
		again := newCommand("payments", "payments__commands", "Charge")
		again.IdempotencyKey = "charge-2"
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Commands: []*driver.CommandInsertParams{again},
		}))
		requireNotFound(t, b.exec, again.ID)
	})

	t.Run("AllOrNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, other := newLeasedExecution("Pay", time.Hour), newLeasedExecution("Pay", time.Hour)
		p.Log = []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "LIFECYCLE"}}
		insertExecutions(t, b.exec, &t0, p, other)
		cmd := newCommand("d", "q", "T")
		_, err := b.exec.ExecutionCheckpointMany(ctx, &driver.ExecutionCheckpointManyParams{Now: ptr(t0.Add(time.Second)), Checkpoints: []*driver.ExecutionCheckpoint{
			{ID: other.ID, Fence: 1, Status: driver.ExecutionCompleted, Log: []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "STEP"}},
				Commands: []*driver.CommandInsertParams{cmd}},
			// Seq 1 is taken.
			{ID: p.ID, Fence: 1, Status: driver.ExecutionCompleted, Log: []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "STEP"}}},
		}})
		require.Error(t, err)
		requireExecution(t, createdExecution(other, t0), getExecution(t, b.exec, other.ID))
		requireExecution(t, createdExecution(p, t0), getExecution(t, b.exec, p.ID))
		require.Empty(t, logList(t, b.exec, other.ID))
		require.Len(t, logList(t, b.exec, p.ID), 1)
		requireNotFound(t, b.exec, cmd.ID)
	})

	t.Run("RolledBackInTransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Hour)
		insertExecutions(t, b.exec, &t0, p)
		tx, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		require.Len(t, checkpoint(t, tx, t0, &driver.ExecutionCheckpoint{ID: p.ID, Fence: 1, Status: driver.ExecutionCompleted}), 1)
		require.Equal(t, driver.ExecutionCompleted, getExecution(t, tx, p.ID).Status)
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, driver.ExecutionExecuting, getExecution(t, b.exec, p.ID).Status)
	})
}

func exerciseExecutionLog(t *testing.T, setup setupFunc) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		full := &driver.ExecutionLogEntry{
			Seq: 2, EntryType: "STEP", Name: "charge", StepStatus: "FAILED", Attempt: 2, MaxAttempts: 5,
			Request: json.RawMessage(`{"amount": 10, "card": {"last4": "4242"}}`), Response: json.RawMessage(`[1,"two",null]`),
			ErrorCode: "DECLINED", ErrorMessage: "card declined", Actor: "runner-1", Reason: "retrying",
		}
		// Zero numbers, empty strings and no JSON are stored as NULL and read back as zero.
		minimal := &driver.ExecutionLogEntry{Seq: 1, EntryType: "LIFECYCLE"}
		p := newLeasedExecution("Pay", time.Hour)
		p.Log = []*driver.ExecutionLogEntry{full, minimal}
		insertExecutions(t, b.exec, &t0, p)
		t1 := t0.Add(time.Second)
		require.Len(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionExecuting,
			Log: []*driver.ExecutionLogEntry{{Seq: 3, EntryType: "SIDE_EFFECT", Name: "now", Response: json.RawMessage(`"2024-06-01"`)}},
		}), 1)

		wantFull := *full
		wantFull.ExecutionID, wantFull.At = p.ID, t0
		require.Equal(t, normalizeLog([]*driver.ExecutionLogEntry{
			{ExecutionID: p.ID, Seq: 1, At: t0, EntryType: "LIFECYCLE"},
			&wantFull,
			{ExecutionID: p.ID, Seq: 3, At: t1, EntryType: "SIDE_EFFECT", Name: "now", Response: json.RawMessage(`"2024-06-01"`)},
		}), logList(t, b.exec, p.ID))
		log, err := b.exec.ExecutionLogList(context.Background(), p.ID)
		require.NoError(t, err)
		require.Nil(t, log[0].Request)
		require.Nil(t, log[0].Response)
		require.Zero(t, log[0].Attempt)
		require.Zero(t, log[0].MaxAttempts)
		require.Empty(t, logList(t, b.exec, uuid.New()))
	})

	// A step's entry carries when it started; At is when it ended. A start after the end (another
	// clock than the writer's) is stored as the end.
	t.Run("StartedAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		before, t1 := t0.Add(-1500*time.Millisecond), t0.Add(time.Second)
		late := t1.Add(time.Hour)
		p := newLeasedExecution("Pay", time.Hour)
		p.Log = []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "STEP", Name: "a", StepStatus: "COMPLETED", StartedAt: &before}}
		insertExecutions(t, b.exec, &t0, p)
		mid := t0.Add(250 * time.Millisecond)
		require.Len(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionExecuting,
			Log: []*driver.ExecutionLogEntry{
				{Seq: 2, EntryType: "STEP", Name: "b", StepStatus: "COMPLETED", StartedAt: &mid},
				{Seq: 3, EntryType: "STEP", Name: "c", StepStatus: "FAILED", StartedAt: &late},
				{Seq: 4, EntryType: "LIFECYCLE", Name: "instant"},
			},
		}), 1)
		log := logList(t, b.exec, p.ID)
		require.Len(t, log, 4)
		require.Equal(t, before, *log[0].StartedAt)
		require.Equal(t, t0, log[0].At)
		require.Equal(t, mid, *log[1].StartedAt)
		require.Equal(t, 750*time.Millisecond, log[1].At.Sub(*log[1].StartedAt), "the step's latency")
		require.Equal(t, t1, *log[2].StartedAt, "a start after the end is stored as the end")
		require.Nil(t, log[3].StartedAt)
		// The log read with an acquire carries it too.
		loaded, err := b.exec.ExecutionAcquireLoadMany(context.Background(), &driver.ExecutionAcquireManyParams{
			IDs: []uuid.UUID{p.ID}, Lease: time.Minute, WorkerID: "w2", Now: &late})
		require.NoError(t, err)
		require.NotEmpty(t, loaded)
		require.Equal(t, mid, *normalizeLog(loaded[0].Loaded.Log)[1].StartedAt)
	})
}

func exerciseExecutionResponses(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("SequenceAndList", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, other := newExecution("Pay"), newExecution("Pay")
		insertExecutions(t, b.exec, &t0, p, other)
		respond := func(id uuid.UUID, name string, payload json.RawMessage, now time.Time) int64 {
			t.Helper()
			seq, err := b.exec.ExecutionResponseInsert(ctx, &driver.ExecutionResponseInsertParams{ExecutionID: id, Name: name, Payload: payload, Now: &now})
			require.NoError(t, err)
			return seq
		}
		t1, t2, t3 := t0.Add(time.Second), t0.Add(2*time.Second), t0.Add(3*time.Second)
		require.Equal(t, int64(1), respond(p.ID, "charged", json.RawMessage(`{"id": "ch_1", "amount": 10}`), t1))
		require.Equal(t, int64(1), respond(other.ID, "charged", nil, t1), "numbered per execution")
		require.Equal(t, int64(2), respond(p.ID, "shipped", nil, t2))
		require.Equal(t, int64(3), respond(p.ID, "charged", json.RawMessage(`[]`), t3))
		got := getExecution(t, b.exec, p.ID)
		require.Equal(t, int64(3), got.ResponsesReceived)
		require.Zero(t, got.ResponsesApplied)
		requireTimePtr(t, t3, got.WakeAt, "wake_at")
		requireTime(t, t3, got.UpdatedAt, "updated_at")

		list := func(afterSeq int64) []driver.ExecutionResponseRow {
			t.Helper()
			rows, err := b.exec.ExecutionResponseList(ctx, p.ID, afterSeq)
			require.NoError(t, err)
			out := make([]driver.ExecutionResponseRow, len(rows))
			for i, r := range rows {
				out[i] = *r
				out[i].ReceivedAt, out[i].Payload = r.ReceivedAt.UTC(), compactJSON(r.Payload)
			}
			return out
		}
		all := []driver.ExecutionResponseRow{
			{ExecutionID: p.ID, Seq: 1, Name: "charged", Payload: compactJSON(json.RawMessage(`{"amount":10,"id":"ch_1"}`)), ReceivedAt: t1},
			{ExecutionID: p.ID, Seq: 2, Name: "shipped", Payload: json.RawMessage(`{}`), ReceivedAt: t2},
			{ExecutionID: p.ID, Seq: 3, Name: "charged", Payload: json.RawMessage(`[]`), ReceivedAt: t3},
		}
		require.Equal(t, all, list(0))
		require.Equal(t, all[1:], list(1))
		require.Empty(t, list(3))
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := uuid.New()
		_, err := b.exec.ExecutionResponseInsert(ctx, &driver.ExecutionResponseInsertParams{ExecutionID: id, Name: "charged", Now: &t0})
		require.ErrorIs(t, err, driver.ErrNotFound)
		rows, err := b.exec.ExecutionResponseList(ctx, id, 0)
		require.NoError(t, err)
		require.Empty(t, rows, "nothing is stored for a missing execution")
	})
}

func exerciseExecutionAcquireLoadMany(t *testing.T, setup setupFunc) {
	ctx := context.Background()
	// loaded flattens what was read for an execution, for comparison.
	loaded := func(l *driver.ExecutionLoaded) (seqs []int, responses []int64) {
		for _, e := range l.Log {
			seqs = append(seqs, e.Seq)
		}
		for _, r := range l.Responses {
			responses = append(responses, r.Seq)
		}
		return seqs, responses
	}
	// prepare inserts: free (a log of two entries, two responses of which one is applied), held
	// (leased for an hour) and empty (no log, no responses).
	prepare := func(t *testing.T, exec driver.Executor) (free, held, empty *driver.ExecutionInsertParams) {
		t.Helper()
		free, held, empty = newExecution("Pay"), newLeasedExecution("Pay", time.Hour), newExecution("Pay")
		free.Log = []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "STEP", Name: "a"}, {Seq: 2, EntryType: "STEP", Name: "b"}}
		held.Log = []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "STEP", Name: "x"}}
		insertExecutions(t, exec, &t0, free, held, empty)
		for i := 0; i < 2; i++ {
			_, err := exec.ExecutionResponseInsert(ctx, &driver.ExecutionResponseInsertParams{ExecutionID: free.ID, Name: "r", Now: &t0})
			require.NoError(t, err)
		}
		// Apply the first response: acquire, then release with responses_applied 1.
		row, err := exec.ExecutionAcquire(ctx, &driver.ExecutionAcquireParams{ID: free.ID, Lease: time.Minute, WorkerID: "w", Now: &t0})
		require.NoError(t, err)
		require.Len(t, checkpoint(t, exec, t0, &driver.ExecutionCheckpoint{
			ID: free.ID, Fence: row.Fence, Status: driver.ExecutionWaitingForAsync, ResponsesApplied: 1, Release: true,
		}), 1)
		return free, held, empty
	}

	t.Run("AcquiresFreeOnesWithTheirLogs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		free, held, empty := prepare(t, b.exec)
		t1 := t0.Add(time.Second)
		got, err := b.exec.ExecutionAcquireLoadMany(ctx, &driver.ExecutionAcquireManyParams{
			IDs: []uuid.UUID{held.ID, free.ID, uuid.New(), empty.ID}, Lease: time.Minute, WorkerID: "runner-b", Now: &t1,
		})
		require.NoError(t, err)
		byID := map[uuid.UUID]*driver.ExecutionAcquired{}
		for _, x := range got {
			byID[x.Row.ID] = x
		}
		require.Len(t, byID, 2, "the held and the unknown execution are not acquired")
		require.Contains(t, byID, free.ID)
		require.Contains(t, byID, empty.ID)

		f := byID[free.ID]
		require.Equal(t, "runner-b", f.Row.WorkerID)
		require.Equal(t, int64(2), f.Row.Fence)
		require.Equal(t, driver.ExecutionWaitingForAsync, f.Row.ClaimedFrom)
		requireTimePtr(t, t1.Add(time.Minute), f.Row.LeaseUntil, "lease_until")
		seqs, responses := loaded(f.Loaded)
		require.Equal(t, []int{1, 2}, seqs)
		require.Empty(t, responses, "responses are not read; the row tells whether any wait")
		require.Equal(t, int64(2), f.Row.ResponsesReceived)
		require.Equal(t, int64(1), f.Row.ResponsesApplied)
		require.Equal(t, free.ID, f.Loaded.Log[0].ExecutionID)

		seqs, responses = loaded(byID[empty.ID].Loaded)
		require.Empty(t, seqs)
		require.Empty(t, responses)
		require.Equal(t, int64(1), byID[empty.ID].Row.Fence)

		h := getExecution(t, b.exec, held.ID)
		require.Equal(t, runner, h.WorkerID, "the held execution keeps its runner")
		require.Equal(t, int64(1), h.Fence)

		// Now both are leased: a second attempt gets nothing.
		again, err := b.exec.ExecutionAcquireLoadMany(ctx, &driver.ExecutionAcquireManyParams{
			IDs: []uuid.UUID{free.ID, empty.ID}, Lease: time.Minute, WorkerID: "runner-c", Now: &t1,
		})
		require.NoError(t, err)
		require.Empty(t, again)
	})

	t.Run("LogAfterSeq", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		free, _, empty := prepare(t, b.exec)
		t1 := t0.Add(time.Second)
		got, err := b.exec.ExecutionAcquireLoadMany(ctx, &driver.ExecutionAcquireManyParams{
			IDs: []uuid.UUID{free.ID, empty.ID}, LogAfterSeq: []int64{1, 0}, Lease: time.Minute, WorkerID: "runner-b", Now: &t1,
		})
		require.NoError(t, err)
		require.Len(t, got, 2)
		for _, x := range got {
			seqs, _ := loaded(x.Loaded)
			if x.Row.ID == free.ID {
				require.Equal(t, []int{2}, seqs, "only the entries after the one the caller holds")
			} else {
				require.Empty(t, seqs)
			}
		}
		loadedMany, err := b.exec.ExecutionLoadMany(ctx, &driver.ExecutionLoadManyParams{
			IDs: []uuid.UUID{free.ID}, AfterSeq: []int64{0}, LogAfterSeq: []int64{2},
		})
		require.NoError(t, err)
		seqs, responses := loaded(loadedMany[free.ID])
		require.Empty(t, seqs)
		require.Equal(t, []int64{1, 2}, responses)

		_, err = b.exec.ExecutionAcquireLoadMany(ctx, &driver.ExecutionAcquireManyParams{
			IDs: []uuid.UUID{free.ID}, LogAfterSeq: []int64{}, Lease: time.Minute, WorkerID: "runner-b", Now: &t1,
		})
		require.Error(t, err, "ids and log sequences must pair up")
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, err := b.exec.ExecutionAcquireLoadMany(ctx, &driver.ExecutionAcquireManyParams{Lease: time.Minute, WorkerID: "w", Now: &t0})
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("LoadMany", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		free, held, empty := prepare(t, b.exec)
		unknown := uuid.New()
		got, err := b.exec.ExecutionLoadMany(ctx, &driver.ExecutionLoadManyParams{
			IDs: []uuid.UUID{free.ID, held.ID, empty.ID, unknown}, AfterSeq: []int64{0, 0, 0, 0},
		})
		require.NoError(t, err)
		require.Len(t, got, 4, "every id gets an entry")
		seqs, responses := loaded(got[free.ID])
		require.Equal(t, []int{1, 2}, seqs)
		require.Equal(t, []int64{1, 2}, responses, "after sequence 0: both responses")
		seqs, _ = loaded(got[held.ID])
		require.Equal(t, []int{1}, seqs)
		for _, id := range []uuid.UUID{empty.ID, unknown} {
			seqs, responses = loaded(got[id])
			require.Empty(t, seqs)
			require.Empty(t, responses)
		}

		got, err = b.exec.ExecutionLoadMany(ctx, &driver.ExecutionLoadManyParams{IDs: []uuid.UUID{free.ID}, AfterSeq: []int64{1}})
		require.NoError(t, err)
		_, responses = loaded(got[free.ID])
		require.Equal(t, []int64{2}, responses)

		_, err = b.exec.ExecutionLoadMany(ctx, &driver.ExecutionLoadManyParams{IDs: []uuid.UUID{free.ID}})
		require.Error(t, err, "ids and sequences must pair up")
	})
}
