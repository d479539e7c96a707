package pgdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/commandbus/commandbus/driver"
)

// commandColumns are returned by every query that yields a CommandRow (the audit column is only
// read by CommandGetByID).
var commandColumns = []string{
	"id", "kind", "domain", "queue", "command_type", "data", "correlation_id", "causation_id",
	"reply_to", "status", "attempt", "max_attempts", "tenant_id", "batch_id", "headers",
	"idempotency_key", "sent_by", "visible_at", "lease_until", "fence", "worker_id", "result", "error_code",
	"error_message", "deadline_at", "parked_at", "created_at", "updated_at", "started_at", "completed_at",
}

func columnList(prefix string) string {
	parts := make([]string, len(commandColumns))
	for i, c := range commandColumns {
		parts[i] = prefix + c
	}
	return strings.Join(parts, ", ")
}

var (
	commandCols  = columnList("")
	commandColsC = columnList("c.")
)

// copyThreshold: batches at least this large without idempotency keys go through COPY.
const copyThreshold = 16

// insertRecord is one command as passed to jsonb_to_recordset; empty values become NULL.
type insertRecord struct {
	Ord            int               `json:"ord"`
	ID             uuid.UUID         `json:"id"`
	Kind           string            `json:"kind"`
	Domain         string            `json:"domain"`
	Queue          string            `json:"queue"`
	CommandType    string            `json:"command_type"`
	Data           json.RawMessage   `json:"data"`
	CorrelationID  *uuid.UUID        `json:"correlation_id,omitempty"`
	CausationID    *uuid.UUID        `json:"causation_id,omitempty"`
	ReplyTo        string            `json:"reply_to,omitempty"`
	Status         string            `json:"status"`
	MaxAttempts    int               `json:"max_attempts"`
	TenantID       string            `json:"tenant_id,omitempty"`
	BatchID        *uuid.UUID        `json:"batch_id,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	VisibleAt      *time.Time        `json:"visible_at,omitempty"`
	DeadlineAt     *time.Time        `json:"deadline_at,omitempty"`
	Actor          string            `json:"actor,omitempty"`
}

func newInsertRecord(ord int, p *driver.CommandInsertParams) insertRecord {
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
	return insertRecord{
		Ord: ord, ID: p.ID, Kind: string(kind), Domain: p.Domain, Queue: p.Queue, CommandType: p.Type,
		Data: data, CorrelationID: uuidPtr(p.CorrelationID), CausationID: uuidPtr(p.CausationID),
		ReplyTo: p.ReplyTo, Status: string(status), MaxAttempts: p.MaxAttempts, TenantID: p.TenantID,
		BatchID: uuidPtr(p.BatchID), Headers: p.Headers, IdempotencyKey: p.IdempotencyKey,
		VisibleAt: p.VisibleAt, DeadlineAt: p.DeadlineAt, Actor: p.Actor,
	}
}

// insertRecordColumns is the column definition list for jsonb_to_recordset.
const insertRecordColumns = `ord int, id uuid, kind text, domain text, queue text, command_type text,
	data jsonb, correlation_id uuid, causation_id uuid, reply_to text, status text, max_attempts int,
	tenant_id text, batch_id uuid, headers jsonb, idempotency_key text, visible_at timestamptz,
	deadline_at timestamptz, actor text`

// insertSelect turns records (alias i) into command rows, stamping times with n.now.
const insertSelect = `
	INSERT INTO {schema}.command (id, kind, domain, queue, command_type, data, correlation_id,
		causation_id, reply_to, status, max_attempts, tenant_id, batch_id, headers, idempotency_key,
		sent_by, visible_at, deadline_at, created_at, updated_at, completed_at)
	SELECT i.id, i.kind, i.domain, i.queue, i.command_type, i.data, i.correlation_id,
		i.causation_id, i.reply_to, i.status, i.max_attempts, i.tenant_id, i.batch_id, i.headers,
		i.idempotency_key, i.actor, coalesce(i.visible_at, n.now), i.deadline_at, n.now, n.now,
		CASE WHEN i.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT') THEN n.now END`

// insertCTEs are the CTEs input (the records of $1, kept only when inputFilter holds), n (the
// time $2) and ins (the inserted ids) that commandInsertManySQL and inboxWithCommandsSQL share.
func insertCTEs(inputFilter string) string {
	return `input AS (
		SELECT * FROM jsonb_to_recordset($1::jsonb) AS t(` + insertRecordColumns + `)` + inputFilter + `
	), n AS (
		SELECT coalesce($2::timestamptz, now()) AS now
	), ins AS (` + insertSelect + `
		FROM input i, n
		ORDER BY i.ord
		ON CONFLICT (domain, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
		RETURNING id
	)`
}

var commandInsertManySQL = `
	WITH ` + insertCTEs("") + `
	SELECT i.ord, coalesce(ins.id, ex.id), ins.id IS NOT NULL
	FROM input i
	LEFT JOIN ins ON ins.id = i.id
	LEFT JOIN {schema}.command ex ON ins.id IS NULL AND i.idempotency_key IS NOT NULL
		AND ex.domain = i.domain AND ex.idempotency_key = i.idempotency_key
	ORDER BY i.ord`

// insertRecordsJSON is the $1 of commandInsertManySQL and inboxWithCommandsSQL: the commands as
// a JSON array of records in insertion order.
func insertRecordsJSON(commands []*driver.CommandInsertParams) ([]byte, error) {
	records := make([]insertRecord, len(commands))
	for i, c := range commands {
		records[i] = newInsertRecord(i, c)
	}
	return json.Marshal(records)
}

func (e *executor) CommandInsertMany(ctx context.Context, params *driver.CommandInsertManyParams) ([]driver.CommandInsertResult, error) {
	if len(params.Commands) == 0 {
		return nil, nil
	}
	useCopy := len(params.Commands) >= copyThreshold
	for _, c := range params.Commands {
		if c.IdempotencyKey != "" {
			useCopy = false
			break
		}
	}
	if useCopy {
		return e.commandInsertCopy(ctx, params)
	}
	payload, err := insertRecordsJSON(params.Commands)
	if err != nil {
		return nil, err
	}
	rows, err := e.db.Query(ctx, e.d.sql(commandInsertManySQL), payload, params.Now)
	if err != nil {
		return nil, err
	}
	results := make([]driver.CommandInsertResult, len(params.Commands))
	var unresolved []int
	for rows.Next() {
		var ord int
		var id pgtype.UUID
		var inserted bool
		if err := rows.Scan(&ord, &id, &inserted); err != nil {
			rows.Close()
			return nil, err
		}
		results[ord].Inserted = inserted
		if id.Valid {
			results[ord].ID = id.Bytes
		} else {
			unresolved = append(unresolved, ord)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// A key that conflicted with a row this statement could not see (inserted by a concurrent
	// transaction, or earlier in this same batch) is resolved with a fresh snapshot.
	for _, ord := range unresolved {
		c := params.Commands[ord]
		existing, err := e.CommandGetByIdempotencyKey(ctx, c.Domain, c.IdempotencyKey)
		if err != nil {
			return nil, fmt.Errorf("resolving idempotency key %q in domain %q: %w", c.IdempotencyKey, c.Domain, err)
		}
		results[ord].ID = existing.ID
	}
	return results, nil
}

func (e *executor) commandInsertCopy(ctx context.Context, params *driver.CommandInsertManyParams) ([]driver.CommandInsertResult, error) {
	columns := []string{"id", "kind", "domain", "queue", "command_type", "data", "correlation_id",
		"causation_id", "reply_to", "status", "max_attempts", "tenant_id", "batch_id", "headers",
		"deadline_at", "sent_by", "completed_at"}
	// visible_at and created_at take the database clock by default; they are only sent when a
	// command is scheduled or a test clock is in use.
	scheduled := params.Now != nil
	for _, c := range params.Commands {
		scheduled = scheduled || c.VisibleAt != nil
	}
	var dbNow time.Time
	switch {
	case params.Now != nil:
		dbNow = *params.Now
		columns = append(columns, "visible_at", "created_at", "updated_at")
	case scheduled:
		// Some commands are scheduled and some are not: COPY cannot use a column default for
		// some rows only, so the unscheduled ones are stamped with the database clock.
		if err := e.db.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
			return nil, err
		}
		columns = append(columns, "visible_at")
	}
	results := make([]driver.CommandInsertResult, len(params.Commands))
	rows := make([][]any, len(params.Commands))
	for i, c := range params.Commands {
		r := newInsertRecord(i, c)
		var headers any
		if len(r.Headers) > 0 {
			headers = r.Headers
		}
		// Terminal commands (replies to finished work) are completed when sent, as on the
		// INSERT path.
		var completedAt any
		if driver.CommandStatus(r.Status).Terminal() {
			completedAt = time.Now()
			if params.Now != nil {
				completedAt = *params.Now
			}
		}
		row := []any{pgUUID(c.ID), r.Kind, r.Domain, r.Queue, r.CommandType, []byte(r.Data),
			pgUUID(c.CorrelationID), pgUUID(c.CausationID), nullString(r.ReplyTo), r.Status, r.MaxAttempts,
			nullString(r.TenantID), pgUUID(c.BatchID), headers, r.DeadlineAt, nullString(r.Actor), completedAt}
		if scheduled {
			visibleAt := dbNow
			if r.VisibleAt != nil {
				visibleAt = *r.VisibleAt
			}
			row = append(row, visibleAt)
		}
		if params.Now != nil {
			row = append(row, dbNow, dbNow)
		}
		rows[i] = row
		results[i] = driver.CommandInsertResult{ID: c.ID, Inserted: true}
	}
	if _, err := e.db.CopyFrom(ctx, pgx.Identifier{e.d.schema, "command"}, columns, pgx.CopyFromRows(rows)); err != nil {
		return nil, err
	}
	return results, nil
}

func (e *executor) CommandGetByID(ctx context.Context, id uuid.UUID) (*driver.CommandRow, error) {
	row := e.db.QueryRow(ctx, e.d.sql(`SELECT `+commandCols+`, audit FROM {schema}.command WHERE id = $1`), pgUUID(id))
	var audit []byte
	cmd, err := scanCommand(row, &audit)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	stored, err := driver.DecodeStoredAudit(audit)
	if err != nil {
		return nil, fmt.Errorf("decoding audit of command %s: %w", id, err)
	}
	cmd.Audit = driver.CurrentAudit(cmd, stored)
	return cmd, nil
}

func (e *executor) CommandGetByIdempotencyKey(ctx context.Context, domain, key string) (*driver.CommandRow, error) {
	row := e.db.QueryRow(ctx, e.d.sql(`SELECT `+commandCols+` FROM {schema}.command
		WHERE domain = $1 AND idempotency_key = $2`), domain, key)
	cmd, err := scanCommand(row, nil)
	if errors.Is(err, pgx.ErrNoRows) {
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
	args := f.args
	rows, err := e.db.Query(ctx, e.d.sql(query), args...)
	if err != nil {
		return nil, err
	}
	return collectCommands(rows)
}

// commandClaimSQL claims a batch. Its commit need not wait for the WAL flush: a claim lost in a
// crash only rolls the fence back, which fences out the claimer's outcome, and the command is
// delivered again (at least once, as always). Outcomes are written with full durability.
const commandClaimSQL = `
	WITH n AS (
		SELECT coalesce($4::timestamptz, now()) AS now, set_config('synchronous_commit', 'off', true) AS async_commit
	), picked AS (
		SELECT id FROM {schema}.command, n
		WHERE queue = $1 AND completed_at IS NULL AND parked_at IS NULL AND visible_at <= n.now
			-- A lease that expired on the last attempt is not claimed again: the watchdog times
			-- the command out (CommandListExpired with LastAttempts).
			AND (status = 'PENDING' OR (lease_until <= n.now AND attempt < max_attempts))
		ORDER BY visible_at
		LIMIT $2
		FOR UPDATE OF command SKIP LOCKED
	)
	UPDATE {schema}.command c SET
		status = 'RUNNING',
		attempt = c.attempt + 1,
		fence = c.fence + 1,
		lease_until = n.now + $3 * interval '1 microsecond',
		started_at = n.now,
		updated_at = n.now,
		worker_id = $5::text,
		-- Only a reclaim writes the audit here: it records the claim whose lease ran out. A first
		-- claim is recorded by the statement that ends it, which keeps this update HOT and small.
		audit = CASE WHEN c.status = 'RUNNING' THEN c.audit || jsonb_build_array(
			jsonb_build_object('at', c.started_at, 'event', 'CLAIMED', 'from', 'PENDING', 'to', 'RUNNING',
				'attempt', c.attempt, 'actor', c.worker_id),
			jsonb_build_object('at', c.lease_until, 'event', 'LEASE_EXPIRED', 'from', 'RUNNING', 'to', 'PENDING',
				'attempt', c.attempt, 'error_code', 'LEASE_EXPIRED'))
			ELSE c.audit END
	FROM picked, n
	WHERE c.id = picked.id
	RETURNING ` + "%s"

func (e *executor) CommandClaim(ctx context.Context, params *driver.CommandClaimParams) ([]*driver.CommandRow, error) {
	query := fmt.Sprintf(commandClaimSQL, commandColsC)
	rows, err := e.db.Query(ctx, e.d.sql(query), params.Queue, params.Max, params.Lease.Microseconds(), params.Now, params.WorkerID)
	if err != nil {
		return nil, err
	}
	return collectCommands(rows)
}

// commandCompleteManySQL takes the completions as parallel typed arrays (cheaper to encode and
// to read than JSON at tens of thousands of rows per second) and inserts each applied
// completion's reply in the same statement.
const commandCompleteManySQL = `
	WITH input AS (
		SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::bigint[], $5::text[]::jsonb[],
			$6::text[], $7::text[], $8::text[], $9::bool[], $10::uuid[], $11::text[], $12::text[],
			$13::text[], $14::text[]::jsonb[], $15::uuid[], $16::int[], $17::text[], $18::text[],
			$20::text[]::jsonb[])
			AS t(id, fence, status, retry_delay_us, result, error_code, error_message, event, release,
				reply_id, reply_domain, reply_queue, reply_type, reply_data, reply_correlation_id,
				reply_max_attempts, reply_tenant_id, reply_actor, reply_headers)
	), n AS (
		SELECT coalesce($19::timestamptz, now()) AS now
	), updated AS (
		UPDATE {schema}.command c SET
			status = i.status,
			attempt = CASE WHEN i.release THEN c.attempt - 1 ELSE c.attempt END,
			visible_at = CASE WHEN i.status = 'PENDING' THEN n.now + i.retry_delay_us * interval '1 microsecond' ELSE c.visible_at END,
			lease_until = NULL,
			result = coalesce(i.result, c.result),
			error_code = i.error_code,
			error_message = i.error_message,
			completed_at = CASE WHEN i.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT') THEN n.now END,
			parked_at = CASE WHEN i.status = 'IN_TSQ' THEN n.now END,
			updated_at = n.now,
			-- The claim this outcome ends, then the outcome; a handler's COMPLETED or FAILED is
			-- rebuilt from the columns instead (driver.CurrentAudit).
			audit = CASE WHEN i.status IN ('COMPLETED', 'FAILED') THEN c.audit ELSE c.audit || jsonb_build_array(
				jsonb_build_object('at', c.started_at, 'event', 'CLAIMED', 'from', 'PENDING', 'to', 'RUNNING',
					'attempt', c.attempt, 'actor', c.worker_id),
				jsonb_strip_nulls(jsonb_build_object(
					'at', n.now, 'event', i.event, 'from', 'RUNNING', 'to', i.status, 'attempt', c.attempt,
					'error_code', i.error_code, 'error_message', i.error_message))) END
		FROM input i, n
		WHERE c.id = i.id AND c.fence = i.fence AND c.status = 'RUNNING'
		RETURNING c.id, c.status, c.worker_id, c.attempt, c.error_code, c.error_message, i.reply_id,
			i.reply_domain, i.reply_queue, i.reply_type, i.reply_data, i.reply_correlation_id,
			i.reply_max_attempts, i.reply_tenant_id, i.reply_actor, i.reply_headers
	), parked AS (
		-- A command moved to the troubleshooting queue is recorded in the dead-letter table
		-- (command_dlq) by the same statement.
		INSERT INTO {schema}.command_dlq (command_id, parked_at, parked_by, attempts, error)
		SELECT u.id, n.now, u.worker_id, u.attempt, concat_ws(': ', u.error_code, u.error_message)
		FROM updated u, n
		WHERE u.status = 'IN_TSQ'
		ON CONFLICT (command_id) DO UPDATE SET parked_at = excluded.parked_at,
			parked_by = excluded.parked_by, attempts = excluded.attempts, error = excluded.error
	), park_audit AS (
		INSERT INTO {schema}.audit_log (at, entity_type, entity_id, action, actor, reason, details)
		SELECT n.now, 'command', u.id::text, 'DLQ_PARK', coalesce(u.worker_id, 'worker'),
			concat_ws(': ', u.error_code, u.error_message), jsonb_build_object('attempts', u.attempt)
		FROM updated u, n
		WHERE u.status = 'IN_TSQ'
	), replies AS (
		INSERT INTO {schema}.command (id, kind, domain, queue, command_type, data, correlation_id,
			causation_id, status, max_attempts, tenant_id, sent_by, visible_at, created_at, updated_at, headers)
		SELECT u.reply_id, 'reply', u.reply_domain, u.reply_queue, u.reply_type, coalesce(u.reply_data, '{}'),
			u.reply_correlation_id, u.id, 'PENDING', u.reply_max_attempts, u.reply_tenant_id,
			u.reply_actor, n.now, n.now, n.now, u.reply_headers
		FROM updated u, n
		WHERE u.reply_id IS NOT NULL
	)
	SELECT id FROM updated`

func (e *executor) CommandCompleteMany(ctx context.Context, params *driver.CommandCompleteManyParams) ([]uuid.UUID, error) {
	n := len(params.Completions)
	if n == 0 {
		return nil, nil
	}
	var (
		ids, replyIDs, replyCorrelations                 = make([]pgtype.UUID, n), make([]pgtype.UUID, n), make([]pgtype.UUID, n)
		fences, delays                                   = make([]int64, n), make([]int64, n)
		statuses, events                                 = make([]string, n), make([]string, n)
		results, codes, messages, replyData              = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		replyDomains, replyQueues, replyTypes, replyTens = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		replyActors, replyHeaders                        = make([]*string, n), make([]*string, n)
		releases                                         = make([]bool, n)
		replyMax                                         = make([]*int32, n)
	)
	for i, c := range params.Completions {
		ids[i], fences[i], statuses[i], delays[i] = pgUUID(c.ID), c.Fence, string(c.Status), c.RetryDelay.Microseconds()
		results[i], codes[i], messages[i] = nullJSONText(c.Result), nullString(c.ErrorCode), nullString(c.ErrorMessage)
		events[i], releases[i] = c.Event, c.Release
		if r := c.Reply; r != nil {
			replyIDs[i] = pgtype.UUID{Bytes: r.ID, Valid: true}
			replyCorrelations[i] = pgtype.UUID{Bytes: r.CorrelationID, Valid: r.CorrelationID != uuid.Nil}
			replyDomains[i], replyQueues[i], replyTypes[i] = &r.Domain, &r.Queue, &r.Type
			replyData[i] = nullJSONText(r.Data)
			maxAttempts := int32(r.MaxAttempts)
			replyMax[i] = &maxAttempts
			replyTens[i], replyActors[i] = nullString(r.TenantID), nullString(r.Actor)
			if len(r.Headers) > 0 {
				encoded, err := json.Marshal(r.Headers)
				if err != nil {
					return nil, fmt.Errorf("encoding the headers of reply %s: %w", r.ID, err)
				}
				replyHeaders[i] = nullJSONText(encoded)
			}
		}
	}
	args := []any{ids, fences, statuses, delays, results, codes, messages, events, releases, replyIDs,
		replyDomains, replyQueues, replyTypes, replyData, replyCorrelations, replyMax, replyTens, replyActors, params.Now, replyHeaders}
	if !hasCompletionExtras(params.Completions) {
		rows, err := e.db.Query(ctx, e.d.sql(commandCompleteManySQL), args...)
		if err != nil {
			return nil, err
		}
		return collectUUIDs(rows)
	}
	// Outbox and inbox rows commit with the outcomes they belong to, and only for those applied:
	// one statement writes them all, joined to the rows it updated.
	extras, err := completionExtrasArgs(params.Completions, params.Now)
	if err != nil {
		return nil, err
	}
	rows, err := e.db.Query(ctx, e.d.sql(commandCompleteManyExtrasSQL), append(args, extras...)...)
	if err != nil {
		return nil, err
	}
	return collectUUIDs(rows)
}

func hasCompletionExtras(completions []*driver.CommandCompletion) bool {
	for _, c := range completions {
		if len(c.Outbox) > 0 || c.Inbox != nil {
			return true
		}
	}
	return false
}

// commandCompleteManyExtrasSQL is commandCompleteManySQL that also writes the outbox messages
// ($21..$31, with their command in $32) and inbox records ($33..$36) of the outcomes it applies.
var commandCompleteManyExtrasSQL = strings.Replace(commandCompleteManySQL, "\n\tSELECT id FROM updated", `, outbox_rows AS (`+
	renumberParams(fmt.Sprintf(outboxInsertSQL, ", $12::uuid[]", ", command_id", "\n\tJOIN updated u ON u.id = t.command_id"), 20)+`
	), inbox_rows AS (
		INSERT INTO {schema}.inbox (message_id, handler, processed_at)
		SELECT t.message_id, t.handler, coalesce(t.at, now())
		FROM unnest($33::uuid[], $34::text[], $35::text[], $36::timestamptz[]) AS t(command_id, message_id, handler, at)
		JOIN updated u ON u.id = t.command_id
		ON CONFLICT DO NOTHING
	)
	SELECT id FROM updated`, 1)

// renumberParams adds by to every $N placeholder of query.
func renumberParams(query string, by int) string {
	return paramRE.ReplaceAllStringFunc(query, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		return "$" + strconv.Itoa(n+by)
	})
}

var paramRE = regexp.MustCompile(`\$[0-9]+`)

// completionExtrasArgs are the arguments $21..$36 of commandCompleteManyExtrasSQL.
func completionExtrasArgs(completions []*driver.CommandCompletion, now *time.Time) ([]any, error) {
	var messages []*driver.OutboxInsertParams
	var owners []pgtype.UUID
	var inboxOwners []pgtype.UUID
	var inboxIDs, inboxHandlers []string
	var inboxAt []*time.Time
	for _, c := range completions {
		for _, m := range c.Outbox {
			messages = append(messages, m)
			owners = append(owners, pgUUID(c.ID))
		}
		if c.Inbox != nil {
			at := c.Inbox.Now
			if at == nil {
				at = now
			}
			inboxOwners, inboxIDs, inboxHandlers, inboxAt = append(inboxOwners, pgUUID(c.ID)), append(inboxIDs, c.Inbox.MessageID),
				append(inboxHandlers, c.Inbox.Handler), append(inboxAt, at)
		}
	}
	args, err := outboxInsertArgs(messages, now)
	if err != nil {
		return nil, err
	}
	if owners == nil {
		owners = []pgtype.UUID{}
	}
	if inboxOwners == nil {
		inboxOwners, inboxIDs, inboxHandlers, inboxAt = []pgtype.UUID{}, []string{}, []string{}, []*time.Time{}
	}
	return append(args, owners, inboxOwners, inboxIDs, inboxHandlers, inboxAt), nil
}

func collectUUIDs(rows pgx.Rows) ([]uuid.UUID, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (uuid.UUID, error) {
		var id pgtype.UUID
		err := row.Scan(&id)
		return fromPgUUID(id), err
	})
}

const commandOperatorSQL = `
	WITH n AS (
		SELECT coalesce($11::timestamptz, now()) AS now
	), updated AS (
		UPDATE {schema}.command c SET
			status = $2,
			attempt = CASE WHEN $8 THEN 0 ELSE c.attempt END,
			visible_at = CASE WHEN $2 = 'PENDING' THEN n.now ELSE c.visible_at END,
			lease_until = NULL,
			result = coalesce($7::jsonb, c.result),
			error_code = CASE WHEN $9::text IS NULL THEN c.error_code ELSE $9 END,
			error_message = CASE WHEN $10::text IS NULL THEN c.error_message ELSE $10 END,
			completed_at = CASE WHEN $2 IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT') THEN n.now END,
			parked_at = CASE WHEN $2 = 'IN_TSQ' THEN coalesce(c.parked_at, n.now) END,
			updated_at = n.now,
			audit = c.audit || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
				'at', n.now, 'event', $4::text, 'from', c.status, 'to', $2::text, 'attempt', c.attempt,
				'actor', $5::text, 'reason', nullif($6::text, ''), 'error_code', $9::text,
				'error_message', $10::text)))
		FROM n
		WHERE c.id = $1 AND c.status = ANY($3::text[])
		RETURNING ` + "%s" + `
	), parked AS (
		INSERT INTO {schema}.command_dlq (command_id, parked_at, parked_by, attempts, error)
		SELECT u.id, n.now, $5::text, u.attempt, concat_ws(': ', u.error_code, u.error_message)
		FROM updated u, n
		WHERE u.status = 'IN_TSQ'
		ON CONFLICT (command_id) DO NOTHING
	), unparked AS (
		-- Leaving the troubleshooting queue (retry, cancel, complete) ends the dead-letter record.
		DELETE FROM {schema}.command_dlq d USING updated u
		WHERE d.command_id = u.id AND u.status <> 'IN_TSQ'
	), replies AS (` + insertSelect + `
		FROM updated u, n, jsonb_to_record($12::jsonb) AS i(` + insertRecordColumns + `)
		WHERE $12::jsonb IS NOT NULL
	)
	SELECT * FROM updated`

func (e *executor) CommandOperatorAction(ctx context.Context, params *driver.CommandOperatorParams) (*driver.CommandRow, error) {
	from := make([]string, len(params.FromStatuses))
	for i, s := range params.FromStatuses {
		from[i] = string(s)
	}
	var reply []byte
	if params.Reply != nil {
		var err error
		if reply, err = json.Marshal(newInsertRecord(0, params.Reply)); err != nil {
			return nil, err
		}
	}
	query := fmt.Sprintf(commandOperatorSQL, commandColsC)
	args := []any{pgUUID(params.ID), string(params.ToStatus), from, params.Event,
		params.Actor, params.Reason, nullJSON(params.Result), params.ResetAttempts,
		nullString(params.ErrorCode), nullString(params.ErrorMessage), params.Now, reply}
	run := func(exec *executor) (*driver.CommandRow, error) {
		cmd, err := scanCommand(exec.db.QueryRow(ctx, e.d.sql(query), args...), nil)
		if errors.Is(err, pgx.ErrNoRows) {
			if _, getErr := exec.CommandGetByID(ctx, params.ID); errors.Is(getErr, driver.ErrNotFound) {
				return nil, driver.ErrNotFound
			}
			return nil, driver.ErrConflict
		}
		return cmd, err
	}
	if len(params.Outbox) == 0 {
		return run(e)
	}
	var cmd *driver.CommandRow
	err := driver.WithTx(ctx, e, func(tx driver.ExecutorTx) error {
		inner := tx.(*executorTx)
		var err error
		if cmd, err = run(&inner.executor); err != nil {
			return err
		}
		_, err = inner.OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: params.Outbox, Now: params.Now})
		return err
	})
	if err != nil {
		return nil, err
	}
	return cmd, nil
}

func (e *executor) CommandQueueDepths(ctx context.Context) ([]*driver.QueueDepth, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`
		SELECT queue, domain, kind,
			count(*) FILTER (WHERE status = 'PENDING' AND visible_at <= now()),
			count(*) FILTER (WHERE status = 'PENDING' AND visible_at > now()),
			count(*) FILTER (WHERE status = 'RUNNING'),
			0::bigint
		FROM {schema}.command WHERE completed_at IS NULL AND parked_at IS NULL
		GROUP BY queue, domain, kind
		UNION ALL
		SELECT queue, domain, kind, 0, 0, 0, count(*)
		FROM {schema}.command WHERE parked_at IS NOT NULL
		GROUP BY queue, domain, kind`))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byQueue := map[string]*driver.QueueDepth{}
	var order []string
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
		order = append(order, q.Queue)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	depths := make([]*driver.QueueDepth, 0, len(order))
	for _, name := range order {
		depths = append(depths, byQueue[name])
	}
	sortDepths(depths)
	return depths, nil
}

func (e *executor) CommandStats(ctx context.Context, params *driver.CommandStatsParams) ([]*driver.CommandStat, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`
		SELECT domain, command_type, status, count(*)
		FROM {schema}.command WHERE created_at >= $1 AND kind = 'command'
		GROUP BY domain, command_type, status`), params.Since)
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
	rows, err = e.db.Query(ctx, e.d.sql(`
		SELECT domain, command_type, count(*),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - started_at)),
			percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - started_at))
		FROM {schema}.command
		WHERE created_at >= $1 AND kind = 'command' AND status = 'COMPLETED' AND started_at IS NOT NULL
		GROUP BY domain, command_type`), params.Since)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var domain, typ string
		var n int64
		var p50, p99 float64
		if err := rows.Scan(&domain, &typ, &n, &p50, &p99); err != nil {
			rows.Close()
			return nil, err
		}
		if s := stats[[2]string{domain, typ}]; s != nil {
			s.Completed = n
			s.P50 = time.Duration(p50 * float64(time.Second))
			s.P99 = time.Duration(p99 * float64(time.Second))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return sortStats(stats), nil
}

func (e *executor) CommandCountRunning(ctx context.Context, queue string) (int64, error) {
	var n int64
	err := e.db.QueryRow(ctx, e.d.sql(`SELECT count(*) FROM {schema}.command
		WHERE queue = $1 AND completed_at IS NULL AND parked_at IS NULL AND status = 'RUNNING'
			AND lease_until > now()`), queue).Scan(&n)
	return n, err
}

func collectCommands(rows pgx.Rows) ([]*driver.CommandRow, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.CommandRow, error) { return scanCommand(row, nil) })
}

func scanCommand(row pgx.Row, audit *[]byte) (*driver.CommandRow, error) {
	var (
		c                                 driver.CommandRow
		kind, status                      string
		id, correlationID, causationID    pgtype.UUID
		batchID                           pgtype.UUID
		replyTo, tenantID, idempotencyKey *string
		workerID, errorCode, errorMessage *string
		sentBy                            *string
		data, headers, result             []byte
	)
	dest := []any{&id, &kind, &c.Domain, &c.Queue, &c.Type, &data, &correlationID, &causationID,
		&replyTo, &status, &c.Attempt, &c.MaxAttempts, &tenantID, &batchID, &headers,
		&idempotencyKey, &sentBy, &c.VisibleAt, &c.LeaseUntil, &c.Fence, &workerID, &result, &errorCode,
		&errorMessage, &c.DeadlineAt, &c.ParkedAt, &c.CreatedAt, &c.UpdatedAt, &c.StartedAt, &c.CompletedAt}
	if audit != nil {
		dest = append(dest, audit)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	c.Kind = driver.CommandKind(kind)
	c.Status = driver.CommandStatus(status)
	c.Data = data
	c.Result = result
	c.ID = fromPgUUID(id)
	c.CorrelationID = fromPgUUID(correlationID)
	c.CausationID = fromPgUUID(causationID)
	c.BatchID = fromPgUUID(batchID)
	c.ReplyTo = derefString(replyTo)
	c.TenantID = derefString(tenantID)
	c.IdempotencyKey = derefString(idempotencyKey)
	c.WorkerID = derefString(workerID)
	c.SentBy = derefString(sentBy)
	c.ErrorCode = derefString(errorCode)
	c.ErrorMessage = derefString(errorMessage)
	if len(headers) > 0 {
		if err := json.Unmarshal(headers, &c.Headers); err != nil {
			return nil, fmt.Errorf("decoding headers of command %s: %w", c.ID, err)
		}
	}
	return &c, nil
}
