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

func newOutboxMessage(transport, topic, key string) *driver.OutboxInsertParams {
	id := uuid.Must(uuid.NewV7()).String()
	return &driver.OutboxInsertParams{
		Category: driver.OutboxCategoryEvent, Transport: transport, Topic: topic, Key: key,
		Type: "CommandCompleted", MessageID: id, Payload: json.RawMessage(fmt.Sprintf(`{"messageId":%q}`, id)),
		Headers: map[string]string{"correlationId": "c-1"},
	}
}

func outboxInsert(t *testing.T, exec driver.Executor, now *time.Time, msgs ...*driver.OutboxInsertParams) []int64 {
	t.Helper()
	ids, err := exec.OutboxInsertMany(context.Background(), &driver.OutboxInsertManyParams{Messages: msgs, Now: now})
	require.NoError(t, err)
	require.Len(t, ids, len(msgs))
	for i := 1; i < len(ids); i++ {
		require.Greater(t, ids[i], ids[i-1], "ids grow in input order")
	}
	return ids
}

// outboxClaim claims until it gets want messages or a deadline passes. On PostgreSQL a claim only
// sees rows below the oldest running transaction of the whole server, which a concurrent test
// may hold back for a moment.
func outboxClaim(t *testing.T, exec driver.Executor, params driver.OutboxClaimParams, want int) []*driver.OutboxRow {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var got []*driver.OutboxRow
	for {
		rows, err := exec.OutboxClaim(context.Background(), &params)
		require.NoError(t, err)
		got = append(got, rows...)
		if len(got) >= want || time.Now().After(deadline) {
			require.Len(t, got, want)
			return got
		}
		time.Sleep(20 * time.Millisecond) // polling the horizon, not waiting for correctness
	}
}

func outboxIDs(rows []*driver.OutboxRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func exerciseOutbox(t *testing.T, setup setupFunc) {
	ctx := context.Background()
	lease := time.Minute

	t.Run("InsertClaimPublish", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, c := newOutboxMessage("kafka", "events.Fx", "k1"), newOutboxMessage("kafka", "events.Fx", "")
		amqp := newOutboxMessage("amqp", "APP.CMD.FX.BookFx.Q", "k9")
		amqp.Category = driver.OutboxCategoryCommand
		ids := outboxInsert(t, b.exec, &t0, a, c, amqp)

		rows := outboxClaim(t, b.exec, driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 10, Lease: lease, RelayID: "r1", Now: &t0}, 2)
		require.Equal(t, ids[:2], outboxIDs(rows), "publication order")
		got := rows[0]
		require.Equal(t, driver.OutboxCategoryEvent, got.Category)
		require.Equal(t, "kafka", got.Transport)
		require.Equal(t, "events.Fx", got.Topic)
		require.Equal(t, "k1", got.Key)
		require.Equal(t, a.MessageID, got.MessageID)
		require.Equal(t, "CommandCompleted", got.Type)
		require.JSONEq(t, string(a.Payload), string(got.Payload))
		require.Equal(t, a.Headers, got.Headers)
		require.Equal(t, driver.OutboxStatusNew, got.Status)
		require.Equal(t, 1, got.Attempts)
		require.Equal(t, "r1", got.LockedBy)
		requireTimePtr(t, t0.Add(lease), got.LockedUntil, "locked_until")
		requireTime(t, t0, got.CreatedAt, "created_at")
		require.Empty(t, rows[1].Key)

		// Leased: nobody else takes them until the lease ends.
		none, err := b.exec.OutboxClaim(ctx, &driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 10, Lease: lease, RelayID: "r2", Now: &t0})
		require.NoError(t, err)
		require.Empty(t, none)

		n, err := b.exec.OutboxMarkPublished(ctx, &driver.OutboxMarkPublishedParams{IDs: ids[:2], Now: ptr(t0.Add(time.Second))})
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		n, err = b.exec.OutboxMarkPublished(ctx, &driver.OutboxMarkPublishedParams{IDs: ids[:2], Now: ptr(t0.Add(time.Second))})
		require.NoError(t, err)
		require.Zero(t, n, "published once")

		listed, err := b.exec.OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusPublished}})
		require.NoError(t, err)
		require.Equal(t, []int64{ids[1], ids[0]}, outboxIDs(listed), "newest first")
		requireTimePtr(t, t0.Add(time.Second), listed[0].PublishedAt, "published_at")
		listed, err = b.exec.OutboxList(ctx, &driver.OutboxListParams{Transport: "amqp"})
		require.NoError(t, err)
		require.Equal(t, []int64{ids[2]}, outboxIDs(listed))

		backlog, err := b.exec.OutboxBacklog(ctx)
		require.NoError(t, err)
		require.Len(t, backlog, 1)
		require.Equal(t, "amqp", backlog[0].Transport)
		require.Equal(t, driver.OutboxCategoryCommand, backlog[0].Category)
		require.Equal(t, int64(1), backlog[0].New)
		requireTimePtr(t, t0, backlog[0].OldestNew, "oldest")

		deleted, err := b.exec.OutboxDeletePublished(ctx, t0.Add(2*time.Second), 1)
		require.NoError(t, err)
		require.Equal(t, int64(1), deleted, "at most max")
		deleted, err = b.exec.OutboxDeletePublished(ctx, t0.Add(2*time.Second), 10)
		require.NoError(t, err)
		require.Equal(t, int64(1), deleted)
	})

	t.Run("OneKeyInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k1a, k1b, k1c := newOutboxMessage("kafka", "t", "k1"), newOutboxMessage("kafka", "t", "k1"), newOutboxMessage("kafka", "t", "k1")
		k2 := newOutboxMessage("kafka", "t", "k2")
		ids := outboxInsert(t, b.exec, &t0, k1a, k1b, k2, k1c)
		claimAt := func(relay string, at time.Time, want int) []int64 {
			return outboxIDs(outboxClaim(t, b.exec, driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 10, Lease: lease, RelayID: relay, Now: &at}, want))
		}
		// A key's run of due messages comes in one claim, in order.
		require.Equal(t, ids, claimAt("r1", t0, 4))
		// Another relay finds k1 held by its leased head.
		require.Empty(t, claimAt("r2", t0, 0))

		// The head fails: it backs off, the rest of its run (not sent) waits with it, and k2 is
		// published.
		n, err := b.exec.OutboxMarkFailed(ctx, &driver.OutboxMarkFailedParams{RelayID: "r1", Now: &t0, Failures: []*driver.OutboxFailure{
			{ID: ids[0], Error: "broker down", RetryDelay: 10 * time.Second},
			{ID: ids[1], Error: "an earlier message of its key failed", RetryDelay: 10 * time.Second, Unattempted: true},
			{ID: ids[3], Error: "an earlier message of its key failed", RetryDelay: 10 * time.Second, Unattempted: true},
		}})
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		_, err = b.exec.OutboxMarkPublished(ctx, &driver.OutboxMarkPublishedParams{IDs: []int64{ids[2]}, Now: &t0})
		require.NoError(t, err)
		require.Empty(t, claimAt("r2", t0.Add(5*time.Second), 0))
		got := claimAt("r2", t0.Add(10*time.Second), 3)
		require.Equal(t, []int64{ids[0], ids[1], ids[3]}, got)
		rows, err := b.exec.OutboxList(ctx, &driver.OutboxListParams{Limit: 10})
		require.NoError(t, err)
		byID := map[int64]*driver.OutboxRow{}
		for _, r := range rows {
			byID[r.ID] = r
		}
		require.Equal(t, 2, byID[ids[0]].Attempts)
		require.Equal(t, 1, byID[ids[1]].Attempts, "a claim that sent nothing is no attempt")
		require.Equal(t, "broker down", byID[ids[0]].LastError)

		// A failure reported by a relay that lost the lease changes nothing.
		n, err = b.exec.OutboxMarkFailed(ctx, &driver.OutboxMarkFailedParams{RelayID: "r1", Now: &t0, Failures: []*driver.OutboxFailure{
			{ID: ids[0], Error: "late", RetryDelay: time.Hour},
		}})
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("ClaimBelowStopsEachRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := outboxInsert(t, b.exec, &t0, newOutboxMessage("kafka", "events", "k"), newOutboxMessage("kafka", "events", "k"),
			newOutboxMessage("kafka", "events", ""), newOutboxMessage("kafka", "events", "k"))
		got := outboxIDs(outboxClaim(t, b.exec, driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 10, Lease: lease, RelayID: "r",
			Now: &t0, Below: ids[1]}, 1))
		require.Equal(t, ids[:1], got, "the run of k stops at ids[1]; ids[2] is above too")
		got = outboxIDs(outboxClaim(t, b.exec, driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 10, Lease: lease, RelayID: "r",
			Now: &t0, Published: ids[:1]}, 3))
		require.Equal(t, ids[1:], got)
	})

	t.Run("ClaimMarksWhatWasPublished", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := outboxInsert(t, b.exec, &t0, newOutboxMessage("kafka", "t", "k"), newOutboxMessage("kafka", "t", "k"), newOutboxMessage("kafka", "t", "j"))
		claim := func(published []int64, max, want int) []int64 {
			return outboxIDs(outboxClaim(t, b.exec, driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: max, Lease: lease, RelayID: "r",
				Now: &t0, Published: published}, want))
		}
		require.Equal(t, ids[:1], claim(nil, 1, 1))
		// The claim marks the first published and takes its key's next message with the rest,
		// in the same call: the published message holds nothing back any more.
		require.Equal(t, ids[1:], claim(ids[:1], 10, 2))
		// With nothing to claim (Max 0), the published are still marked.
		require.Empty(t, claim(ids[1:], 0, 0))
		rows, err := b.exec.OutboxList(ctx, &driver.OutboxListParams{Limit: 10})
		require.NoError(t, err)
		require.Len(t, rows, 3)
		for _, r := range rows {
			require.Equal(t, driver.OutboxStatusPublished, r.Status, "message %d", r.ID)
			require.Nil(t, r.LockedUntil)
			require.NotNil(t, r.PublishedAt)
		}
	})

	t.Run("RunStopsAtUndueMessage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, later, c := newOutboxMessage("kafka", "t", "k"), newOutboxMessage("kafka", "t", "k"), newOutboxMessage("kafka", "t", "k")
		later.NextAt = ptr(t0.Add(time.Minute))
		other := newOutboxMessage("amqp", "q", "k")
		ids := outboxInsert(t, b.exec, &t0, a, later, c)
		claim := func(at time.Time, want int) []int64 {
			return outboxIDs(outboxClaim(t, b.exec, driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 10, Lease: lease, RelayID: "r", Now: &at}, want))
		}
		require.Equal(t, ids[:1], claim(t0, 1), "the run stops before a message that is not due")
		_, err := b.exec.OutboxMarkPublished(ctx, &driver.OutboxMarkPublishedParams{IDs: ids[:1], Now: &t0})
		require.NoError(t, err)
		require.Empty(t, claim(t0, 0))
		require.Equal(t, ids[1:], claim(t0.Add(time.Minute), 2))
		_, err = b.exec.OutboxMarkPublished(ctx, &driver.OutboxMarkPublishedParams{IDs: ids[1:], Now: &t0})
		require.NoError(t, err)
		// Another transport's message holds its key's later messages back from this relay.
		more := outboxInsert(t, b.exec, &t0, other, newOutboxMessage("kafka", "t", "k"))
		require.Empty(t, claim(t0.Add(time.Minute), 0))
		_, err = b.exec.OutboxMarkPublished(ctx, &driver.OutboxMarkPublishedParams{IDs: more[:1], Now: &t0})
		require.NoError(t, err)
		require.Equal(t, more[1:], claim(t0.Add(time.Minute), 1))
	})

	t.Run("BatchLimitKeepsOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var msgs []*driver.OutboxInsertParams
		for i := 0; i < 5; i++ {
			msgs = append(msgs, newOutboxMessage("kafka", "t", "k"))
		}
		ids := outboxInsert(t, b.exec, &t0, msgs...)
		got := outboxIDs(outboxClaim(t, b.exec, driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 3, Lease: lease, RelayID: "r", Now: &t0}, 3))
		require.Equal(t, ids[:3], got, "the first Max of the run")
	})

	t.Run("GiveUpAndExpiredLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m, next := newOutboxMessage("amqp", "q", "k"), newOutboxMessage("amqp", "q", "k")
		ids := outboxInsert(t, b.exec, &t0, m, next)
		outboxClaim(t, b.exec, driver.OutboxClaimParams{Transports: []string{"amqp"}, Max: 10, Lease: lease, RelayID: "r1", Now: &t0}, 2)
		// The relay died: its lease runs out and another relay takes the messages again.
		again := outboxClaim(t, b.exec, driver.OutboxClaimParams{Transports: []string{"amqp"}, Max: 10, Lease: lease, RelayID: "r2", Now: ptr(t0.Add(lease))}, 2)
		require.Equal(t, ids[0], again[0].ID)
		require.Equal(t, 2, again[0].Attempts)
		n, err := b.exec.OutboxMarkFailed(ctx, &driver.OutboxMarkFailedParams{RelayID: "r2", Now: &t0, Failures: []*driver.OutboxFailure{
			{ID: ids[0], Error: "message too large", GiveUp: true},
			{ID: ids[1], Error: "an earlier message of its key failed", Unattempted: true},
		}})
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		// A FAILED message no longer holds its key.
		require.Equal(t, ids[1], outboxClaim(t, b.exec, driver.OutboxClaimParams{Transports: []string{"amqp"}, Max: 10, Lease: lease, RelayID: "r2", Now: ptr(t0.Add(lease))}, 1)[0].ID)
		backlog, err := b.exec.OutboxBacklog(ctx)
		require.NoError(t, err)
		require.Len(t, backlog, 1)
		require.Equal(t, int64(1), backlog[0].Failed)

		// An operator resends the FAILED message: NEW again, attempts reset, due at once.
		failed, err := b.exec.OutboxGet(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, driver.OutboxStatusFailed, failed.Status)
		require.Equal(t, "message too large", failed.LastError)
		resent, err := b.exec.OutboxResend(ctx, &driver.OutboxResendParams{IDs: []int64{ids[0], ids[1]}, Now: ptr(t0.Add(lease))})
		require.NoError(t, err)
		require.Equal(t, []int64{ids[0]}, resent, "only FAILED messages are resent")
		back, err := b.exec.OutboxGet(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, driver.OutboxStatusNew, back.Status)
		require.Zero(t, back.Attempts)
		_, err = b.exec.OutboxGet(ctx, 1<<40)
		require.ErrorIs(t, err, driver.ErrNotFound)
	})

	t.Run("ScheduledAndRolledBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		later := newOutboxMessage("kafka", "t", "")
		later.NextAt = ptr(t0.Add(time.Minute))
		outboxInsert(t, b.exec, &t0, later)
		tx, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		outboxInsert(t, tx, &t0, newOutboxMessage("kafka", "t", ""))
		require.NoError(t, tx.Rollback(ctx))
		none, err := b.exec.OutboxClaim(ctx, &driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 10, Lease: lease, RelayID: "r", Now: &t0})
		require.NoError(t, err)
		require.Empty(t, none)
		outboxClaim(t, b.exec, driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 10, Lease: lease, RelayID: "r", Now: ptr(t0.Add(time.Minute))}, 1)
	})
}

func exerciseInbox(t *testing.T, setup setupFunc) {
	ctx := context.Background()
	t.Run("FirstWriteWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, err := b.exec.InboxInsert(ctx, &driver.InboxInsertParams{MessageID: "m1", Handler: "h", Now: &t0})
		require.NoError(t, err)
		require.True(t, first)
		again, err := b.exec.InboxInsert(ctx, &driver.InboxInsertParams{MessageID: "m1", Handler: "h", Now: &t0})
		require.NoError(t, err)
		require.False(t, again, "a duplicate")
		other, err := b.exec.InboxInsert(ctx, &driver.InboxInsertParams{MessageID: "m1", Handler: "h2", Now: ptr(t0.Add(time.Hour))})
		require.NoError(t, err)
		require.True(t, other, "another handler processes the same message once too")
		exists, err := b.exec.InboxExists(ctx, "m1", "h")
		require.NoError(t, err)
		require.True(t, exists)
		exists, err = b.exec.InboxExists(ctx, "m2", "h")
		require.NoError(t, err)
		require.False(t, exists)

		// Rolled back with the handler's effects: the message was not processed.
		tx, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		first, err = tx.InboxInsert(ctx, &driver.InboxInsertParams{MessageID: "m3", Handler: "h", Now: &t0})
		require.NoError(t, err)
		require.True(t, first)
		require.NoError(t, tx.Rollback(ctx))
		exists, err = b.exec.InboxExists(ctx, "m3", "h")
		require.NoError(t, err)
		require.False(t, exists)

		deleted, err := b.exec.InboxDeleteBefore(ctx, t0.Add(time.Minute), 10)
		require.NoError(t, err)
		require.Equal(t, int64(1), deleted)
		exists, err = b.exec.InboxExists(ctx, "m1", "h2")
		require.NoError(t, err)
		require.True(t, exists)
	})

	t.Run("WithCommandsOnlyTheFirstTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		reply := func() *driver.CommandInsertManyParams {
			return &driver.CommandInsertManyParams{Now: &t0, Commands: []*driver.CommandInsertParams{{
				ID: uuid.New(), Kind: driver.CommandKindReply, Domain: "payments", Queue: "payments.reply", Type: "Book",
				Data: []byte(`{"outcome":"SUCCESS"}`), MaxAttempts: 3}}}
		}
		msg := &driver.InboxInsertParams{MessageID: "r1", Handler: "replies", Now: &t0}
		firstReply := reply()
		first, err := b.exec.InboxInsertWithCommands(ctx, msg, firstReply)
		require.NoError(t, err)
		require.True(t, first)
		row, err := b.exec.CommandGetByID(ctx, firstReply.Commands[0].ID)
		require.NoError(t, err, "the reply row is written with the first record")
		require.Equal(t, driver.CommandStatusPending, row.Status)
		require.Equal(t, "payments.reply", row.Queue)

		again := reply()
		first, err = b.exec.InboxInsertWithCommands(ctx, msg, again)
		require.NoError(t, err)
		require.False(t, first, "a redelivery")
		_, err = b.exec.CommandGetByID(ctx, again.Commands[0].ID)
		require.ErrorIs(t, err, driver.ErrNotFound, "a redelivery inserts nothing")

		// Without commands it records the message alone.
		first, err = b.exec.InboxInsertWithCommands(ctx, &driver.InboxInsertParams{MessageID: "r2", Handler: "replies"}, nil)
		require.NoError(t, err)
		require.True(t, first)
		exists, err := b.exec.InboxExists(ctx, "r2", "replies")
		require.NoError(t, err)
		require.True(t, exists)
	})
}

func exerciseDLQ(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("ParkedWithTheMoveAndRemovedOnTheWayOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, other := newCommand("fx", "fx__commands", "BookFx"), newCommand("risk", "risk__commands", "Book")
		p.TenantID = "acme"
		insert(t, b.exec, &t0, p, other)
		t1 := t0.Add(time.Second)
		require.Len(t, claim(t, b.exec, "fx__commands", 1, time.Minute, &t1), 1)
		require.Len(t, claim(t, b.exec, "risk__commands", 1, time.Minute, &t1), 1)
		complete(t, b.exec, &t1,
			&driver.CommandCompletion{ID: p.ID, Fence: 1, Status: driver.CommandStatusInTSQ, Event: "MOVED_TO_TSQ",
				ErrorCode: "RETRIES_EXHAUSTED", ErrorMessage: "attempt 1 of 1 failed"},
			&driver.CommandCompletion{ID: other.ID, Fence: 1, Status: driver.CommandStatusInTSQ, Event: "MOVED_TO_TSQ",
				ErrorCode: "PERMANENT_FAILURE"})

		d, err := b.exec.DLQGet(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, p.ID, d.CommandID)
		requireTime(t, t1, d.ParkedAt, "parked_at")
		require.Equal(t, "worker-1", d.ParkedBy)
		require.Equal(t, 1, d.Attempts)
		require.Equal(t, "RETRIES_EXHAUSTED: attempt 1 of 1 failed", d.Error)
		require.Equal(t, driver.CommandStatusInTSQ, d.Command.Status)
		require.Equal(t, "fx", d.Command.Domain)

		list, err := b.exec.DLQList(ctx, &driver.DLQListParams{})
		require.NoError(t, err)
		require.Len(t, list, 2)
		list, err = b.exec.DLQList(ctx, &driver.DLQListParams{Domain: "fx", Type: "BookFx", TenantID: "acme"})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, p.ID, list[0].CommandID)
		// Paging: both were parked at t1, so the command id orders them; After resumes past the
		// last entry seen.
		all, err := b.exec.DLQList(ctx, &driver.DLQListParams{})
		require.NoError(t, err)
		require.Len(t, all, 2)
		require.Greater(t, all[0].CommandID.String(), all[1].CommandID.String())
		first, err := b.exec.DLQList(ctx, &driver.DLQListParams{Limit: 1})
		require.NoError(t, err)
		require.Len(t, first, 1)
		require.Equal(t, all[0].CommandID, first[0].CommandID)
		next, err := b.exec.DLQList(ctx, &driver.DLQListParams{Limit: 1, After: &driver.DLQCursor{ParkedAt: first[0].ParkedAt, CommandID: first[0].CommandID}})
		require.NoError(t, err)
		require.Len(t, next, 1)
		require.Equal(t, all[1].CommandID, next[0].CommandID)
		last, err := b.exec.DLQList(ctx, &driver.DLQListParams{After: &driver.DLQCursor{ParkedAt: next[0].ParkedAt, CommandID: next[0].CommandID}})
		require.NoError(t, err)
		require.Empty(t, last)
		depths, err := b.exec.DLQDepths(ctx)
		require.NoError(t, err)
		require.Equal(t, []*driver.DLQDepth{{Domain: "fx", Count: 1}, {Domain: "risk", Count: 1}}, depths)

		// Resubmitted: the record goes with the command's move out of the troubleshooting queue.
		_, err = b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: p.ID, FromStatuses: []driver.CommandStatus{driver.CommandStatusInTSQ}, ToStatus: driver.CommandStatusPending,
			Event: "DLQ_RESUBMIT", Actor: "alice", Reason: "fixed", ResetAttempts: true, Now: &t1,
		})
		require.NoError(t, err)
		_, err = b.exec.DLQGet(ctx, p.ID)
		require.ErrorIs(t, err, driver.ErrNotFound)

		// An operator parking a command records who did.
		_, err = b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: p.ID, FromStatuses: []driver.CommandStatus{driver.CommandStatusPending}, ToStatus: driver.CommandStatusInTSQ,
			Event: "PARKED", Actor: "bob", Reason: "hold", ErrorCode: "HELD", Now: &t1,
		})
		require.NoError(t, err)
		d, err = b.exec.DLQGet(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, "bob", d.ParkedBy)
		require.Equal(t, 0, d.Attempts)

		// A rejected outcome parks nothing.
		_, err = b.exec.DLQGet(ctx, uuid.New())
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
}

func exerciseCommandDelivery(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("ClaimByID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, scheduled := newCommand("fx", "fx__commands", "BookFx"), newCommand("fx", "fx__commands", "BookFx")
		scheduled.VisibleAt = ptr(t0.Add(time.Hour))
		insert(t, b.exec, &t0, p, scheduled)
		t1 := t0.Add(time.Second)
		claimByID := func(id uuid.UUID, at time.Time) (*driver.CommandRow, error) {
			return b.exec.CommandClaimByID(ctx, &driver.CommandClaimByIDParams{ID: id, Lease: time.Minute, WorkerID: "amqp-1", Now: &at})
		}
		row, err := claimByID(p.ID, t1)
		require.NoError(t, err)
		require.Equal(t, driver.CommandStatusRunning, row.Status)
		require.Equal(t, 1, row.Attempt)
		require.Equal(t, int64(1), row.Fence)
		require.Equal(t, "amqp-1", row.WorkerID)
		requireTimePtr(t, t1.Add(time.Minute), row.LeaseUntil, "lease_until")

		_, err = claimByID(p.ID, t1)
		require.ErrorIs(t, err, driver.ErrConflict, "held by a live lease")
		_, err = claimByID(scheduled.ID, t1)
		require.ErrorIs(t, err, driver.ErrConflict, "not yet due")
		_, err = claimByID(uuid.New(), t1)
		require.ErrorIs(t, err, driver.ErrNotFound)

		// A delivery whose message the consumer already processed claims nothing.
		dup := newCommand("fx", "fx__commands", "BookFx")
		insert(t, b.exec, &t0, dup)
		_, err = b.exec.InboxInsert(ctx, &driver.InboxInsertParams{MessageID: "m-dup", Handler: "amqp"})
		require.NoError(t, err)
		withInbox := func(message string) (*driver.CommandRow, error) {
			return b.exec.CommandClaimByID(ctx, &driver.CommandClaimByIDParams{ID: dup.ID, Lease: time.Minute, WorkerID: "amqp-1", Now: &t1,
				Inbox: &driver.InboxInsertParams{MessageID: message, Handler: "amqp"}})
		}
		_, err = withInbox("m-dup")
		require.ErrorIs(t, err, driver.ErrDuplicate)
		row, err = b.exec.CommandGetByID(ctx, dup.ID)
		require.NoError(t, err)
		require.Equal(t, driver.CommandStatusPending, row.Status, "a duplicate claims nothing")
		row, err = withInbox("m-new")
		require.NoError(t, err, "another message of the same command claims it")
		require.Equal(t, driver.CommandStatusRunning, row.Status)

		t2 := t1.Add(time.Minute)
		row, err = claimByID(p.ID, t2)
		require.NoError(t, err, "the lease expired")
		require.Equal(t, 2, row.Attempt)
		require.Equal(t, int64(2), row.Fence)
		require.Equal(t, []uuid.UUID{p.ID}, complete(t, b.exec, &t2, &driver.CommandCompletion{
			ID: p.ID, Fence: 2, Status: driver.CommandStatusCompleted, Event: "COMPLETED"}))
		_, err = claimByID(p.ID, t2.Add(time.Hour))
		require.ErrorIs(t, err, driver.ErrConflict, "finished")
	})

	t.Run("ListExpired", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		leased, pastDeadline, fresh, otherQueue := newCommand("fx", "fx__commands", "A"), newCommand("fx", "fx__commands", "B"),
			newCommand("fx", "fx__commands", "C"), newCommand("risk", "risk__commands", "D")
		pastDeadline.DeadlineAt = ptr(t0.Add(30 * time.Second))
		insert(t, b.exec, &t0, leased, pastDeadline, fresh, otherQueue)
		_, err := b.exec.CommandClaimByID(ctx, &driver.CommandClaimByIDParams{ID: leased.ID, Lease: time.Minute, WorkerID: "w", Now: &t0})
		require.NoError(t, err)
		_, err = b.exec.CommandClaimByID(ctx, &driver.CommandClaimByIDParams{ID: otherQueue.ID, Lease: time.Second, WorkerID: "w", Now: &t0})
		require.NoError(t, err)
		list := func(at time.Time) []uuid.UUID {
			rows, err := b.exec.CommandListExpired(ctx, &driver.CommandListExpiredParams{Queues: []string{"fx__commands"}, Max: 10, Now: &at})
			require.NoError(t, err)
			return ids(rows)
		}
		require.Empty(t, list(t0))
		require.Equal(t, []uuid.UUID{pastDeadline.ID}, list(t0.Add(30*time.Second)))
		require.ElementsMatch(t, []uuid.UUID{leased.ID, pastDeadline.ID}, list(t0.Add(time.Minute)))
	})

	t.Run("CompletionExtrasOnlyWhenApplied", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, stale := newCommand("fx", "fx__commands", "A"), newCommand("fx", "fx__commands", "B")
		insert(t, b.exec, &t0, p, stale)
		require.Len(t, claim(t, b.exec, "fx__commands", 2, time.Minute, &t0), 2)
		reply, event := newOutboxMessage("amqp", "APP.CMD.REPLY.Q", "k"), newOutboxMessage("kafka", "events.Fx", "k")
		staleEvent := newOutboxMessage("kafka", "events.Fx", "k")
		applied := complete(t, b.exec, &t0,
			&driver.CommandCompletion{ID: p.ID, Fence: 1, Status: driver.CommandStatusCompleted, Event: "COMPLETED",
				Outbox: []*driver.OutboxInsertParams{reply, event}, Inbox: &driver.InboxInsertParams{MessageID: "m-p", Handler: "fx"}},
			&driver.CommandCompletion{ID: stale.ID, Fence: 7, Status: driver.CommandStatusCompleted, Event: "COMPLETED",
				Outbox: []*driver.OutboxInsertParams{staleEvent}, Inbox: &driver.InboxInsertParams{MessageID: "m-stale", Handler: "fx"}})
		require.Equal(t, []uuid.UUID{p.ID}, applied)
		rows, err := b.exec.OutboxList(ctx, &driver.OutboxListParams{})
		require.NoError(t, err)
		var messageIDs []string
		for _, r := range rows {
			messageIDs = append(messageIDs, r.MessageID)
		}
		require.ElementsMatch(t, []string{reply.MessageID, event.MessageID}, messageIDs)
		exists, err := b.exec.InboxExists(ctx, "m-p", "fx")
		require.NoError(t, err)
		require.True(t, exists)
		exists, err = b.exec.InboxExists(ctx, "m-stale", "fx")
		require.NoError(t, err)
		require.False(t, exists)

		// An operator action writes its outbox messages with the change.
		msg := newOutboxMessage("amqp", "APP.CMD.FX.A.Q", "k")
		_, err = b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: stale.ID, FromStatuses: []driver.CommandStatus{driver.CommandStatusRunning}, ToStatus: driver.CommandStatusPending,
			Event: "REDELIVER", Actor: "watchdog", Outbox: []*driver.OutboxInsertParams{msg}, Now: &t0,
		})
		require.NoError(t, err)
		rows, err = b.exec.OutboxList(ctx, &driver.OutboxListParams{Transport: "amqp", Topic: "APP.CMD.FX.A.Q"})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		// And writes none when it does not apply.
		_, err = b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: stale.ID, FromStatuses: []driver.CommandStatus{driver.CommandStatusInTSQ}, ToStatus: driver.CommandStatusPending,
			Event: "REDELIVER", Actor: "watchdog", Outbox: []*driver.OutboxInsertParams{newOutboxMessage("amqp", "APP.CMD.FX.A.Q", "k")}, Now: &t0,
		})
		require.ErrorIs(t, err, driver.ErrConflict)
		rows, err = b.exec.OutboxList(ctx, &driver.OutboxListParams{Transport: "amqp", Topic: "APP.CMD.FX.A.Q"})
		require.NoError(t, err)
		require.Len(t, rows, 1)
	})
}
