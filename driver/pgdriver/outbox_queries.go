package pgdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/jsonappend"
)

var outboxColumnList = []string{"id", "category", "transport", "topic", "key", "type", "message_id",
	"payload::text", "headers::text", "status", "attempts", "next_at", "locked_until", "locked_by",
	"last_error", "created_at", "published_at"}

var (
	outboxColumns  = strings.Join(outboxColumnList, ", ")
	outboxColumnsO = "o." + strings.Join(outboxColumnList, ", o.")
)

func (e *executor) OutboxInsertMany(ctx context.Context, params *driver.OutboxInsertManyParams) ([]int64, error) {
	if len(params.Messages) == 0 {
		return nil, nil
	}
	args, err := outboxInsertArgs(params.Messages, params.Now)
	if err != nil {
		return nil, err
	}
	rows, err := e.db.Query(ctx, e.d.sql(plainOutboxInsertSQL), args...)
	if err != nil {
		return nil, fmt.Errorf("writing outbox messages: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("writing outbox messages: %w", err)
	}
	// RETURNING follows the insertion order, which ORDER BY ord fixed; ids grow with it.
	return ids, nil
}

// outboxInsertSQL writes the messages $1..$9, $11 (one array per column) at time $10. Its verbs
// add columns to the unnest and a join: an execution checkpoint's messages carry their execution
// and fence ($12, $13) and are written only when that checkpoint applied.
const outboxInsertSQL = `
	INSERT INTO {schema}.outbox (category, transport, topic, key, type, message_id, payload, headers, next_at, created_at)
	SELECT t.category, t.transport, t.topic, t.key, t.type, t.message_id, t.payload::jsonb, t.headers::jsonb,
		coalesce(t.next_at, CASE WHEN t.delay_us > 0 THEN coalesce($10::timestamptz, clock_timestamp()) + t.delay_us * interval '1 microsecond' END),
		coalesce($10::timestamptz, clock_timestamp())
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[], $11::bigint[]%s)
		WITH ORDINALITY AS t(category, transport, topic, key, type, message_id, payload, headers, next_at, delay_us%s, ord)%s
	ORDER BY t.ord
	RETURNING id`

// plainOutboxInsertSQL writes messages of no execution.
var plainOutboxInsertSQL = fmt.Sprintf(outboxInsertSQL, "", "", "")

// checkpointOutboxSQL writes the outbox messages of a checkpoint batch (the columns of
// outboxInsertSQL) for the checkpoints that applied: their fence still matches (the checkpoint
// statement holds their rows until commit). A message flagged when_suspended ($14) is written
// only when its checkpoint's release stored SUSPENDED (the checkpoint never asks for that status
// itself when it carries such messages). Such a message (a JSON object) gets the operator's actor
// and reason of the suspension. With a hand-off holder $15, the messages are written leased to it
// for $16 microseconds (driver.OutboxHandoff) and returned with their previous messages
// (writtenReturning).
var checkpointOutboxSQL = `
	INSERT INTO {schema}.outbox (category, transport, topic, key, type, message_id, payload, headers, next_at, created_at, locked_by, locked_until)
	SELECT t.category, t.transport, t.topic, t.key, t.type, t.message_id,
		CASE WHEN t.when_suspended
			THEN t.payload::jsonb || jsonb_strip_nulls(jsonb_build_object('actor', e.suspend_actor, 'reason', e.suspend_reason))
			ELSE t.payload::jsonb END,
		t.headers::jsonb,
		coalesce(t.next_at, CASE WHEN t.delay_us > 0 THEN coalesce($10::timestamptz, clock_timestamp()) + t.delay_us * interval '1 microsecond' END),
		coalesce($10::timestamptz, clock_timestamp()),
		$15::text, coalesce($10::timestamptz, clock_timestamp()) + $16::bigint * interval '1 microsecond'
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[], $11::bigint[],
			$12::uuid[], $13::bigint[], $14::bool[])
		WITH ORDINALITY AS t(category, transport, topic, key, type, message_id, payload, headers, next_at, delay_us, owner, owner_fence, when_suspended, ord)
	JOIN {schema}.execution e ON e.id = t.owner AND e.fence = t.owner_fence AND (NOT t.when_suspended OR e.status = 'SUSPENDED')
	ORDER BY t.ord
	` + fmt.Sprintf(writtenReturning, "CASE WHEN $15::text IS NOT NULL THEN "+previousUnpublishedSQL+" ELSE 0 END")

// writtenReturning is what a write of outbox messages returns for driver.WrittenMessage, %s
// being the previous message's id: the row's id, key and created_at, and the columns that tell
// which of the messages given it is (matchWritten).
const writtenReturning = "RETURNING id, coalesce(key, '') AS key, %s AS previous, created_at, message_id, transport, topic"

// previousUnpublishedSQL is, in the RETURNING of an insert into the outbox, the latest
// unpublished message of the row's key that the statement sees (not the rows it writes), 0 when
// there is none: one backward step in the key index.
const previousUnpublishedSQL = `coalesce((SELECT b.id FROM {schema}.outbox b WHERE b.key = outbox.key AND b.status = 'NEW'
		ORDER BY b.txid DESC, b.id DESC LIMIT 1), 0)`

// writtenRow is a row of writtenReturning.
type writtenRow struct {
	driver.WrittenMessage
	messageID, transport, topic string
}

func scanWritten(row pgx.CollectableRow) (writtenRow, error) {
	var w writtenRow
	err := row.Scan(&w.ID, &w.Key, &w.Previous, &w.CreatedAt, &w.messageID, &w.transport, &w.topic)
	return w, err
}

// matchWritten returns the messages written (rows, in insertion order) with the messages given
// (messages, in the same order, some of which the statement may not have written): each row is
// the next message with its key, message id, transport and topic. stored(i) reports whether
// message i was stored as given; a message that was not gets no Message.
func matchWritten(rows []writtenRow, messages []*driver.OutboxInsertParams, stored func(i int) bool) []driver.WrittenMessage {
	written := make([]driver.WrittenMessage, len(rows))
	next := 0
	for i, row := range rows {
		written[i] = row.WrittenMessage
		for ; next < len(messages); next++ {
			m := messages[next]
			if m.Key == row.Key && m.MessageID == row.messageID && m.Transport == row.transport && m.Topic == row.topic {
				if stored == nil || stored(next) {
					written[i].Message = m
				}
				next++
				break
			}
		}
	}
	return written
}

// outboxInsertArgs are the column arrays of outboxInsertSQL.
func outboxInsertArgs(messages []*driver.OutboxInsertParams, now *time.Time) ([]any, error) {
	n := len(messages)
	var (
		categories, transports, topics, types, messageIDs = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		keys                                              = make([]*string, n)
		payloads, headers                                 = make([][]byte, n), make([][]byte, n) // text[], not copied into strings
		nextAts                                           = make([]*time.Time, n)
		delays                                            = make([]int64, n)
	)
	for i, m := range messages {
		categories[i], transports[i], topics[i], types[i], messageIDs[i] = string(m.Category), m.Transport, m.Topic, m.Type, m.MessageID
		keys[i] = nullString(m.Key)
		payloads[i] = m.Payload
		if payloads[i] == nil {
			payloads[i] = []byte{} // "", not NULL: the cast to jsonb says what is wrong
		}
		headers[i] = encodeHeaders(m.Headers)
		nextAts[i], delays[i] = m.NextAt, m.Delay.Microseconds()
	}
	return []any{categories, transports, topics, keys, types, messageIDs, payloads, headers, nextAts, now, delays}, nil
}

// encodeHeaders returns the JSON of a message's headers, "{}" when it has none.
func encodeHeaders(h map[string]string) []byte {
	if len(h) == 0 {
		return []byte("{}")
	}
	return jsonappend.StringMap(nil, h)
}

// outboxClaimSQL leases the publishable head of the outbox. pg_snapshot_xmin is the oldest
// transaction still running: every row written below it is committed or gone for good, so the
// order (txid, id) is final below it. A head is a row with no earlier unpublished row of its key,
// leased or not; locking the heads (SKIP LOCKED) keeps two relays from taking one key. With each
// head come the rows of its key that follow it without a gap: no earlier unpublished row of the
// key between is undue, leased, another transport's or above the horizon. Nobody else can take
// those followers, since the head, still NEW, precedes them. The union is cut at $2 in
// publication order, so a follower never comes without the rows before it.
//
// Each head's followers are read by a LATERAL subquery, in key order from the head, cut at the
// first row that may not go (a running bool_or): the plan is an index range scan per head
// whatever the table's statistics say. A join of heads and followers, which the planner chose
// on a fresh table with no statistics, scanned every unpublished row per head and per follower:
// a claim of 2,000 took 30 s during a burst of lifecycle events.
//
// The messages the relay published since its last claim are marked by a statement of their own
// just before, in the claim's transaction (see OutboxClaim), so the claim sees them published:
// they hold back no message of their key, and the key's next messages may come with this claim.
// (When the mark was a CTE of the claim, the claim's one snapshot still saw them NEW, and each
// row it read was compared with every id published: a burst's claims of 1,000 rows read 3,000
// rows against 1,000 ids.) The mark gives the transaction an xid, which the horizon counts
// (pg_snapshot_xmin includes the reader's own transaction): rows of transactions that started
// writing in the instant between the two statements wait for the next claim.
//
// The claim and the mark commit asynchronously (no wait for the WAL flush): a lease lost in a
// crash is a message claimed again, a mark lost is a message published again, and the outbox is
// at least once anyway (consumers deduplicate by message id).
const outboxClaimSQL = `
	WITH n AS (
		SELECT coalesce($4::timestamptz, now()) AS now, pg_snapshot_xmin(pg_current_snapshot()) AS horizon,
			set_config('synchronous_commit', 'off', true) AS async_commit
	), heads AS (
		SELECT o.id, o.key, o.txid FROM {schema}.outbox o, n
		WHERE o.status = 'NEW' AND o.txid < n.horizon
			AND o.transport = ANY($1::text[]) AND ($6::bigint IS NULL OR o.id < $6)
			AND (o.next_at IS NULL OR o.next_at <= n.now)
			AND (o.locked_until IS NULL OR o.locked_until <= n.now)
			AND (o.key IS NULL OR NOT EXISTS (
				SELECT 1 FROM {schema}.outbox b
				WHERE b.key = o.key AND b.status = 'NEW' AND (b.txid, b.id) < (o.txid, o.id)))
		ORDER BY o.txid, o.id
		LIMIT $2
		FOR UPDATE OF o SKIP LOCKED
	), followers AS (
		SELECT r.id, r.txid FROM heads h, n, LATERAL (
			SELECT f.id, f.txid, bool_or(f.txid >= n.horizon OR f.transport <> ALL($1::text[]) OR coalesce(f.id >= $6, false)
					OR coalesce(f.next_at > n.now, false) OR coalesce(f.locked_until > n.now, false))
				OVER (ORDER BY f.txid, f.id) AS blocked
			FROM {schema}.outbox f
			WHERE f.key = h.key AND f.status = 'NEW' AND (f.txid, f.id) > (h.txid, h.id)
			ORDER BY f.txid, f.id
			LIMIT $2
		) r
		WHERE h.key IS NOT NULL AND NOT r.blocked
	), picked AS (
		SELECT id FROM (SELECT id, txid FROM heads UNION ALL SELECT id, txid FROM followers) u
		ORDER BY txid, id
		LIMIT $2
	)
	UPDATE {schema}.outbox o SET
		attempts = o.attempts + 1,
		locked_until = n.now + $3 * interval '1 microsecond',
		locked_by = $5
	FROM picked, n
	WHERE o.id = picked.id
	RETURNING o.txid::text::bigint, ` + "%s"

func (e *executor) OutboxClaim(ctx context.Context, params *driver.OutboxClaimParams) ([]*driver.OutboxRow, error) {
	if params.Max <= 0 || len(params.Transports) == 0 {
		_, err := e.OutboxMarkPublished(ctx, &driver.OutboxMarkPublishedParams{IDs: params.Published, Now: params.Now})
		return nil, err
	}
	// The published messages are marked first, so the claim sees them published.
	var statements []batchStatement
	mark := len(params.Published) > 0
	if mark {
		statements = append(statements, batchStatement{e.d.sql(outboxMarkSQL), []any{params.Published, params.Now}})
	}
	statements = append(statements, batchStatement{e.d.sql(fmt.Sprintf(outboxClaimSQL, outboxColumnsO)),
		[]any{params.Transports, params.Max, params.Lease.Microseconds(), params.Now, params.RelayID, nullPositive(params.Below)}})
	var out []claimedRow
	err := e.outboxBatch(ctx, statements, func(results pgx.BatchResults) (err error) {
		if mark {
			if _, err := results.Exec(); err != nil {
				return err
			}
		}
		out, err = scanClaimed(results.Query())
		return err
	})
	if err != nil {
		return nil, err
	}
	// RETURNING has no order: restore publication order.
	sortClaimed(out, func(a, b claimedRow) bool {
		if a.txid != b.txid {
			return a.txid < b.txid
		}
		return a.row.ID < b.row.ID
	})
	result := make([]*driver.OutboxRow, len(out))
	for i, c := range out {
		result[i] = c.row
	}
	return result, nil
}

// nullPositive is n, or NULL when it is not positive.
func nullPositive(n int64) *int64 {
	if n <= 0 {
		return nil
	}
	return &n
}

// outboxPlanner is the planner's setting for the relay's statements (the claim, the marks): no
// bitmap scan, and no sequential scan when an index will do.
//
// A bitmap scan of the unpublished index reads every entry it holds, and on a busy outbox most of
// them are dead: rows published since the last vacuum, whose entries stay until vacuum removes
// them. The planner, which expects few unpublished rows, chose it on some runs and not others;
// such a claim read about 900 pages to find 11 rows. An index scan marks the dead entries it
// meets (once no transaction can see them), so the next claims skip them.
//
// A sequential scan is what a plan made while the table was small chooses for the marks, and the
// plan is kept: a prepared statement's generic plan lives as long as its connection. In a
// benchmark each claim read the whole outbox (3,300 pages) to mark a few rows.
//
// The marks test the status as NOT IN ('PUBLISHED', 'FAILED'), not as = 'NEW' (the CHECK
// constraint allows only those three). With = 'NEW' the partial indexes of unpublished rows
// match, and their statistics promise few rows: the planner looked each id up in the (key,
// txid, id) index, a walk of the whole index per id. NOT IN matches no partial index, so each
// id is a primary-key lookup.
const outboxPlanner = `SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`

// outboxBatch sends statements in a transaction of their own, after outboxPlanner, in one round
// trip (inside a caller's transaction, the statements alone: the settings would outlast it). read
// reads the statements' results.
func (e *executor) outboxBatch(ctx context.Context, statements []batchStatement, read func(pgx.BatchResults) error) error {
	batch := &pgx.Batch{}
	before, after := 0, 0 // results before and after the statements'
	if _, inTx := e.db.(pgx.Tx); !inTx {
		batch.Queue("BEGIN")
		batch.Queue(outboxPlanner)
		before, after = 2, 1
	}
	for _, st := range statements {
		batch.Queue(st.sql, st.args...)
	}
	if after > 0 {
		batch.Queue("COMMIT")
	}
	results := e.db.SendBatch(ctx, batch)
	err := execResults(results, before)
	if err == nil {
		err = read(results)
	}
	if err == nil {
		err = execResults(results, after)
	}
	if closeErr := results.Close(); err == nil {
		err = closeErr
	}
	return err
}

// batchStatement is a statement of a batch and its arguments.
type batchStatement struct {
	sql  string
	args []any
}

// execResults reads n results of a batch that return no rows worth reading.
func execResults(results pgx.BatchResults, n int) error {
	for range n {
		if _, err := results.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// claimedRow is a claimed row with its transaction id (publication order is (txid, id)).
type claimedRow struct {
	txid int64
	row  *driver.OutboxRow
}

func scanClaimed(rows pgx.Rows, err error) ([]claimedRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []claimedRow
	for rows.Next() {
		var txid int64
		row, err := scanOutbox(rows, &txid)
		if err != nil {
			return nil, err
		}
		out = append(out, claimedRow{txid, row})
	}
	return out, rows.Err()
}

// outboxMarkSQL marks the messages $1 published at $2.
const outboxMarkSQL = `UPDATE {schema}.outbox o SET status = 'PUBLISHED',
		published_at = coalesce($2::timestamptz, now()), locked_until = NULL, last_error = NULL
	FROM unnest($1::bigint[]) AS t(id), (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
	WHERE o.id = t.id AND o.status NOT IN ('PUBLISHED', 'FAILED')`

func (e *executor) OutboxMarkPublished(ctx context.Context, params *driver.OutboxMarkPublishedParams) (int64, error) {
	if len(params.IDs) == 0 {
		return 0, nil
	}
	// The ids are joined (a primary-key lookup each): "id = ANY($1) AND status = 'NEW'" was
	// planned as a bitmap AND with the whole unpublished index. See outboxPlanner.
	var tag pgconn.CommandTag
	err := e.outboxBatch(ctx, []batchStatement{{e.d.sql(outboxMarkSQL), []any{params.IDs, params.Now}}},
		func(results pgx.BatchResults) (err error) {
			tag, err = results.Exec()
			return err
		})
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (e *executor) OutboxMarkFailed(ctx context.Context, params *driver.OutboxMarkFailedParams) (int64, error) {
	n := len(params.Failures)
	if n == 0 {
		return 0, nil
	}
	ids, delays, errs, giveUp, unattempted := make([]int64, n), make([]int64, n), make([]string, n), make([]bool, n), make([]bool, n)
	for i, f := range params.Failures {
		ids[i], delays[i], errs[i], giveUp[i], unattempted[i] = f.ID, f.RetryDelay.Microseconds(), f.Error, f.GiveUp, f.Unattempted
	}
	var tag pgconn.CommandTag
	err := e.outboxBatch(ctx, []batchStatement{{e.d.sql(`
		WITH n AS (SELECT coalesce($6::timestamptz, now()) AS now)
		UPDATE {schema}.outbox o SET
			status = CASE WHEN f.give_up THEN 'FAILED' ELSE 'NEW' END,
			attempts = CASE WHEN f.unattempted THEN greatest(o.attempts - 1, 0) ELSE o.attempts END,
			next_at = n.now + f.delay_us * interval '1 microsecond',
			locked_until = NULL,
			last_error = f.error
		FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bool[], $7::bool[]) AS f(id, delay_us, error, give_up, unattempted), n
		WHERE o.id = f.id AND o.status NOT IN ('PUBLISHED', 'FAILED') AND o.locked_by = $5`),
		[]any{ids, delays, errs, giveUp, params.RelayID, params.Now, unattempted}}},
		func(results pgx.BatchResults) (err error) {
			tag, err = results.Exec()
			return err
		})
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (e *executor) OutboxList(ctx context.Context, params *driver.OutboxListParams) ([]*driver.OutboxRow, error) {
	var f filter
	anyOf(&f, "status", params.Statuses)
	f.equal("transport", params.Transport)
	f.equal("topic", params.Topic)
	if params.BeforeID > 0 {
		f.cond("id < " + f.arg(params.BeforeID))
	}
	query := f.query(`SELECT `+outboxColumns+` FROM {schema}.outbox`, params.Limit)
	args := f.args
	rows, err := e.db.Query(ctx, e.d.sql(query), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.OutboxRow, error) { return scanOutbox(row, nil) })
}

func (e *executor) OutboxBacklog(ctx context.Context) ([]*driver.OutboxBacklog, error) {
	var out []*driver.OutboxBacklog
	err := e.outboxBatch(ctx, []batchStatement{{e.d.sql(outboxBacklogSQL), nil}}, func(results pgx.BatchResults) error {
		rows, err := results.Query()
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.OutboxBacklog, error) {
			var b driver.OutboxBacklog
			var category string
			err := row.Scan(&b.Transport, &category, &b.New, &b.Failed, &b.OldestNew)
			b.Category = driver.OutboxCategory(category)
			return &b, err
		})
		return err
	})
	return out, err
}

// outboxBacklogSQL counts the unpublished and the failed messages per transport and category.
// Each part reads its partial index (outbox_dispatch_idx, outbox_failed_idx) under outboxPlanner:
// one filter for status IN ('NEW', 'FAILED') matched neither index and read the whole table,
// published rows included (they stay until retention).
const outboxBacklogSQL = `
	SELECT transport, category, sum(new)::bigint, sum(failed)::bigint, min(oldest) FROM (
		SELECT transport, category, count(*) AS new, 0 AS failed, min(created_at) AS oldest
		FROM {schema}.outbox WHERE status = 'NEW' GROUP BY transport, category
		UNION ALL
		SELECT transport, category, 0, count(*), NULL
		FROM {schema}.outbox WHERE status = 'FAILED' GROUP BY transport, category
	) b GROUP BY transport, category ORDER BY transport, category`

func (e *executor) OutboxDeletePublished(ctx context.Context, before time.Time, max int) (int64, error) {
	tag, err := e.db.Exec(ctx, e.d.sql(`DELETE FROM {schema}.outbox WHERE id IN (
		SELECT id FROM {schema}.outbox WHERE status = 'PUBLISHED' AND published_at < $1 LIMIT $2)`), before, max)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (e *executor) OutboxGet(ctx context.Context, id int64) (*driver.OutboxRow, error) {
	row, err := scanOutbox(e.db.QueryRow(ctx, e.d.sql(`SELECT `+outboxColumns+` FROM {schema}.outbox WHERE id = $1`), id), nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	return row, err
}

func (e *executor) OutboxResend(ctx context.Context, params *driver.OutboxResendParams) ([]int64, error) {
	if len(params.IDs) == 0 {
		return nil, nil
	}
	rows, err := e.db.Query(ctx, e.d.sql(`UPDATE {schema}.outbox SET status = 'NEW', attempts = 0,
			next_at = coalesce($2::timestamptz, now()), locked_until = NULL, locked_by = NULL
		WHERE id = ANY($1::bigint[]) AND status = 'FAILED' RETURNING id`), params.IDs, params.Now)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

func scanOutbox(row pgx.Row, txid *int64) (*driver.OutboxRow, error) {
	var (
		o                        driver.OutboxRow
		category, status         string
		key, lockedBy, lastError *string
		payload, headers         string
	)
	dest := []any{&o.ID, &category, &o.Transport, &o.Topic, &key, &o.Type, &o.MessageID, &payload, &headers,
		&status, &o.Attempts, &o.NextAt, &o.LockedUntil, &lockedBy, &lastError, &o.CreatedAt, &o.PublishedAt}
	if txid != nil {
		dest = append([]any{txid}, dest...)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	o.Category, o.Status = driver.OutboxCategory(category), driver.OutboxStatus(status)
	o.Key, o.LockedBy, o.LastError = derefString(key), derefString(lockedBy), derefString(lastError)
	o.Payload = json.RawMessage(payload)
	if headers != "" && headers != "{}" {
		if err := json.Unmarshal([]byte(headers), &o.Headers); err != nil {
			return nil, fmt.Errorf("decoding headers of outbox message %d: %w", o.ID, err)
		}
	}
	return &o, nil
}

func (e *executor) InboxInsert(ctx context.Context, params *driver.InboxInsertParams) (bool, error) {
	tag, err := e.db.Exec(ctx, e.d.sql(`INSERT INTO {schema}.inbox (message_id, handler, processed_at)
		VALUES ($1, $2, coalesce($3::timestamptz, now())) ON CONFLICT DO NOTHING`), params.MessageID, params.Handler, params.Now)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// inboxWithCommandsSQL records the inbox message $3/$4 at $5 and inserts the commands of $1 (as
// commandInsertManySQL does) only when the record is new; it returns whether it was.
var inboxWithCommandsSQL = `
	WITH first AS (
		INSERT INTO {schema}.inbox (message_id, handler, processed_at)
		VALUES ($3, $4, coalesce($5::timestamptz, now())) ON CONFLICT DO NOTHING
		RETURNING 1
	), ` + insertCTEs("\n\t\tWHERE EXISTS (SELECT 1 FROM first)") + `
	SELECT EXISTS (SELECT 1 FROM first), (SELECT count(*) FROM ins)`

func (e *executor) InboxInsertWithCommands(ctx context.Context, params *driver.InboxInsertParams, commands *driver.CommandInsertManyParams) (bool, error) {
	if commands == nil || len(commands.Commands) == 0 {
		return e.InboxInsert(ctx, params)
	}
	payload, err := insertRecordsJSON(commands.Commands)
	if err != nil {
		return false, err
	}
	var first bool
	var inserted int64
	err = e.db.QueryRow(ctx, e.d.sql(inboxWithCommandsSQL), payload, commands.Now, params.MessageID, params.Handler, params.Now).Scan(&first, &inserted)
	return first, err
}

func (e *executor) InboxExists(ctx context.Context, messageID, handler string) (bool, error) {
	var exists bool
	err := e.db.QueryRow(ctx, e.d.sql(`SELECT EXISTS (SELECT 1 FROM {schema}.inbox WHERE message_id = $1 AND handler = $2)`),
		messageID, handler).Scan(&exists)
	return exists, err
}

func (e *executor) InboxDeleteBefore(ctx context.Context, before time.Time, max int) (int64, error) {
	tag, err := e.db.Exec(ctx, e.d.sql(`DELETE FROM {schema}.inbox WHERE (message_id, handler) IN (
		SELECT message_id, handler FROM {schema}.inbox WHERE processed_at < $1 LIMIT $2)`), before, max)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

const dlqSelect = `SELECT d.command_id, d.parked_at, d.parked_by, d.attempts, d.error, ` + "%s" + `
	FROM {schema}.command_dlq d JOIN {schema}.command c ON c.id = d.command_id`

func (e *executor) DLQList(ctx context.Context, params *driver.DLQListParams) ([]*driver.DLQRow, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if params.Domain != "" {
		where = append(where, "c.domain = "+arg(params.Domain))
	}
	if params.Type != "" {
		where = append(where, "c.command_type = "+arg(params.Type))
	}
	if params.TenantID != "" {
		where = append(where, "c.tenant_id = "+arg(params.TenantID))
	}
	if a := params.After; a != nil {
		where = append(where, "(d.parked_at, d.command_id) < ("+arg(a.ParkedAt)+", "+arg(a.CommandID)+")")
	}
	query := fmt.Sprintf(dlqSelect, commandColsC)
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY d.parked_at DESC, d.command_id DESC LIMIT " + arg(limitOrDefault(params.Limit))
	rows, err := e.db.Query(ctx, e.d.sql(query), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.DLQRow, error) { return scanDLQ(row) })
}

func (e *executor) DLQGet(ctx context.Context, commandID uuid.UUID) (*driver.DLQRow, error) {
	row := e.db.QueryRow(ctx, e.d.sql(fmt.Sprintf(dlqSelect, commandColsC)+" WHERE d.command_id = $1"), pgUUID(commandID))
	d, err := scanDLQ(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	return d, err
}

func (e *executor) DLQDepths(ctx context.Context) ([]*driver.DLQDepth, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`SELECT c.domain, count(*) FROM {schema}.command_dlq d
		JOIN {schema}.command c ON c.id = d.command_id GROUP BY c.domain ORDER BY c.domain`))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.DLQDepth, error) {
		var d driver.DLQDepth
		return &d, row.Scan(&d.Domain, &d.Count)
	})
}

// dlqScanner reads the DLQ columns followed by the command columns.
type dlqScanner struct {
	row  pgx.Row
	dest []any
}

func (s *dlqScanner) Scan(dest ...any) error { return s.row.Scan(append(s.dest, dest...)...) }

func scanDLQ(row pgx.Row) (*driver.DLQRow, error) {
	var d driver.DLQRow
	var id pgtype.UUID
	var parkedBy, errText *string
	cmd, err := scanCommand(&dlqScanner{row: row, dest: []any{&id, &d.ParkedAt, &parkedBy, &d.Attempts, &errText}}, nil)
	if err != nil {
		return nil, err
	}
	d.CommandID, d.ParkedBy, d.Error, d.Command = fromPgUUID(id), derefString(parkedBy), derefString(errText), cmd
	return &d, nil
}

const commandClaimByIDSQL = `
	WITH n AS (
		SELECT coalesce($4::timestamptz, now()) AS now
	), picked AS (
		SELECT id FROM {schema}.command, n
		WHERE id = $1 AND completed_at IS NULL AND parked_at IS NULL AND visible_at <= n.now
			AND (status = 'PENDING' OR lease_until <= n.now)
			AND ($5::text IS NULL OR NOT EXISTS (SELECT 1 FROM {schema}.inbox WHERE message_id = $5 AND handler = $6))
		FOR UPDATE OF command
	)
	UPDATE {schema}.command c SET
		status = 'RUNNING',
		attempt = c.attempt + 1,
		fence = c.fence + 1,
		lease_until = n.now + $2 * interval '1 microsecond',
		started_at = n.now,
		updated_at = n.now,
		worker_id = $3::text,
		audit = CASE WHEN c.status = 'RUNNING' THEN c.audit || jsonb_build_array(
			jsonb_build_object('at', c.started_at, 'event', 'CLAIMED', 'from', 'PENDING', 'to', 'RUNNING',
				'attempt', c.attempt, 'actor', c.worker_id),
			jsonb_build_object('at', c.lease_until, 'event', 'LEASE_EXPIRED', 'from', 'RUNNING', 'to', 'PENDING',
				'attempt', c.attempt, 'error_code', 'LEASE_EXPIRED'))
			ELSE c.audit END
	FROM picked, n
	WHERE c.id = picked.id
	RETURNING ` + "%s"

func (e *executor) CommandClaimByID(ctx context.Context, params *driver.CommandClaimByIDParams) (*driver.CommandRow, error) {
	var message, handler *string
	if params.Inbox != nil {
		message, handler = &params.Inbox.MessageID, &params.Inbox.Handler
	}
	row := e.db.QueryRow(ctx, e.d.sql(fmt.Sprintf(commandClaimByIDSQL, commandColsC)), pgUUID(params.ID),
		params.Lease.Microseconds(), params.WorkerID, params.Now, message, handler)
	cmd, err := scanCommand(row, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		var exists, seen bool
		if err := e.db.QueryRow(ctx, e.d.sql(`SELECT EXISTS (SELECT 1 FROM {schema}.command WHERE id = $1),
			$2::text IS NOT NULL AND EXISTS (SELECT 1 FROM {schema}.inbox WHERE message_id = $2 AND handler = $3)`),
			pgUUID(params.ID), message, handler).Scan(&exists, &seen); err != nil {
			return nil, err
		}
		switch {
		case !exists:
			return nil, driver.ErrNotFound
		case seen:
			return nil, driver.ErrDuplicate
		}
		return nil, driver.ErrConflict
	}
	return cmd, err
}

func (e *executor) CommandListExpired(ctx context.Context, params *driver.CommandListExpiredParams) ([]*driver.CommandRow, error) {
	if len(params.Queues) == 0 {
		return nil, nil
	}
	rows, err := e.db.Query(ctx, e.d.sql(`SELECT `+commandCols+` FROM {schema}.command,
			(SELECT coalesce($3::timestamptz, now()) AS now) n
		WHERE queue = ANY($1::text[]) AND completed_at IS NULL AND parked_at IS NULL
			AND CASE WHEN $4 THEN status = 'RUNNING' AND lease_until <= n.now AND attempt >= max_attempts
				ELSE (status = 'RUNNING' AND lease_until <= n.now)
					OR (status IN ('PENDING', 'RUNNING') AND deadline_at <= n.now) END
		ORDER BY visible_at LIMIT $2`), params.Queues, limitOrDefault(params.Max), params.Now, params.LastAttempts)
	if err != nil {
		return nil, err
	}
	return collectCommands(rows)
}
