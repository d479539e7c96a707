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

// copySizedBatch is large enough for the PostgreSQL driver to use COPY (16 rows or more without
// idempotency keys), so both of its insert paths are exercised.
const copySizedBatch = 20

// sentCommand is the row an insert of p at now must produce, with the audit trail
// CommandGetByID returns for it.
func sentCommand(p *driver.CommandInsertParams, now time.Time) *driver.CommandRow {
	status := p.Status
	if status == "" {
		status = driver.CommandStatusPending
	}
	kind := p.Kind
	if kind == "" {
		kind = driver.CommandKindCommand
	}
	data := p.Data
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	visibleAt := now
	if p.VisibleAt != nil {
		visibleAt = *p.VisibleAt
	}
	var completedAt *time.Time
	if status.Terminal() {
		completedAt = &now
	}
	// SENT is rebuilt from created_at and sent_by, always to PENDING. A command inserted
	// A command inserted already finished (a record of work done elsewhere) was never claimed:
	// its one entry is the send, straight to its final status.
	audit := []driver.AuditEntry{{At: now, Event: "SENT", To: driver.CommandStatusPending, Actor: p.Actor}}
	if status.Terminal() {
		audit[0].To = status
	}
	return &driver.CommandRow{
		ID: p.ID, Kind: kind, Domain: p.Domain, Queue: p.Queue, Type: p.Type, Data: data,
		CorrelationID: p.CorrelationID, CausationID: p.CausationID, ReplyTo: p.ReplyTo,
		Status: status, MaxAttempts: p.MaxAttempts, TenantID: p.TenantID, BatchID: p.BatchID,
		Headers: p.Headers, IdempotencyKey: p.IdempotencyKey, SentBy: p.Actor, VisibleAt: visibleAt,
		DeadlineAt: p.DeadlineAt, CreatedAt: now, UpdatedAt: now, CompletedAt: completedAt,
		Audit: audit,
	}
}

func exerciseCommandInsertMany(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("AllFieldsRoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := &driver.CommandInsertParams{
			ID:             uuid.New(),
			Kind:           driver.CommandKindCommand,
			Domain:         "orders",
			Queue:          "orders__commands",
			Type:           "PlaceOrder",
			Data:           json.RawMessage(`{"sku":"A-1","qty":2,"tags":["x","y"]}`),
			CorrelationID:  uuid.New(),
			CausationID:    uuid.New(),
			ReplyTo:        "orders__replies",
			MaxAttempts:    5,
			TenantID:       "tenant-1",
			BatchID:        uuid.New(),
			Headers:        map[string]string{"traceparent": "00-abc-def-01", "user": "u1"},
			IdempotencyKey: "order-1",
			VisibleAt:      ptr(t0.Add(time.Minute)),
			DeadlineAt:     ptr(t0.Add(time.Hour)),
			Actor:          "api",
		}
		insert(t, b.exec, &t0, p)
		got := get(t, b.exec, p.ID)
		requireCommand(t, sentCommand(p, t0), got)
		require.Equal(t, "api", got.SentBy)
		require.Equal(t, []driver.AuditEntry{{At: t0, Event: "SENT", To: driver.CommandStatusPending, Actor: "api"}}, normalizeAudit(got.Audit))
	})

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := &driver.CommandInsertParams{ID: uuid.New(), Domain: "d", Queue: "q", Type: "T", MaxAttempts: 1}
		insert(t, b.exec, &t0, p)
		got := get(t, b.exec, p.ID)
		requireCommand(t, sentCommand(p, t0), got)
		require.Equal(t, driver.CommandKindCommand, got.Kind)
		require.Equal(t, driver.CommandStatusPending, got.Status)
		require.JSONEq(t, `{}`, string(got.Data))
		require.Nil(t, got.Headers)
		require.Equal(t, uuid.Nil, got.CorrelationID)
		require.Empty(t, got.SentBy)
		require.Nil(t, got.ParkedAt)
		require.Equal(t, []driver.AuditEntry{{At: t0, Event: "SENT", To: driver.CommandStatusPending}}, normalizeAudit(got.Audit))
	})

	t.Run("TerminalReplyIsCompletedAtInsert", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newCommand("d", "d__replies", "Reply")
		p.Kind, p.Status, p.Actor = driver.CommandKindReply, driver.CommandStatusCompleted, "worker"
		insert(t, b.exec, &t0, p)
		got := get(t, b.exec, p.ID)
		requireCommand(t, sentCommand(p, t0), got)
		requireTimePtr(t, t0, got.CompletedAt, "completed_at")
		require.Equal(t, []driver.AuditEntry{
			{At: t0, Event: "SENT", To: driver.CommandStatusCompleted, Actor: "worker"},
		}, normalizeAudit(got.Audit), "a command inserted finished has one entry: it was never claimed")
	})

	t.Run("DatabaseClockWhenNowIsNil", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newCommand("d", "q", "T")
		insert(t, b.exec, nil, p)
		got := get(t, b.exec, p.ID)
		require.WithinDuration(t, time.Now(), got.CreatedAt, within)
		require.WithinDuration(t, got.CreatedAt, got.VisibleAt, time.Second)
		require.WithinDuration(t, got.CreatedAt, got.Audit[0].At, time.Second)
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		results, err := b.exec.CommandInsertMany(ctx, &driver.CommandInsertManyParams{})
		require.NoError(t, err)
		require.Empty(t, results)
	})

	t.Run("IdempotencyDedupe", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := newCommand("d", "q", "T")
		first.IdempotencyKey = "k1"
		insert(t, b.exec, &t0, first)

		dupOfExisting := newCommand("d", "q", "T")
		dupOfExisting.IdempotencyKey = "k1"
		fresh := newCommand("d", "q", "T")
		fresh.IdempotencyKey = "k2"
		dupInBatch := newCommand("d", "q", "T")
		dupInBatch.IdempotencyKey = "k2"
		noKey := newCommand("d", "q", "T")
		otherDomain := newCommand("other", "q", "T")
		otherDomain.IdempotencyKey = "k1"

		results, err := b.exec.CommandInsertMany(ctx, &driver.CommandInsertManyParams{
			Commands: []*driver.CommandInsertParams{dupOfExisting, fresh, dupInBatch, noKey, otherDomain},
			Now:      ptr(t0.Add(time.Second)),
		})
		require.NoError(t, err)
		require.Equal(t, []driver.CommandInsertResult{
			{ID: first.ID, Inserted: false},
			{ID: fresh.ID, Inserted: true},
			{ID: fresh.ID, Inserted: false},
			{ID: noKey.ID, Inserted: true},
			{ID: otherDomain.ID, Inserted: true},
		}, results)
		requireNotFound(t, b.exec, dupOfExisting.ID)
		requireNotFound(t, b.exec, dupInBatch.ID)
		requireTime(t, t0, get(t, b.exec, first.ID).CreatedAt, "the original is untouched")
	})

	t.Run("CopySizedBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cmds := make([]*driver.CommandInsertParams, copySizedBatch)
		for i := range cmds {
			p := newCommand("d", "q", "T")
			p.Data = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
			p.Actor = "bulk"
			switch i % 4 {
			case 1:
				p.VisibleAt = ptr(t0.Add(time.Duration(i) * time.Minute))
				p.Headers = map[string]string{"i": fmt.Sprint(i)}
			case 2:
				p.Kind, p.Status, p.Queue = driver.CommandKindReply, driver.CommandStatusCompleted, "replies"
				p.CorrelationID, p.CausationID = uuid.New(), uuid.New()
			case 3:
				p.TenantID, p.BatchID, p.ReplyTo = "tenant", uuid.New(), "reply-queue"
				p.DeadlineAt = ptr(t0.Add(time.Hour))
			}
			cmds[i] = p
		}
		insert(t, b.exec, &t0, cmds...)
		for _, p := range cmds {
			requireCommand(t, sentCommand(p, t0), get(t, b.exec, p.ID))
		}
	})

	t.Run("CopySizedBatchOnDatabaseClock", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cmds := make([]*driver.CommandInsertParams, copySizedBatch)
		for i := range cmds {
			cmds[i] = newCommand("d", "q", "T")
			cmds[i].Actor = fmt.Sprint("sender-", i%2)
		}
		cmds[0].VisibleAt = &t0
		insert(t, b.exec, nil, cmds...)
		requireTime(t, t0, get(t, b.exec, cmds[0].ID).VisibleAt, "explicit visible_at")
		for i, p := range cmds {
			got := get(t, b.exec, p.ID)
			require.Equal(t, p.Actor, got.SentBy)
			if i == 0 {
				continue
			}
			require.WithinDuration(t, time.Now(), got.CreatedAt, within)
			require.WithinDuration(t, got.CreatedAt, got.VisibleAt, time.Second)
		}
	})

	t.Run("CopySizedBatchAllOnDatabaseClock", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cmds := make([]*driver.CommandInsertParams, copySizedBatch)
		for i := range cmds {
			cmds[i] = newCommand("d", "q", "T")
		}
		cmds[1].Actor = "bulk"
		insert(t, b.exec, nil, cmds...)
		for _, p := range cmds {
			got := get(t, b.exec, p.ID)
			require.Equal(t, p.Actor, got.SentBy)
			require.WithinDuration(t, time.Now(), got.CreatedAt, within)
			require.WithinDuration(t, got.CreatedAt, got.VisibleAt, time.Second)
			requireTime(t, got.CreatedAt, got.UpdatedAt, "updated_at")
		}
	})

	t.Run("CopySizedBatchWithIdempotencyKeys", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		existing := newCommand("d", "q", "T")
		existing.IdempotencyKey = "key-0"
		insert(t, b.exec, &t0, existing)

		cmds := make([]*driver.CommandInsertParams, copySizedBatch)
		want := make([]driver.CommandInsertResult, copySizedBatch)
		for i := range cmds {
			cmds[i] = newCommand("d", "q", "T")
			// Keys key-0..key-9, each twice: key-0 exists already, the others dedupe
			// within the batch.
			cmds[i].IdempotencyKey = fmt.Sprintf("key-%d", i%10)
			switch {
			case i%10 == 0:
				want[i] = driver.CommandInsertResult{ID: existing.ID}
			case i < 10:
				want[i] = driver.CommandInsertResult{ID: cmds[i].ID, Inserted: true}
			default:
				want[i] = driver.CommandInsertResult{ID: cmds[i-10].ID}
			}
		}
		results, err := b.exec.CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: cmds, Now: &t0})
		require.NoError(t, err)
		require.Equal(t, want, results)
		for i, p := range cmds {
			if want[i].Inserted {
				requireCommand(t, sentCommand(p, t0), get(t, b.exec, p.ID))
			} else {
				requireNotFound(t, b.exec, p.ID)
			}
		}
	})

	t.Run("ConstraintViolationFailsTheBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		good := newCommand("d", "q", "T")
		bad := newCommand("d", "q", "T")
		bad.MaxAttempts = 0
		_, err := b.exec.CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: []*driver.CommandInsertParams{good, bad}, Now: &t0})
		require.Error(t, err)
		requireNotFound(t, b.exec, good.ID)

		dupID := newCommand("d", "q", "T")
		insert(t, b.exec, &t0, dupID)
		_, err = b.exec.CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: []*driver.CommandInsertParams{dupID}, Now: &t0})
		require.Error(t, err, "a duplicate id is not an idempotency hit")
	})
}

func exerciseCommandGet(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("ByIDNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		requireNotFound(t, b.exec, uuid.New())
	})

	t.Run("ByIdempotencyKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newCommand("d", "q", "T")
		p.IdempotencyKey = "k"
		insert(t, b.exec, &t0, p)

		got, err := b.exec.CommandGetByIdempotencyKey(ctx, "d", "k")
		require.NoError(t, err)
		want := sentCommand(p, t0)
		want.Audit = nil // only CommandGetByID loads the audit trail
		requireCommand(t, want, got)

		_, err = b.exec.CommandGetByIdempotencyKey(ctx, "other", "k")
		require.ErrorIs(t, err, driver.ErrNotFound)
		_, err = b.exec.CommandGetByIdempotencyKey(ctx, "d", "missing")
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
}

func exerciseCommandList(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("FiltersAndPaging", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		batchID, correlationID := uuid.New(), uuid.New()
		c0 := newCommand("a", "qa", "T1")
		c0.TenantID, c0.BatchID, c0.CorrelationID = "x", batchID, correlationID
		c1 := newCommand("a", "qr", "T2")
		c1.TenantID = "y"
		c2 := newCommand("b", "qb", "T1")
		c2.Kind, c2.Status = driver.CommandKindReply, driver.CommandStatusCompleted
		c3 := newCommand("a", "qa2", "T1")
		c3.BatchID, c3.CorrelationID = batchID, correlationID
		c4 := newCommand("b", "qb", "T2")
		c4.TenantID = "x"
		all := []*driver.CommandInsertParams{c0, c1, c2, c3, c4}
		for i, c := range all {
			insert(t, b.exec, ptr(t0.Add(time.Duration(i)*time.Second)), c)
		}
		require.Len(t, claim(t, b.exec, "qr", 1, time.Hour, ptr(t0.Add(time.Minute))), 1)

		list := func(params driver.CommandListParams) []uuid.UUID {
			t.Helper()
			rows, err := b.exec.CommandList(ctx, &params)
			require.NoError(t, err)
			for _, r := range rows {
				require.Nil(t, r.Audit, "lists do not load the audit trail")
			}
			return ids(rows)
		}
		idsOf := func(cmds ...*driver.CommandInsertParams) []uuid.UUID {
			out := []uuid.UUID{}
			for _, c := range cmds {
				out = append(out, c.ID)
			}
			return out
		}
		orEmpty := func(ids []uuid.UUID) []uuid.UUID {
			if ids == nil {
				return []uuid.UUID{}
			}
			return ids
		}

		require.Equal(t, idsOf(c4, c3, c2, c1, c0), list(driver.CommandListParams{}), "newest first")
		require.Equal(t, idsOf(c1), list(driver.CommandListParams{Statuses: []driver.CommandStatus{driver.CommandStatusRunning}}))
		require.Equal(t, idsOf(c4, c3, c2, c0), list(driver.CommandListParams{Statuses: []driver.CommandStatus{driver.CommandStatusPending, driver.CommandStatusCompleted}}))
		require.Equal(t, idsOf(c2), list(driver.CommandListParams{Kind: driver.CommandKindReply}))
		require.Equal(t, idsOf(c4, c3, c1, c0), list(driver.CommandListParams{Kind: driver.CommandKindCommand}))
		require.Equal(t, idsOf(c3, c1, c0), list(driver.CommandListParams{Domain: "a"}))
		require.Equal(t, idsOf(c4, c2), list(driver.CommandListParams{Queue: "qb"}))
		require.Equal(t, idsOf(c4, c1), list(driver.CommandListParams{Type: "T2"}))
		require.Equal(t, idsOf(c4, c0), list(driver.CommandListParams{TenantID: "x"}))
		require.Equal(t, idsOf(c3, c0), list(driver.CommandListParams{BatchID: batchID}))
		require.Equal(t, idsOf(c3, c0), list(driver.CommandListParams{CorrelationID: correlationID}))
		require.Equal(t, idsOf(c3, c0), list(driver.CommandListParams{Domain: "a", Type: "T1"}))
		require.Equal(t, idsOf(), orEmpty(list(driver.CommandListParams{Domain: "missing"})))
		require.Equal(t, idsOf(c4, c3), list(driver.CommandListParams{Limit: 2}))

		got, err := b.exec.CommandList(ctx, &driver.CommandListParams{Domain: "a", Type: "T1"})
		require.NoError(t, err)
		want := sentCommand(c3, t0.Add(3*time.Second))
		want.Audit = nil
		requireCommand(t, want, got[0])

		// Paging: each page starts before the last id of the previous one, with the filters kept.
		page := list(driver.CommandListParams{Limit: 2})
		var seen []uuid.UUID
		for len(page) > 0 {
			seen = append(seen, page...)
			page = list(driver.CommandListParams{Limit: 2, BeforeID: page[len(page)-1]})
		}
		require.Equal(t, idsOf(c4, c3, c2, c1, c0), seen)
		require.Equal(t, idsOf(c0), list(driver.CommandListParams{Domain: "a", BeforeID: c1.ID}))
		require.Equal(t, idsOf(c1, c0), list(driver.CommandListParams{Domain: "a", BeforeID: c3.ID}))
		require.Equal(t, idsOf(), orEmpty(list(driver.CommandListParams{BeforeID: c0.ID})))
	})

	t.Run("OrderedByIDNotCreatedAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cmds := make([]*driver.CommandInsertParams, 5)
		for i := range cmds {
			cmds[i] = newCommand("tie", "q", "T")
		}
		// Three share created_at; the clock of the last two runs backwards. The list follows
		// the ids all the same.
		insert(t, b.exec, &t0, cmds[:3]...)
		insert(t, b.exec, ptr(t0.Add(-time.Hour)), cmds[3])
		insert(t, b.exec, ptr(t0.Add(-2*time.Hour)), cmds[4])
		rows, err := b.exec.CommandList(ctx, &driver.CommandListParams{Domain: "tie"})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{cmds[4].ID, cmds[3].ID, cmds[2].ID, cmds[1].ID, cmds[0].ID}, ids(rows))
		var seen []uuid.UUID
		before := driver.CommandListParams{Domain: "tie", Limit: 1}
		for {
			page, err := b.exec.CommandList(ctx, &before)
			require.NoError(t, err)
			if len(page) == 0 {
				break
			}
			require.Len(t, page, 1)
			seen = append(seen, page[0].ID)
			before.BeforeID = page[0].ID
		}
		require.Equal(t, ids(rows), seen)
	})

	t.Run("DefaultLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cmds := make([]*driver.CommandInsertParams, driver.DefaultListLimit+5)
		for i := range cmds {
			cmds[i] = newCommand("d", "q", "T")
		}
		insert(t, b.exec, &t0, cmds...)
		rows, err := b.exec.CommandList(ctx, &driver.CommandListParams{})
		require.NoError(t, err)
		require.Len(t, rows, driver.DefaultListLimit)
	})
}
