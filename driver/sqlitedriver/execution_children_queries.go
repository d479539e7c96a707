package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// executionInsertSQL inserts one execution unless its id exists (the insert is idempotent).
const executionInsertSQL = `
	INSERT INTO {schema}.execution (id, model, type, domain, tenant_id, business_key, batch_id,
		status, state, deadline_at, lease_until, fence, worker_id, wake_at, created_at, updated_at,
		parent_id, root_id, continued_from, traceparent)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, json(?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (id) DO NOTHING`

// insertOwner is the execution whose checkpoint inserts a child or a successor: what the
// inserted execution leaves empty comes from it.
type insertOwner struct {
	id, parentID, rootID                      uuid.UUID
	model, typ, domain, tenantID, businessKey string
	traceparent                               string
	successor                                 bool // the insert continues the owner, rather than being its child
}

// readInsertOwner reads the owner of a checkpoint's children and successor.
func (e *executor) readInsertOwner(ctx context.Context, tx *sql.Tx, id uuid.UUID) (*insertOwner, error) {
	var (
		o                                          = &insertOwner{id: id}
		parentID, rootID, tenant, key, traceparent sql.NullString
	)
	err := tx.QueryRowContext(ctx, e.d.sql(`
		SELECT model, type, domain, tenant_id, business_key, parent_id, root_id, traceparent
		FROM {schema}.execution WHERE id = ?`), id.String()).Scan(&o.model, &o.typ, &o.domain,
		&tenant, &key, &parentID, &rootID, &traceparent)
	if err != nil {
		return nil, fmt.Errorf("reading execution %s: %w", id, err)
	}
	o.tenantID, o.businessKey, o.traceparent = tenant.String, key.String, traceparent.String
	if o.parentID, err = parseNullUUID(parentID); err != nil {
		return nil, err
	}
	if o.rootID, err = parseNullUUID(rootID); err != nil {
		return nil, err
	}
	if o.rootID == uuid.Nil {
		o.rootID = id
	}
	return o, nil
}

// orDefault returns s, or def when s is empty.
func orDefault[T comparable](s, def T) T {
	var zero T
	if s == zero {
		return def
	}
	return s
}

// insertExecution inserts x unless its id exists, with its log, and reports whether it did. With
// an owner, x is the owner's child or successor and takes what it leaves empty from the owner (see
// the PostgreSQL driver's executionInsertSQL).
func (e *executor) insertExecution(ctx context.Context, tx *sql.Tx, x *driver.ExecutionInsertParams, owner *insertOwner, nowUS int64,
	handoff *driver.OutboxHandoff, written *[]driver.WrittenMessage) (bool, error) {
	model, typ, domain := x.Model, x.Type, x.Domain
	tenant, key, traceparent := x.TenantID, x.BusinessKey, x.Traceparent
	parentID, rootID, continuedFrom := x.ParentID, x.RootID, uuid.Nil
	switch {
	case owner != nil:
		model, typ, domain = orDefault(model, owner.model), orDefault(typ, owner.typ), orDefault(domain, owner.domain)
		tenant, key, traceparent = orDefault(tenant, owner.tenantID), orDefault(key, owner.businessKey), orDefault(traceparent, owner.traceparent)
		if owner.successor {
			parentID, rootID, continuedFrom = orDefault(parentID, owner.parentID), orDefault(rootID, owner.rootID), owner.id
		} else {
			parentID, rootID = owner.id, owner.rootID
		}
	case rootID == uuid.Nil && parentID != uuid.Nil:
		var root, self sql.NullString
		err := tx.QueryRowContext(ctx, e.d.sql(`SELECT root_id, id FROM {schema}.execution WHERE id = ?`), parentID.String()).Scan(&root, &self)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("reading the parent of execution %s: %w", x.ID, err)
		}
		if rootID, err = parseNullUUID(orDefault(root, self)); err != nil {
			return false, err
		}
	}
	if rootID == uuid.Nil {
		rootID = x.ID
	}
	status := driver.ExecutionPending
	if x.Lease > 0 {
		status = driver.ExecutionExecuting
	}
	// A leased execution wakes when its lease would end (its runner died); a pending one now, or
	// at its not-before time when that is later. Like PostgreSQL, the lease counts in whole
	// microseconds.
	var leaseUntil any
	fence, wakeAt := int64(0), nowUS
	if x.NotBefore != nil {
		wakeAt = max(nowUS, micros(*x.NotBefore))
	}
	if leaseUS := x.Lease.Microseconds(); leaseUS > 0 {
		leaseUntil, fence, wakeAt = nowUS+leaseUS, 1, nowUS+leaseUS
	}
	res, err := tx.ExecContext(ctx, e.d.sql(executionInsertSQL), x.ID.String(), model, typ, domain,
		nullText(tenant), nullText(key), nullUUID(x.BatchID), string(status), jsonText(x.State),
		nullMicros(x.DeadlineAt), leaseUntil, fence, nullText(x.WorkerID), wakeAt, nowUS, nowUS,
		nullUUID(parentID), nullUUID(rootID), nullUUID(continuedFrom), nullText(traceparent))
	if err != nil {
		return false, fmt.Errorf("inserting execution %s: %w", x.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return false, err // the id exists: nothing to do
	}
	if err := e.insertExecutionLog(ctx, tx, x.ID, x.Log, nowUS); err != nil {
		return false, err
	}
	if err := writeOutbox(ctx, e.d, tx, x.Outbox, fromMicros(nowUS), handoff, written); err != nil {
		return false, fmt.Errorf("writing the outbox messages of execution %s: %w", x.ID, err)
	}
	return true, e.writeExecutionAttributes(ctx, tx, x.ID, x.Attributes)
}

func (e *executor) ExecutionInsertMany(ctx context.Context, params *driver.ExecutionInsertManyParams) ([]uuid.UUID, error) {
	if len(params.Executions) == 0 {
		return nil, nil
	}
	nowUS := micros(now(params.Now))
	var inserted []uuid.UUID
	var written []driver.WrittenMessage
	var handoff *driver.OutboxHandoff
	if e.tx == nil { // committed when it returns: not in a caller's transaction
		handoff = params.OutboxHandoff
	}
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		inserted, written = inserted[:0], written[:0]
		for _, x := range params.Executions {
			ok, err := e.insertExecution(ctx, tx, x, nil, nowUS, handoff, &written)
			if err != nil {
				return err
			}
			if ok {
				inserted = append(inserted, x.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(written) > 0 && handoff != nil { // committed
		handoff.Written(written)
	}
	return inserted, nil
}

// checkpointFollowUps writes, after the checkpoints of a batch, what the applied ones imply, in
// the order the PostgreSQL driver does: children and successors are inserted; continued
// executions are linked to their successors and their pending inputs moved; ended children
// answer their parents; cancelled executions cancel their descendants.
func (e *executor) checkpointFollowUps(ctx context.Context, tx *sql.Tx, applied []*driver.ExecutionCheckpoint, nowUS int64) error {
	for _, c := range applied {
		if len(c.Children) == 0 && c.ContinueAsNew == nil {
			continue
		}
		owner, err := e.readInsertOwner(ctx, tx, c.ID)
		if err != nil {
			return err
		}
		for _, child := range c.Children {
			if _, err := e.insertExecution(ctx, tx, child, owner, nowUS, nil, nil); err != nil {
				return err
			}
		}
		if c.ContinueAsNew != nil {
			owner.successor = true
			if _, err := e.insertExecution(ctx, tx, c.ContinueAsNew, owner, nowUS, nil, nil); err != nil {
				return err
			}
		}
	}
	for _, c := range applied {
		if c.ContinueAsNew == nil {
			continue
		}
		// Its unapplied responses move to the successor, so it has none left to be woken for.
		if _, err := tx.ExecContext(ctx, e.d.sql(`
			UPDATE {schema}.execution SET continued_as = ?, responses_applied = responses_received,
				wake_at = NULL, updated_at = ?
			WHERE id = ?`), c.ContinueAsNew.ID.String(), nowUS, c.ID.String()); err != nil {
			return fmt.Errorf("linking execution %s to its successor: %w", c.ID, err)
		}
		if err := e.movePendingInputs(ctx, tx, c.ID, c.ContinueAsNew.ID, c.ResponsesApplied, nowUS); err != nil {
			return err
		}
	}
	for _, c := range applied {
		if c.Status.Terminal() {
			if err := e.answerParent(ctx, tx, c.ID, nowUS); err != nil {
				return err
			}
		}
	}
	for _, c := range applied {
		if c.Status == driver.ExecutionCancelled {
			if err := e.cancelDescendants(ctx, tx, c.ID, nowUS); err != nil {
				return err
			}
		}
	}
	return nil
}

// movePendingInputs moves what a continued execution received and had not applied (its async
// responses above afterSeq) to its successor, after the successor's own, and wakes the
// successor. Every kind of pending input an execution can receive moves here.
func (e *executor) movePendingInputs(ctx context.Context, tx *sql.Tx, from, to uuid.UUID, afterSeq, nowUS int64) error {
	// Signals not consumed move to the successor, which applies them.
	if _, err := tx.ExecContext(ctx, e.d.sql(`UPDATE {schema}.execution_signal SET execution_id = ?
		WHERE execution_id = ? AND consumed_at IS NULL`), to.String(), from.String()); err != nil {
		return fmt.Errorf("moving the signals of execution %s: %w", from, err)
	}
	var moved int64
	err := tx.QueryRowContext(ctx, e.d.sql(`SELECT count(*) FROM {schema}.execution_response
		WHERE execution_id = ? AND seq > ?`), from.String(), afterSeq).Scan(&moved)
	if err != nil || moved == 0 {
		return err
	}
	var base int64
	err = tx.QueryRowContext(ctx, e.d.sql(`
		UPDATE {schema}.execution SET
			responses_received = responses_received + ?,
			wake_at = CASE WHEN lease_until IS NOT NULL AND lease_until > ? THEN wake_at ELSE ? END,
			updated_at = ?
		WHERE id = ?
		RETURNING responses_received - ?`), moved, nowUS, nowUS, nowUS, to.String(), moved).Scan(&base)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // no successor to move to
	}
	if err != nil {
		return fmt.Errorf("moving the responses of execution %s: %w", from, err)
	}
	if _, err := tx.ExecContext(ctx, e.d.sql(`
		INSERT INTO {schema}.execution_response (execution_id, seq, name, payload, received_at)
		SELECT ?, ? + row_number() OVER (ORDER BY seq), name, payload, received_at
		FROM {schema}.execution_response WHERE execution_id = ? AND seq > ?`),
		to.String(), base, from.String(), afterSeq); err != nil {
		return fmt.Errorf("moving the responses of execution %s: %w", from, err)
	}
	_, err = tx.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.execution_response
		WHERE execution_id = ? AND seq > ?`), from.String(), afterSeq)
	return err
}

// answerParent records, when execution id ended as the child of a parent that has not ended,
// a response on the parent carrying the child's outcome, and wakes the parent as an arriving
// response does. A child answers once, and one that continued as new does not answer (its
// successor will).
func (e *executor) answerParent(ctx context.Context, tx *sql.Tx, id uuid.UUID, nowUS int64) error {
	var (
		outcome                 = driver.ChildOutcome{ChildID: id}
		parentID, continuedAs   sql.NullString
		status, state           string
		errorCode, errorMessage sql.NullString
	)
	err := tx.QueryRowContext(ctx, e.d.sql(`
		SELECT parent_id, continued_as, type, status, error_code, error_message, state
		FROM {schema}.execution WHERE id = ?`), id.String()).Scan(&parentID, &continuedAs,
		&outcome.Type, &status, &errorCode, &errorMessage, &state)
	if err != nil {
		return fmt.Errorf("reading ended execution %s: %w", id, err)
	}
	if !parentID.Valid || continuedAs.Valid {
		return nil
	}
	name := driver.ChildResponseName(id)
	var answered int
	if err := tx.QueryRowContext(ctx, e.d.sql(`SELECT count(*) FROM {schema}.execution_response
		WHERE execution_id = ? AND name = ?`), parentID.String, name).Scan(&answered); err != nil || answered > 0 {
		return err
	}
	outcome.Status, outcome.State = driver.ExecutionStatus(status), json.RawMessage(state)
	outcome.ErrorCode, outcome.ErrorMessage = errorCode.String, errorMessage.String
	payload, err := json.Marshal(outcome)
	if err != nil {
		return err
	}
	var seq int64
	err = tx.QueryRowContext(ctx, e.d.sql(`
		UPDATE {schema}.execution SET
			responses_received = responses_received + 1,
			wake_at = CASE WHEN lease_until IS NOT NULL AND lease_until > ? THEN wake_at ELSE ? END,
			updated_at = ?
		WHERE id = ? AND completed_at IS NULL
		RETURNING responses_received`), nowUS, nowUS, nowUS, parentID.String).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // the parent has ended (or is gone): nobody to answer
	}
	if err != nil {
		return fmt.Errorf("answering the parent of execution %s: %w", id, err)
	}
	_, err = tx.ExecContext(ctx, e.d.sql(`INSERT INTO {schema}.execution_response
		(execution_id, seq, name, payload, received_at) VALUES (?, ?, ?, json(?), ?)`),
		parentID.String, seq, name, string(payload), nowUS)
	return err
}

// cancelDescendants cancels the non-terminal descendants of the cancelled execution id: their
// fence grows (a runner holding one can no longer write), their lease ends, and their log gets a
// LIFECYCLE PARENT_CANCELLED entry naming id. Terminal descendants are passed through, not
// changed: their own children are still reached.
func (e *executor) cancelDescendants(ctx context.Context, tx *sql.Tx, id uuid.UUID, nowUS int64) error {
	message := "cancelled with execution " + id.String()
	rows, err := tx.QueryContext(ctx, e.d.sql(`
		WITH RECURSIVE tree(id) AS (
			SELECT id FROM {schema}.execution WHERE parent_id = ?
			UNION
			SELECT c.id FROM {schema}.execution c JOIN tree ON c.parent_id = tree.id
		)
		UPDATE {schema}.execution SET
			status = 'CANCELLED',
			fence = fence + 1,
			lease_until = NULL,
			wake_at = NULL,
			error_code = ?,
			error_message = ?,
			completed_at = ?,
			updated_at = ?
		WHERE id IN (SELECT id FROM tree)
			AND status NOT IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED')
		RETURNING id`), id.String(), driver.CodeParentCancelled, message, nowUS, nowUS)
	if err != nil {
		return fmt.Errorf("cancelling the descendants of execution %s: %w", id, err)
	}
	var hit []string
	for rows.Next() {
		var x string
		if err := rows.Scan(&x); err != nil {
			rows.Close()
			return err
		}
		hit = append(hit, x)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	response, err := json.Marshal(map[string]string{"cancelledId": id.String()})
	if err != nil {
		return err
	}
	for _, x := range hit {
		if _, err := tx.ExecContext(ctx, e.d.sql(`
			INSERT INTO {schema}.execution_log (execution_id, seq, at, entry_type, name, step_status,
				response, error_code, error_message, actor, reason)
			SELECT ?, coalesce(max(seq), 0) + 1, ?, 'LIFECYCLE', ?, 'CANCELLED', json(?), ?, ?, ?, ?
			FROM {schema}.execution_log WHERE execution_id = ?`),
			x, nowUS, driver.EntryParentCancelled, string(response), driver.CodeParentCancelled,
			message, "execution:"+id.String(), "an ancestor was cancelled", x); err != nil {
			return fmt.Errorf("logging the cancellation of execution %s: %w", x, err)
		}
	}
	return nil
}
