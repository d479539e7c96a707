package pgdriver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/commandbus/commandbus/driver"
)

// The relations an inserted execution can have to the checkpoint that inserts it.
const (
	relationChild     = "child"
	relationSuccessor = "successor"
)

// executionInsertSQL inserts executions given as 17 parallel arrays (and $19, their not-before times), skips the ids that exist
// (the insert is idempotent), writes the log entries of those it inserted and returns their ids
// in input order. An execution with an owner (a checkpoint's child or successor) is inserted
// only while the owner's fence is still owner_fence, so a fenced checkpoint inserts nothing,
// and takes what it leaves empty from the owner. A child's parent is its owner and its root the
// owner's root; a successor continues from its owner and keeps the owner's parent and root
// unless given. A top-level execution given a parent takes the parent's root; without one it is
// its own root.
const executionInsertSQL = `
	WITH n AS (
		SELECT coalesce($18::timestamptz, now()) AS now
	), raw AS (
		SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
			$7::uuid[], $8::text[], $9::timestamptz[], $10::bigint[], $11::text[], $12::uuid[],
			$13::uuid[], $14::text[], $15::uuid[], $16::bigint[], $17::text[], $19::timestamptz[])
			WITH ORDINALITY AS r(id, model, type, domain, tenant_id, business_key, batch_id, state,
				deadline_at, lease_us, worker_id, parent_id, root_id, traceparent, owner, owner_fence,
				relation, not_before, ord)
	), i AS (
		SELECT r.id, r.ord, r.batch_id, r.state, r.deadline_at, r.lease_us, r.worker_id, r.not_before,
			coalesce(nullif(r.model, ''), o.model, '') AS model,
			coalesce(nullif(r.type, ''), o.type, '') AS type,
			coalesce(nullif(r.domain, ''), o.domain, '') AS domain,
			coalesce(r.tenant_id, o.tenant_id) AS tenant_id,
			coalesce(r.business_key, o.business_key) AS business_key,
			CASE r.relation WHEN '` + relationChild + `' THEN o.id
				WHEN '` + relationSuccessor + `' THEN coalesce(r.parent_id, o.parent_id)
				ELSE r.parent_id END AS parent_id,
			CASE r.relation WHEN '` + relationChild + `' THEN coalesce(o.root_id, o.id)
				WHEN '` + relationSuccessor + `' THEN coalesce(r.root_id, o.root_id, o.id)
				ELSE coalesce(r.root_id, p.root_id, p.id, r.id) END AS root_id,
			CASE WHEN r.relation = '` + relationSuccessor + `' THEN o.id END AS continued_from,
			coalesce(r.traceparent, o.traceparent) AS traceparent
		FROM raw r
		LEFT JOIN {schema}.execution o ON o.id = r.owner
		LEFT JOIN {schema}.execution p ON p.id = r.parent_id AND r.owner IS NULL
		WHERE r.owner IS NULL OR o.fence = r.owner_fence
	), ins AS (
		INSERT INTO {schema}.execution (id, model, type, domain, tenant_id, business_key, batch_id,
			status, state, deadline_at, lease_until, fence, worker_id, wake_at, created_at, updated_at,
			parent_id, root_id, continued_from, traceparent)
		SELECT i.id, i.model, i.type, i.domain, i.tenant_id, i.business_key, i.batch_id,
			CASE WHEN i.lease_us > 0 THEN 'EXECUTING' ELSE 'PENDING' END,
			i.state::jsonb, i.deadline_at,
			CASE WHEN i.lease_us > 0 THEN n.now + i.lease_us * interval '1 microsecond' END,
			CASE WHEN i.lease_us > 0 THEN 1 ELSE 0 END,
			i.worker_id,
			-- A leased execution wakes when its lease would end (its runner died); a pending one now.
			-- A pending one given a later not-before time wakes then.
			CASE WHEN i.lease_us > 0 THEN n.now + i.lease_us * interval '1 microsecond'
				ELSE greatest(n.now, i.not_before) END,
			n.now, n.now, i.parent_id, i.root_id, i.continued_from, i.traceparent
		FROM i, n
		ON CONFLICT (id) DO NOTHING
		RETURNING id
	)`

// executionInsertLogSQL follows executionInsertSQL: the log entries (parameters from $20) of the
// executions inserted.
var executionInsertLogSQL = strings.Replace(logInsertSQL(20), "/*applied*/ true", "l.execution_id IN (SELECT id FROM ins)", 1)

// executionInsertSelectSQL ends the insert: the inserted ids in input order.
const executionInsertSelectSQL = `
	SELECT i.id FROM i WHERE i.id IN (SELECT id FROM ins) ORDER BY i.ord`

// executionInsertSelectOutboxSQL is executionInsertSelectSQL followed by the ids and keys of the
// outbox messages written (with a NULL execution id).
const executionInsertSelectOutboxSQL = `
	SELECT i.id, NULL::bigint AS outbox_id, NULL::text, NULL::bigint, NULL::timestamptz, NULL::text, NULL::text, NULL::text, i.ord
	FROM i WHERE i.id IN (SELECT id FROM ins)
	UNION ALL SELECT NULL::uuid, o.id, o.key, o.previous, o.created_at, o.message_id, o.transport, o.topic, NULL FROM inserted_outbox o
	ORDER BY 9, 2`

// executionInsertAttrsParam is the first parameter of the attributes of new executions, after
// executionInsertSQL's 19 and the log's 15.
const executionInsertAttrsParam = 35

// insertArrays holds executions to insert as parallel arrays for executionInsertSQL.
type insertArrays struct {
	ids, batches, parents, roots, owners []pgtype.UUID
	models, types, domains, states       []string
	relations                            []*string
	tenants, keys, workers, traceparents []*string
	deadlines, notBefores                []pgtype.Timestamptz
	leases, ownerFences                  []int64
	log                                  logArrays
	attrs                                attributeArrays
	outbox                               []*driver.OutboxInsertParams // written when their execution is inserted
	outboxOwners                         []pgtype.UUID
	handoff                              *driver.OutboxHandoff // the outbox messages' lease and report, if any
}

// add appends an execution; owner and relation are zero for a top-level insert. It fails on an
// invalid attribute.
func (a *insertArrays) add(x *driver.ExecutionInsertParams, owner uuid.UUID, ownerFence int64, relation string) error {
	if err := a.attrs.add(x.ID, 0, x.Attributes); err != nil {
		return err
	}
	a.ids, a.batches = append(a.ids, pgUUID(x.ID)), append(a.batches, pgUUID(x.BatchID))
	a.parents, a.roots, a.owners = append(a.parents, pgUUID(x.ParentID)), append(a.roots, pgUUID(x.RootID)), append(a.owners, pgUUID(owner))
	a.models, a.types, a.domains = append(a.models, x.Model), append(a.types, x.Type), append(a.domains, x.Domain)
	a.states = append(a.states, jsonText(x.State))
	a.relations = append(a.relations, nullString(relation))
	a.tenants, a.keys = append(a.tenants, nullString(x.TenantID)), append(a.keys, nullString(x.BusinessKey))
	a.workers, a.traceparents = append(a.workers, nullString(x.WorkerID)), append(a.traceparents, nullString(x.Traceparent))
	var deadline pgtype.Timestamptz
	if x.DeadlineAt != nil {
		deadline = pgtype.Timestamptz{Time: *x.DeadlineAt, Valid: true}
	}
	a.deadlines = append(a.deadlines, deadline)
	var notBefore pgtype.Timestamptz
	if x.NotBefore != nil {
		notBefore = pgtype.Timestamptz{Time: *x.NotBefore, Valid: true}
	}
	a.notBefores = append(a.notBefores, notBefore)
	a.leases, a.ownerFences = append(a.leases, x.Lease.Microseconds()), append(a.ownerFences, ownerFence)
	for _, entry := range x.Log {
		a.log.add(x.ID, 0, entry)
	}
	for _, m := range x.Outbox {
		a.outbox, a.outboxOwners = append(a.outbox, m), append(a.outboxOwners, pgUUID(x.ID))
	}
	return nil
}

func (a *insertArrays) empty() bool { return len(a.ids) == 0 }

// sql is the insert statement: the executions, their log entries, their attributes and their
// outbox messages.
func (a *insertArrays) sql() string {
	attrsCTE, attrsArgs := a.attrs.insertCTE(executionInsertAttrsParam)
	return executionInsertSQL + executionInsertLogSQL + attrsCTE +
		a.outboxCTE(executionInsertAttrsParam+len(attrsArgs)) + executionInsertSelectSQL
}

// sqlWithOutboxIDs is sql returning, after the ids of the executions inserted, the ids of the
// outbox messages written (rows of a NULL execution id).
func (a *insertArrays) sqlWithOutboxIDs() string {
	attrsCTE, attrsArgs := a.attrs.insertCTE(executionInsertAttrsParam)
	return executionInsertSQL + executionInsertLogSQL + attrsCTE +
		a.outboxCTE(executionInsertAttrsParam+len(attrsArgs)) + executionInsertSelectOutboxSQL
}

// outboxCTE writes the outbox messages of the executions the statement inserted (none for an
// id that existed), from parameter $first on; nothing when there are none.
func (a *insertArrays) outboxCTE(first int) string {
	if len(a.outbox) == 0 {
		return ""
	}
	p := make([]any, 13)
	for i := range p {
		p[i] = first + i
	}
	return fmt.Sprintf(`, inserted_outbox AS (
		INSERT INTO {schema}.outbox (category, transport, topic, key, type, message_id, payload, headers, next_at, created_at, locked_by, locked_until)
		SELECT t.category, t.transport, t.topic, t.key, t.type, t.message_id, t.payload::jsonb, t.headers::jsonb,
			coalesce(t.next_at, CASE WHEN t.delay_us > 0 THEN n.now + t.delay_us * interval '1 microsecond' END), n.now,
			$%[12]d::text, n.now + $%[13]d::bigint * interval '1 microsecond'
		FROM unnest($%[1]d::text[], $%[2]d::text[], $%[3]d::text[], $%[4]d::text[], $%[5]d::text[], $%[6]d::text[], $%[7]d::text[],
				$%[8]d::text[], $%[9]d::timestamptz[], $%[10]d::bigint[], $%[11]d::uuid[])
			WITH ORDINALITY AS t(category, transport, topic, key, type, message_id, payload, headers, next_at, delay_us, owner, ord), n
		WHERE t.owner IN (SELECT id FROM ins)
		ORDER BY t.ord
		`+fmt.Sprintf(writtenReturning, "CASE WHEN $%[12]d::text IS NOT NULL THEN "+previousUnpublishedSQL+" ELSE 0 END")+`
	)`, p...)
}

// args are the parameters of sql.
func (a *insertArrays) args(now any) ([]any, error) {
	l := &a.log
	_, attrsArgs := a.attrs.insertCTE(executionInsertAttrsParam)
	args := append([]any{a.ids, a.models, a.types, a.domains, a.tenants, a.keys, a.batches, a.states,
		a.deadlines, a.leases, a.workers, a.parents, a.roots, a.traceparents, a.owners, a.ownerFences,
		a.relations, now, a.notBefores, l.executionIDs, l.seqs, l.entryTypes, l.names, l.stepStatuses, l.attempts,
		l.maxAttempts, l.requests, l.responses, l.errorCodes, l.errorMessages, l.actors, l.reasons,
		l.fences, l.startedAts}, attrsArgs...)
	if len(a.outbox) == 0 {
		return args, nil
	}
	outboxArgs, err := outboxInsertArgs(a.outbox, nil)
	if err != nil {
		return nil, err
	}
	var holder *string
	var lease *int64
	if h := a.handoff; h != nil && h.Holder != "" {
		us := h.Lease.Microseconds()
		holder, lease = &h.Holder, &us
	}
	// Without the time (the statement's own, $18).
	return append(append(append(args, outboxArgs[:9]...), outboxArgs[10:]...), a.outboxOwners, holder, lease), nil
}

func (e *executor) ExecutionInsertMany(ctx context.Context, params *driver.ExecutionInsertManyParams) ([]uuid.UUID, error) {
	if len(params.Executions) == 0 {
		return nil, nil
	}
	var a insertArrays
	seen := make(map[uuid.UUID]bool, len(params.Executions))
	for _, x := range params.Executions {
		if !seen[x.ID] { // an id given twice is inserted as its first occurrence
			seen[x.ID] = true
			if err := a.add(x, uuid.Nil, 0, ""); err != nil {
				return nil, err
			}
		}
	}
	_, inTx := e.db.(pgx.Tx)
	if !inTx { // in a caller's transaction, nothing is committed when the statement returns
		a.handoff = params.OutboxHandoff
	}
	args, err := a.args(params.Now)
	if err != nil {
		return nil, err
	}
	if len(a.outbox) == 0 || a.handoff == nil {
		rows, err := e.db.Query(ctx, e.d.sql(a.sql()), args...)
		if err != nil {
			return nil, err
		}
		return collectUUIDs(rows)
	}
	rows, err := e.db.Query(ctx, e.d.sql(a.sqlWithOutboxIDs()), args...)
	if err != nil {
		return nil, err
	}
	var inserted []uuid.UUID
	var written []writtenRow
	var id pgtype.UUID
	var ord *int64
	var w struct {
		id, previous                *int64
		key                         *string
		createdAt                   *time.Time
		messageID, transport, topic *string
	}
	if _, err := pgx.ForEachRow(rows, []any{&id, &w.id, &w.key, &w.previous, &w.createdAt, &w.messageID, &w.transport, &w.topic, &ord}, func() error {
		if w.id == nil {
			inserted = append(inserted, fromPgUUID(id))
			return nil
		}
		written = append(written, writtenRow{
			WrittenMessage: driver.WrittenMessage{ID: *w.id, Key: *w.key, Previous: *w.previous, CreatedAt: *w.createdAt},
			messageID:      *w.messageID, transport: *w.transport, topic: *w.topic,
		})
		return nil
	}); err != nil {
		return nil, err
	}
	if len(written) > 0 { // committed: the statement was its own transaction
		a.handoff.Written(matchWritten(written, a.outbox, nil))
	}
	return inserted, nil
}

// checkpointFollowUps are the statements that run after a checkpoint batch's main statement, in
// the same transaction, for the checkpoints that applied (their fence still matches: the main
// statement holds their rows locked until the commit).
type checkpointFollowUps struct {
	owned               insertArrays // children and successors
	continuedIDs        []pgtype.UUID
	continuedFences     []int64
	successors          []pgtype.UUID
	continuedAppliedSeq []int64
	endedIDs            []pgtype.UUID
	endedFences         []int64
	cancelledIDs        []pgtype.UUID
	cancelledFences     []int64
	outbox              []*driver.OutboxInsertParams
	outboxOwners        []pgtype.UUID
	outboxFences        []int64
	outboxSuspended     []bool // written only when the owner's release stored SUSPENDED
}

func (f *checkpointFollowUps) add(c *driver.ExecutionCheckpoint) error {
	for _, child := range c.Children {
		if err := f.owned.add(child, c.ID, c.Fence, relationChild); err != nil {
			return err
		}
	}
	if n := c.ContinueAsNew; n != nil {
		if err := f.owned.add(n, c.ID, c.Fence, relationSuccessor); err != nil {
			return err
		}
		f.continuedIDs, f.continuedFences = append(f.continuedIDs, pgUUID(c.ID)), append(f.continuedFences, c.Fence)
		f.successors, f.continuedAppliedSeq = append(f.successors, pgUUID(n.ID)), append(f.continuedAppliedSeq, c.ResponsesApplied)
	}
	if c.Status.Terminal() {
		f.endedIDs, f.endedFences = append(f.endedIDs, pgUUID(c.ID)), append(f.endedFences, c.Fence)
	}
	if c.Status == driver.ExecutionCancelled {
		f.cancelledIDs, f.cancelledFences = append(f.cancelledIDs, pgUUID(c.ID)), append(f.cancelledFences, c.Fence)
	}
	for _, m := range c.Outbox {
		f.outbox = append(f.outbox, m)
		f.outboxOwners, f.outboxFences = append(f.outboxOwners, pgUUID(c.ID)), append(f.outboxFences, c.Fence)
		f.outboxSuspended = append(f.outboxSuspended, false)
	}
	if c.Release && !c.Status.Terminal() && c.Status != driver.ExecutionSuspended {
		for _, m := range c.SuspendOutbox {
			f.outbox = append(f.outbox, m)
			f.outboxOwners, f.outboxFences = append(f.outboxOwners, pgUUID(c.ID)), append(f.outboxFences, c.Fence)
			f.outboxSuspended = append(f.outboxSuspended, true)
		}
	}
	return nil
}

func (f *checkpointFollowUps) empty() bool {
	return f.owned.empty() && len(f.endedIDs) == 0 && len(f.outbox) == 0
}

// queue adds the follow-up statements to batch, in order: children and successors are
// inserted; continued executions are linked to their successors and their pending inputs
// moved; ended children answer their parents; cancelled executions cancel their descendants;
// the outbox messages are written.
func (f *checkpointFollowUps) queue(e *executor, batch *pgx.Batch, now *time.Time, handoff *driver.OutboxHandoff) error {
	if !f.owned.empty() {
		args, err := f.owned.args(now)
		if err != nil {
			return err
		}
		batch.Queue(e.d.sql(f.owned.sql()), args...)
	}
	if len(f.continuedIDs) > 0 {
		batch.Queue(e.d.sql(executionContinueLinkSQL), f.continuedIDs, f.continuedFences, f.successors, now)
		e.queueMovePendingInputs(batch, f.continuedIDs, f.continuedFences, f.successors, f.continuedAppliedSeq, now)
	}
	if len(f.endedIDs) > 0 {
		batch.Queue(e.d.sql(executionChildEndedSQL), f.endedIDs, f.endedFences, now)
	}
	if len(f.cancelledIDs) > 0 {
		batch.Queue(e.d.sql(executionCancelDescendantsSQL), f.cancelledIDs, f.cancelledFences, now)
		batch.Queue(e.d.sql(executionLogParentCancelledSQL), f.cancelledIDs, now)
	}
	if len(f.outbox) > 0 {
		args, err := outboxInsertArgs(f.outbox, now)
		if err != nil {
			return err
		}
		var holder *string
		var lease *int64
		if handoff != nil && handoff.Holder != "" {
			us := handoff.Lease.Microseconds()
			holder, lease = &handoff.Holder, &us
		}
		batch.Queue(e.d.sql(checkpointOutboxSQL), append(args, f.outboxOwners, f.outboxFences, f.outboxSuspended, holder, lease)...)
	}
	return nil
}

// executionContinueLinkSQL records on each continued execution ($1, fence $2) its successor $3.
// Its unapplied responses move to the successor, so it has none left to be woken for.
const executionContinueLinkSQL = `
	WITH n AS (
		SELECT coalesce($4::timestamptz, now()) AS now
	)
	UPDATE {schema}.execution e SET
		continued_as = t.successor,
		responses_applied = e.responses_received,
		wake_at = NULL,
		updated_at = n.now
	FROM unnest($1::uuid[], $2::bigint[], $3::uuid[]) AS t(id, fence, successor), n
	WHERE e.id = t.id AND e.fence = t.fence`

// executionMoveResponsesSQL moves the async responses each continued execution ($1, fence $2)
// received above sequence $4 to its successor $3, after the successor's own, and wakes the
// successor.
const executionMoveResponsesSQL = `
	WITH n AS (
		SELECT coalesce($5::timestamptz, now()) AS now
	), moving AS (
		SELECT r.execution_id, r.seq, r.name, r.payload, r.received_at, t.successor
		FROM unnest($1::uuid[], $2::bigint[], $3::uuid[], $4::bigint[]) AS t(id, fence, successor, after_seq)
		JOIN {schema}.execution e ON e.id = t.id AND e.fence = t.fence AND e.continued_as = t.successor
		JOIN {schema}.execution_response r ON r.execution_id = t.id AND r.seq > t.after_seq
	), counts AS (
		SELECT successor, count(*) AS moved FROM moving GROUP BY successor
	), bumped AS (
		UPDATE {schema}.execution s SET
			responses_received = s.responses_received + c.moved,
			wake_at = CASE WHEN s.lease_until IS NOT NULL AND s.lease_until > n.now THEN s.wake_at ELSE n.now END,
			updated_at = n.now
		FROM counts c, n
		WHERE s.id = c.successor
		RETURNING s.id, s.responses_received - c.moved AS base
	), copied AS (
		INSERT INTO {schema}.execution_response (execution_id, seq, name, payload, received_at)
		SELECT b.id, b.base + row_number() OVER (PARTITION BY b.id ORDER BY m.execution_id, m.seq),
			m.name, m.payload, m.received_at
		FROM moving m JOIN bumped b ON b.id = m.successor
	)
	DELETE FROM {schema}.execution_response r
	USING moving m, bumped b
	WHERE r.execution_id = m.execution_id AND r.seq = m.seq AND b.id = m.successor`

// queueMovePendingInputs queues the move of what continued executions received and had not
// applied (their async responses) to their successors. Every kind of pending input an execution
// can receive moves here.
func (e *executor) queueMovePendingInputs(batch *pgx.Batch, ids []pgtype.UUID, fences []int64, successors []pgtype.UUID, appliedSeqs []int64, now any) {
	batch.Queue(e.d.sql(executionMoveResponsesSQL), ids, fences, successors, appliedSeqs, now)
	batch.Queue(e.d.sql(executionMoveSignalsSQL), ids, fences, successors)
}

// executionMoveSignalsSQL moves the signals each continued execution ($1, fence $2) has not
// consumed to its successor ($3), which applies them.
const executionMoveSignalsSQL = `
	UPDATE {schema}.execution_signal s SET execution_id = t.successor
	FROM unnest($1::uuid[], $2::bigint[], $3::uuid[]) AS t(id, fence, successor)
	JOIN {schema}.execution e ON e.id = t.id AND e.fence = t.fence
	WHERE s.execution_id = t.id AND s.consumed_at IS NULL`

// executionChildEndedSQL records, for each execution ($1, fence $2) that ended as a child of a
// parent that has not ended, a response on the parent carrying the child's outcome, and wakes
// the parent as an arriving response does. A child answers once: a parent that already holds
// the child's response gets no second one; a child that continued as new does not answer (its
// successor will).
const executionChildEndedSQL = `
	WITH n AS (
		SELECT coalesce($3::timestamptz, now()) AS now
	), ended AS (
		SELECT e.id, e.parent_id, e.type, e.status, e.error_code, e.error_message, e.state
		FROM unnest($1::uuid[], $2::bigint[]) AS t(id, fence)
		JOIN {schema}.execution e ON e.id = t.id AND e.fence = t.fence
		WHERE e.parent_id IS NOT NULL AND e.continued_as IS NULL
			AND e.status IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED')
			AND NOT EXISTS (SELECT 1 FROM {schema}.execution_response r
				WHERE r.execution_id = e.parent_id AND r.name = 'child:' || e.id::text)
	), counts AS (
		SELECT parent_id, count(*) AS ended FROM ended GROUP BY parent_id
	), bumped AS (
		UPDATE {schema}.execution p SET
			responses_received = p.responses_received + c.ended,
			-- Wake it now unless a runner holds it: the runner applies the response before it
			-- lets go (its release sees the new count).
			wake_at = CASE WHEN p.lease_until IS NOT NULL AND p.lease_until > n.now THEN p.wake_at ELSE n.now END,
			updated_at = n.now
		FROM counts c, n
		WHERE p.id = c.parent_id AND p.completed_at IS NULL
		RETURNING p.id, p.responses_received - c.ended AS base
	)
	INSERT INTO {schema}.execution_response (execution_id, seq, name, payload, received_at)
	SELECT b.id, b.base + row_number() OVER (PARTITION BY b.id ORDER BY d.id), 'child:' || d.id::text,
		jsonb_strip_nulls(jsonb_build_object('childId', d.id, 'type', d.type, 'status', d.status,
			'errorCode', d.error_code, 'errorMessage', d.error_message, 'state', d.state)),
		n.now
	FROM ended d JOIN bumped b ON b.id = d.parent_id, n`

// executionCancelDescendantsSQL cancels the non-terminal descendants of each execution ($1,
// fence $2) that is CANCELLED: their fence grows (a runner holding one can no longer write) and
// their lease ends; executionLogParentCancelledSQL then logs it. Terminal descendants are passed through, not changed: their own children are still
// reached.
const executionCancelDescendantsSQL = `
	WITH RECURSIVE n AS (
		SELECT coalesce($3::timestamptz, now()) AS now
	), tree AS (
		SELECT e.id, e.id AS origin
		FROM unnest($1::uuid[], $2::bigint[]) AS t(id, fence)
		JOIN {schema}.execution e ON e.id = t.id AND e.fence = t.fence AND e.status = 'CANCELLED'
		UNION
		SELECT c.id, tree.origin FROM {schema}.execution c JOIN tree ON c.parent_id = tree.id
	), hit AS (
		UPDATE {schema}.execution e SET
			status = 'CANCELLED',
			fence = e.fence + 1,
			lease_until = NULL,
			wake_at = NULL,
			error_code = '` + driver.CodeParentCancelled + `',
			error_message = 'cancelled with execution ' || tree.origin::text,
			completed_at = n.now,
			updated_at = n.now
		FROM tree, n
		WHERE e.id = tree.id AND tree.id <> tree.origin
			AND e.status NOT IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED')
		RETURNING e.id, tree.origin
	)
	SELECT count(*) FROM hit`

// executionLogParentCancelledSQL logs a LIFECYCLE PARENT_CANCELLED entry on each execution the
// cascade of executionCancelDescendantsSQL cancelled (the descendants of $1 cancelled with them
// and not logged yet). It is a statement of its own, run after the cascade in the same
// transaction: its snapshot sees the entries a descendant's runner committed while the cascade
// waited for that descendant's row, so the new entry's sequence number follows them.
const executionLogParentCancelledSQL = `
	WITH RECURSIVE n AS (
		SELECT coalesce($2::timestamptz, now()) AS now
	), tree AS (
		SELECT e.id, e.id AS origin FROM {schema}.execution e WHERE e.id = ANY($1::uuid[])
		UNION
		SELECT c.id, tree.origin FROM {schema}.execution c JOIN tree ON c.parent_id = tree.id
	)
	INSERT INTO {schema}.execution_log (execution_id, seq, at, entry_type, name, step_status,
		response, error_code, error_message, actor, reason)
	SELECT h.id,
		(SELECT coalesce(max(l.seq), 0) + 1 FROM {schema}.execution_log l WHERE l.execution_id = h.id),
		n.now, 'LIFECYCLE', '` + driver.EntryParentCancelled + `', 'CANCELLED',
		jsonb_build_object('cancelledId', h.origin), '` + driver.CodeParentCancelled + `',
		'cancelled with execution ' || h.origin::text, 'execution:' || h.origin::text,
		'an ancestor was cancelled'
	FROM tree h
	JOIN {schema}.execution e ON e.id = h.id, n
	WHERE h.id <> h.origin AND e.status = 'CANCELLED' AND e.error_code = '` + driver.CodeParentCancelled + `'
		AND e.error_message = 'cancelled with execution ' || h.origin::text
		AND NOT EXISTS (SELECT 1 FROM {schema}.execution_log x
			WHERE x.execution_id = h.id AND x.entry_type = 'LIFECYCLE' AND x.name = '` + driver.EntryParentCancelled + `')`
