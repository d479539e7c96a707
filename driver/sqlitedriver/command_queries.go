package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// commandColumns are returned by every query that yields a CommandRow (the audit column is only
// read by CommandGetByID), in the order scanCommand expects.
var commandColumns = []string{
	"id", "kind", "domain", "queue", "command_type", "data", "correlation_id", "causation_id",
	"reply_to", "status", "attempt", "max_attempts", "tenant_id", "batch_id", "headers",
	"idempotency_key", "sent_by", "visible_at", "lease_until", "fence", "worker_id", "result", "error_code",
	"error_message", "deadline_at", "parked_at", "created_at", "updated_at", "started_at", "completed_at",
}

var commandCols = strings.Join(commandColumns, ", ")

// terminalStatusesSQL lists the statuses that stamp completed_at.
const terminalStatusesSQL = `('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`

const commandInsertSQL = `
	INSERT INTO {schema}.command (id, kind, domain, queue, command_type, data, correlation_id,
		causation_id, reply_to, status, max_attempts, tenant_id, batch_id, headers, idempotency_key,
		sent_by, visible_at, deadline_at, created_at, updated_at, completed_at)
	VALUES (?, ?, ?, ?, ?, json(?), ?, ?, ?, ?, ?, ?, ?, json(?), ?, ?, ?, ?, ?, ?, ?)`

// commandInsertDedupeSQL skips commands whose (domain, idempotency key) exists, like the
// PostgreSQL ON CONFLICT; any other constraint violation still fails.
const commandInsertDedupeSQL = commandInsertSQL + `
	ON CONFLICT (domain, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING id`

// commandInsertArgs returns the arguments of commandInsertSQL for one command, stamping it
// with now, with the defaults the PostgreSQL driver applies. No audit is stored: the SENT entry
// is rebuilt from created_at and sent_by when the command is read.
func commandInsertArgs(p *driver.CommandInsertParams, now time.Time) ([]any, error) {
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
		data = json.RawMessage("{}")
	}
	var headers any
	if len(p.Headers) > 0 {
		b, err := json.Marshal(p.Headers)
		if err != nil {
			return nil, err
		}
		headers = string(b)
	}
	visibleAt := now
	if p.VisibleAt != nil {
		visibleAt = *p.VisibleAt
	}
	var completedAt any
	if status.Terminal() {
		completedAt = micros(now)
	}
	return []any{p.ID.String(), string(kind), p.Domain, p.Queue, p.Type, string(data),
		nullUUID(p.CorrelationID), nullUUID(p.CausationID), nullText(p.ReplyTo), string(status),
		p.MaxAttempts, nullText(p.TenantID), nullUUID(p.BatchID), headers,
		nullText(p.IdempotencyKey), nullText(p.Actor), micros(visibleAt), nullMicros(p.DeadlineAt),
		micros(now), micros(now), completedAt}, nil
}

// insertReply inserts the reply of an applied completion or operator action. Like the
// PostgreSQL driver it does not deduplicate: a clashing idempotency key fails the whole call.
func (e *executor) insertReply(ctx context.Context, tx *sql.Tx, reply *driver.CommandInsertParams, now time.Time) error {
	args, err := commandInsertArgs(reply, now)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, e.d.sql(commandInsertSQL), args...); err != nil {
		return fmt.Errorf("inserting reply %s: %w", reply.ID, err)
	}
	return nil
}

func (e *executor) CommandInsertMany(ctx context.Context, params *driver.CommandInsertManyParams) ([]driver.CommandInsertResult, error) {
	if len(params.Commands) == 0 {
		return nil, nil
	}
	now := now(params.Now)
	results := make([]driver.CommandInsertResult, len(params.Commands))
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, e.d.sql(commandInsertDedupeSQL))
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i, c := range params.Commands {
			args, err := commandInsertArgs(c, now)
			if err != nil {
				return err
			}
			var id string
			err = stmt.QueryRowContext(ctx, args...).Scan(&id)
			switch {
			case err == nil:
				results[i] = driver.CommandInsertResult{ID: c.ID, Inserted: true}
			case errors.Is(err, sql.ErrNoRows):
				// Deduplicated: the existing command (possibly inserted earlier in this batch)
				// is visible to this transaction.
				existing, err := e.commandIDByIdempotencyKey(ctx, tx, c.Domain, c.IdempotencyKey)
				if err != nil {
					return fmt.Errorf("resolving idempotency key %q in domain %q: %w", c.IdempotencyKey, c.Domain, err)
				}
				results[i] = driver.CommandInsertResult{ID: existing}
			default:
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

func (e *executor) commandIDByIdempotencyKey(ctx context.Context, q querier, domain, key string) (uuid.UUID, error) {
	var id string
	err := q.QueryRowContext(ctx, e.d.sql(`SELECT id FROM {schema}.command
		WHERE domain = ? AND idempotency_key = ?`), domain, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return uuid.Nil, driver.ErrNotFound
	}
	if err != nil {
		return uuid.Nil, err
	}
	return uuid.Parse(id)
}

func (e *executor) CommandGetByID(ctx context.Context, id uuid.UUID) (*driver.CommandRow, error) {
	row := e.read.QueryRowContext(ctx, e.d.sql(`SELECT `+commandCols+`, audit FROM {schema}.command WHERE id = ?`), id.String())
	var audit string
	cmd, err := scanCommand(row, &audit)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	stored, err := driver.DecodeStoredAudit([]byte(audit))
	if err != nil {
		return nil, fmt.Errorf("decoding audit of command %s: %w", id, err)
	}
	cmd.Audit = driver.CurrentAudit(cmd, stored)
	return cmd, nil
}

func (e *executor) CommandGetByIdempotencyKey(ctx context.Context, domain, key string) (*driver.CommandRow, error) {
	row := e.read.QueryRowContext(ctx, e.d.sql(`SELECT `+commandCols+` FROM {schema}.command
		WHERE domain = ? AND idempotency_key = ?`), domain, key)
	cmd, err := scanCommand(row, nil)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	return cmd, err
}

func (e *executor) CommandList(ctx context.Context, params *driver.CommandListParams) ([]*driver.CommandRow, error) {
	var f filter
	anyOf(&f, "status", params.Statuses)
	if len(params.Statuses) == 1 && params.Statuses[0] == driver.CommandStatusInTSQ {
		f.cond("parked_at IS NOT NULL") // lets the troubleshooting-queue index serve it
	}
	f.equal("kind", string(params.Kind))
	f.equal("domain", params.Domain)
	f.equal("queue", params.Queue)
	f.equal("command_type", params.Type)
	f.equal("tenant_id", params.TenantID)
	f.equalID("batch_id", params.BatchID)
	f.equalID("correlation_id", params.CorrelationID)
	f.beforeID(params.BeforeID)
	query := f.query(`SELECT `+commandCols+` FROM {schema}.command`, params.Limit)
	rows, err := e.read.QueryContext(ctx, e.d.sql(query), f.args...)
	if err != nil {
		return nil, err
	}
	return collectCommands(rows)
}

// auditTimeSQL formats a column of unix microseconds for an audit entry: RFC 3339 in UTC with
// microseconds, which encoding/json reads back as the same instant. NULL stays NULL.
func auditTimeSQL(column string) string {
	return `strftime('%Y-%m-%dT%H:%M:%S', ` + column + ` / 1000000, 'unixepoch') || printf('.%06dZ', ` + column + ` % 1000000)`
}

// claimedEntrySQL is the CLAIMED audit entry of the claim a row holds, built from the row before
// the update: it is written by the statement that ends the claim (see driver.CurrentAudit).
var claimedEntrySQL = `json_object('at', ` + auditTimeSQL("started_at") + `, 'event', 'CLAIMED',
	'from', 'PENDING', 'to', 'RUNNING', 'attempt', attempt, 'actor', worker_id)`

// commandClaimSQL claims in one statement; the single writer connection makes it atomic
// without SKIP LOCKED. Column references on the right of SET read the row before the update.
// A claim leaves visible_at alone (a RUNNING row is claimable again when its lease runs out) and
// writes audit only when it takes over an expired claim: the claim whose lease ran out and its
// expiry. A first claim is recorded by the statement that ends it.
var commandClaimSQL = `
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
	WHERE id IN (
		SELECT id FROM {schema}.command
		WHERE queue = ? AND completed_at IS NULL AND parked_at IS NULL AND visible_at <= ?
			-- A lease that expired on the last attempt is not claimed again: the watchdog times
			-- the command out (CommandListExpired with LastAttempts).
			AND (status = 'PENDING' OR (lease_until <= ? AND attempt < max_attempts))
		ORDER BY visible_at
		LIMIT ?
	)
	RETURNING ` + commandCols

func (e *executor) CommandClaim(ctx context.Context, params *driver.CommandClaimParams) ([]*driver.CommandRow, error) {
	if params.Max <= 0 {
		return nil, nil // SQLite reads a negative LIMIT as "no limit"
	}
	now := now(params.Now)
	leaseUntil := micros(now.Add(params.Lease))
	rows, err := e.write.QueryContext(ctx, e.d.sql(commandClaimSQL), leaseUntil, micros(now),
		micros(now), params.WorkerID, params.Queue, micros(now), micros(now), params.Max)
	if err != nil {
		return nil, err
	}
	commands, err := collectCommands(rows)
	if err != nil {
		return nil, err
	}
	// RETURNING has no order; give a stable one, oldest command first.
	sort.Slice(commands, func(i, j int) bool {
		if !commands[i].CreatedAt.Equal(commands[j].CreatedAt) {
			return commands[i].CreatedAt.Before(commands[j].CreatedAt)
		}
		return commands[i].ID.String() < commands[j].ID.String()
	})
	return commands, nil
}

// commandCompleteSQL applies one outcome when the claim still holds. Unless the outcome is a
// handler's COMPLETED or FAILED (rebuilt from the columns by driver.CurrentAudit), it appends
// the claim it ends and then the outcome. json_patch onto an empty object drops the null
// members, like jsonb_strip_nulls.
var commandCompleteSQL = `
	UPDATE {schema}.command SET
		status = ?,
		attempt = attempt - ?,
		visible_at = coalesce(?, visible_at),
		lease_until = NULL,
		result = coalesce(json(?), result),
		error_code = ?,
		error_message = ?,
		completed_at = ?,
		parked_at = ?,
		updated_at = ?,
		audit = CASE WHEN ? THEN json_insert(audit,
			'$[#]', ` + claimedEntrySQL + `,
			'$[#]', json_patch('{}', json_object(
				'at', ?, 'event', ?, 'from', 'RUNNING', 'to', ?, 'attempt', attempt,
				'error_code', ?, 'error_message', ?)))
			ELSE audit END
	WHERE id = ? AND fence = ? AND status = 'RUNNING'`

func (e *executor) CommandCompleteMany(ctx context.Context, params *driver.CommandCompleteManyParams) ([]uuid.UUID, error) {
	if len(params.Completions) == 0 {
		return nil, nil
	}
	now := now(params.Now)
	var applied []uuid.UUID
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, e.d.sql(commandCompleteSQL))
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, c := range params.Completions {
			var visibleAt, completedAt, parkedAt any
			if c.Status == driver.CommandStatusPending {
				visibleAt = micros(now.Add(c.RetryDelay))
			}
			if c.Status.Terminal() {
				completedAt = micros(now)
			}
			if c.Status == driver.CommandStatusInTSQ {
				parkedAt = micros(now)
			}
			storesAudit := c.Status != driver.CommandStatusCompleted && c.Status != driver.CommandStatusFailed
			errorCode, errorMessage := nullText(c.ErrorCode), nullText(c.ErrorMessage)
			res, err := stmt.ExecContext(ctx, string(c.Status), boolInt(c.Release), visibleAt,
				nullJSON(c.Result), errorCode, errorMessage, completedAt, parkedAt, micros(now),
				boolInt(storesAudit), auditTime(now), c.Event, string(c.Status), errorCode, errorMessage,
				c.ID.String(), c.Fence)
			if err != nil {
				return fmt.Errorf("completing command %s: %w", c.ID, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 0 {
				continue // the claim was lost: a newer claim or an operator moved the command on
			}
			applied = append(applied, c.ID)
			if c.Reply != nil {
				if err := e.insertReply(ctx, tx, completionReply(c), now); err != nil {
					return err
				}
			}
			if c.Status == driver.CommandStatusInTSQ {
				if err := e.recordParked(ctx, tx, c.ID, nil, now, true); err != nil {
					return fmt.Errorf("recording parked command %s: %w", c.ID, err)
				}
			}
			if len(c.Outbox) > 0 {
				if err := insertOutbox(ctx, e.d, tx, c.Outbox, now, nil); err != nil {
					return fmt.Errorf("writing outbox messages of command %s: %w", c.ID, err)
				}
			}
			if c.Inbox != nil {
				if _, err := tx.ExecContext(ctx, e.d.sql(`INSERT INTO {schema}.inbox (message_id, handler, processed_at)
					VALUES (?, ?, ?) ON CONFLICT DO NOTHING`), c.Inbox.MessageID, c.Inbox.Handler, micros(now)); err != nil {
					return fmt.Errorf("recording inbox message %s: %w", c.Inbox.MessageID, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// completionReply is the reply a completion inserts, as driver.CommandCompletion.Reply
// documents: PENDING, of kind reply, caused by the completed command, from the fields the
// PostgreSQL driver passes on.
func completionReply(c *driver.CommandCompletion) *driver.CommandInsertParams {
	r := c.Reply
	return &driver.CommandInsertParams{
		ID: r.ID, Kind: driver.CommandKindReply, Domain: r.Domain, Queue: r.Queue, Type: r.Type,
		Data: r.Data, CorrelationID: r.CorrelationID, CausationID: c.ID, MaxAttempts: r.MaxAttempts,
		TenantID: r.TenantID, Actor: r.Actor, Headers: r.Headers,
	}
}

var commandOperatorSQL = `
	UPDATE {schema}.command SET
		status = ?,
		attempt = CASE WHEN ? THEN 0 ELSE attempt END,
		visible_at = coalesce(?, visible_at),
		lease_until = NULL,
		result = coalesce(json(?), result),
		error_code = coalesce(?, error_code),
		error_message = coalesce(?, error_message),
		completed_at = ?,
		parked_at = CASE WHEN ? THEN coalesce(parked_at, ?) END,
		updated_at = ?,
		audit = json_insert(audit, '$[#]', json_patch('{}', json_object(
			'at', ?, 'event', ?, 'from', status, 'to', ?, 'attempt', attempt,
			'actor', ?, 'reason', ?, 'error_code', ?, 'error_message', ?)))
	WHERE id = ? AND status IN (SELECT value FROM json_each(?))
	RETURNING ` + commandCols

func (e *executor) CommandOperatorAction(ctx context.Context, params *driver.CommandOperatorParams) (*driver.CommandRow, error) {
	now := now(params.Now)
	from, err := json.Marshal(params.FromStatuses)
	if err != nil {
		return nil, err
	}
	if params.FromStatuses == nil {
		from = []byte("[]")
	}
	var visibleAt, completedAt any
	if params.ToStatus == driver.CommandStatusPending {
		visibleAt = micros(now)
	}
	if params.ToStatus.Terminal() {
		completedAt = micros(now)
	}
	errorCode, errorMessage := nullText(params.ErrorCode), nullText(params.ErrorMessage)
	var cmd *driver.CommandRow
	err = e.inTx(ctx, func(tx *sql.Tx) error {
		row := tx.QueryRowContext(ctx, e.d.sql(commandOperatorSQL),
			string(params.ToStatus), params.ResetAttempts, visibleAt, nullJSON(params.Result),
			errorCode, errorMessage, completedAt,
			boolInt(params.ToStatus == driver.CommandStatusInTSQ), micros(now), micros(now),
			auditTime(now), params.Event, string(params.ToStatus), params.Actor,
			nullText(params.Reason), errorCode, errorMessage,
			params.ID.String(), string(from))
		var err error
		cmd, err = scanCommand(row, nil)
		if errors.Is(err, sql.ErrNoRows) {
			var exists int
			err := tx.QueryRowContext(ctx, e.d.sql(`SELECT 1 FROM {schema}.command WHERE id = ?`), params.ID.String()).Scan(&exists)
			if errors.Is(err, sql.ErrNoRows) {
				return driver.ErrNotFound
			}
			if err != nil {
				return err
			}
			return driver.ErrConflict
		}
		if err != nil {
			return err
		}
		if params.ToStatus == driver.CommandStatusInTSQ {
			if err := e.recordParked(ctx, tx, params.ID, params.Actor, now, false); err != nil {
				return err
			}
		} else if _, err := tx.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.command_dlq WHERE command_id = ?`), params.ID.String()); err != nil {
			return err
		}
		if len(params.Outbox) > 0 {
			if err := insertOutbox(ctx, e.d, tx, params.Outbox, now, nil); err != nil {
				return err
			}
		}
		if params.Reply != nil {
			return e.insertReply(ctx, tx, params.Reply, now)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cmd, nil
}

// commandQueueDepthsSQL counts unfinished rows and parked rows apart, each through its partial
// index.
const commandQueueDepthsSQL = `
		SELECT queue, domain, kind,
			sum(status = 'PENDING' AND visible_at <= ?),
			sum(status = 'PENDING' AND visible_at > ?),
			sum(status = 'RUNNING'),
			0
		FROM {schema}.command WHERE completed_at IS NULL AND parked_at IS NULL
		GROUP BY queue, domain, kind
		UNION ALL
		SELECT queue, domain, kind, 0, 0, 0, count(*)
		FROM {schema}.command WHERE parked_at IS NOT NULL
		GROUP BY queue, domain, kind`

func (e *executor) CommandQueueDepths(ctx context.Context) ([]*driver.QueueDepth, error) {
	nowUS := micros(now(nil))
	rows, err := e.read.QueryContext(ctx, e.d.sql(commandQueueDepthsSQL), nowUS, nowUS)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byQueue := map[string]*driver.QueueDepth{}
	for rows.Next() {
		var q driver.QueueDepth
		var kind string
		if err := rows.Scan(&q.Queue, &q.Domain, &kind, &q.Ready, &q.Scheduled, &q.Running, &q.InTSQ); err != nil {
			return nil, err
		}
		q.Kind = driver.CommandKind(kind)
		if existing, ok := byQueue[q.Queue]; ok {
			existing.Ready += q.Ready
			existing.Scheduled += q.Scheduled
			existing.Running += q.Running
			existing.InTSQ += q.InTSQ
			continue
		}
		byQueue[q.Queue] = &q
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	depths := make([]*driver.QueueDepth, 0, len(byQueue))
	for _, q := range byQueue {
		depths = append(depths, q)
	}
	driver.SortQueueDepths(depths)
	return depths, nil
}

func (e *executor) CommandStats(ctx context.Context, params *driver.CommandStatsParams) ([]*driver.CommandStat, error) {
	since := micros(params.Since)
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT domain, command_type, status, count(*)
		FROM {schema}.command WHERE created_at >= ? AND kind = 'command'
		GROUP BY domain, command_type, status`), since)
	if err != nil {
		return nil, err
	}
	stats := map[[2]string]*driver.CommandStat{}
	for rows.Next() {
		var domain, typ, status string
		var n int64
		if err := rows.Scan(&domain, &typ, &status, &n); err != nil {
			rows.Close()
			return nil, err
		}
		key := [2]string{domain, typ}
		if stats[key] == nil {
			stats[key] = &driver.CommandStat{Domain: domain, Type: typ, Counts: map[driver.CommandStatus]int64{}}
		}
		stats[key].Counts[driver.CommandStatus(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = e.read.QueryContext(ctx, e.d.sql(`
		SELECT domain, command_type, completed_at - started_at
		FROM {schema}.command
		WHERE created_at >= ? AND kind = 'command' AND status = 'COMPLETED' AND started_at IS NOT NULL`), since)
	if err != nil {
		return nil, err
	}
	durations := map[[2]string][]float64{}
	completed := map[[2]string]int64{}
	for rows.Next() {
		var domain, typ string
		var us sql.NullInt64
		if err := rows.Scan(&domain, &typ, &us); err != nil {
			rows.Close()
			return nil, err
		}
		key := [2]string{domain, typ}
		completed[key]++
		if us.Valid {
			// Seconds as a float, the unit PostgreSQL's percentile_cont works in.
			durations[key] = append(durations[key], float64(us.Int64)/1e6)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for key, n := range completed {
		s := stats[key]
		if s == nil {
			continue
		}
		s.Completed = n
		values := durations[key]
		sort.Float64s(values)
		s.P50 = time.Duration(percentileCont(values, 0.5) * float64(time.Second))
		s.P99 = time.Duration(percentileCont(values, 0.99) * float64(time.Second))
	}
	return driver.SortedCommandStats(stats), nil
}

// percentileCont is PostgreSQL's percentile_cont over sorted values: linear interpolation
// between the two nearest ranks, computed the same way (float8 arithmetic) so that both drivers
// report the same durations. It returns 0 for no values.
func percentileCont(sorted []float64, fraction float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	position := fraction * float64(len(sorted)-1)
	first := math.Floor(position)
	second := math.Ceil(position)
	lo, hi := sorted[int(first)], sorted[int(second)]
	if first == second {
		return lo
	}
	return lo + (hi-lo)*(position-first)
}

const commandCountRunningSQL = `SELECT count(*) FROM {schema}.command
	WHERE queue = ? AND completed_at IS NULL AND parked_at IS NULL AND status = 'RUNNING'
		AND lease_until > ?`

func (e *executor) CommandCountRunning(ctx context.Context, queue string) (int64, error) {
	var n int64
	err := e.read.QueryRowContext(ctx, e.d.sql(commandCountRunningSQL), queue, micros(now(nil))).Scan(&n)
	return n, err
}

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface {
	Scan(dest ...any) error
}

func collectCommands(rows *sql.Rows) ([]*driver.CommandRow, error) {
	defer rows.Close()
	var out []*driver.CommandRow
	for rows.Next() {
		cmd, err := scanCommand(rows, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, cmd)
	}
	return out, rows.Err()
}

func scanCommand(row rowScanner, audit *string) (*driver.CommandRow, error) {
	var (
		c                                                driver.CommandRow
		id, kind, status, data                           string
		correlationID, causationID, batchID              sql.NullString
		replyTo, tenantID, idempotencyKey, headers       sql.NullString
		workerID, errorCode, errorMessage, result        sql.NullString
		sentBy                                           sql.NullString
		visibleAt, createdAt, updatedAt                  int64
		leaseUntil, deadlineAt, startedAt, completedAtUS sql.NullInt64
		parkedAt                                         sql.NullInt64
	)
	dest := []any{&id, &kind, &c.Domain, &c.Queue, &c.Type, &data, &correlationID, &causationID,
		&replyTo, &status, &c.Attempt, &c.MaxAttempts, &tenantID, &batchID, &headers,
		&idempotencyKey, &sentBy, &visibleAt, &leaseUntil, &c.Fence, &workerID, &result, &errorCode,
		&errorMessage, &deadlineAt, &parkedAt, &createdAt, &updatedAt, &startedAt, &completedAtUS}
	if audit != nil {
		dest = append(dest, audit)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	var err error
	if c.ID, err = uuid.Parse(id); err != nil {
		return nil, fmt.Errorf("decoding command id %q: %w", id, err)
	}
	if c.CorrelationID, err = parseNullUUID(correlationID); err != nil {
		return nil, fmt.Errorf("decoding correlation id of command %s: %w", c.ID, err)
	}
	if c.CausationID, err = parseNullUUID(causationID); err != nil {
		return nil, fmt.Errorf("decoding causation id of command %s: %w", c.ID, err)
	}
	if c.BatchID, err = parseNullUUID(batchID); err != nil {
		return nil, fmt.Errorf("decoding batch id of command %s: %w", c.ID, err)
	}
	c.Kind = driver.CommandKind(kind)
	c.Status = driver.CommandStatus(status)
	c.Data = json.RawMessage(data)
	if result.Valid {
		c.Result = json.RawMessage(result.String)
	}
	c.ReplyTo = replyTo.String
	c.TenantID = tenantID.String
	c.IdempotencyKey = idempotencyKey.String
	c.WorkerID = workerID.String
	c.SentBy = sentBy.String
	c.ErrorCode = errorCode.String
	c.ErrorMessage = errorMessage.String
	c.VisibleAt = fromMicros(visibleAt)
	c.LeaseUntil = fromNullMicros(leaseUntil)
	c.DeadlineAt = fromNullMicros(deadlineAt)
	c.ParkedAt = fromNullMicros(parkedAt)
	c.CreatedAt = fromMicros(createdAt)
	c.UpdatedAt = fromMicros(updatedAt)
	c.StartedAt = fromNullMicros(startedAt)
	c.CompletedAt = fromNullMicros(completedAtUS)
	if headers.Valid && headers.String != "" {
		if err := json.Unmarshal([]byte(headers.String), &c.Headers); err != nil {
			return nil, fmt.Errorf("decoding headers of command %s: %w", c.ID, err)
		}
	}
	return &c, nil
}
