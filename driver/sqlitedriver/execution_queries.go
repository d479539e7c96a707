package sqlitedriver

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// The execution queries have the PostgreSQL driver's semantics (driver/pgdriver/
// execution_queries.go is the reference). Where PostgreSQL does a batch in one statement of
// data-modifying CTEs, this driver runs one statement per row inside one transaction: the single
// writer connection makes that as atomic, and as isolated, as the one statement.

// executionColumns are returned by every query that yields an ExecutionRow, in the order
// scanExecution expects.
var executionColumns = []string{
	"id", "model", "type", "domain", "tenant_id", "business_key", "batch_id", "status", "state",
	"step", "current_wait", "next_retry_at", "next_wait_timeout_at", "deadline_at", "retries",
	"lease_until", "fence", "worker_id", "wake_at", "responses_received", "responses_applied",
	"error_code", "error_message", "created_at", "updated_at", "completed_at",
	"parent_id", "root_id", "continued_from", "continued_as", "traceparent", "suspended_from",
	"suspend_requested",
}

var executionCols = strings.Join(executionColumns, ", ")

// executionLogInsertSQL stores a zero attempt or max_attempts as NULL, as PostgreSQL does.
const executionLogInsertSQL = `
	INSERT INTO {schema}.execution_log (execution_id, seq, at, entry_type, name, step_status,
		attempt, max_attempts, request, response, error_code, error_message, actor, reason, started_at)
	VALUES (?, ?, ?, ?, ?, ?, nullif(?, 0), nullif(?, 0), json(?), json(?), ?, ?, ?, ?, ?)`

// startedMicros is a log entry's start, never after its end (nowUS), as on PostgreSQL.
func startedMicros(t *time.Time, nowUS int64) any {
	if t == nil {
		return nil
	}
	return min(micros(*t), nowUS)
}

// insertExecutionLog writes log entries of one execution, stamped with nowUS.
func (e *executor) insertExecutionLog(ctx context.Context, tx *sql.Tx, id uuid.UUID, entries []*driver.ExecutionLogEntry, nowUS int64) error {
	for _, l := range entries {
		if _, err := tx.ExecContext(ctx, e.d.sql(executionLogInsertSQL), id.String(), l.Seq, nowUS,
			l.EntryType, nullText(l.Name), nullText(l.StepStatus), l.Attempt, l.MaxAttempts,
			nullJSON(l.Request), nullJSON(l.Response), nullText(l.ErrorCode), nullText(l.ErrorMessage),
			nullText(l.Actor), nullText(l.Reason), startedMicros(l.StartedAt, nowUS)); err != nil {
			return fmt.Errorf("inserting log entry %d of execution %s: %w", l.Seq, id, err)
		}
	}
	return nil
}

func (e *executor) ExecutionGet(ctx context.Context, id uuid.UUID) (*driver.ExecutionRow, error) {
	row := e.read.QueryRowContext(ctx, e.d.sql(`SELECT `+executionCols+` FROM {schema}.execution WHERE id = ?`), id.String())
	x, err := scanExecution(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	return x, err
}

func (e *executor) ExecutionList(ctx context.Context, params *driver.ExecutionListParams) ([]*driver.ExecutionRow, error) {
	var f filter
	anyOf(&f, "status", params.Statuses)
	f.equal("model", params.Model)
	f.equal("type", params.Type)
	f.equal("domain", params.Domain)
	f.equal("tenant_id", params.TenantID)
	f.equal("business_key", params.BusinessKey)
	f.equalID("batch_id", params.BatchID)
	f.equalID("parent_id", params.ParentID)
	if err := driver.ValidateAttributeSearch(params.Attributes); err != nil {
		return nil, err
	}
	attributesMatch(&f, params.Attributes)
	f.beforeID(params.BeforeID)
	query := f.query(`SELECT `+executionCols+` FROM {schema}.execution`, params.Limit)
	rows, err := e.read.QueryContext(ctx, e.d.sql(query), f.args...)
	if err != nil {
		return nil, err
	}
	return collectExecutions(rows)
}

// executionClaimSQL takes the picked executions. It runs right after the pick in the same
// transaction, so it needs no recheck.
const executionClaimSQL = `
	UPDATE {schema}.execution SET
		status = CASE WHEN status IN ('PENDING', 'WAITING_FOR_ASYNC', 'WAITING_FOR_RETRY')
			THEN 'EXECUTING' ELSE status END,
		fence = fence + 1,
		lease_until = ?,
		wake_at = ?,
		worker_id = ?,
		updated_at = ?
	WHERE id IN (SELECT value FROM json_each(?))
	RETURNING `

// ExecutionClaim picks, then updates: SQLite's RETURNING shows only the new row, and the claim
// must report the status it took the execution from.
func (e *executor) ExecutionClaim(ctx context.Context, params *driver.ExecutionClaimParams) ([]*driver.ExecutionRow, error) {
	var where, order string
	switch params.Kind {
	case driver.ClaimPending:
		// A response may wake a SUSPENDED execution: it runs after the resume.
		where, order = "wake_at <= ? AND status NOT IN ('SUSPENDED', 'QUEUED')", "wake_at"
	case driver.ClaimRetry:
		where, order = "status = 'WAITING_FOR_RETRY' AND next_retry_at <= ?", "next_retry_at"
	default:
		return nil, fmt.Errorf("unknown claim kind %q", params.Kind)
	}
	if params.Max <= 0 {
		return nil, nil // SQLite reads a negative LIMIT as "no limit"
	}
	nowUS := micros(now(params.Now))
	leaseUntil := nowUS + params.Lease.Microseconds()
	pick := `SELECT id, status, lease_until IS NOT NULL FROM {schema}.execution
		WHERE ` + where + ` AND (lease_until IS NULL OR lease_until <= ?)`
	args := []any{nowUS, nowUS}
	if len(params.Types) > 0 {
		types, err := json.Marshal(params.Types)
		if err != nil {
			return nil, err
		}
		pick += ` AND type IN (SELECT value FROM json_each(?))`
		args = append(args, string(types))
	}
	// No tie-break: executions inserted together share one wake_at, and ordering them by id
	// would sort them all on every claim. Ties come in index order.
	pick += ` ORDER BY ` + order + ` LIMIT ?`
	args = append(args, params.Max)

	var claimed []*driver.ExecutionRow
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, e.d.sql(pick), args...)
		if err != nil {
			return err
		}
		var picked []string
		claimedFrom := map[string]string{}
		stale := map[string]bool{}
		for rows.Next() {
			var id, status string
			var leased bool
			if err := rows.Scan(&id, &status, &leased); err != nil {
				rows.Close()
				return err
			}
			picked = append(picked, id)
			claimedFrom[id], stale[id] = status, leased
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(picked) == 0 {
			return nil
		}
		pickedJSON, err := json.Marshal(picked)
		if err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, e.d.sql(executionClaimSQL+executionCols),
			leaseUntil, leaseUntil, params.WorkerID, nowUS, string(pickedJSON))
		if err != nil {
			return err
		}
		if claimed, err = collectExecutions(rows); err != nil {
			return err
		}
		rank := make(map[string]int, len(picked))
		for i, id := range picked {
			rank[id] = i
		}
		for _, x := range claimed {
			x.ClaimedFrom, x.StaleLease = driver.ExecutionStatus(claimedFrom[x.ID.String()]), stale[x.ID.String()]
		}
		// RETURNING has no order; give the pick's.
		sort.Slice(claimed, func(i, j int) bool { return rank[claimed[i].ID.String()] < rank[claimed[j].ID.String()] })
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// executionAcquireSQL leaves the status alone, so the row it returns shows the status the
// execution was acquired from.
const executionAcquireSQL = `
	UPDATE {schema}.execution SET
		fence = fence + 1,
		lease_until = ?,
		wake_at = ?,
		worker_id = ?,
		updated_at = ?
	WHERE id = ? AND (lease_until IS NULL OR lease_until <= ?) AND status <> 'QUEUED'
	RETURNING `

func (e *executor) ExecutionAcquire(ctx context.Context, params *driver.ExecutionAcquireParams) (*driver.ExecutionRow, error) {
	nowUS := micros(now(params.Now))
	leaseUntil := nowUS + params.Lease.Microseconds()
	var x *driver.ExecutionRow
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		row := tx.QueryRowContext(ctx, e.d.sql(executionAcquireSQL+executionCols),
			leaseUntil, leaseUntil, params.WorkerID, nowUS, params.ID.String(), nowUS)
		var err error
		x, err = scanExecution(row)
		if errors.Is(err, sql.ErrNoRows) {
			var exists int
			err := tx.QueryRowContext(ctx, e.d.sql(`SELECT 1 FROM {schema}.execution WHERE id = ?`), params.ID.String()).Scan(&exists)
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
		x.ClaimedFrom = x.Status
		return nil
	})
	if err != nil {
		return nil, err
	}
	return x, nil
}

// executionCheckpointSQL writes one fenced checkpoint. Column references on the right of SET
// read the row before the update. The Go side resolves what does not depend on the row:
// :next_retry_at and :next_wait_timeout_at are final, :lease_end is the renewed lease's end (NULL
// when not renewing). A release wakes the execution at once for responses it did not apply and,
// unless it ended, for signals that arrived while it ran, else at the earliest of :wake_at, its
// pending timers and its open waits' timeouts.
const executionCheckpointSQL = `
	UPDATE {schema}.execution SET
		status = CASE WHEN :release AND suspend_requested AND NOT :terminal THEN 'SUSPENDED' ELSE :status END,
		suspended_from = CASE WHEN :release AND suspend_requested AND NOT :terminal
			THEN CASE WHEN :status = 'EXECUTING' THEN 'PENDING' ELSE :status END
			ELSE suspended_from END,
		suspend_requested = suspend_requested AND NOT :release AND NOT :terminal,
		state = coalesce(json(:state), state),
		step = :step,
		current_wait = :current_wait,
		next_retry_at = :next_retry_at,
		next_wait_timeout_at = :next_wait_timeout_at,
		deadline_at = coalesce(:deadline_at, deadline_at),
		retries = :retries,
		lease_until = CASE WHEN :release THEN NULL
			WHEN :lease_end IS NOT NULL THEN :lease_end ELSE lease_until END,
		wake_at = CASE
			-- a suspended execution waits for its resume, outside the pending poller's index
			WHEN :release AND (suspend_requested AND NOT :terminal OR :status = 'SUSPENDED') THEN NULL
			WHEN :release AND responses_received > :responses_applied THEN :now
			WHEN :release AND :terminal THEN :wake_at
			WHEN :release AND signal_wake THEN :now
			WHEN :release THEN (SELECT min(at) FROM (
				SELECT :wake_at AS at
				UNION ALL SELECT min(t.fire_at) FROM {schema}.execution_timer t
					WHERE t.execution_id = :id AND t.status = 'PENDING'
				UNION ALL SELECT min(w.timeout_at) FROM {schema}.execution_wait w
					WHERE w.execution_id = :id))
			WHEN :lease_end IS NOT NULL THEN :lease_end
			ELSE wake_at END,
		signal_wake = signal_wake AND NOT :release,
		responses_applied = :responses_applied,
		error_code = :error_code,
		error_message = :error_message,
		completed_at = CASE WHEN :terminal THEN coalesce(completed_at, :now) END,
		updated_at = :now
	WHERE id = :id AND fence = :fence
	RETURNING status, suspend_requested, suspend_actor, suspend_reason`

func (e *executor) ExecutionCheckpointMany(ctx context.Context, params *driver.ExecutionCheckpointManyParams) ([]uuid.UUID, error) {
	if len(params.Checkpoints) == 0 {
		return nil, nil
	}
	now := now(params.Now)
	nowUS := micros(now)
	// afterNow is now plus d in whole microseconds when that is positive, else fallback, the
	// rule PostgreSQL applies to retry delays, wait timeouts and leases.
	afterNow := func(d int64, fallback any) any {
		if d > 0 {
			return nowUS + d
		}
		return fallback
	}
	for _, c := range params.Checkpoints {
		if err := c.ValidateSignalOps(); err != nil {
			return nil, fmt.Errorf("checkpointing execution %s: %w", c.ID, err)
		}
	}
	var applied []uuid.UUID
	var written []driver.WrittenMessage // the outbox messages written, for the hand-off
	var handoff *driver.OutboxHandoff
	if e.tx == nil { // committed when it returns: not in a caller's transaction
		handoff = params.OutboxHandoff
	}
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		var appliedCheckpoints []*driver.ExecutionCheckpoint
		stmt, err := tx.PrepareContext(ctx, e.d.sql(executionCheckpointSQL))
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, c := range params.Checkpoints {
			if c.HasSignalOps() {
				// Timers and waits go first so that the checkpoint's wake_at sees them.
				written, err := e.writeSignalOps(ctx, tx, c, nowUS)
				if err != nil {
					return err
				}
				if !written {
					continue // fenced out
				}
			}
			var state any
			if c.State != nil {
				state = string(c.State)
			}
			var (
				status                string
				requested             bool
				suspActor, suspReason sql.NullString
			)
			err := stmt.QueryRowContext(ctx,
				sql.Named("status", string(c.Status)),
				sql.Named("state", state),
				sql.Named("step", nullText(c.Step)),
				sql.Named("current_wait", nullText(c.CurrentWait)),
				sql.Named("next_retry_at", afterNow(c.RetryDelay.Microseconds(), nullMicros(c.NextRetryAt))),
				sql.Named("next_wait_timeout_at", afterNow(c.WaitTimeout.Microseconds(), nullMicros(c.NextWaitTimeoutAt))),
				sql.Named("deadline_at", nullMicros(c.DeadlineAt)),
				sql.Named("retries", c.Retries),
				sql.Named("release", boolInt(c.Release)),
				sql.Named("lease_end", afterNow(c.Lease.Microseconds(), nil)),
				sql.Named("responses_applied", c.ResponsesApplied),
				sql.Named("now", nowUS),
				sql.Named("wake_at", nullMicros(c.WakeAt)),
				sql.Named("error_code", nullText(c.ErrorCode)),
				sql.Named("error_message", nullText(c.ErrorMessage)),
				sql.Named("terminal", boolInt(c.Status.Terminal())),
				sql.Named("id", c.ID.String()),
				sql.Named("fence", c.Fence)).Scan(&status, &requested, &suspActor, &suspReason)
			if errors.Is(err, sql.ErrNoRows) {
				continue // fenced out: another runner holds the execution now, or it is gone
			}
			if err != nil {
				return fmt.Errorf("checkpointing execution %s: %w", c.ID, err)
			}
			applied = append(applied, c.ID)
			suspendedNow := status == string(driver.ExecutionSuspended) && c.Status != driver.ExecutionSuspended
			c.SuspendRequested = requested || suspendedNow
			if err := e.insertExecutionLog(ctx, tx, c.ID, c.Log, nowUS); err != nil {
				return err
			}
			appliedCheckpoints = append(appliedCheckpoints, c)
			if err := e.writeExecutionAttributes(ctx, tx, c.ID, c.Attributes); err != nil {
				return err
			}
			if suspendedNow {
				// The suspension's log entry follows the checkpoint's own entries.
				if _, err := tx.ExecContext(ctx, e.d.sql(`
					INSERT INTO {schema}.execution_log (execution_id, seq, at, entry_type, name, step_status, actor, reason)
					SELECT ?, coalesce(max(seq), 0) + 1, ?, 'LIFECYCLE', 'SUSPENDED', 'SUSPENDED', ?, ?
					FROM {schema}.execution_log WHERE execution_id = ?`),
					c.ID.String(), nowUS, suspActor, suspReason, c.ID.String()); err != nil {
					return fmt.Errorf("logging the suspension of execution %s: %w", c.ID, err)
				}
			}
			for _, cmd := range c.Commands {
				args, err := commandInsertArgs(cmd, now)
				if err != nil {
					return err
				}
				var id string
				err = tx.QueryRowContext(ctx, e.d.sql(commandInsertDedupeSQL), args...).Scan(&id)
				if err != nil && !errors.Is(err, sql.ErrNoRows) { // no row: deduplicated
					return fmt.Errorf("inserting command %s of execution %s: %w", cmd.ID, c.ID, err)
				}
			}
			if err := writeOutbox(ctx, e.d, tx, c.Outbox, now, handoff, &written); err != nil {
				return fmt.Errorf("writing the outbox messages of execution %s: %w", c.ID, err)
			}
			if suspendedNow {
				if err := writeOutbox(ctx, e.d, tx, withSuspender(c.SuspendOutbox, suspActor, suspReason), now, handoff, &written); err != nil {
					return fmt.Errorf("writing the outbox messages of the suspension of execution %s: %w", c.ID, err)
				}
			}
		}
		return e.checkpointFollowUps(ctx, tx, appliedCheckpoints, nowUS)
	})
	if err != nil {
		return nil, err
	}
	if len(written) > 0 && handoff != nil { // committed
		slices.SortFunc(written, func(a, b driver.WrittenMessage) int { return cmp.Compare(a.ID, b.ID) })
		handoff.Written(written)
	}
	return applied, nil
}

func (e *executor) ExecutionLogList(ctx context.Context, id uuid.UUID) ([]*driver.ExecutionLogEntry, error) {
	return e.executionLogAfter(ctx, id, 0)
}

// executionLogAfter reads the log entries of an execution with a sequence above afterSeq.
func (e *executor) executionLogAfter(ctx context.Context, id uuid.UUID, afterSeq int64) ([]*driver.ExecutionLogEntry, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT execution_id, seq, at, entry_type, coalesce(name, ''), coalesce(step_status, ''),
			coalesce(attempt, 0), coalesce(max_attempts, 0), request, response,
			coalesce(error_code, ''), coalesce(error_message, ''), coalesce(actor, ''), coalesce(reason, ''),
			started_at
		FROM {schema}.execution_log WHERE execution_id = ? AND seq > ? ORDER BY seq`), id.String(), afterSeq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.ExecutionLogEntry
	for rows.Next() {
		var (
			l                 driver.ExecutionLogEntry
			executionID       string
			at                int64
			request, response sql.NullString
			startedAt         sql.NullInt64
		)
		if err := rows.Scan(&executionID, &l.Seq, &at, &l.EntryType, &l.Name, &l.StepStatus,
			&l.Attempt, &l.MaxAttempts, &request, &response, &l.ErrorCode, &l.ErrorMessage,
			&l.Actor, &l.Reason, &startedAt); err != nil {
			return nil, err
		}
		if l.ExecutionID, err = uuid.Parse(executionID); err != nil {
			return nil, fmt.Errorf("decoding execution id %q: %w", executionID, err)
		}
		l.At = fromMicros(at)
		if startedAt.Valid {
			t := fromMicros(startedAt.Int64)
			l.StartedAt = &t
		}
		l.Request, l.Response = rawJSON(request), rawJSON(response)
		out = append(out, &l)
	}
	return out, rows.Err()
}

// executionResponseBumpSQL counts the response and wakes the execution now unless a runner
// holds it: the runner applies the response before it lets go (its release sees the new count).
const executionResponseBumpSQL = `
	UPDATE {schema}.execution SET
		responses_received = responses_received + 1,
		wake_at = CASE WHEN lease_until IS NOT NULL AND lease_until > ? THEN wake_at ELSE ? END,
		updated_at = ?
	WHERE id = ?
	RETURNING responses_received`

func (e *executor) ExecutionResponseInsert(ctx context.Context, params *driver.ExecutionResponseInsertParams) (int64, error) {
	nowUS := micros(now(params.Now))
	var seq int64
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, e.d.sql(executionResponseBumpSQL), nowUS, nowUS, nowUS,
			params.ExecutionID.String()).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			return driver.ErrNotFound
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, e.d.sql(`INSERT INTO {schema}.execution_response
			(execution_id, seq, name, payload, received_at) VALUES (?, ?, ?, json(?), ?)`),
			params.ExecutionID.String(), seq, params.Name, jsonText(params.Payload), nowUS)
		return err
	})
	if err != nil {
		return 0, err
	}
	return seq, nil
}

func (e *executor) ExecutionResponseList(ctx context.Context, id uuid.UUID, afterSeq int64) ([]*driver.ExecutionResponseRow, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT execution_id, seq, name, payload, received_at FROM {schema}.execution_response
		WHERE execution_id = ? AND seq > ? ORDER BY seq`), id.String(), afterSeq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.ExecutionResponseRow
	for rows.Next() {
		var (
			r                    driver.ExecutionResponseRow
			executionID, payload string
			receivedAt           int64
		)
		if err := rows.Scan(&executionID, &r.Seq, &r.Name, &payload, &receivedAt); err != nil {
			return nil, err
		}
		if r.ExecutionID, err = uuid.Parse(executionID); err != nil {
			return nil, fmt.Errorf("decoding execution id %q: %w", executionID, err)
		}
		r.Payload, r.ReceivedAt = json.RawMessage(payload), fromMicros(receivedAt)
		out = append(out, &r)
	}
	return out, rows.Err()
}

func (e *executor) ExecutionListDue(ctx context.Context, params *driver.ExecutionListDueParams) ([]*driver.ExecutionRow, error) {
	var where, order string
	switch params.Kind {
	case driver.DueWaitTimeout:
		where, order = "status = 'WAITING_FOR_ASYNC' AND next_wait_timeout_at <= ?", "next_wait_timeout_at"
	case driver.DueDeadline:
		where, order = "deadline_at IS NOT NULL AND completed_at IS NULL AND deadline_at <= ? AND "+driver.DeadlineDueSQL, "deadline_at"
	default:
		return nil, fmt.Errorf("unknown due kind %q", params.Kind)
	}
	if params.Max <= 0 {
		return nil, nil // SQLite reads a negative LIMIT as "no limit"
	}
	query := `SELECT ` + executionCols + ` FROM {schema}.execution WHERE ` + where
	args := []any{micros(now(params.Now))}
	if len(params.Types) > 0 {
		types, err := json.Marshal(params.Types)
		if err != nil {
			return nil, err
		}
		query += ` AND type IN (SELECT value FROM json_each(?))`
		args = append(args, string(types))
	}
	query += ` ORDER BY ` + order + ` LIMIT ?`
	args = append(args, params.Max)
	rows, err := e.read.QueryContext(ctx, e.d.sql(query), args...)
	if err != nil {
		return nil, err
	}
	return collectExecutions(rows)
}

func (e *executor) ExecutionCountByStatus(ctx context.Context) ([]*driver.ExecutionStatusCount, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT type, status, count(*) FROM {schema}.execution GROUP BY type, status ORDER BY type, status`))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.ExecutionStatusCount
	for rows.Next() {
		var c driver.ExecutionStatusCount
		var status string
		if err := rows.Scan(&c.Type, &status, &c.Count); err != nil {
			return nil, err
		}
		c.Status = driver.ExecutionStatus(status)
		out = append(out, &c)
	}
	return out, rows.Err()
}

func collectExecutions(rows *sql.Rows) ([]*driver.ExecutionRow, error) {
	defer rows.Close()
	var out []*driver.ExecutionRow
	for rows.Next() {
		x, err := scanExecution(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

func scanExecution(row rowScanner) (*driver.ExecutionRow, error) {
	var (
		x                              driver.ExecutionRow
		id, status, state              string
		tenantID, businessKey, batchID sql.NullString
		step, wait, workerID           sql.NullString
		errorCode, errorMessage        sql.NullString
		nextRetryAt, nextWaitTimeoutAt sql.NullInt64
		deadlineAt, leaseUntil, wakeAt sql.NullInt64
		createdAt, updatedAt           int64
		completedAt                    sql.NullInt64
		parentID, rootID, from, as     sql.NullString
		traceparent, suspendedFrom     sql.NullString
	)
	if err := row.Scan(&id, &x.Model, &x.Type, &x.Domain, &tenantID, &businessKey, &batchID,
		&status, &state, &step, &wait, &nextRetryAt, &nextWaitTimeoutAt, &deadlineAt, &x.Retries,
		&leaseUntil, &x.Fence, &workerID, &wakeAt, &x.ResponsesReceived, &x.ResponsesApplied,
		&errorCode, &errorMessage, &createdAt, &updatedAt, &completedAt, &parentID, &rootID, &from,
		&as, &traceparent, &suspendedFrom, &x.SuspendRequested); err != nil {
		return nil, err
	}
	var err error
	if x.ID, err = uuid.Parse(id); err != nil {
		return nil, fmt.Errorf("decoding execution id %q: %w", id, err)
	}
	if x.BatchID, err = parseNullUUID(batchID); err != nil {
		return nil, fmt.Errorf("decoding batch id of execution %s: %w", x.ID, err)
	}
	for _, link := range []struct {
		to   *uuid.UUID
		from sql.NullString
		name string
	}{{&x.ParentID, parentID, "parent"}, {&x.RootID, rootID, "root"}, {&x.ContinuedFrom, from, "predecessor"}, {&x.ContinuedAs, as, "successor"}} {
		if *link.to, err = parseNullUUID(link.from); err != nil {
			return nil, fmt.Errorf("decoding %s id of execution %s: %w", link.name, x.ID, err)
		}
	}
	if x.RootID == uuid.Nil {
		x.RootID = x.ID // written before roots were recorded: a top-level execution
	}
	x.Traceparent = traceparent.String
	x.Status = driver.ExecutionStatus(status)
	x.State = json.RawMessage(state)
	x.TenantID, x.BusinessKey = tenantID.String, businessKey.String
	x.Step, x.CurrentWait, x.WorkerID = step.String, wait.String, workerID.String
	x.ErrorCode, x.ErrorMessage = errorCode.String, errorMessage.String
	x.NextRetryAt, x.NextWaitTimeoutAt = fromNullMicros(nextRetryAt), fromNullMicros(nextWaitTimeoutAt)
	x.DeadlineAt, x.LeaseUntil, x.WakeAt = fromNullMicros(deadlineAt), fromNullMicros(leaseUntil), fromNullMicros(wakeAt)
	x.CreatedAt, x.UpdatedAt, x.CompletedAt = fromMicros(createdAt), fromMicros(updatedAt), fromNullMicros(completedAt)
	x.SuspendedFrom = driver.ExecutionStatus(suspendedFrom.String)
	return &x, nil
}

// jsonText passes JSON as TEXT, "{}" when empty (the PostgreSQL driver's default for state and
// payloads).
func jsonText(b []byte) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

// rawJSON reads a nullable JSON column; NULL is nil.
func rawJSON(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

// ExecutionAcquireLoadMany acquires each execution, then reads its log.
// The single writer makes the acquire and the reads consistent without a transaction around
// them: no other runner can write an execution once it is leased here.
func (e *executor) ExecutionAcquireLoadMany(ctx context.Context, params *driver.ExecutionAcquireManyParams) ([]*driver.ExecutionAcquired, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	var acquired []*driver.ExecutionAcquired
	for i, id := range params.IDs {
		row, err := e.ExecutionAcquire(ctx, &driver.ExecutionAcquireParams{ID: id, Lease: params.Lease, WorkerID: params.WorkerID, Now: params.Now})
		if errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		log, err := e.executionLogAfter(ctx, row.ID, driver.LogAfter(params.LogAfterSeq, i))
		if err != nil {
			return nil, err
		}
		acquired = append(acquired, &driver.ExecutionAcquired{Row: row, Loaded: &driver.ExecutionLoaded{Log: log}})
	}
	return acquired, nil
}

// ExecutionLoadMany reads each execution's log and unapplied responses.
func (e *executor) ExecutionLoadMany(ctx context.Context, params *driver.ExecutionLoadManyParams) (map[uuid.UUID]*driver.ExecutionLoaded, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]*driver.ExecutionLoaded, len(params.IDs))
	for i, id := range params.IDs {
		loaded, err := e.executionLoad(ctx, id, params.AfterSeq[i], driver.LogAfter(params.LogAfterSeq, i))
		if err != nil {
			return nil, err
		}
		out[id] = loaded
	}
	return out, nil
}

// executionLoad reads an execution's log entries above logAfterSeq and its responses with a
// sequence above afterSeq.
func (e *executor) executionLoad(ctx context.Context, id uuid.UUID, afterSeq, logAfterSeq int64) (*driver.ExecutionLoaded, error) {
	log, err := e.executionLogAfter(ctx, id, logAfterSeq)
	if err != nil {
		return nil, err
	}
	responses, err := e.ExecutionResponseList(ctx, id, afterSeq)
	if err != nil {
		return nil, err
	}
	return &driver.ExecutionLoaded{Log: log, Responses: responses}, nil
}

// withSuspender returns messages whose JSON object payloads carry the actor and reason of the
// operator's suspend request (the PostgreSQL driver merges them in SQL).
func withSuspender(messages []*driver.OutboxInsertParams, actor, reason sql.NullString) []*driver.OutboxInsertParams {
	out := make([]*driver.OutboxInsertParams, len(messages))
	for i, m := range messages {
		var body map[string]any
		if err := json.Unmarshal(m.Payload, &body); err != nil || body == nil {
			out[i] = m // not an object: as written
			continue
		}
		if actor.Valid {
			body["actor"] = actor.String
		}
		if reason.Valid {
			body["reason"] = reason.String
		}
		payload, err := json.Marshal(body)
		if err != nil {
			out[i] = m
			continue
		}
		copied := *m
		copied.Payload = payload
		out[i] = &copied
	}
	return out
}
