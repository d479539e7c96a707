package drivertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

// runner is the worker id of the executions the suite leases.
const runner = "runner-1"

// newExecution returns insert params with the fields every execution needs. Its id is a UUIDv7,
// as the engine generates them, so executions created later list first.
func newExecution(typ string) *driver.ExecutionInsertParams {
	return &driver.ExecutionInsertParams{
		ID:     uuid.Must(uuid.NewV7()),
		Model:  "process",
		Type:   typ,
		Domain: "d",
		State:  json.RawMessage(`{"n":1}`),
	}
}

// newLeasedExecution returns insert params of an execution created EXECUTING, leased to runner.
func newLeasedExecution(typ string, lease time.Duration) *driver.ExecutionInsertParams {
	p := newExecution(typ)
	p.Lease, p.WorkerID = lease, runner
	return p
}

// createdExecution is the row an insert of p at now must produce.
func createdExecution(p *driver.ExecutionInsertParams, now time.Time) *driver.ExecutionRow {
	state := p.State
	if len(state) == 0 {
		state = json.RawMessage(`{}`)
	}
	x := &driver.ExecutionRow{
		ID: p.ID, Model: p.Model, Type: p.Type, Domain: p.Domain, TenantID: p.TenantID,
		BusinessKey: p.BusinessKey, BatchID: p.BatchID, Status: driver.ExecutionPending, State: state,
		DeadlineAt: p.DeadlineAt, WorkerID: p.WorkerID, WakeAt: &now, CreatedAt: now, UpdatedAt: now,
		ParentID: p.ParentID, RootID: p.RootID, Traceparent: p.Traceparent,
	}
	if x.RootID == uuid.Nil {
		x.RootID = p.ID
	}
	if p.Lease > 0 {
		end := now.Add(p.Lease)
		x.Status, x.Fence, x.LeaseUntil, x.WakeAt = driver.ExecutionExecuting, 1, &end, &end
	}
	return x
}

// insertExecutions inserts executions at now (nil: the database clock) and requires that each
// was new.
func insertExecutions(t *testing.T, exec driver.Executor, now *time.Time, xs ...*driver.ExecutionInsertParams) {
	t.Helper()
	inserted, err := exec.ExecutionInsertMany(context.Background(), &driver.ExecutionInsertManyParams{Executions: xs, Now: now})
	require.NoError(t, err)
	ids := make([]uuid.UUID, len(xs))
	for i, x := range xs {
		ids[i] = x.ID
	}
	require.Equal(t, ids, inserted, "every execution is new")
}

func getExecution(t *testing.T, exec driver.Executor, id uuid.UUID) *driver.ExecutionRow {
	t.Helper()
	x, err := exec.ExecutionGet(context.Background(), id)
	require.NoError(t, err)
	return x
}

// claimExecutions claims for runner with the given kind, types, max and lease at now.
func claimExecutions(t *testing.T, exec driver.Executor, kind driver.ExecutionClaimKind, types []string, max int, lease time.Duration, now time.Time) []*driver.ExecutionRow {
	t.Helper()
	rows, err := exec.ExecutionClaim(context.Background(), &driver.ExecutionClaimParams{
		Kind: kind, Types: types, Max: max, Lease: lease, WorkerID: runner, Now: &now,
	})
	require.NoError(t, err)
	return rows
}

// checkpoint writes checkpoints at now and returns the ids that applied.
func checkpoint(t *testing.T, exec driver.Executor, now time.Time, checkpoints ...*driver.ExecutionCheckpoint) []uuid.UUID {
	t.Helper()
	applied, err := exec.ExecutionCheckpointMany(context.Background(), &driver.ExecutionCheckpointManyParams{Checkpoints: checkpoints, Now: &now})
	require.NoError(t, err)
	return applied
}

// park checkpoints a freshly leased execution (fence 1) into status and releases it, woken at
// wakeAt (nil: not woken).
func park(t *testing.T, exec driver.Executor, now time.Time, id uuid.UUID, status driver.ExecutionStatus, wakeAt *time.Time) {
	t.Helper()
	require.Equal(t, []uuid.UUID{id}, checkpoint(t, exec, now, &driver.ExecutionCheckpoint{
		ID: id, Fence: 1, Status: status, Release: true, WakeAt: wakeAt,
	}))
}

func executionIDs(rows []*driver.ExecutionRow) []uuid.UUID {
	out := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// requireExecution compares two executions field by field: times by instant, state by value.
func requireExecution(t *testing.T, want, got *driver.ExecutionRow) {
	t.Helper()
	require.NotNil(t, got)
	require.JSONEq(t, string(want.State), string(got.State), "state")
	require.Equal(t, normalizeExecution(want), normalizeExecution(got))
}

func normalizeExecution(x *driver.ExecutionRow) driver.ExecutionRow {
	out := *x
	out.State = nil
	out.NextRetryAt = utcPtr(out.NextRetryAt)
	out.NextWaitTimeoutAt = utcPtr(out.NextWaitTimeoutAt)
	out.DeadlineAt = utcPtr(out.DeadlineAt)
	out.LeaseUntil = utcPtr(out.LeaseUntil)
	out.WakeAt = utcPtr(out.WakeAt)
	out.CreatedAt = out.CreatedAt.UTC()
	out.UpdatedAt = out.UpdatedAt.UTC()
	out.CompletedAt = utcPtr(out.CompletedAt)
	return out
}

func exerciseExecutionInsertMany(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("PendingAndLeased", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pending := newExecution("Pay")
		pending.Model, pending.Domain = "saga", "payments"
		pending.TenantID, pending.BusinessKey, pending.BatchID = "tenant-1", "order-1", uuid.New()
		pending.State = json.RawMessage(`{"amount":10,"items":["a","b"]}`)
		pending.DeadlineAt = ptr(t0.Add(time.Hour))
		leased := newLeasedExecution("Ship", 30*time.Second)
		leased.State = nil
		insertExecutions(t, b.exec, &t0, pending, leased)

		// A pending execution is woken at once; a leased one is EXECUTING with fence 1 and wakes
		// when its lease would end (its runner died).
		got := getExecution(t, b.exec, pending.ID)
		requireExecution(t, createdExecution(pending, t0), got)
		require.Equal(t, driver.ExecutionPending, got.Status)
		requireTimePtr(t, t0, got.WakeAt, "wake_at")
		got = getExecution(t, b.exec, leased.ID)
		requireExecution(t, createdExecution(leased, t0), got)
		require.Equal(t, int64(1), got.Fence)
		requireTimePtr(t, t0.Add(30*time.Second), got.LeaseUntil, "lease_until")
		require.JSONEq(t, `{}`, string(got.State), "no state is an empty object")
		require.Empty(t, got.ClaimedFrom, "only claims report where they took an execution from")
	})

	t.Run("NotBefore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A pending execution given a later not-before time exists at once but is not claimed
		// before it; a past one changes nothing; a leased insert ignores it.
		later := newExecution("Later")
		later.NotBefore = ptr(t0.Add(2 * time.Second))
		past := newExecution("Later")
		past.NotBefore = ptr(t0.Add(-time.Hour))
		leased := newLeasedExecution("Leased", time.Minute)
		leased.NotBefore = ptr(t0.Add(time.Hour))
		insertExecutions(t, b.exec, &t0, later, past, leased)

		got := getExecution(t, b.exec, later.ID)
		require.Equal(t, driver.ExecutionPending, got.Status)
		requireTimePtr(t, t0.Add(2*time.Second), got.WakeAt, "wake_at")
		requireTimePtr(t, t0, getExecution(t, b.exec, past.ID).WakeAt, "wake_at of a past not-before")
		requireTimePtr(t, t0.Add(time.Minute), getExecution(t, b.exec, leased.ID).WakeAt, "wake_at of a leased insert")

		next, err := b.exec.ExecutionNextWake(ctx, &driver.ExecutionNextWakeParams{Types: []string{"Later"}, Now: &t0})
		require.NoError(t, err)
		requireTimePtr(t, t0.Add(2*time.Second), next, "the pending poller is told when it becomes runnable")

		rows := claimExecutions(t, b.exec, driver.ClaimPending, []string{"Later"}, 10, time.Minute, t0.Add(2*time.Second-time.Millisecond))
		require.Equal(t, []uuid.UUID{past.ID}, executionIDs(rows), "not claimed before its not-before time")
		rows = claimExecutions(t, b.exec, driver.ClaimPending, []string{"Later"}, 10, time.Minute, t0.Add(2*time.Second))
		require.Equal(t, []uuid.UUID{later.ID}, executionIDs(rows), "claimed from its not-before time")
	})

	t.Run("WritesLog", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Minute)
		p.Log = []*driver.ExecutionLogEntry{
			// At is the database's: the insert's now.
			{Seq: 1, At: t0.Add(-time.Hour), EntryType: "LIFECYCLE", Name: "started", Actor: "api"},
			{Seq: 2, EntryType: "STEP", Name: "charge", StepStatus: "STARTED", Attempt: 1, MaxAttempts: 3},
		}
		other := newExecution("Pay")
		insertExecutions(t, b.exec, &t0, p, other)
		log, err := b.exec.ExecutionLogList(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, []driver.ExecutionLogEntry{
			{ExecutionID: p.ID, Seq: 1, At: t0, EntryType: "LIFECYCLE", Name: "started", Actor: "api"},
			{ExecutionID: p.ID, Seq: 2, At: t0, EntryType: "STEP", Name: "charge", StepStatus: "STARTED", Attempt: 1, MaxAttempts: 3},
		}, normalizeLog(log))
		log, err = b.exec.ExecutionLogList(ctx, other.ID)
		require.NoError(t, err)
		require.Empty(t, log)
	})

	t.Run("AllOrNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := newExecution("Pay")
		insertExecutions(t, b.exec, &t0, first)

		fresh, clash := newExecution("Pay"), newExecution("Pay")
		clash.Log = []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "LIFECYCLE"}, {Seq: 1, EntryType: "LIFECYCLE"}}
		_, err := b.exec.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{
			Executions: []*driver.ExecutionInsertParams{fresh, clash}, Now: &t0,
		})
		require.Error(t, err, "two log entries with one seq")
		for _, id := range []uuid.UUID{fresh.ID, clash.ID} {
			_, err = b.exec.ExecutionGet(ctx, id)
			require.ErrorIs(t, err, driver.ErrNotFound, "nothing of a failed batch is written")
		}
	})

	t.Run("InvalidStateFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newExecution("Pay")
		p.State = json.RawMessage(`{"n":`)
		_, err := b.exec.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{
			Executions: []*driver.ExecutionInsertParams{p}, Now: &t0,
		})
		require.Error(t, err)
	})

	t.Run("DatabaseClockWhenNowIsNil", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newExecution("Pay")
		insertExecutions(t, b.exec, nil, p)
		got := getExecution(t, b.exec, p.ID)
		require.WithinDuration(t, time.Now(), got.CreatedAt, within)
		requireTimePtr(t, got.CreatedAt, got.WakeAt, "wake_at")
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		inserted, err := b.exec.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{})
		require.NoError(t, err)
		require.Empty(t, inserted)
	})

	t.Run("RolledBackInTransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tx, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		p := newExecution("Pay")
		insertExecutions(t, tx, &t0, p)
		getExecution(t, tx, p.ID)
		require.NoError(t, tx.Rollback(ctx))
		_, err = b.exec.ExecutionGet(ctx, p.ID)
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
}

func exerciseExecutionGet(t *testing.T, setup setupFunc) {
	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.exec.ExecutionGet(context.Background(), uuid.New())
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
}

func exerciseExecutionList(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("FiltersNewestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		batch := uuid.New()
		a := newExecution("Pay")
		a.TenantID, a.BatchID, a.BusinessKey = "t1", batch, "order-1"
		c := newLeasedExecution("Pay", time.Hour)
		c.Domain, c.BatchID = "other", batch
		d := newExecution("Ship")
		d.Model, d.TenantID, d.BusinessKey = "saga", "t1", "order-1"
		e := newLeasedExecution("Ship", time.Hour)
		insertExecutions(t, b.exec, &t0, a, c, d, e)

		list := func(params driver.ExecutionListParams) []uuid.UUID {
			t.Helper()
			rows, err := b.exec.ExecutionList(ctx, &params)
			require.NoError(t, err)
			return executionIDs(rows)
		}
		require.Equal(t, []uuid.UUID{e.ID, d.ID, c.ID, a.ID}, list(driver.ExecutionListParams{}))
		require.Equal(t, []uuid.UUID{e.ID, c.ID}, list(driver.ExecutionListParams{Statuses: []driver.ExecutionStatus{driver.ExecutionExecuting}}))
		require.Equal(t, []uuid.UUID{e.ID, d.ID, c.ID, a.ID}, list(driver.ExecutionListParams{
			Statuses: []driver.ExecutionStatus{driver.ExecutionExecuting, driver.ExecutionPending},
		}))
		require.Equal(t, []uuid.UUID{d.ID}, list(driver.ExecutionListParams{Model: "saga"}))
		require.Equal(t, []uuid.UUID{c.ID, a.ID}, list(driver.ExecutionListParams{Type: "Pay"}))
		require.Equal(t, []uuid.UUID{c.ID}, list(driver.ExecutionListParams{Domain: "other"}))
		require.Equal(t, []uuid.UUID{d.ID, a.ID}, list(driver.ExecutionListParams{TenantID: "t1"}))
		require.Equal(t, []uuid.UUID{d.ID, a.ID}, list(driver.ExecutionListParams{BusinessKey: "order-1"}))
		require.Equal(t, []uuid.UUID{a.ID}, list(driver.ExecutionListParams{BusinessKey: "order-1", Type: "Pay"}))
		require.Equal(t, []uuid.UUID{c.ID, a.ID}, list(driver.ExecutionListParams{BatchID: batch}))
		require.Empty(t, list(driver.ExecutionListParams{Type: "Missing"}))

		// Paging: Limit, then BeforeID the last id seen.
		require.Equal(t, []uuid.UUID{e.ID, d.ID}, list(driver.ExecutionListParams{Limit: 2}))
		require.Equal(t, []uuid.UUID{c.ID, a.ID}, list(driver.ExecutionListParams{Limit: 2, BeforeID: d.ID}))
		require.Empty(t, list(driver.ExecutionListParams{BeforeID: a.ID}))
		require.Equal(t, []uuid.UUID{a.ID}, list(driver.ExecutionListParams{BeforeID: c.ID, TenantID: "t1"}))

		rows, err := b.exec.ExecutionList(ctx, &driver.ExecutionListParams{Type: "Ship", Model: "saga"})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		requireExecution(t, createdExecution(d, t0), rows[0])
	})
}

func exerciseExecutionCountByStatus(t *testing.T, setup setupFunc) {
	t.Run("ByTypeAndStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		counts, err := b.exec.ExecutionCountByStatus(context.Background())
		require.NoError(t, err)
		require.Empty(t, counts)

		done := newLeasedExecution("Ship", time.Minute)
		insertExecutions(t, b.exec, &t0, newExecution("Ship"), newExecution("Pay"), newExecution("Pay"),
			newLeasedExecution("Pay", time.Minute), done)
		park(t, b.exec, t0, done.ID, driver.ExecutionCompleted, nil)
		counts, err = b.exec.ExecutionCountByStatus(context.Background())
		require.NoError(t, err)
		require.Equal(t, []*driver.ExecutionStatusCount{
			{Type: "Pay", Status: driver.ExecutionExecuting, Count: 1},
			{Type: "Pay", Status: driver.ExecutionPending, Count: 2},
			{Type: "Ship", Status: driver.ExecutionCompleted, Count: 1},
			{Type: "Ship", Status: driver.ExecutionPending, Count: 1},
		}, counts)
	})
}

func exerciseExecutionListDue(t *testing.T, setup setupFunc) {
	ctx := context.Background()
	listDue := func(t *testing.T, exec driver.Executor, kind driver.ExecutionDueKind, types []string, max int, now time.Time) []uuid.UUID {
		t.Helper()
		rows, err := exec.ExecutionListDue(ctx, &driver.ExecutionListDueParams{Kind: kind, Types: types, Max: max, Now: &now})
		require.NoError(t, err)
		return executionIDs(rows)
	}

	t.Run("WaitTimeout", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		waiting := func(typ string, status driver.ExecutionStatus, timeout time.Time, release bool) *driver.ExecutionInsertParams {
			p := newLeasedExecution(typ, time.Hour)
			insertExecutions(t, b.exec, &t0, p)
			require.Len(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
				ID: p.ID, Fence: 1, Status: status, CurrentWait: "reply", NextWaitTimeoutAt: &timeout, Release: release,
			}), 1)
			return p
		}
		// Created in an order different from their timeout order.
		third := waiting("Pay", driver.ExecutionWaitingForAsync, t0.Add(3*time.Minute), true)
		first := waiting("Pay", driver.ExecutionWaitingForAsync, t0.Add(time.Minute), true)
		otherType := waiting("Ship", driver.ExecutionWaitingForAsync, t0.Add(90*time.Second), true)
		// Still leased: the check does not look at the lease.
		second := waiting("Pay", driver.ExecutionWaitingForAsync, t0.Add(2*time.Minute), false)
		waiting("Pay", driver.ExecutionWaitingForRetry, t0, true)
		waiting("Pay", driver.ExecutionExecuting, t0, true)

		require.Empty(t, listDue(t, b.exec, driver.DueWaitTimeout, nil, 10, t0))
		require.Equal(t, []uuid.UUID{first.ID, otherType.ID, second.ID}, listDue(t, b.exec, driver.DueWaitTimeout, nil, 10, t0.Add(2*time.Minute)))
		require.Equal(t, []uuid.UUID{first.ID, otherType.ID}, listDue(t, b.exec, driver.DueWaitTimeout, nil, 2, t0.Add(time.Hour)))
		require.Equal(t, []uuid.UUID{first.ID, second.ID, third.ID}, listDue(t, b.exec, driver.DueWaitTimeout, []string{"Pay"}, 10, t0.Add(time.Hour)))
		require.Equal(t, []uuid.UUID{otherType.ID}, listDue(t, b.exec, driver.DueWaitTimeout, []string{"Ship", "Missing"}, 10, t0.Add(time.Hour)))
		require.Empty(t, listDue(t, b.exec, driver.DueWaitTimeout, nil, 0, t0.Add(time.Hour)))

		rows, err := b.exec.ExecutionListDue(ctx, &driver.ExecutionListDueParams{Kind: driver.DueWaitTimeout, Max: 1, Now: ptr(t0.Add(time.Hour))})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, driver.ExecutionWaitingForAsync, rows[0].Status)
		require.Equal(t, "reply", rows[0].CurrentWait)
		requireTimePtr(t, t0.Add(time.Minute), rows[0].NextWaitTimeoutAt, "next_wait_timeout_at")
	})

	t.Run("Deadline", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		withDeadline := func(typ string, deadline time.Time) *driver.ExecutionInsertParams {
			p := newLeasedExecution(typ, time.Hour)
			p.DeadlineAt = &deadline
			return p
		}
		second, first, otherType := withDeadline("Pay", t0.Add(2*time.Minute)), withDeadline("Pay", t0.Add(time.Minute)), withDeadline("Ship", t0.Add(90*time.Second))
		completed, failed := withDeadline("Pay", t0), withDeadline("Pay", t0)
		waiting := withDeadline("Pay", t0.Add(3*time.Minute))
		// Compensating executions, and executions parked by the deadline action or by failed
		// compensations, have had their deadline handled; one parked for another reason has not
		// (issue 15, defect 10).
		compensating := withDeadline("Pay", t0)
		parked := withDeadline("Pay", t0.Add(30*time.Second))
		parkedByDeadline, parkedByCompensation := withDeadline("Pay", t0), withDeadline("Pay", t0)
		insertExecutions(t, b.exec, &t0, second, first, otherType, completed, failed, waiting, parked, compensating,
			parkedByDeadline, parkedByCompensation, newLeasedExecution("Pay", time.Hour))
		park(t, b.exec, t0, completed.ID, driver.ExecutionCompleted, nil)
		park(t, b.exec, t0, failed.ID, driver.ExecutionFailed, nil)
		park(t, b.exec, t0, waiting.ID, driver.ExecutionWaitingForAsync, nil)
		park(t, b.exec, t0, compensating.ID, driver.ExecutionCompensating, nil)
		for id, code := range map[uuid.UUID]string{parked.ID: "NETWORK_ERROR", parkedByDeadline.ID: "DEADLINE_EXCEEDED", parkedByCompensation.ID: "COMPENSATION_FAILED"} {
			require.Equal(t, []uuid.UUID{id}, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
				ID: id, Fence: 1, Status: driver.ExecutionWaitingForTSQ, Release: true, ErrorCode: code, ErrorMessage: "parked",
			}))
		}

		require.Empty(t, listDue(t, b.exec, driver.DueDeadline, nil, 10, t0.Add(29*time.Second)))
		require.Equal(t, []uuid.UUID{parked.ID, first.ID, otherType.ID, second.ID}, listDue(t, b.exec, driver.DueDeadline, nil, 10, t0.Add(2*time.Minute)))
		require.Equal(t, []uuid.UUID{parked.ID}, listDue(t, b.exec, driver.DueDeadline, nil, 1, t0.Add(time.Hour)))
		require.Equal(t, []uuid.UUID{parked.ID, first.ID, second.ID, waiting.ID}, listDue(t, b.exec, driver.DueDeadline, []string{"Pay"}, 10, t0.Add(time.Hour)))
		require.Equal(t, []uuid.UUID{otherType.ID}, listDue(t, b.exec, driver.DueDeadline, []string{"Ship"}, 10, t0.Add(time.Hour)))
		for _, id := range []uuid.UUID{parked.ID, parkedByDeadline.ID, parkedByCompensation.ID, compensating.ID} {
			row := getExecution(t, b.exec, id)
			require.Equal(t, id == parked.ID, !driver.DeadlineHandled(row), "DeadlineHandled agrees with the query for %s", row.ErrorCode)
		}

		// A checkpoint replaces the deadline only when it gives one.
		require.Len(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{ID: first.ID, Fence: 1, Status: driver.ExecutionExecuting}), 1)
		requireTimePtr(t, t0.Add(time.Minute), getExecution(t, b.exec, first.ID).DeadlineAt, "deadline kept")
		require.Len(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: first.ID, Fence: 1, Status: driver.ExecutionExecuting, DeadlineAt: ptr(t0.Add(time.Hour)),
		}), 1)
		require.Equal(t, []uuid.UUID{parked.ID, otherType.ID, second.ID}, listDue(t, b.exec, driver.DueDeadline, nil, 10, t0.Add(2*time.Minute)))
	})

	t.Run("UnknownKind", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.exec.ExecutionListDue(ctx, &driver.ExecutionListDueParams{Kind: "sometime", Max: 1, Now: &t0})
		require.Error(t, err)
	})
}
