package pgdriver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/commandbus/commandbus/driver"
)

var executionColumns = []string{
	"id", "model", "type", "domain", "tenant_id", "business_key", "batch_id", "status", "state",
	"step", "current_wait", "next_retry_at", "next_wait_timeout_at", "deadline_at", "retries",
	"lease_until", "fence", "worker_id", "wake_at", "responses_received", "responses_applied",
	"error_code", "error_message", "created_at", "updated_at", "completed_at",
	"parent_id", "root_id", "continued_from", "continued_as", "traceparent", "suspended_from",
	"suspend_requested",
}

func executionColumnList(prefix string) string {
	parts := make([]string, len(executionColumns))
	for i, c := range executionColumns {
		parts[i] = prefix + c
	}
	return strings.Join(parts, ", ")
}

var (
	executionCols  = executionColumnList("")
	executionColsE = executionColumnList("e.")
)

// logArrays holds log entries as parallel arrays for unnest.
type logArrays struct {
	executionIDs                                   []pgtype.UUID
	fences                                         []int64
	seqs, attempts, maxAttempts                    []int32
	entryTypes                                     []string
	names, stepStatuses, errorCodes, errorMessages []*string
	actors, reasons, requests, responses           []*string
	startedAts                                     []*time.Time
}

func (l *logArrays) add(id uuid.UUID, fence int64, entry *driver.ExecutionLogEntry) {
	l.executionIDs = append(l.executionIDs, pgUUID(id))
	l.fences = append(l.fences, fence)
	l.seqs = append(l.seqs, int32(entry.Seq))
	l.attempts = append(l.attempts, int32(entry.Attempt))
	l.maxAttempts = append(l.maxAttempts, int32(entry.MaxAttempts))
	l.entryTypes = append(l.entryTypes, entry.EntryType)
	l.names = append(l.names, nullString(entry.Name))
	l.stepStatuses = append(l.stepStatuses, nullString(entry.StepStatus))
	l.errorCodes = append(l.errorCodes, nullString(entry.ErrorCode))
	l.errorMessages = append(l.errorMessages, nullString(entry.ErrorMessage))
	l.actors = append(l.actors, nullString(entry.Actor))
	l.reasons = append(l.reasons, nullString(entry.Reason))
	l.requests = append(l.requests, nullJSONText(entry.Request))
	l.responses = append(l.responses, nullJSONText(entry.Response))
	l.startedAts = append(l.startedAts, entry.StartedAt)
}

// logInsertSQL is a CTE inserting log entries given as 15 arrays from parameter $first on (the
// last one the writer's fence), stamped with n.now. The WHERE placeholder is replaced by the
// checkpoint statement so that only entries of checkpoints that applied are written.
func logInsertSQL(first int) string {
	p := func(i int) string { return fmt.Sprintf("$%d", first+i) }
	return `, logs AS (
			INSERT INTO {schema}.execution_log (execution_id, seq, at, entry_type, name, step_status,
				attempt, max_attempts, request, response, error_code, error_message, actor, reason, started_at)
			SELECT l.execution_id, l.seq, n.now, l.entry_type, l.name, l.step_status,
				nullif(l.attempt, 0), nullif(l.max_attempts, 0), l.request::jsonb, l.response::jsonb,
				l.error_code, l.error_message, l.actor, l.reason,
				-- a start read from another clock than the database's never falls after the end
				-- (least ignores a NULL: an entry without a start keeps none)
				CASE WHEN l.started_at IS NOT NULL THEN least(l.started_at, n.now) END
			FROM unnest(` + p(0) + `::uuid[], ` + p(1) + `::int[], ` + p(2) + `::text[], ` + p(3) + `::text[], ` +
		p(4) + `::text[], ` + p(5) + `::int[], ` + p(6) + `::int[], ` + p(7) + `::text[], ` + p(8) + `::text[], ` +
		p(9) + `::text[], ` + p(10) + `::text[], ` + p(11) + `::text[], ` + p(12) + `::text[], ` + p(13) + `::bigint[], ` + p(14) + `::timestamptz[])
				AS l(execution_id, seq, entry_type, name, step_status, attempt, max_attempts, request,
					response, error_code, error_message, actor, reason, fence, started_at), n
			WHERE /*applied*/ true
		)`
}

func (e *executor) ExecutionGet(ctx context.Context, id uuid.UUID) (*driver.ExecutionRow, error) {
	row := e.db.QueryRow(ctx, e.d.sql(`SELECT `+executionCols+` FROM {schema}.execution WHERE id = $1`), pgUUID(id))
	x, err := scanExecution(row, false)
	if errors.Is(err, pgx.ErrNoRows) {
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
	args := f.args
	rows, err := e.db.Query(ctx, e.d.sql(query), args...)
	if err != nil {
		return nil, err
	}
	return collectExecutions(rows, false)
}

// executionClaimSQL and executionAcquireSQL take leases. Their commits need not wait for the WAL
// flush: a lease lost in a crash only rolls the fence back, which fences out its holder's next
// checkpoint, and any later durable commit flushes it anyway. Checkpoints are fully durable.
const executionClaimSQL = `
	WITH n AS (
		SELECT coalesce($5::timestamptz, now()) AS now, set_config('synchronous_commit', 'off', true) AS async_commit
	), picked AS (
		SELECT id, status AS claimed_from, lease_until IS NOT NULL AS stale FROM {schema}.execution, n
		WHERE %s AND (lease_until IS NULL OR lease_until <= n.now)
			AND (cardinality($1::text[]) = 0 OR type = ANY($1::text[]))
		ORDER BY %s
		LIMIT $2
		FOR UPDATE OF execution SKIP LOCKED
	)
	UPDATE {schema}.execution e SET
		status = CASE WHEN e.status IN ('PENDING', 'WAITING_FOR_ASYNC', 'WAITING_FOR_RETRY')
			THEN 'EXECUTING' ELSE e.status END,
		fence = e.fence + 1,
		lease_until = n.now + $3 * interval '1 microsecond',
		wake_at = n.now + $3 * interval '1 microsecond',
		worker_id = $4::text,
		updated_at = n.now
	FROM picked, n
	WHERE e.id = picked.id
	RETURNING ` + "%s, picked.claimed_from, picked.stale"

func (e *executor) ExecutionClaim(ctx context.Context, params *driver.ExecutionClaimParams) ([]*driver.ExecutionRow, error) {
	var where, order string
	switch params.Kind {
	case driver.ClaimPending:
		// A response may wake a SUSPENDED execution: it runs after the resume. A QUEUED one
		// runs only once admitted (its tenant has a free slot).
		where, order = "wake_at <= n.now AND status NOT IN ('SUSPENDED', 'QUEUED')", "wake_at"
	case driver.ClaimRetry:
		where, order = "status = 'WAITING_FOR_RETRY' AND next_retry_at <= n.now", "next_retry_at"
	default:
		return nil, fmt.Errorf("unknown claim kind %q", params.Kind)
	}
	types := params.Types
	if types == nil {
		types = []string{}
	}
	query := fmt.Sprintf(executionClaimSQL, where, order, executionColsE)
	rows, err := e.db.Query(ctx, e.d.sql(query), types, params.Max, params.Lease.Microseconds(), params.WorkerID, params.Now)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.ExecutionRow, error) {
		return scanExecutionExtra(row, true, &staleScan{})
	})
}

// staleScan reads a claim's stale column into the row it scanned.
type staleScan struct{ stale bool }

const executionResponsesSQL = `
	SELECT execution_id, seq, name, payload, received_at FROM {schema}.execution_response
	WHERE execution_id = $1 AND seq > $2 ORDER BY seq`

func (e *executor) ExecutionAcquire(ctx context.Context, params *driver.ExecutionAcquireParams) (*driver.ExecutionRow, error) {
	row := e.db.QueryRow(ctx, e.d.sql(executionAcquireOneSQL),
		pgUUID(params.ID), params.Lease.Microseconds(), params.WorkerID, params.Now)
	return e.acquired(ctx, params.ID, row)
}

// acquired turns an acquire's result into the row, ErrNotFound or ErrConflict.
func (e *executor) acquired(ctx context.Context, id uuid.UUID, row pgx.Row) (*driver.ExecutionRow, error) {
	x, err := scanExecution(row, true)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, getErr := e.ExecutionGet(ctx, id); errors.Is(getErr, driver.ErrNotFound) {
			return nil, driver.ErrNotFound
		}
		return nil, driver.ErrConflict
	}
	return x, err
}

// executionAcquireSQL leases the executions matched by %[1]s that no live lease holds; the rows
// are locked in the order %[2]s gives, so two concurrent batches cannot deadlock on each other.
// One id and a batch get statements of their own: a prepared statement on one id soon runs on a
// cached generic plan, while one on an array is planned again on every call, which costs more
// than the acquire itself when a reply arrives on an idle system.
const executionAcquireSQL = `
	WITH n AS (
		SELECT coalesce($4::timestamptz, now()) AS now, set_config('synchronous_commit', 'off', true) AS async_commit
	), picked AS (
		SELECT id, status AS claimed_from FROM {schema}.execution, n
		WHERE %[1]s AND (lease_until IS NULL OR lease_until <= n.now) AND status <> 'QUEUED'
		%[2]s
		FOR UPDATE OF execution
	)
	UPDATE {schema}.execution e SET
		fence = e.fence + 1,
		lease_until = n.now + $2 * interval '1 microsecond',
		wake_at = n.now + $2 * interval '1 microsecond',
		worker_id = $3::text,
		updated_at = n.now
	FROM picked, n
	WHERE e.id = picked.id
	RETURNING %[3]s, picked.claimed_from`

var (
	executionAcquireOneSQL  = fmt.Sprintf(executionAcquireSQL, "id = $1", "", executionColsE)
	executionAcquireManySQL = fmt.Sprintf(executionAcquireSQL, "id = ANY($1::uuid[])", "ORDER BY id", executionColsE)
)

// executionLogManySQL reads the log entries of executions $1 above sequences $2. The lateral
// subquery keeps the plan to one primary-key range scan per execution: a plain join of unnest
// with the log lets the planner, which cannot see how short the array is, hash-join a sequential
// scan of the whole log.
const executionLogManySQL = `
	SELECT l.execution_id, l.seq, l.at, l.entry_type, coalesce(l.name, ''), coalesce(l.step_status, ''),
		coalesce(l.attempt, 0), coalesce(l.max_attempts, 0), l.request, l.response,
		coalesce(l.error_code, ''), coalesce(l.error_message, ''), coalesce(l.actor, ''), coalesce(l.reason, ''),
		l.started_at
	FROM unnest($1::uuid[], $2::int[]) AS t(id, after_seq)
	CROSS JOIN LATERAL (
		SELECT * FROM {schema}.execution_log
		WHERE execution_id = t.id AND seq > t.after_seq
		ORDER BY seq
	) l
	ORDER BY l.execution_id, l.seq`

// executionLogOneSQL is executionLogManySQL for one execution (see executionAcquireSQL).
const executionLogOneSQL = `
	SELECT execution_id, seq, at, entry_type, coalesce(name, ''), coalesce(step_status, ''),
		coalesce(attempt, 0), coalesce(max_attempts, 0), request, response,
		coalesce(error_code, ''), coalesce(error_message, ''), coalesce(actor, ''), coalesce(reason, ''),
		started_at
	FROM {schema}.execution_log WHERE execution_id = $1 AND seq > $2 ORDER BY seq`

// logAfterSeqs returns the log sequences to read after, zeros (whole logs) when none are given.
func logAfterSeqs(logAfterSeq []int64, n int) []int64 {
	if logAfterSeq != nil {
		return logAfterSeq
	}
	return make([]int64, n)
}

// ExecutionAcquireLoadMany sends the acquire and the log read as one pipelined batch: one round
// trip and one implicit transaction, so the read sees the acquire. Logs of ids it did not acquire
// are read too and dropped; that is the rare case.
func (e *executor) ExecutionAcquireLoadMany(ctx context.Context, params *driver.ExecutionAcquireManyParams) ([]*driver.ExecutionAcquired, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	if len(params.IDs) == 0 {
		return nil, nil
	}
	ids := pgUUIDs(params.IDs)
	batch := &pgx.Batch{}
	if len(ids) == 1 {
		batch.Queue(e.d.sql(executionAcquireOneSQL), ids[0], params.Lease.Microseconds(), params.WorkerID, params.Now)
		batch.Queue(e.d.sql(executionLogOneSQL), ids[0], logAfterSeqs(params.LogAfterSeq, 1)[0])
	} else {
		batch.Queue(e.d.sql(executionAcquireManySQL), ids, params.Lease.Microseconds(), params.WorkerID, params.Now)
		batch.Queue(e.d.sql(executionLogManySQL), ids, logAfterSeqs(params.LogAfterSeq, len(ids)))
	}
	results := e.db.SendBatch(ctx, batch)
	acquired, err := e.readAcquired(results)
	if closeErr := results.Close(); err == nil {
		err = closeErr
	}
	return acquired, err
}

func (e *executor) readAcquired(results pgx.BatchResults) ([]*driver.ExecutionAcquired, error) {
	rows, err := results.Query()
	if err != nil {
		return nil, err
	}
	xs, err := collectExecutions(rows, true)
	if err != nil {
		return nil, err
	}
	if rows, err = results.Query(); err != nil {
		return nil, err
	}
	log, err := collectLog(rows)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]*driver.ExecutionAcquired, len(xs))
	acquired := make([]*driver.ExecutionAcquired, len(xs))
	for i, x := range xs {
		acquired[i] = &driver.ExecutionAcquired{Row: x, Loaded: &driver.ExecutionLoaded{}}
		byID[x.ID] = acquired[i]
	}
	for _, entry := range log {
		if x := byID[entry.ExecutionID]; x != nil {
			x.Loaded.Log = append(x.Loaded.Log, entry)
		}
	}
	return acquired, nil
}

// ExecutionLoadMany reads the logs and unapplied responses as one pipelined batch.
func (e *executor) ExecutionLoadMany(ctx context.Context, params *driver.ExecutionLoadManyParams) (map[uuid.UUID]*driver.ExecutionLoaded, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	ids := pgUUIDs(params.IDs)
	batch := &pgx.Batch{}
	batch.Queue(e.d.sql(executionLogManySQL), ids, logAfterSeqs(params.LogAfterSeq, len(ids)))
	batch.Queue(e.d.sql(`
		SELECT r.execution_id, r.seq, r.name, r.payload, r.received_at
		FROM unnest($1::uuid[], $2::bigint[]) AS t(id, after_seq)
		CROSS JOIN LATERAL (
			SELECT * FROM {schema}.execution_response
			WHERE execution_id = t.id AND seq > t.after_seq
			ORDER BY seq
		) r
		ORDER BY r.execution_id, r.seq`), ids, params.AfterSeq)
	results := e.db.SendBatch(ctx, batch)
	loaded, err := readLoadedMany(results)
	if closeErr := results.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]*driver.ExecutionLoaded, len(params.IDs))
	for _, id := range params.IDs {
		out[id] = loaded.get(id)
	}
	return out, nil
}

// loadedByID groups logs and responses read for many executions.
type loadedByID map[uuid.UUID]*driver.ExecutionLoaded

func (l loadedByID) get(id uuid.UUID) *driver.ExecutionLoaded {
	if x := l[id]; x != nil {
		return x
	}
	return &driver.ExecutionLoaded{}
}

func (l loadedByID) at(id uuid.UUID) *driver.ExecutionLoaded {
	x := l[id]
	if x == nil {
		x = &driver.ExecutionLoaded{}
		l[id] = x
	}
	return x
}

// readLoadedMany reads the logs and responses queued in a batch, in that order, grouped by
// execution.
func readLoadedMany(results pgx.BatchResults) (loadedByID, error) {
	rows, err := results.Query()
	if err != nil {
		return nil, err
	}
	log, err := collectLog(rows)
	if err != nil {
		return nil, err
	}
	rows, err = results.Query()
	if err != nil {
		return nil, err
	}
	responses, err := collectResponses(rows)
	if err != nil {
		return nil, err
	}
	out := loadedByID{}
	for _, entry := range log {
		x := out.at(entry.ExecutionID)
		x.Log = append(x.Log, entry)
	}
	for _, r := range responses {
		x := out.at(r.ExecutionID)
		x.Responses = append(x.Responses, r)
	}
	return out, nil
}

// executionCheckpointSQL writes fenced checkpoints from parallel arrays, then the log entries and
// commands of those that applied, in one statement (one commit for the whole batch).
const executionCheckpointSQL = `
	WITH input AS (
		SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
			$7::timestamptz[], $8::timestamptz[], $9::bigint[], $10::bigint[], $11::timestamptz[],
			$12::int[], $13::bigint[], $14::bool[], $15::timestamptz[], $16::bigint[], $17::text[], $18::text[],
			$19::bool[])
			AS t(id, fence, status, state, step, current_wait, next_retry_at, next_wait_timeout_at,
				retry_delay_us, wait_timeout_us, deadline_at, retries, lease_us, release, wake_at,
				responses_applied, error_code, error_message, has_state),
			LATERAL (SELECT t.status IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED') AS terminal) AS k
	), n AS (
		SELECT coalesce($20::timestamptz, now()) AS now
	), applied AS (
		UPDATE {schema}.execution e SET
			-- A release while a suspend request is pending stores SUSPENDED, remembering the
			-- released status (a running one as PENDING); a terminal checkpoint drops the request.
			status = CASE WHEN i.release AND e.suspend_requested AND NOT i.terminal THEN 'SUSPENDED' ELSE i.status END,
			suspended_from = CASE WHEN i.release AND e.suspend_requested AND NOT i.terminal
				THEN CASE WHEN i.status = 'EXECUTING' THEN 'PENDING' ELSE i.status END
				ELSE e.suspended_from END,
			suspend_requested = e.suspend_requested AND NOT i.release AND NOT i.terminal,
			state = CASE WHEN i.has_state THEN i.state::jsonb ELSE e.state END,
			step = i.step,
			current_wait = i.current_wait,
			next_retry_at = CASE WHEN i.retry_delay_us > 0 THEN n.now + i.retry_delay_us * interval '1 microsecond' ELSE i.next_retry_at END,
			next_wait_timeout_at = CASE WHEN i.wait_timeout_us > 0 THEN n.now + i.wait_timeout_us * interval '1 microsecond' ELSE i.next_wait_timeout_at END,
			deadline_at = coalesce(i.deadline_at, e.deadline_at),
			retries = i.retries,
			lease_until = CASE WHEN i.release THEN NULL
				WHEN i.lease_us > 0 THEN n.now + i.lease_us * interval '1 microsecond' ELSE e.lease_until END,
			-- A release wakes the execution at once for responses it did not apply and, unless
			-- it ended, for signals that arrived while it ran, else at the earliest of the
			-- runner's wake-up, its pending timers and its open waits' timeouts.
			wake_at = CASE
				-- a suspended execution waits for its resume, outside the pending poller's index
				WHEN i.release AND (e.suspend_requested AND NOT i.terminal OR i.status = 'SUSPENDED') THEN NULL
				WHEN i.release AND e.responses_received > i.responses_applied THEN n.now
				WHEN i.release AND i.status IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED') THEN i.wake_at
				WHEN i.release AND e.signal_wake THEN n.now
				WHEN i.release THEN least(i.wake_at,
					(SELECT min(t.fire_at) FROM {schema}.execution_timer t WHERE t.execution_id = e.id AND t.status = 'PENDING'),
					(SELECT min(w.timeout_at) FROM {schema}.execution_wait w WHERE w.execution_id = e.id))
				WHEN i.lease_us > 0 THEN n.now + i.lease_us * interval '1 microsecond'
				ELSE e.wake_at END,
			signal_wake = e.signal_wake AND NOT i.release,
			responses_applied = i.responses_applied,
			error_code = i.error_code,
			error_message = i.error_message,
			completed_at = CASE WHEN i.status IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED')
				THEN coalesce(e.completed_at, n.now) END,
			updated_at = n.now
		FROM input i, n
		WHERE e.id = i.id AND e.fence = i.fence
		RETURNING e.id, e.fence, e.suspend_actor, e.suspend_reason,
			e.status = 'SUSPENDED' AND i.status <> 'SUSPENDED' AS suspended_now,
			e.suspend_requested OR (e.status = 'SUSPENDED' AND i.status <> 'SUSPENDED') AS suspend_flag
	)` + "%s" + `, suspended_log AS (
		-- The suspension's log entry follows the checkpoint's own entries.
		INSERT INTO {schema}.execution_log (execution_id, seq, at, entry_type, name, step_status, actor, reason)
		SELECT a.id, coalesce(greatest(
				(SELECT max(seq) FROM {schema}.execution_log WHERE execution_id = a.id),
				(SELECT max(l.seq) FROM unnest($21::uuid[], $22::int[]) AS l(execution_id, seq) WHERE l.execution_id = a.id)
			), 0) + 1,
			n.now, 'LIFECYCLE', 'SUSPENDED', 'SUSPENDED', a.suspend_actor, a.suspend_reason
		FROM applied a, n
		WHERE a.suspended_now
	), commands AS (` + insertSelect + `
		FROM jsonb_to_recordset($36::jsonb) AS i(` + insertRecordColumns + `, owner uuid, owner_fence bigint), n
		WHERE (i.owner, i.owner_fence) IN (SELECT id, fence FROM applied)
		ON CONFLICT (domain, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	)
	SELECT id, suspend_flag FROM applied`

// commandRecord is a command of a checkpoint, tagged with the execution that sends it.
type commandRecord struct {
	insertRecord
	Owner      uuid.UUID `json:"owner"`
	OwnerFence int64     `json:"owner_fence"`
}

func (e *executor) ExecutionCheckpointMany(ctx context.Context, params *driver.ExecutionCheckpointManyParams) ([]uuid.UUID, error) {
	if len(params.Checkpoints) == 0 {
		return nil, nil
	}
	query, args, followUps, err := e.checkpointStatement(params)
	if err != nil {
		return nil, err
	}
	signalOps := hasSignalOps(params)
	if followUps.empty() && !signalOps {
		rows, err := e.db.Query(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		return checkpointsApplied(rows, params.Checkpoints)
	}
	// Signal, timer and wait changes run before the checkpoint (it must see the timers and waits
	// for the execution's wake time); children, successors, ended children and cancellations run
	// after it. A pipelined batch runs them all in its implicit transaction, in one round trip.
	batch := &pgx.Batch{}
	if signalOps {
		for _, c := range params.Checkpoints {
			if err := c.ValidateSignalOps(); err != nil {
				return nil, fmt.Errorf("checkpointing execution %s: %w", c.ID, err)
			}
		}
		opsArgs, err := signalOpsArgs(params)
		if err != nil {
			return nil, err
		}
		batch.Queue(e.d.sql(executionSignalOpsSQL), opsArgs...)
	}
	batch.Queue(query, args...)
	var handoff *driver.OutboxHandoff
	if _, inTx := e.db.(pgx.Tx); !inTx { // committed when it returns: the batch is its own transaction
		handoff = params.OutboxHandoff
	}
	if err := followUps.queue(e, batch, params.Now, handoff); err != nil {
		return nil, err
	}
	results := e.db.SendBatch(ctx, batch)
	appliedIDs, rows, err := readCheckpointBatch(results, params.Checkpoints, signalOps, len(followUps.outbox) > 0, batch.Len())
	if closeErr := results.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 && handoff != nil {
		written := matchWritten(rows, followUps.outbox, func(i int) bool { return !followUps.outboxSuspended[i] })
		slices.SortFunc(written, func(a, b driver.WrittenMessage) int { return cmp.Compare(a.ID, b.ID) })
		handoff.Written(written)
	}
	return appliedIDs, nil
}

// readCheckpointBatch reads a checkpoint batch of n statements: the signal operations first when
// there are some, then the checkpoint's applied ids, then the follow-ups, the last of which
// writes the outbox messages when outbox is set (the messages written are returned).
func readCheckpointBatch(results pgx.BatchResults, cps []*driver.ExecutionCheckpoint, signalOps, outbox bool, n int) ([]uuid.UUID, []writtenRow, error) {
	if signalOps {
		if _, err := results.Exec(); err != nil {
			return nil, nil, err
		}
		n--
	}
	rows, err := results.Query()
	if err != nil {
		return nil, nil, err
	}
	ids, err := checkpointsApplied(rows, cps)
	if err != nil {
		return nil, nil, err
	}
	if outbox {
		n--
	}
	for range n - 1 {
		if _, err := results.Exec(); err != nil {
			return nil, nil, err
		}
	}
	if !outbox {
		return ids, nil, nil
	}
	rows, err = results.Query()
	if err != nil {
		return nil, nil, err
	}
	written, err := pgx.CollectRows(rows, scanWritten)
	if err != nil {
		return nil, nil, err
	}
	return ids, written, nil
}

// checkpointStatement returns the checkpoint statement of a batch and its arguments, and the
// follow-up statements its children, successors, ends and cancellations need.
func (e *executor) checkpointStatement(params *driver.ExecutionCheckpointManyParams) (string, []any, *checkpointFollowUps, error) {
	n := len(params.Checkpoints)
	var (
		ids                                       = make([]pgtype.UUID, n)
		fences, delays, timeouts, leases, applied = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		statuses, states                          = make([]string, n), make([]string, n)
		steps, waits, codes, messages             = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		retryAts, timeoutAts, deadlines, wakeAts  = make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
		retries                                   = make([]int32, n)
		releases, hasState                        = make([]bool, n), make([]bool, n)
		log                                       logArrays
		commands                                  []commandRecord
		followUps                                 checkpointFollowUps
		attrs                                     attributeArrays
	)
	ts := func(t *time.Time) pgtype.Timestamptz {
		if t == nil {
			return pgtype.Timestamptz{}
		}
		return pgtype.Timestamptz{Time: *t, Valid: true}
	}
	for i, c := range params.Checkpoints {
		ids[i], fences[i], statuses[i] = pgUUID(c.ID), c.Fence, string(c.Status)
		if c.State != nil {
			states[i], hasState[i] = string(c.State), true
		}
		steps[i], waits[i] = nullString(c.Step), nullString(c.CurrentWait)
		retryAts[i], timeoutAts[i], deadlines[i], wakeAts[i] = ts(c.NextRetryAt), ts(c.NextWaitTimeoutAt), ts(c.DeadlineAt), ts(c.WakeAt)
		delays[i], timeouts[i] = c.RetryDelay.Microseconds(), c.WaitTimeout.Microseconds()
		retries[i], leases[i], releases[i], applied[i] = int32(c.Retries), c.Lease.Microseconds(), c.Release, c.ResponsesApplied
		codes[i], messages[i] = nullString(c.ErrorCode), nullString(c.ErrorMessage)
		for _, entry := range c.Log {
			log.add(c.ID, c.Fence, entry)
		}
		if err := attrs.add(c.ID, c.Fence, c.Attributes); err != nil {
			return "", nil, nil, err
		}
		for j, cmd := range c.Commands {
			commands = append(commands, commandRecord{insertRecord: newInsertRecord(j, cmd), Owner: c.ID, OwnerFence: c.Fence})
		}
		if err := followUps.add(c); err != nil {
			return "", nil, nil, err
		}
	}
	commandJSON, err := json.Marshal(commands)
	if err != nil {
		return "", nil, nil, err
	}
	if commands == nil {
		commandJSON = []byte("[]")
	}
	attrsCTE, attrsArgs := attrs.checkpointCTE(37)
	query := fmt.Sprintf(executionCheckpointSQL,
		strings.Replace(logInsertSQL(21), "/*applied*/ true", "(l.execution_id, l.fence) IN (SELECT id, fence FROM applied)", 1)+attrsCTE)
	args := []any{ids, fences, statuses, states, steps, waits, retryAts,
		timeoutAts, delays, timeouts, deadlines, retries, leases, releases, wakeAts, applied, codes,
		messages, hasState, params.Now,
		log.executionIDs, log.seqs, log.entryTypes, log.names, log.stepStatuses, log.attempts,
		log.maxAttempts, log.requests, log.responses, log.errorCodes, log.errorMessages, log.actors,
		log.reasons, log.fences, log.startedAts, commandJSON}
	return e.d.sql(query), append(args, attrsArgs...), &followUps, nil
}

// checkpointsApplied reads the ids of the checkpoints that applied, each with whether a suspend
// request was pending, which it reports on the checkpoint.
func checkpointsApplied(rows pgx.Rows, cps []*driver.ExecutionCheckpoint) ([]uuid.UUID, error) {
	suspend := map[uuid.UUID]bool{}
	ids, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (uuid.UUID, error) {
		var id pgtype.UUID
		var flag bool
		err := row.Scan(&id, &flag)
		suspend[fromPgUUID(id)] = flag
		return fromPgUUID(id), err
	})
	if err != nil {
		return nil, err
	}
	for _, cp := range cps {
		cp.SuspendRequested = suspend[cp.ID]
	}
	return ids, nil
}

func (e *executor) ExecutionLogList(ctx context.Context, id uuid.UUID) ([]*driver.ExecutionLogEntry, error) {
	rows, err := e.db.Query(ctx, e.d.sql(executionLogOneSQL), pgUUID(id), 0)
	if err != nil {
		return nil, err
	}
	return collectLog(rows)
}

func collectLog(rows pgx.Rows) ([]*driver.ExecutionLogEntry, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.ExecutionLogEntry, error) {
		var l driver.ExecutionLogEntry
		var execID pgtype.UUID
		var request, response []byte
		err := row.Scan(&execID, &l.Seq, &l.At, &l.EntryType, &l.Name, &l.StepStatus, &l.Attempt,
			&l.MaxAttempts, &request, &response, &l.ErrorCode, &l.ErrorMessage, &l.Actor, &l.Reason, &l.StartedAt)
		l.ExecutionID, l.Request, l.Response = fromPgUUID(execID), request, response
		return &l, err
	})
}

func (e *executor) ExecutionResponseInsert(ctx context.Context, params *driver.ExecutionResponseInsertParams) (int64, error) {
	var seq int64
	err := e.db.QueryRow(ctx, e.d.sql(`
		WITH n AS (
			SELECT coalesce($4::timestamptz, now()) AS now
		), bumped AS (
			UPDATE {schema}.execution SET
				responses_received = responses_received + 1,
				-- Wake it now unless a runner holds it: the runner applies the response before it
				-- lets go (its release sees the new count).
				wake_at = CASE WHEN lease_until IS NOT NULL AND lease_until > n.now THEN wake_at ELSE n.now END,
				updated_at = n.now
			FROM n
			WHERE id = $1
			RETURNING id, responses_received
		), ins AS (
			INSERT INTO {schema}.execution_response (execution_id, seq, name, payload, received_at)
			SELECT id, responses_received, $2, $3::jsonb, n.now FROM bumped, n
		)
		SELECT responses_received FROM bumped`),
		pgUUID(params.ExecutionID), params.Name, jsonText(params.Payload), params.Now).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, driver.ErrNotFound
	}
	return seq, err
}

func (e *executor) ExecutionResponseList(ctx context.Context, id uuid.UUID, afterSeq int64) ([]*driver.ExecutionResponseRow, error) {
	rows, err := e.db.Query(ctx, e.d.sql(executionResponsesSQL), pgUUID(id), afterSeq)
	if err != nil {
		return nil, err
	}
	return collectResponses(rows)
}

func collectResponses(rows pgx.Rows) ([]*driver.ExecutionResponseRow, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.ExecutionResponseRow, error) {
		var r driver.ExecutionResponseRow
		var execID pgtype.UUID
		var payload []byte
		err := row.Scan(&execID, &r.Seq, &r.Name, &payload, &r.ReceivedAt)
		r.ExecutionID, r.Payload = fromPgUUID(execID), payload
		return &r, err
	})
}

func (e *executor) ExecutionListDue(ctx context.Context, params *driver.ExecutionListDueParams) ([]*driver.ExecutionRow, error) {
	var where, order string
	switch params.Kind {
	case driver.DueWaitTimeout:
		where, order = "status = 'WAITING_FOR_ASYNC' AND next_wait_timeout_at <= n.now", "next_wait_timeout_at"
	case driver.DueDeadline:
		where, order = "deadline_at IS NOT NULL AND completed_at IS NULL AND deadline_at <= n.now AND "+driver.DeadlineDueSQL, "deadline_at"
	default:
		return nil, fmt.Errorf("unknown due kind %q", params.Kind)
	}
	types := params.Types
	if types == nil {
		types = []string{}
	}
	rows, err := e.db.Query(ctx, e.d.sql(`
		WITH n AS (SELECT coalesce($3::timestamptz, now()) AS now)
		SELECT `+executionCols+` FROM {schema}.execution, n
		WHERE `+where+` AND (cardinality($1::text[]) = 0 OR type = ANY($1::text[]))
		ORDER BY `+order+` LIMIT $2`), types, params.Max, params.Now)
	if err != nil {
		return nil, err
	}
	return collectExecutions(rows, false)
}

func (e *executor) ExecutionCountByStatus(ctx context.Context) ([]*driver.ExecutionStatusCount, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`
		SELECT type, status, count(*) FROM {schema}.execution GROUP BY type, status ORDER BY type, status`))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.ExecutionStatusCount, error) {
		var c driver.ExecutionStatusCount
		var status string
		err := row.Scan(&c.Type, &status, &c.Count)
		c.Status = driver.ExecutionStatus(status)
		return &c, err
	})
}

func collectExecutions(rows pgx.Rows, claimed bool) ([]*driver.ExecutionRow, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.ExecutionRow, error) { return scanExecution(row, claimed) })
}

func scanExecution(row pgx.Row, claimed bool) (*driver.ExecutionRow, error) {
	return scanExecutionExtra(row, claimed, nil)
}

// scanExecutionExtra is scanExecution of a claim that also returns whether the lease it took
// over had expired (stale non-nil).
func scanExecutionExtra(row pgx.Row, claimed bool, stale *staleScan) (*driver.ExecutionRow, error) {
	var (
		x                                 driver.ExecutionRow
		id, batchID                       pgtype.UUID
		parentID, rootID, from, as        pgtype.UUID
		traceparent                       *string
		status, claimedFrom               string
		tenantID, businessKey, step, wait *string
		workerID, errorCode, errorMessage *string
		suspendedFrom                     *string
		state                             []byte
	)
	dest := []any{&id, &x.Model, &x.Type, &x.Domain, &tenantID, &businessKey, &batchID, &status, &state,
		&step, &wait, &x.NextRetryAt, &x.NextWaitTimeoutAt, &x.DeadlineAt, &x.Retries, &x.LeaseUntil,
		&x.Fence, &workerID, &x.WakeAt, &x.ResponsesReceived, &x.ResponsesApplied, &errorCode,
		&errorMessage, &x.CreatedAt, &x.UpdatedAt, &x.CompletedAt, &parentID, &rootID, &from, &as, &traceparent,
		&suspendedFrom, &x.SuspendRequested}
	if claimed {
		dest = append(dest, &claimedFrom)
	}
	if stale != nil {
		dest = append(dest, &stale.stale)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if stale != nil {
		x.StaleLease = stale.stale
	}
	x.ID, x.BatchID = fromPgUUID(id), fromPgUUID(batchID)
	x.ParentID, x.RootID, x.ContinuedFrom, x.ContinuedAs = fromPgUUID(parentID), fromPgUUID(rootID), fromPgUUID(from), fromPgUUID(as)
	if x.RootID == uuid.Nil {
		x.RootID = x.ID // written before roots were recorded: a top-level execution
	}
	x.Traceparent = derefString(traceparent)
	x.Status, x.ClaimedFrom = driver.ExecutionStatus(status), driver.ExecutionStatus(claimedFrom)
	x.State = state
	x.TenantID, x.BusinessKey, x.Step, x.CurrentWait = derefString(tenantID), derefString(businessKey), derefString(step), derefString(wait)
	x.WorkerID, x.ErrorCode, x.ErrorMessage = derefString(workerID), derefString(errorCode), derefString(errorMessage)
	x.SuspendedFrom = driver.ExecutionStatus(derefString(suspendedFrom))
	return &x, nil
}

// jsonText passes JSON as text, "{}" when empty.
func jsonText(b []byte) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}
