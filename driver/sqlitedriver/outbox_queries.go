package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/jsonappend"
)

const outboxColumns = `id, category, transport, topic, key, type, message_id, payload, headers,
	status, attempts, next_at, locked_until, locked_by, last_error, created_at, published_at`

const outboxInsertSQL = `INSERT INTO {schema}.outbox (category, transport, topic, key, type, message_id,
	payload, headers, next_at, created_at, locked_by, locked_until) VALUES (?, ?, ?, ?, ?, ?, json(?), json(?), ?, ?, ?, ?) RETURNING id`

func (e *executor) OutboxInsertMany(ctx context.Context, params *driver.OutboxInsertManyParams) ([]int64, error) {
	if len(params.Messages) == 0 {
		return nil, nil
	}
	now := now(params.Now)
	ids := make([]int64, len(params.Messages))
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		return insertOutbox(ctx, e.d, tx, params.Messages, now, ids)
	})
	if err != nil {
		return nil, fmt.Errorf("writing outbox messages: %w", err)
	}
	return ids, nil
}

func insertOutbox(ctx context.Context, d *Driver, tx *sql.Tx, messages []*driver.OutboxInsertParams, now time.Time, ids []int64) error {
	return insertLeasedOutbox(ctx, d, tx, messages, now, ids, nil)
}

// insertLeasedOutbox writes messages, leased to handoff's holder when handoff is set (see
// driver.OutboxHandoff), and sets ids (when not nil) to their ids.
func insertLeasedOutbox(ctx context.Context, d *Driver, tx *sql.Tx, messages []*driver.OutboxInsertParams, now time.Time, ids []int64,
	handoff *driver.OutboxHandoff) error {
	var holder, until any
	if handoff != nil && handoff.Holder != "" {
		holder, until = handoff.Holder, micros(now.Add(handoff.Lease))
	}
	if len(messages) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, d.sql(outboxInsertSQL))
	if err != nil {
		return err
	}
	defer stmt.Close()
	for i, m := range messages {
		headers := "{}"
		if len(m.Headers) > 0 {
			headers = string(jsonappend.StringMap(nil, m.Headers))
		}
		nextAt := m.NextAt
		if nextAt == nil && m.Delay > 0 {
			at := now.Add(m.Delay)
			nextAt = &at
		}
		var id int64
		if err := stmt.QueryRowContext(ctx, string(m.Category), m.Transport, m.Topic, nullText(m.Key), m.Type,
			m.MessageID, string(m.Payload), headers, nullMicros(nextAt), micros(now), holder, until).Scan(&id); err != nil {
			return err
		}
		if ids != nil {
			ids[i] = id
		}
	}
	return nil
}

// writeOutbox writes messages as insertOutbox does or, with a hand-off (driver.OutboxHandoff),
// leased to its holder, and then appends them to written, each with the latest unpublished
// message of its key written before it.
func writeOutbox(ctx context.Context, d *Driver, tx *sql.Tx, messages []*driver.OutboxInsertParams, now time.Time,
	handoff *driver.OutboxHandoff, written *[]driver.WrittenMessage) error {
	if handoff == nil || len(messages) == 0 {
		return insertOutbox(ctx, d, tx, messages, now, nil)
	}
	previous := make([]int64, len(messages))
	for i, m := range messages {
		if m.Key == "" || handoff.Holder == "" {
			continue
		}
		if err := tx.QueryRowContext(ctx, d.sql(outboxPreviousSQL), m.Key).Scan(&previous[i]); err != nil {
			return err
		}
	}
	ids := make([]int64, len(messages))
	if err := insertLeasedOutbox(ctx, d, tx, messages, now, ids, handoff); err != nil {
		return err
	}
	for i, m := range messages {
		*written = append(*written, driver.WrittenMessage{ID: ids[i], Key: m.Key, Previous: previous[i], CreatedAt: now, Message: m})
	}
	return nil
}

// outboxPreviousSQL is the latest unpublished message of key ?1, 0 when there is none.
const outboxPreviousSQL = `SELECT coalesce(max(id), 0) FROM {schema}.outbox WHERE key = ?1 AND status = 'NEW'`

// outboxClaimSQL takes, in id order, the publishable messages whose earlier unpublished messages
// of the same key are all publishable too (the head of each key and the run that follows it). The
// single writer commits transactions one at a time, so id order is commit order and nothing
// committed later can take a smaller id; the LIMIT cuts in id order, so a message never comes
// without the earlier ones of its key.
const outboxClaimSQL = `
	UPDATE {schema}.outbox SET attempts = attempts + 1, locked_until = ?1, locked_by = ?2
	WHERE id IN (
		SELECT o.id FROM {schema}.outbox o
		WHERE o.status = 'NEW' AND o.transport IN (SELECT value FROM json_each(?3)) AND (?6 IS NULL OR o.id < ?6)
			AND (o.next_at IS NULL OR o.next_at <= ?4)
			AND (o.locked_until IS NULL OR o.locked_until <= ?4)
			AND (o.key IS NULL OR NOT EXISTS (
				SELECT 1 FROM {schema}.outbox b WHERE b.key = o.key AND b.status = 'NEW' AND b.id < o.id
					AND (b.transport NOT IN (SELECT value FROM json_each(?3)) OR b.next_at > ?4 OR b.locked_until > ?4)))
		ORDER BY o.id
		LIMIT ?5
	)
	RETURNING ` + outboxColumns

func (e *executor) OutboxClaim(ctx context.Context, params *driver.OutboxClaimParams) ([]*driver.OutboxRow, error) {
	// The messages published since the last claim are marked first, on the single writer.
	if _, err := e.OutboxMarkPublished(ctx, &driver.OutboxMarkPublishedParams{IDs: params.Published, Now: params.Now}); err != nil {
		return nil, err
	}
	if params.Max <= 0 || len(params.Transports) == 0 {
		return nil, nil
	}
	now := now(params.Now)
	transports, err := json.Marshal(params.Transports)
	if err != nil {
		return nil, err
	}
	rows, err := e.write.QueryContext(ctx, e.d.sql(outboxClaimSQL), micros(now.Add(params.Lease)), params.RelayID,
		string(transports), micros(now), params.Max, nullPositive(params.Below))
	if err != nil {
		return nil, err
	}
	out, err := collectOutbox(rows)
	if err != nil {
		return nil, err
	}
	sortByID(out)
	return out, nil
}

// nullPositive is n, or NULL when it is not positive.
func nullPositive(n int64) any {
	if n <= 0 {
		return nil
	}
	return n
}

func (e *executor) OutboxMarkPublished(ctx context.Context, params *driver.OutboxMarkPublishedParams) (int64, error) {
	if len(params.IDs) == 0 {
		return 0, nil
	}
	ids, err := json.Marshal(params.IDs)
	if err != nil {
		return 0, err
	}
	res, err := e.write.ExecContext(ctx, e.d.sql(`UPDATE {schema}.outbox SET status = 'PUBLISHED', published_at = ?,
			locked_until = NULL, last_error = NULL
		WHERE id IN (SELECT value FROM json_each(?)) AND status = 'NEW'`), micros(now(params.Now)), string(ids))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (e *executor) OutboxMarkFailed(ctx context.Context, params *driver.OutboxMarkFailedParams) (int64, error) {
	if len(params.Failures) == 0 {
		return 0, nil
	}
	now := now(params.Now)
	var total int64
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		for _, f := range params.Failures {
			status := driver.OutboxStatusNew
			if f.GiveUp {
				status = driver.OutboxStatusFailed
			}
			uncount := 0
			if f.Unattempted {
				uncount = 1
			}
			res, err := tx.ExecContext(ctx, e.d.sql(`UPDATE {schema}.outbox SET status = ?, next_at = ?,
					locked_until = NULL, last_error = ?, attempts = max(attempts - ?, 0)
				WHERE id = ? AND status = 'NEW' AND locked_by = ?`), string(status), micros(now.Add(f.RetryDelay)),
				f.Error, uncount, f.ID, params.RelayID)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	return total, err
}

func (e *executor) OutboxList(ctx context.Context, params *driver.OutboxListParams) ([]*driver.OutboxRow, error) {
	var f filter
	anyOf(&f, "status", params.Statuses)
	f.equal("transport", params.Transport)
	f.equal("topic", params.Topic)
	if params.BeforeID > 0 {
		f.cond("id < ?", params.BeforeID)
	}
	query := f.query(`SELECT `+outboxColumns+` FROM {schema}.outbox`, params.Limit)
	rows, err := e.read.QueryContext(ctx, e.d.sql(query), f.args...)
	if err != nil {
		return nil, err
	}
	return collectOutbox(rows)
}

func (e *executor) OutboxGet(ctx context.Context, id int64) (*driver.OutboxRow, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`SELECT `+outboxColumns+` FROM {schema}.outbox WHERE id = ?`), id)
	if err != nil {
		return nil, err
	}
	out, err := collectOutbox(rows)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, driver.ErrNotFound
	}
	return out[0], nil
}

func (e *executor) OutboxResend(ctx context.Context, params *driver.OutboxResendParams) ([]int64, error) {
	if len(params.IDs) == 0 {
		return nil, nil
	}
	ids, err := json.Marshal(params.IDs)
	if err != nil {
		return nil, err
	}
	rows, err := e.write.QueryContext(ctx, e.d.sql(`UPDATE {schema}.outbox SET status = 'NEW', attempts = 0, next_at = ?,
			locked_until = NULL, locked_by = NULL
		WHERE id IN (SELECT value FROM json_each(?)) AND status = 'FAILED' RETURNING id`), micros(now(params.Now)), string(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out, rows.Err()
}

func (e *executor) OutboxBacklog(ctx context.Context) ([]*driver.OutboxBacklog, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT transport, category, sum(new), sum(failed), min(oldest) FROM (
			SELECT transport, category, count(*) AS new, 0 AS failed, min(created_at) AS oldest
			FROM {schema}.outbox WHERE status = 'NEW' GROUP BY transport, category
			UNION ALL
			SELECT transport, category, 0, count(*), NULL
			FROM {schema}.outbox WHERE status = 'FAILED' GROUP BY transport, category
		) GROUP BY transport, category ORDER BY transport, category`)) // each part reads its partial index
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.OutboxBacklog
	for rows.Next() {
		var b driver.OutboxBacklog
		var category string
		var oldest sql.NullInt64
		if err := rows.Scan(&b.Transport, &category, &b.New, &b.Failed, &oldest); err != nil {
			return nil, err
		}
		b.Category, b.OldestNew = driver.OutboxCategory(category), fromNullMicros(oldest)
		out = append(out, &b)
	}
	return out, rows.Err()
}

func (e *executor) OutboxDeletePublished(ctx context.Context, before time.Time, max int) (int64, error) {
	res, err := e.write.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.outbox WHERE id IN (
		SELECT id FROM {schema}.outbox WHERE status = 'PUBLISHED' AND published_at < ? LIMIT ?)`), micros(before), max)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func collectOutbox(rows *sql.Rows) ([]*driver.OutboxRow, error) {
	defer rows.Close()
	var out []*driver.OutboxRow
	for rows.Next() {
		var (
			o                                driver.OutboxRow
			category, status                 string
			key, lockedBy, lastError         sql.NullString
			payload, headers                 string
			nextAt, lockedUntil, publishedAt sql.NullInt64
			createdAt                        int64
		)
		if err := rows.Scan(&o.ID, &category, &o.Transport, &o.Topic, &key, &o.Type, &o.MessageID, &payload,
			&headers, &status, &o.Attempts, &nextAt, &lockedUntil, &lockedBy, &lastError, &createdAt, &publishedAt); err != nil {
			return nil, err
		}
		o.Category, o.Status = driver.OutboxCategory(category), driver.OutboxStatus(status)
		o.Key, o.LockedBy, o.LastError = key.String, lockedBy.String, lastError.String
		o.Payload = json.RawMessage(payload)
		o.NextAt, o.LockedUntil, o.PublishedAt = fromNullMicros(nextAt), fromNullMicros(lockedUntil), fromNullMicros(publishedAt)
		o.CreatedAt = fromMicros(createdAt)
		if headers != "" && headers != "{}" {
			if err := json.Unmarshal([]byte(headers), &o.Headers); err != nil {
				return nil, fmt.Errorf("decoding headers of outbox message %d: %w", o.ID, err)
			}
		}
		out = append(out, &o)
	}
	return out, rows.Err()
}

func sortByID(rows []*driver.OutboxRow) {
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && rows[j].ID < rows[j-1].ID; j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
}

func (e *executor) InboxInsert(ctx context.Context, params *driver.InboxInsertParams) (bool, error) {
	res, err := e.write.ExecContext(ctx, e.d.sql(`INSERT INTO {schema}.inbox (message_id, handler, processed_at)
		VALUES (?, ?, ?) ON CONFLICT DO NOTHING`), params.MessageID, params.Handler, micros(now(params.Now)))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (e *executor) InboxInsertWithCommands(ctx context.Context, params *driver.InboxInsertParams, commands *driver.CommandInsertManyParams) (bool, error) {
	if commands == nil || len(commands.Commands) == 0 {
		return e.InboxInsert(ctx, params)
	}
	var first bool
	err := driver.WithTx(ctx, e, func(tx driver.ExecutorTx) error {
		var err error
		if first, err = tx.InboxInsert(ctx, params); err != nil || !first {
			return err
		}
		_, err = tx.CommandInsertMany(ctx, commands)
		return err
	})
	return first, err
}

func (e *executor) InboxExists(ctx context.Context, messageID, handler string) (bool, error) {
	var exists bool
	err := e.read.QueryRowContext(ctx, e.d.sql(`SELECT EXISTS (SELECT 1 FROM {schema}.inbox WHERE message_id = ? AND handler = ?)`),
		messageID, handler).Scan(&exists)
	return exists, err
}

func (e *executor) InboxDeleteBefore(ctx context.Context, before time.Time, max int) (int64, error) {
	res, err := e.write.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.inbox WHERE rowid IN (
		SELECT rowid FROM {schema}.inbox WHERE processed_at < ? LIMIT ?)`), micros(before), max)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

var dlqSelect = `SELECT d.command_id, d.parked_at, d.parked_by, d.attempts, d.error, c.` +
	strings.Join(commandColumns, ", c.") + `
	FROM {schema}.command_dlq d JOIN {schema}.command c ON c.id = d.command_id`

func (e *executor) DLQList(ctx context.Context, params *driver.DLQListParams) ([]*driver.DLQRow, error) {
	var where []string
	var args []any
	if params.Domain != "" {
		where, args = append(where, "c.domain = ?"), append(args, params.Domain)
	}
	if params.Type != "" {
		where, args = append(where, "c.command_type = ?"), append(args, params.Type)
	}
	if params.TenantID != "" {
		where, args = append(where, "c.tenant_id = ?"), append(args, params.TenantID)
	}
	if a := params.After; a != nil {
		where, args = append(where, "(d.parked_at, d.command_id) < (?, ?)"), append(args, micros(a.ParkedAt), a.CommandID.String())
	}
	query := dlqSelect
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY d.parked_at DESC, d.command_id DESC LIMIT ?"
	args = append(args, driver.LimitOrDefault(params.Limit))
	rows, err := e.read.QueryContext(ctx, e.d.sql(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.DLQRow
	for rows.Next() {
		d, err := scanDLQ(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func (e *executor) DLQGet(ctx context.Context, commandID uuid.UUID) (*driver.DLQRow, error) {
	d, err := scanDLQ(e.read.QueryRowContext(ctx, e.d.sql(dlqSelect+" WHERE d.command_id = ?"), commandID.String()))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	return d, err
}

func (e *executor) DLQDepths(ctx context.Context) ([]*driver.DLQDepth, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`SELECT c.domain, count(*) FROM {schema}.command_dlq d
		JOIN {schema}.command c ON c.id = d.command_id GROUP BY c.domain ORDER BY c.domain`))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.DLQDepth
	for rows.Next() {
		var d driver.DLQDepth
		if err := rows.Scan(&d.Domain, &d.Count); err != nil {
			return nil, err
		}
		out = append(out, &d)
	}
	return out, rows.Err()
}

// dlqScanner reads the DLQ columns followed by the command columns.
type dlqScanner struct {
	row  rowScanner
	dest []any
}

func (s *dlqScanner) Scan(dest ...any) error { return s.row.Scan(append(s.dest, dest...)...) }

func scanDLQ(row rowScanner) (*driver.DLQRow, error) {
	var d driver.DLQRow
	var id string
	var parkedAt int64
	var parkedBy, errText sql.NullString
	cmd, err := scanCommand(&dlqScanner{row: row, dest: []any{&id, &parkedAt, &parkedBy, &d.Attempts, &errText}}, nil)
	if err != nil {
		return nil, err
	}
	d.CommandID, d.Command = cmd.ID, cmd
	d.ParkedAt, d.ParkedBy, d.Error = fromMicros(parkedAt), parkedBy.String, errText.String
	return &d, nil
}

// recordParked writes the dead-letter record of a command just moved to IN_TSQ.
func (e *executor) recordParked(ctx context.Context, tx *sql.Tx, id uuid.UUID, parkedBy any, at time.Time, replace bool) error {
	verb := "INSERT OR IGNORE"
	if replace {
		verb = "INSERT OR REPLACE"
	}
	_, err := tx.ExecContext(ctx, e.d.sql(verb+` INTO {schema}.command_dlq (command_id, parked_at, parked_by, attempts, error)
		SELECT id, ?, coalesce(?, worker_id), attempt,
			CASE WHEN error_code IS NULL THEN error_message WHEN error_message IS NULL THEN error_code
				ELSE error_code || ': ' || error_message END
		FROM {schema}.command WHERE id = ?`), micros(at), parkedBy, id.String())
	if err != nil || !replace {
		return err
	}
	// A park by the engine is audited here; an operator's action is audited by its caller.
	_, err = tx.ExecContext(ctx, e.d.sql(`INSERT INTO {schema}.audit_log (at, entity_type, entity_id, action, actor, reason, details)
		SELECT ?, 'command', id, 'DLQ_PARK', coalesce(worker_id, 'worker'),
			CASE WHEN error_code IS NULL THEN coalesce(error_message, '') WHEN error_message IS NULL THEN error_code
				ELSE error_code || ': ' || error_message END, json_object('attempts', attempt)
		FROM {schema}.command WHERE id = ?`), micros(at), id.String())
	return err
}

var commandClaimByIDSQL = `
	UPDATE {schema}.command SET
		status = 'RUNNING',
		attempt = attempt + 1,
		fence = fence + 1,
		lease_until = ?,
		started_at = ?,
		updated_at = ?,
		worker_id = ?,
		audit = CASE WHEN status = 'RUNNING' THEN json_insert(audit,
			'$[#]', ` + claimedEntrySQL + `,
			'$[#]', json_object('at', ` + auditTimeSQL("lease_until") + `, 'event', 'LEASE_EXPIRED',
				'from', 'RUNNING', 'to', 'PENDING', 'attempt', attempt, 'error_code', 'LEASE_EXPIRED'))
			ELSE audit END
	WHERE id = ? AND completed_at IS NULL AND parked_at IS NULL AND visible_at <= ?
		AND (status = 'PENDING' OR lease_until <= ?)
		AND (? IS NULL OR NOT EXISTS (SELECT 1 FROM {schema}.inbox WHERE message_id = ? AND handler = ?))
	RETURNING ` + commandCols

func (e *executor) CommandClaimByID(ctx context.Context, params *driver.CommandClaimByIDParams) (*driver.CommandRow, error) {
	now := now(params.Now)
	var message, handler any
	if params.Inbox != nil {
		message, handler = params.Inbox.MessageID, params.Inbox.Handler
	}
	cmd, err := scanCommand(e.write.QueryRowContext(ctx, e.d.sql(commandClaimByIDSQL), micros(now.Add(params.Lease)),
		micros(now), micros(now), params.WorkerID, params.ID.String(), micros(now), micros(now), message, message, handler), nil)
	if errors.Is(err, sql.ErrNoRows) {
		var exists, seen bool
		if err := e.write.QueryRowContext(ctx, e.d.sql(`SELECT EXISTS (SELECT 1 FROM {schema}.command WHERE id = ?),
			? IS NOT NULL AND EXISTS (SELECT 1 FROM {schema}.inbox WHERE message_id = ? AND handler = ?)`),
			params.ID.String(), message, message, handler).Scan(&exists, &seen); err != nil {
			return nil, err
		}
		if !exists {
			return nil, driver.ErrNotFound
		}
		if seen {
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
	queues, err := json.Marshal(params.Queues)
	if err != nil {
		return nil, err
	}
	nowUS := micros(now(params.Now))
	cond := `((status = 'RUNNING' AND lease_until <= ?) OR (status IN ('PENDING', 'RUNNING') AND deadline_at <= ?))`
	args := []any{string(queues), nowUS, nowUS, driver.LimitOrDefault(params.Max)}
	if params.LastAttempts {
		cond = `status = 'RUNNING' AND lease_until <= ? AND attempt >= max_attempts`
		args = []any{string(queues), nowUS, driver.LimitOrDefault(params.Max)}
	}
	rows, err := e.read.QueryContext(ctx, e.d.sql(`SELECT `+commandCols+` FROM {schema}.command
		WHERE queue IN (SELECT value FROM json_each(?)) AND completed_at IS NULL AND parked_at IS NULL
			AND `+cond+`
		ORDER BY visible_at LIMIT ?`), args...)
	if err != nil {
		return nil, err
	}
	return collectCommands(rows)
}
