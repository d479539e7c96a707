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

// ExecutionSuspend has the PostgreSQL driver's semantics: an execution no live lease holds is
// suspended at once (its fence grows, fencing out a runner whose lease expired); for one a runner
// holds the request is recorded for that runner's release.
func (e *executor) ExecutionSuspend(ctx context.Context, params *driver.ExecutionSuspendParams) (*driver.ExecutionRow, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	nowUS := micros(now(params.Now))
	var out *driver.ExecutionRow
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		status, leased, requested, err := e.readForSuspension(ctx, tx, params.ID, nowUS)
		if err != nil {
			return err
		}
		switch {
		case status.Terminal(), status == driver.ExecutionSuspended:
			return fmt.Errorf("%w: execution %s is %s", driver.ErrConflict, params.ID, status)
		case leased && requested:
			out, err = scanExecution(tx.QueryRowContext(ctx, e.d.sql(`SELECT `+executionCols+` FROM {schema}.execution WHERE id = ?`), params.ID.String()))
			return err // asked already: nothing more to do
		case leased:
			row := tx.QueryRowContext(ctx, e.d.sql(`
				UPDATE {schema}.execution SET suspend_requested = 1, suspend_actor = ?, suspend_reason = ?, updated_at = ?
				WHERE id = ?
				RETURNING `+executionCols), params.Actor, nullText(params.Reason), nowUS, params.ID.String())
			if out, err = scanExecution(row); err != nil {
				return err
			}
			return e.auditSuspension(ctx, tx, driver.AuditExecutionSuspend, params.ID, params.Actor, params.Reason, nowUS,
				map[string]any{"from": status, "requested": true})
		}
		row := tx.QueryRowContext(ctx, e.d.sql(`
			UPDATE {schema}.execution SET status = 'SUSPENDED', suspended_from = ?, suspend_requested = 0,
				suspend_actor = ?, suspend_reason = ?, fence = fence + 1, lease_until = NULL, wake_at = NULL, updated_at = ?
			WHERE id = ?
			RETURNING `+executionCols), string(driver.SuspendedFromStatus(status)), params.Actor,
			nullText(params.Reason), nowUS, params.ID.String())
		if out, err = scanExecution(row); err != nil {
			return err
		}
		seq, err := e.logLifecycle(ctx, tx, params.ID, driver.LogSuspended, string(driver.ExecutionSuspended), params.Actor, params.Reason, nowUS, map[string]any{"from": status})
		if err != nil {
			return err
		}
		if err := e.writeChangeOutbox(ctx, tx, params.Outbox, out, seq, nowUS); err != nil {
			return err
		}
		return e.auditSuspension(ctx, tx, driver.AuditExecutionSuspend, params.ID, params.Actor, params.Reason, nowUS,
			map[string]any{"from": status})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ExecutionResume has the PostgreSQL driver's semantics.
func (e *executor) ExecutionResume(ctx context.Context, params *driver.ExecutionResumeParams) (*driver.ExecutionRow, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	nowUS := micros(now(params.Now))
	var out *driver.ExecutionRow
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		status, _, requested, err := e.readForSuspension(ctx, tx, params.ID, nowUS)
		if err != nil {
			return err
		}
		switch {
		case status == driver.ExecutionSuspended:
		case requested:
			row := tx.QueryRowContext(ctx, e.d.sql(`
				UPDATE {schema}.execution SET suspend_requested = 0, suspend_actor = NULL, suspend_reason = NULL, updated_at = ?
				WHERE id = ?
				RETURNING `+executionCols), nowUS, params.ID.String())
			if out, err = scanExecution(row); err != nil {
				return err
			}
			return e.auditSuspension(ctx, tx, driver.AuditExecutionResume, params.ID, params.Actor, params.Reason, nowUS,
				map[string]any{"cancelledRequest": true, "status": status})
		default:
			return fmt.Errorf("%w: execution %s is %s, not suspended", driver.ErrConflict, params.ID, status)
		}
		row := tx.QueryRowContext(ctx, e.d.sql(`
			UPDATE {schema}.execution SET status = suspended_from, suspended_from = NULL,
				suspend_actor = NULL, suspend_reason = NULL, fence = fence + 1, lease_until = NULL,
				wake_at = CASE WHEN suspended_from IN ('PENDING', 'EXECUTING', 'COMPENSATING')
						OR responses_received > responses_applied
						OR wake_at <= :now
						OR (suspended_from = 'WAITING_FOR_RETRY' AND next_retry_at <= :now)
					THEN :now ELSE wake_at END,
				updated_at = :now
			WHERE id = :id
			RETURNING `+executionCols), sql.Named("now", nowUS), sql.Named("id", params.ID.String()))
		if out, err = scanExecution(row); err != nil {
			return err
		}
		seq, err := e.logLifecycle(ctx, tx, params.ID, driver.LogResumed, "", params.Actor, params.Reason, nowUS, map[string]any{"to": out.Status})
		if err != nil {
			return err
		}
		if err := e.writeChangeOutbox(ctx, tx, params.Outbox, out, seq, nowUS); err != nil {
			return err
		}
		return e.auditSuspension(ctx, tx, driver.AuditExecutionResume, params.ID, params.Actor, params.Reason, nowUS,
			map[string]any{"to": out.Status})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readForSuspension reads an execution's status, whether a live lease holds it, and whether a
// suspend request is pending (inside the writer's transaction, which isolates it).
func (e *executor) readForSuspension(ctx context.Context, tx *sql.Tx, id uuid.UUID, nowUS int64) (status driver.ExecutionStatus, leased, requested bool, err error) {
	var s string
	err = tx.QueryRowContext(ctx, e.d.sql(`
		SELECT status, coalesce(lease_until > ?, 0), suspend_requested FROM {schema}.execution WHERE id = ?`),
		nowUS, id.String()).Scan(&s, &leased, &requested)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, false, driver.ErrNotFound
	}
	return driver.ExecutionStatus(s), leased, requested, err
}

// logLifecycle appends a LIFECYCLE entry to the log of an execution no runner holds and returns
// its sequence number.
func (e *executor) logLifecycle(ctx context.Context, tx *sql.Tx, id uuid.UUID, name, stepStatus, actor, reason string, nowUS int64, request map[string]any) (int, error) {
	body, err := json.Marshal(request)
	if err != nil {
		return 0, err
	}
	var seq int
	err = tx.QueryRowContext(ctx, e.d.sql(`
		INSERT INTO {schema}.execution_log (execution_id, seq, at, entry_type, name, step_status, actor, reason, request)
		SELECT ?, coalesce(max(seq), 0) + 1, ?, 'LIFECYCLE', ?, ?, ?, ?, json(?)
		FROM {schema}.execution_log WHERE execution_id = ?
		RETURNING seq`),
		id.String(), nowUS, name, nullText(stepStatus), nullText(actor), nullText(reason), string(body), id.String()).Scan(&seq)
	return seq, err
}

// writeChangeOutbox writes the outbox messages of an operator's status change in its
// transaction.
func (e *executor) writeChangeOutbox(ctx context.Context, tx *sql.Tx, fn driver.OutboxOfChange, after *driver.ExecutionRow, logSeq int, nowUS int64) error {
	if fn == nil {
		return nil
	}
	msgs, err := fn(after, logSeq)
	if err != nil {
		return err
	}
	return insertOutbox(ctx, e.d, tx, msgs, fromMicros(nowUS), nil)
}

func (e *executor) auditSuspension(ctx context.Context, tx *sql.Tx, action string, id uuid.UUID, actor, reason string, nowUS int64, details map[string]any) error {
	body, err := json.Marshal(details)
	if err != nil {
		return err
	}
	at := fromMicros(nowUS)
	in := &executor{d: e.d, read: tx, write: tx, tx: tx, notify: e.notify}
	return in.AuditLogInsert(ctx, &driver.AuditLogInsertParams{
		EntityType: "execution", EntityID: id.String(), Action: action, Actor: actor, Reason: reason, Details: body, Now: &at,
	})
}

// ExecutionHeartbeat renews a running execution's lease (and its wake time, which follows the
// lease) if the fence is still the caller's and the lease was not released.
func (e *executor) ExecutionHeartbeat(ctx context.Context, params *driver.ExecutionHeartbeatParams) (bool, error) {
	nowUS := micros(now(params.Now))
	leaseEnd := nowUS + params.Lease.Microseconds()
	var requested bool
	err := e.write.QueryRowContext(ctx, e.d.sql(`
		UPDATE {schema}.execution SET lease_until = ?, wake_at = ?
		WHERE id = ? AND fence = ? AND lease_until IS NOT NULL
		RETURNING suspend_requested`), leaseEnd, leaseEnd, params.ID.String(), params.Fence).Scan(&requested)
	if errors.Is(err, sql.ErrNoRows) {
		return false, driver.ErrNotFound
	}
	return requested, err
}
