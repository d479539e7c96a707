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

func exerciseCommandClaim(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("StampsLeaseAndAudit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newCommand("d", "q", "T")
		p.Actor = "api"
		insert(t, b.exec, &t0, p)
		t1 := t0.Add(time.Second)
		rows, err := b.exec.CommandClaim(ctx, &driver.CommandClaimParams{
			Queue: "q", Max: 10, Lease: 30 * time.Second, WorkerID: "worker-a", Now: &t1,
		})
		require.NoError(t, err)
		require.Len(t, rows, 1)

		// The claim leaves visible_at alone: the lease alone says when the command is
		// claimable again. GetByID shows the claim in progress, rebuilt from its columns.
		want := sentCommand(p, t0)
		want.Status, want.Attempt, want.Fence, want.WorkerID = driver.CommandStatusRunning, 1, 1, "worker-a"
		want.LeaseUntil = ptr(t1.Add(30 * time.Second))
		want.StartedAt, want.UpdatedAt = &t1, t1
		want.Audit = append(want.Audit, claimedEntry(t1, 1, "worker-a"))
		requireCommand(t, want, get(t, b.exec, p.ID))
		requireTime(t, t0, rows[0].VisibleAt, "visible_at")
		claimed := *want
		claimed.Audit = nil
		requireCommand(t, &claimed, rows[0])
	})

	t.Run("MaxVisibilityOrderAndQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		due := func(offset time.Duration) *driver.CommandInsertParams {
			p := newCommand("d", "q", "T")
			p.VisibleAt = ptr(t0.Add(offset))
			return p
		}
		first, second, third, later := due(-3*time.Minute), due(-2*time.Minute), due(-time.Minute), due(time.Minute)
		otherQueue := newCommand("d", "other", "T")
		otherQueue.VisibleAt = ptr(t0.Add(-time.Hour))
		terminal := due(-time.Hour)
		terminal.Kind, terminal.Status = driver.CommandKindReply, driver.CommandStatusCompleted
		// Inserted in an order different from their due order.
		insert(t, b.exec, ptr(t0.Add(-time.Hour)), later, third, otherQueue, first, terminal, second)

		require.Empty(t, claim(t, b.exec, "q", 0, time.Hour, &t0), "max 0 claims nothing")
		require.ElementsMatch(t, []uuid.UUID{first.ID, second.ID}, ids(claim(t, b.exec, "q", 2, time.Hour, &t0)), "earliest due first")
		require.ElementsMatch(t, []uuid.UUID{third.ID}, ids(claim(t, b.exec, "q", 10, time.Hour, &t0)))
		require.Empty(t, claim(t, b.exec, "q", 10, time.Hour, &t0), "nothing else is due")
		require.ElementsMatch(t, []uuid.UUID{later.ID}, ids(claim(t, b.exec, "q", 10, time.Hour, ptr(t0.Add(2*time.Minute)))))
		require.Equal(t, driver.CommandStatusCompleted, get(t, b.exec, terminal.ID).Status)
		require.ElementsMatch(t, []uuid.UUID{otherQueue.ID}, ids(claim(t, b.exec, "other", 10, time.Hour, &t0)))
		require.Empty(t, claim(t, b.exec, "missing", 10, time.Hour, &t0))
	})

	t.Run("ReclaimsExpiredLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newCommand("d", "q", "T")
		insert(t, b.exec, &t0, p)
		t1 := t0.Add(time.Second)
		first := claim(t, b.exec, "q", 1, time.Minute, &t1)
		require.Len(t, first, 1)
		require.Equal(t, int64(1), first[0].Fence)
		leaseEnd := t1.Add(time.Minute)

		require.Empty(t, claim(t, b.exec, "q", 1, time.Minute, ptr(t1.Add(30*time.Second))), "the lease holds")
		require.Empty(t, claim(t, b.exec, "q", 1, time.Minute, ptr(leaseEnd.Add(-time.Microsecond))), "the lease holds to its end")

		t2 := t1.Add(2 * time.Minute)
		rows, err := b.exec.CommandClaim(ctx, &driver.CommandClaimParams{Queue: "q", Max: 1, Lease: time.Minute, WorkerID: "worker-b", Now: &t2})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, driver.CommandStatusRunning, rows[0].Status)
		require.Equal(t, 2, rows[0].Attempt)
		require.Equal(t, int64(2), rows[0].Fence)
		require.Equal(t, "worker-b", rows[0].WorkerID)
		requireTimePtr(t, t2, rows[0].StartedAt, "started_at")
		requireTimePtr(t, t2.Add(time.Minute), rows[0].LeaseUntil, "lease_until")
		requireTime(t, t0, rows[0].VisibleAt, "visible_at")

		// The reclaim records the claim that expired (its worker, its attempt) and the expiry,
		// at the end of its lease; the new claim is in progress.
		expired := driver.AuditEntry{
			At: leaseEnd, Event: "LEASE_EXPIRED", From: driver.CommandStatusRunning, To: driver.CommandStatusPending,
			Attempt: 1, ErrorCode: "LEASE_EXPIRED",
		}
		sent := driver.AuditEntry{At: t0, Event: "SENT", To: driver.CommandStatusPending}
		requireAudit(t, b.exec, p.ID, sent, claimedEntry(t1, 1, "worker-1"), expired, claimedEntry(t2, 2, "worker-b"))

		// The first claim lost: its outcome does not apply, the new one does.
		t3 := t2.Add(time.Second)
		require.Empty(t, complete(t, b.exec, &t3, &driver.CommandCompletion{ID: p.ID, Fence: 1, Status: driver.CommandStatusCompleted, Event: "COMPLETED"}))
		require.Equal(t, []uuid.UUID{p.ID}, complete(t, b.exec, &t3, &driver.CommandCompletion{ID: p.ID, Fence: 2, Status: driver.CommandStatusCompleted, Event: "COMPLETED"}))
		requireAudit(t, b.exec, p.ID, sent, claimedEntry(t1, 1, "worker-1"), expired, claimedEntry(t2, 2, "worker-b"),
			driver.AuditEntry{At: t3, Event: "COMPLETED", From: driver.CommandStatusRunning, To: driver.CommandStatusCompleted, Attempt: 2})
	})

	t.Run("ReclaimsAtLeaseEndAgainAndAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newCommand("d", "q", "T")
		insert(t, b.exec, &t0, p)
		sent := driver.AuditEntry{At: t0, Event: "SENT", To: driver.CommandStatusPending}
		want := []driver.AuditEntry{sent}
		at := t0
		for attempt := 1; attempt <= 3; attempt++ {
			rows := claim(t, b.exec, "q", 1, time.Minute, &at)
			require.Len(t, rows, 1, "attempt %d", attempt)
			require.Equal(t, attempt, rows[0].Attempt)
			require.Equal(t, int64(attempt), rows[0].Fence)
			if attempt > 1 {
				want = append(want, claimedEntry(at.Add(-time.Minute), attempt-1, "worker-1"), driver.AuditEntry{
					At: at, Event: "LEASE_EXPIRED", From: driver.CommandStatusRunning, To: driver.CommandStatusPending,
					Attempt: attempt - 1, ErrorCode: "LEASE_EXPIRED",
				})
			}
			requireAudit(t, b.exec, p.ID, append(want, claimedEntry(at, attempt, "worker-1"))...)
			at = at.Add(time.Minute) // exactly the end of the lease
		}
	})

	// Issue 15, defect 9: a lease that expired on the last attempt is not claimed again (that
	// claim counted "attempt 4 of 3"); the watchdog lists it to time it out.
	t.Run("LeaseExpiredOnLastAttemptIsNotClaimed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		last, spare := newCommand("d", "q", "T"), newCommand("d", "q", "T")
		last.MaxAttempts, spare.MaxAttempts = 1, 2
		insert(t, b.exec, &t0, last, spare)
		require.Len(t, claim(t, b.exec, "q", 2, time.Minute, &t0), 2)
		expired := t0.Add(2 * time.Minute)
		rows := claim(t, b.exec, "q", 10, time.Minute, &expired)
		require.Equal(t, []uuid.UUID{spare.ID}, ids(rows), "only the command with attempts left is claimed again")
		require.Equal(t, 2, rows[0].Attempt)

		row, err := b.exec.CommandGetByID(ctx, last.ID)
		require.NoError(t, err)
		require.Equal(t, driver.CommandStatusRunning, row.Status)
		require.Equal(t, 1, row.Attempt, "attempt never passes max_attempts")
		require.Equal(t, int64(1), row.Fence)

		listed, err := b.exec.CommandListExpired(ctx, &driver.CommandListExpiredParams{Queues: []string{"q"}, Max: 10, Now: &expired, LastAttempts: true})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{last.ID}, ids(listed), "the watchdog's work: the last attempt's expired lease, not the fresh claim")
		early, err := b.exec.CommandListExpired(ctx, &driver.CommandListExpiredParams{Queues: []string{"q"}, Max: 10, Now: ptr(t0.Add(30 * time.Second)), LastAttempts: true})
		require.NoError(t, err)
		require.Empty(t, early, "the lease still holds")

		// The watchdog's fenced time-out applies, with the attempt it ran.
		require.Equal(t, []uuid.UUID{last.ID}, complete(t, b.exec, &expired, &driver.CommandCompletion{ID: last.ID, Fence: 1,
			Status: driver.CommandStatusTimedOut, ErrorCode: "LEASE_EXPIRED", ErrorMessage: "lease expired on attempt 1 of 1", Event: "TIMED_OUT"}))
		row, err = b.exec.CommandGetByID(ctx, last.ID)
		require.NoError(t, err)
		require.Equal(t, driver.CommandStatusTimedOut, row.Status)
		require.Equal(t, 1, row.Attempt)
	})

	t.Run("SkipsParkedAndFinished", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		parked, failed, cancelled := newCommand("d", "q", "T"), newCommand("d", "q", "T"), newCommand("d", "q", "T")
		insert(t, b.exec, &t0, parked, failed, cancelled)
		t1 := t0.Add(time.Second)
		require.Len(t, claim(t, b.exec, "q", 2, time.Minute, &t1), 2)
		require.Len(t, complete(t, b.exec, &t1,
			&driver.CommandCompletion{ID: parked.ID, Fence: 1, Status: driver.CommandStatusInTSQ, Event: "MOVED_TO_TSQ"},
			&driver.CommandCompletion{ID: failed.ID, Fence: 1, Status: driver.CommandStatusFailed, Event: "FAILED"},
		), 2)
		_, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: cancelled.ID, FromStatuses: []driver.CommandStatus{driver.CommandStatusPending},
			ToStatus: driver.CommandStatusCancelled, Event: "OPERATOR_CANCEL", Actor: "alice", Now: &t1,
		})
		require.NoError(t, err)
		require.Empty(t, claim(t, b.exec, "q", 10, time.Minute, ptr(t1.Add(time.Hour))))
	})
}

// completionReply is the row the completion at now of command commandID must insert for reply:
// PENDING, of kind reply, caused by the command, with only these fields of reply used.
func completionReply(reply *driver.CommandInsertParams, commandID uuid.UUID, now time.Time) *driver.CommandRow {
	return sentCommand(&driver.CommandInsertParams{
		ID: reply.ID, Kind: driver.CommandKindReply, Domain: reply.Domain, Queue: reply.Queue,
		Type: reply.Type, Data: reply.Data, CorrelationID: reply.CorrelationID, CausationID: commandID,
		MaxAttempts: reply.MaxAttempts, TenantID: reply.TenantID, Actor: reply.Actor, Headers: reply.Headers,
	}, now)
}

func exerciseCommandCompleteMany(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("EveryOutcome", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		names := []string{"ok", "failed", "tsq", "timedOut", "retry", "release", "stale", "done"}
		cmds := map[string]*driver.CommandInsertParams{}
		var all []*driver.CommandInsertParams
		for _, name := range names {
			cmds[name] = newCommand("d", "q", name)
			all = append(all, cmds[name])
		}
		insert(t, b.exec, &t0, all...)
		t1 := t0.Add(time.Second)
		require.Len(t, claim(t, b.exec, "q", 10, time.Minute, &t1), len(names))

		// "done" is already completed, so a second outcome for it is discarded.
		require.Equal(t, []uuid.UUID{cmds["done"].ID}, complete(t, b.exec, &t1, &driver.CommandCompletion{
			ID: cmds["done"].ID, Fence: 1, Status: driver.CommandStatusCompleted, Event: "COMPLETED",
		}))

		// reply is a reply as the engine builds it.
		reply := func(name string) *driver.CommandInsertParams {
			r := newCommand("d", "d__replies", "Reply")
			r.Kind, r.CorrelationID, r.CausationID, r.Actor = driver.CommandKindReply, uuid.New(), cmds[name].ID, "worker-1"
			r.Data = json.RawMessage(fmt.Sprintf(`{"commandId":%q}`, cmds[name].ID))
			return r
		}
		okReply, timedOutReply, staleReply, doneReply := reply("ok"), reply("timedOut"), reply("stale"), reply("done")
		// The fields a completion's reply does not use are ignored.
		okReply.Kind, okReply.Status, okReply.CausationID = driver.CommandKindCommand, driver.CommandStatusCompleted, uuid.New()
		okReply.ReplyTo, okReply.BatchID, okReply.IdempotencyKey = "elsewhere", uuid.New(), "reply-key"
		okReply.VisibleAt, okReply.DeadlineAt = ptr(t0.Add(time.Hour)), ptr(t0.Add(time.Hour))
		okReply.Headers = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} // kept
		timedOutReply.TenantID, timedOutReply.MaxAttempts = "tenant", 7
		t2 := t1.Add(10 * time.Second)
		applied := complete(t, b.exec, &t2,
			&driver.CommandCompletion{ID: cmds["ok"].ID, Fence: 1, Status: driver.CommandStatusCompleted,
				Result: json.RawMessage(`{"ok":true}`), Event: "COMPLETED", Reply: okReply},
			&driver.CommandCompletion{ID: cmds["failed"].ID, Fence: 1, Status: driver.CommandStatusFailed,
				ErrorCode: "E_BAD", ErrorMessage: "bad input", Event: "FAILED"},
			&driver.CommandCompletion{ID: cmds["tsq"].ID, Fence: 1, Status: driver.CommandStatusInTSQ,
				ErrorCode: "E_EXHAUSTED", ErrorMessage: "retries exhausted", Event: "MOVED_TO_TSQ"},
			&driver.CommandCompletion{ID: cmds["timedOut"].ID, Fence: 1, Status: driver.CommandStatusTimedOut,
				ErrorCode: "TIMEOUT", Event: "TIMED_OUT", Reply: timedOutReply},
			&driver.CommandCompletion{ID: cmds["retry"].ID, Fence: 1, Status: driver.CommandStatusPending,
				RetryDelay: 30 * time.Second, ErrorCode: "E_TRANSIENT", ErrorMessage: "try later", Event: "RETRY_SCHEDULED"},
			&driver.CommandCompletion{ID: cmds["release"].ID, Fence: 1, Status: driver.CommandStatusPending,
				Release: true, Event: "RELEASED"},
			&driver.CommandCompletion{ID: cmds["stale"].ID, Fence: 0, Status: driver.CommandStatusCompleted,
				Event: "COMPLETED", Reply: staleReply},
			&driver.CommandCompletion{ID: cmds["done"].ID, Fence: 1, Status: driver.CommandStatusFailed,
				Event: "FAILED", Reply: doneReply},
			&driver.CommandCompletion{ID: uuid.New(), Fence: 1, Status: driver.CommandStatusCompleted, Event: "COMPLETED"},
		)
		require.ElementsMatch(t, []uuid.UUID{cmds["ok"].ID, cmds["failed"].ID, cmds["tsq"].ID,
			cmds["timedOut"].ID, cmds["retry"].ID, cmds["release"].ID}, applied)

		// outcome is the row a completion at t2 must leave. Whether the outcome entry is stored
		// (with the claim it ends) or rebuilt from the columns (a handler's COMPLETED or
		// FAILED), GetByID shows the claim, then the outcome, each once.
		outcome := func(name string, status driver.CommandStatus, attempt int, entry driver.AuditEntry) *driver.CommandRow {
			want := sentCommand(cmds[name], t0)
			want.Status, want.Attempt, want.Fence, want.WorkerID = status, attempt, 1, "worker-1"
			want.StartedAt, want.UpdatedAt = &t1, t2
			if status.Terminal() {
				want.CompletedAt = &t2
			}
			if status == driver.CommandStatusInTSQ {
				want.ParkedAt = &t2
			}
			entry.At, entry.From, entry.To = t2, driver.CommandStatusRunning, status
			want.Audit = append(want.Audit, claimedEntry(t1, 1, "worker-1"), entry)
			return want
		}

		want := outcome("ok", driver.CommandStatusCompleted, 1, driver.AuditEntry{Event: "COMPLETED", Attempt: 1})
		want.Result = json.RawMessage(`{"ok":true}`)
		requireCommand(t, want, get(t, b.exec, cmds["ok"].ID))
		requireCommand(t, completionReply(okReply, cmds["ok"].ID, t2), get(t, b.exec, okReply.ID))

		want = outcome("failed", driver.CommandStatusFailed, 1, driver.AuditEntry{Event: "FAILED", Attempt: 1, ErrorCode: "E_BAD", ErrorMessage: "bad input"})
		want.ErrorCode, want.ErrorMessage = "E_BAD", "bad input"
		requireCommand(t, want, get(t, b.exec, cmds["failed"].ID))

		want = outcome("tsq", driver.CommandStatusInTSQ, 1, driver.AuditEntry{Event: "MOVED_TO_TSQ", Attempt: 1, ErrorCode: "E_EXHAUSTED", ErrorMessage: "retries exhausted"})
		want.ErrorCode, want.ErrorMessage = "E_EXHAUSTED", "retries exhausted"
		requireCommand(t, want, get(t, b.exec, cmds["tsq"].ID))

		want = outcome("timedOut", driver.CommandStatusTimedOut, 1, driver.AuditEntry{Event: "TIMED_OUT", Attempt: 1, ErrorCode: "TIMEOUT"})
		want.ErrorCode = "TIMEOUT"
		requireCommand(t, want, get(t, b.exec, cmds["timedOut"].ID))
		requireCommand(t, completionReply(timedOutReply, cmds["timedOut"].ID, t2), get(t, b.exec, timedOutReply.ID))

		want = outcome("retry", driver.CommandStatusPending, 1, driver.AuditEntry{Event: "RETRY_SCHEDULED", Attempt: 1, ErrorCode: "E_TRANSIENT", ErrorMessage: "try later"})
		want.ErrorCode, want.ErrorMessage = "E_TRANSIENT", "try later"
		want.VisibleAt = t2.Add(30 * time.Second)
		requireCommand(t, want, get(t, b.exec, cmds["retry"].ID))

		// A release gives the attempt back; its audit entry names the attempt that was released.
		want = outcome("release", driver.CommandStatusPending, 0, driver.AuditEntry{Event: "RELEASED", Attempt: 1})
		want.VisibleAt = t2
		requireCommand(t, want, get(t, b.exec, cmds["release"].ID))

		stale := get(t, b.exec, cmds["stale"].ID)
		require.Equal(t, driver.CommandStatusRunning, stale.Status)
		requireTimePtr(t, t1.Add(time.Minute), stale.LeaseUntil, "lease_until")
		requireAudit(t, b.exec, cmds["stale"].ID, driver.AuditEntry{At: t0, Event: "SENT", To: driver.CommandStatusPending},
			claimedEntry(t1, 1, "worker-1"))
		requireNotFound(t, b.exec, staleReply.ID)
		want = outcome("done", driver.CommandStatusCompleted, 1, driver.AuditEntry{Event: "COMPLETED", Attempt: 1})
		want.UpdatedAt, want.CompletedAt, want.Audit[len(want.Audit)-1].At = t1, &t1, t1
		requireCommand(t, want, get(t, b.exec, cmds["done"].ID))
		requireNotFound(t, b.exec, doneReply.ID)

		// The released command is due at once, the retried one after its delay.
		require.Equal(t, []uuid.UUID{cmds["release"].ID}, ids(claim(t, b.exec, "q", 10, time.Minute, ptr(t2.Add(time.Second)))))
		t3 := t2.Add(31 * time.Second)
		retried := claim(t, b.exec, "q", 10, time.Minute, &t3)
		require.Equal(t, []uuid.UUID{cmds["retry"].ID}, ids(retried))
		require.Equal(t, 2, retried[0].Attempt)
		require.Equal(t, int64(2), retried[0].Fence)

		// A later success clears the previous error.
		require.Equal(t, []uuid.UUID{cmds["retry"].ID}, complete(t, b.exec, &t3, &driver.CommandCompletion{
			ID: cmds["retry"].ID, Fence: 2, Status: driver.CommandStatusCompleted, Event: "COMPLETED",
		}))
		got := get(t, b.exec, cmds["retry"].ID)
		require.Empty(t, got.ErrorCode)
		require.Empty(t, got.ErrorMessage)
		require.Empty(t, got.Result)
		requireTimePtr(t, t3, got.CompletedAt, "completed_at")
		require.Nil(t, got.LeaseUntil)
		requireAudit(t, b.exec, cmds["retry"].ID,
			driver.AuditEntry{At: t0, Event: "SENT", To: driver.CommandStatusPending},
			claimedEntry(t1, 1, "worker-1"),
			driver.AuditEntry{At: t2, Event: "RETRY_SCHEDULED", From: driver.CommandStatusRunning, To: driver.CommandStatusPending,
				Attempt: 1, ErrorCode: "E_TRANSIENT", ErrorMessage: "try later"},
			claimedEntry(t3, 2, "worker-1"),
			driver.AuditEntry{At: t3, Event: "COMPLETED", From: driver.CommandStatusRunning, To: driver.CommandStatusCompleted, Attempt: 2})
	})

	t.Run("FailedAfterReleaseAndRetry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newCommand("d", "q", "T")
		insert(t, b.exec, &t0, p)
		at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
		require.Len(t, claim(t, b.exec, "q", 1, time.Minute, ptr(at(1))), 1)
		require.Len(t, complete(t, b.exec, ptr(at(2)), &driver.CommandCompletion{
			ID: p.ID, Fence: 1, Status: driver.CommandStatusPending, Release: true, Event: "RELEASED",
		}), 1)
		rows := claim(t, b.exec, "q", 1, time.Minute, ptr(at(3)))
		require.Len(t, rows, 1)
		require.Equal(t, 1, rows[0].Attempt, "the released attempt is given back")
		require.Len(t, complete(t, b.exec, ptr(at(4)), &driver.CommandCompletion{
			ID: p.ID, Fence: 2, Status: driver.CommandStatusFailed, ErrorCode: "E_BAD", ErrorMessage: "bad", Event: "FAILED",
		}), 1)
		got := get(t, b.exec, p.ID)
		require.Equal(t, driver.CommandStatusFailed, got.Status)
		require.Nil(t, got.LeaseUntil)
		require.Nil(t, got.ParkedAt)
		requireAudit(t, b.exec, p.ID,
			driver.AuditEntry{At: t0, Event: "SENT", To: driver.CommandStatusPending},
			claimedEntry(at(1), 1, "worker-1"),
			driver.AuditEntry{At: at(2), Event: "RELEASED", From: driver.CommandStatusRunning, To: driver.CommandStatusPending, Attempt: 1},
			claimedEntry(at(3), 1, "worker-1"),
			driver.AuditEntry{At: at(4), Event: "FAILED", From: driver.CommandStatusRunning, To: driver.CommandStatusFailed,
				Attempt: 1, ErrorCode: "E_BAD", ErrorMessage: "bad"})
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		applied, err := b.exec.CommandCompleteMany(ctx, &driver.CommandCompleteManyParams{})
		require.NoError(t, err)
		require.Empty(t, applied)
	})

	t.Run("DatabaseClockWhenNowIsNil", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newCommand("d", "q", "T")
		insert(t, b.exec, nil, p)
		require.Len(t, claim(t, b.exec, "q", 1, time.Minute, nil), 1)
		require.Len(t, complete(t, b.exec, nil, &driver.CommandCompletion{
			ID: p.ID, Fence: 1, Status: driver.CommandStatusPending, RetryDelay: time.Hour, Event: "RETRY_SCHEDULED",
		}), 1)
		got := get(t, b.exec, p.ID)
		require.WithinDuration(t, time.Now().Add(time.Hour), got.VisibleAt, within)
		require.WithinDuration(t, time.Now(), got.UpdatedAt, within)
	})
}

func exerciseCommandOperatorAction(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	parkedAt := t0.Add(2 * time.Second)
	// inTSQ returns a command parked in the troubleshooting queue at parkedAt after one attempt.
	inTSQ := func(t *testing.T, exec driver.Executor) *driver.CommandInsertParams {
		t.Helper()
		p := newCommand("d", "q-"+uuid.NewString(), "T")
		insert(t, exec, &t0, p)
		require.Len(t, claim(t, exec, p.Queue, 1, time.Minute, ptr(t0.Add(time.Second))), 1)
		require.Len(t, complete(t, exec, &parkedAt, &driver.CommandCompletion{
			ID: p.ID, Fence: 1, Status: driver.CommandStatusInTSQ, ErrorCode: "E1", ErrorMessage: "m1", Event: "MOVED_TO_TSQ",
		}), 1)
		requireTimePtr(t, parkedAt, get(t, exec, p.ID).ParkedAt, "parked_at")
		require.Empty(t, claim(t, exec, p.Queue, 1, time.Minute, ptr(t0.Add(time.Hour))), "a parked command is not claimed")
		return p
	}
	// parkedAudit is the audit trail of a command returned by inTSQ.
	parkedAudit := []driver.AuditEntry{
		{At: t0, Event: "SENT", To: driver.CommandStatusPending},
		claimedEntry(t0.Add(time.Second), 1, "worker-1"),
		{At: parkedAt, Event: "MOVED_TO_TSQ", From: driver.CommandStatusRunning, To: driver.CommandStatusInTSQ,
			Attempt: 1, ErrorCode: "E1", ErrorMessage: "m1"},
	}
	fromTSQ := []driver.CommandStatus{driver.CommandStatusInTSQ}
	t3 := t0.Add(time.Hour)

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: uuid.New(), FromStatuses: fromTSQ, ToStatus: driver.CommandStatusPending, Event: "OPERATOR_RETRY", Actor: "alice",
		})
		require.ErrorIs(t, err, driver.ErrNotFound)
	})

	t.Run("ConflictChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newCommand("d", "q", "T")
		insert(t, b.exec, &t0, p)
		reply := newCommand("d", "replies", "Reply")
		for _, from := range [][]driver.CommandStatus{fromTSQ, nil, {}} {
			_, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
				ID: p.ID, FromStatuses: from, ToStatus: driver.CommandStatusCancelled, Event: "OPERATOR_CANCEL",
				Actor: "alice", Reply: reply, Now: &t3,
			})
			require.ErrorIs(t, err, driver.ErrConflict, "from %v", from)
		}
		requireCommand(t, sentCommand(p, t0), get(t, b.exec, p.ID))
		requireNotFound(t, b.exec, reply.ID)
	})

	t.Run("RetryWithFreshAttempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := inTSQ(t, b.exec)
		got, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: p.ID, FromStatuses: fromTSQ, ToStatus: driver.CommandStatusPending, Event: "OPERATOR_RETRY",
			Actor: "alice", Reason: "fixed upstream", ResetAttempts: true, Now: &t3,
		})
		require.NoError(t, err)
		require.Nil(t, got.Audit)
		require.Equal(t, driver.CommandStatusPending, got.Status)
		require.Equal(t, 0, got.Attempt)
		require.Equal(t, int64(1), got.Fence)
		requireTime(t, t3, got.VisibleAt, "visible_at")
		requireTime(t, t3, got.UpdatedAt, "updated_at")
		require.Nil(t, got.LeaseUntil)
		require.Nil(t, got.CompletedAt)
		require.Nil(t, got.ParkedAt, "leaving the troubleshooting queue clears parked_at")
		require.Equal(t, "E1", got.ErrorCode, "an action without an error keeps the last one")
		require.Equal(t, "m1", got.ErrorMessage)
		require.Equal(t, driver.AuditEntry{
			At: t3, Event: "OPERATOR_RETRY", From: driver.CommandStatusInTSQ, To: driver.CommandStatusPending,
			Attempt: 1, Actor: "alice", Reason: "fixed upstream",
		}, lastAudit(t, b.exec, p.ID))
		fresh := get(t, b.exec, p.ID)
		fresh.Audit = nil
		requireCommand(t, fresh, got)

		// Claimable again at once, with a new attempt budget and a higher fence.
		rows := claim(t, b.exec, p.Queue, 1, time.Minute, &t3)
		require.Len(t, rows, 1)
		require.Equal(t, 1, rows[0].Attempt)
		require.Equal(t, int64(2), rows[0].Fence)
		requireAudit(t, b.exec, p.ID, append(parkedAudit,
			driver.AuditEntry{At: t3, Event: "OPERATOR_RETRY", From: driver.CommandStatusInTSQ, To: driver.CommandStatusPending,
				Attempt: 1, Actor: "alice", Reason: "fixed upstream"},
			claimedEntry(t3, 1, "worker-1"))...)
	})

	t.Run("ParkedAtKeptWhileParked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := inTSQ(t, b.exec)
		park := func(from driver.CommandStatus, now time.Time) *driver.CommandRow {
			t.Helper()
			got, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
				ID: p.ID, FromStatuses: []driver.CommandStatus{from}, ToStatus: driver.CommandStatusInTSQ,
				Event: "OPERATOR_PARK", Actor: "alice", Now: &now,
			})
			require.NoError(t, err)
			return got
		}
		// Parked again while parked: it has waited since it was first parked.
		requireTimePtr(t, parkedAt, park(driver.CommandStatusInTSQ, t3).ParkedAt, "parked_at kept")

		_, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: p.ID, FromStatuses: fromTSQ, ToStatus: driver.CommandStatusPending, Event: "OPERATOR_RETRY", Actor: "alice", Now: &t3,
		})
		require.NoError(t, err)
		require.Nil(t, get(t, b.exec, p.ID).ParkedAt)

		t4 := t3.Add(time.Minute)
		requireTimePtr(t, t4, park(driver.CommandStatusPending, t4).ParkedAt, "parked again from PENDING")
		requireTimePtr(t, t4, get(t, b.exec, p.ID).ParkedAt, "parked_at stored")
		require.Empty(t, claim(t, b.exec, p.Queue, 1, time.Minute, ptr(t4.Add(time.Hour))))
	})

	t.Run("RetryKeepsAttempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := inTSQ(t, b.exec)
		got, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: p.ID, FromStatuses: fromTSQ, ToStatus: driver.CommandStatusPending, Event: "OPERATOR_RETRY", Actor: "alice", Now: &t3,
		})
		require.NoError(t, err)
		require.Equal(t, 1, got.Attempt)
		entry := lastAudit(t, b.exec, p.ID)
		require.Empty(t, entry.Reason)
	})

	t.Run("CompleteWithResultAndReply", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := inTSQ(t, b.exec)
		reply := newCommand("d", "replies", "Reply")
		reply.Kind, reply.Status, reply.CorrelationID, reply.Actor = driver.CommandKindReply, driver.CommandStatusCompleted, p.ID, "alice"
		// TSQ_COMPLETE is the engine's event: driver.CurrentAudit knows that such a COMPLETED
		// is not a handler's, whose outcome it would rebuild.
		got, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: p.ID, FromStatuses: []driver.CommandStatus{driver.CommandStatusInTSQ, driver.CommandStatusPending},
			ToStatus: driver.CommandStatusCompleted, Event: "TSQ_COMPLETE", Actor: "alice",
			Result: json.RawMessage(`{"manual":true}`), Reply: reply, Now: &t3,
		})
		require.NoError(t, err)
		require.Equal(t, driver.CommandStatusCompleted, got.Status)
		require.JSONEq(t, `{"manual":true}`, string(got.Result))
		requireTimePtr(t, t3, got.CompletedAt, "completed_at")
		require.Nil(t, got.ParkedAt)
		requireTime(t, t0, got.VisibleAt, "visible_at stays")
		requireCommand(t, sentCommand(reply, t3), get(t, b.exec, reply.ID))
		requireAudit(t, b.exec, p.ID, append(parkedAudit, driver.AuditEntry{
			At: t3, Event: "TSQ_COMPLETE", From: driver.CommandStatusInTSQ, To: driver.CommandStatusCompleted,
			Attempt: 1, Actor: "alice",
		})...)

		// Terminal now: a second action conflicts.
		_, err = b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: p.ID, FromStatuses: fromTSQ, ToStatus: driver.CommandStatusCancelled, Event: "OPERATOR_CANCEL", Actor: "alice", Now: &t3,
		})
		require.ErrorIs(t, err, driver.ErrConflict)
	})

	t.Run("CancelOverwritesError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := inTSQ(t, b.exec)
		got, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: p.ID, FromStatuses: fromTSQ, ToStatus: driver.CommandStatusCancelled, Event: "OPERATOR_CANCEL",
			Actor: "bob", Reason: "duplicate", ErrorCode: "CANCELLED", ErrorMessage: "cancelled by operator", Now: &t3,
		})
		require.NoError(t, err)
		require.Equal(t, driver.CommandStatusCancelled, got.Status)
		require.Equal(t, "CANCELLED", got.ErrorCode)
		require.Equal(t, "cancelled by operator", got.ErrorMessage)
		require.Empty(t, got.Result)
		requireTimePtr(t, t3, got.CompletedAt, "completed_at")
		require.Nil(t, got.ParkedAt)
		require.Equal(t, driver.AuditEntry{
			At: t3, Event: "OPERATOR_CANCEL", From: driver.CommandStatusInTSQ, To: driver.CommandStatusCancelled,
			Attempt: 1, Actor: "bob", Reason: "duplicate", ErrorCode: "CANCELLED", ErrorMessage: "cancelled by operator",
		}, lastAudit(t, b.exec, p.ID))
	})

	t.Run("WatchdogTimesOutRunning", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newCommand("d", "q", "T")
		insert(t, b.exec, &t0, p)
		require.Len(t, claim(t, b.exec, "q", 1, time.Minute, &t0), 1)
		got, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: p.ID, FromStatuses: []driver.CommandStatus{driver.CommandStatusRunning}, ToStatus: driver.CommandStatusTimedOut,
			Event: "DEADLINE_EXCEEDED", Actor: "watchdog", ErrorCode: "TIMEOUT", Now: &t3,
		})
		require.NoError(t, err)
		require.Equal(t, driver.CommandStatusTimedOut, got.Status)
		require.Nil(t, got.LeaseUntil)
		require.Equal(t, "worker-1", got.WorkerID)
		// The claim is void: its outcome no longer applies.
		require.Empty(t, complete(t, b.exec, &t3, &driver.CommandCompletion{ID: p.ID, Fence: 1, Status: driver.CommandStatusCompleted, Event: "COMPLETED"}))
	})

	t.Run("DatabaseClockWhenNowIsNil", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := inTSQ(t, b.exec)
		got, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: p.ID, FromStatuses: fromTSQ, ToStatus: driver.CommandStatusPending, Event: "OPERATOR_RETRY", Actor: "alice",
		})
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), got.VisibleAt, within)
		require.WithinDuration(t, time.Now(), lastAudit(t, b.exec, p.ID).At, within)
	})
}
