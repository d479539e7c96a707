package pgdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/commandbus/commandbus/driver"
)

// ExecutionSuspend suspends an execution no live lease holds at once, fencing out a runner whose
// lease expired; for one a runner holds it records the request its runner's release honours.
func (e *executor) ExecutionSuspend(ctx context.Context, params *driver.ExecutionSuspendParams) (*driver.ExecutionRow, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	var out *driver.ExecutionRow
	err := pgx.BeginFunc(ctx, e.db, func(tx pgx.Tx) error {
		in := &executor{d: e.d, db: tx}
		status, leased, requested, err := in.lockForSuspension(ctx, params.ID, params.Now)
		if err != nil {
			return err
		}
		switch {
		case status.Terminal(), status == driver.ExecutionSuspended:
			return fmt.Errorf("%w: execution %s is %s", driver.ErrConflict, params.ID, status)
		case leased && requested:
			out, err = in.ExecutionGet(ctx, params.ID) // asked already: nothing more to do
			return err
		case leased:
			row := tx.QueryRow(ctx, e.d.sql(`
				UPDATE {schema}.execution SET suspend_requested = true, suspend_actor = $2, suspend_reason = $3,
					updated_at = coalesce($4::timestamptz, now())
				WHERE id = $1
				RETURNING `+executionCols), pgUUID(params.ID), params.Actor, nullString(params.Reason), params.Now)
			if out, err = scanExecution(row, false); err != nil {
				return err
			}
			return in.auditSuspension(ctx, driver.AuditExecutionSuspend, params.ID, params.Actor, params.Reason, params.Now,
				map[string]any{"from": status, "requested": true})
		}
		row := tx.QueryRow(ctx, e.d.sql(`
			UPDATE {schema}.execution SET status = 'SUSPENDED', suspended_from = $2, suspend_requested = false,
				suspend_actor = $3, suspend_reason = $4, fence = fence + 1, lease_until = NULL, wake_at = NULL,
				updated_at = coalesce($5::timestamptz, now())
			WHERE id = $1
			RETURNING `+executionCols), pgUUID(params.ID), string(driver.SuspendedFromStatus(status)), params.Actor,
			nullString(params.Reason), params.Now)
		if out, err = scanExecution(row, false); err != nil {
			return err
		}
		seq, err := in.logLifecycle(ctx, params.ID, driver.LogSuspended, string(driver.ExecutionSuspended), params.Actor, params.Reason, params.Now, map[string]any{"from": status})
		if err != nil {
			return err
		}
		if err := in.writeChangeOutbox(ctx, params.Outbox, out, seq, params.Now); err != nil {
			return err
		}
		return in.auditSuspension(ctx, driver.AuditExecutionSuspend, params.ID, params.Actor, params.Reason, params.Now,
			map[string]any{"from": status})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ExecutionResume gives a SUSPENDED execution back the status it had, fencing out anyone who
// acquired it meanwhile, and wakes it at once when it has work: it was runnable, responses
// arrived, its wake time or retry time passed. On an execution with a pending suspend request it
// cancels the request.
func (e *executor) ExecutionResume(ctx context.Context, params *driver.ExecutionResumeParams) (*driver.ExecutionRow, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	var out *driver.ExecutionRow
	err := pgx.BeginFunc(ctx, e.db, func(tx pgx.Tx) error {
		in := &executor{d: e.d, db: tx}
		status, _, requested, err := in.lockForSuspension(ctx, params.ID, params.Now)
		if err != nil {
			return err
		}
		switch {
		case status == driver.ExecutionSuspended:
		case requested:
			row := tx.QueryRow(ctx, e.d.sql(`
				UPDATE {schema}.execution SET suspend_requested = false, suspend_actor = NULL, suspend_reason = NULL,
					updated_at = coalesce($2::timestamptz, now())
				WHERE id = $1
				RETURNING `+executionCols), pgUUID(params.ID), params.Now)
			if out, err = scanExecution(row, false); err != nil {
				return err
			}
			return in.auditSuspension(ctx, driver.AuditExecutionResume, params.ID, params.Actor, params.Reason, params.Now,
				map[string]any{"cancelledRequest": true, "status": status})
		default:
			return fmt.Errorf("%w: execution %s is %s, not suspended", driver.ErrConflict, params.ID, status)
		}
		row := tx.QueryRow(ctx, e.d.sql(`
			WITH n AS (SELECT coalesce($2::timestamptz, now()) AS now)
			UPDATE {schema}.execution SET status = suspended_from, suspended_from = NULL,
				suspend_actor = NULL, suspend_reason = NULL, fence = fence + 1, lease_until = NULL,
				wake_at = CASE WHEN suspended_from IN ('PENDING', 'EXECUTING', 'COMPENSATING')
						OR responses_received > responses_applied
						OR wake_at <= n.now
						OR (suspended_from = 'WAITING_FOR_RETRY' AND next_retry_at <= n.now)
					THEN n.now ELSE wake_at END,
				updated_at = n.now
			FROM n
			WHERE id = $1
			RETURNING `+executionCols), pgUUID(params.ID), params.Now)
		if out, err = scanExecution(row, false); err != nil {
			return err
		}
		seq, err := in.logLifecycle(ctx, params.ID, driver.LogResumed, "", params.Actor, params.Reason, params.Now, map[string]any{"to": out.Status})
		if err != nil {
			return err
		}
		if err := in.writeChangeOutbox(ctx, params.Outbox, out, seq, params.Now); err != nil {
			return err
		}
		return in.auditSuspension(ctx, driver.AuditExecutionResume, params.ID, params.Actor, params.Reason, params.Now,
			map[string]any{"to": out.Status})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lockForSuspension locks an execution's row and reads its status, whether a live lease holds
// it, and whether a suspend request is pending.
func (e *executor) lockForSuspension(ctx context.Context, id uuid.UUID, now *time.Time) (status driver.ExecutionStatus, leased, requested bool, err error) {
	var s string
	err = e.db.QueryRow(ctx, e.d.sql(`
		SELECT status, coalesce(lease_until > coalesce($2::timestamptz, now()), false), suspend_requested
		FROM {schema}.execution WHERE id = $1 FOR UPDATE`), pgUUID(id), now).Scan(&s, &leased, &requested)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, false, driver.ErrNotFound
	}
	return driver.ExecutionStatus(s), leased, requested, err
}

// logLifecycle appends a LIFECYCLE entry to the log of an execution no runner holds and returns
// its sequence number.
func (e *executor) logLifecycle(ctx context.Context, id uuid.UUID, name, stepStatus, actor, reason string, now *time.Time, request map[string]any) (int, error) {
	body, err := json.Marshal(request)
	if err != nil {
		return 0, err
	}
	var seq int
	err = e.db.QueryRow(ctx, e.d.sql(`
		INSERT INTO {schema}.execution_log (execution_id, seq, at, entry_type, name, step_status, actor, reason, request)
		SELECT $1, coalesce(max(seq), 0) + 1, coalesce($2::timestamptz, now()), 'LIFECYCLE', $3, $4, $5, $6, $7::jsonb
		FROM {schema}.execution_log WHERE execution_id = $1
		RETURNING seq`),
		pgUUID(id), now, name, nullString(stepStatus), nullString(actor), nullString(reason), string(body)).Scan(&seq)
	return seq, err
}

// writeChangeOutbox writes the outbox messages of an operator's status change in its
// transaction (e.db is the transaction).
func (e *executor) writeChangeOutbox(ctx context.Context, fn driver.OutboxOfChange, after *driver.ExecutionRow, logSeq int, now *time.Time) error {
	if fn == nil {
		return nil
	}
	msgs, err := fn(after, logSeq)
	if err != nil {
		return err
	}
	_, err = e.OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: msgs, Now: now})
	return err
}

func (e *executor) auditSuspension(ctx context.Context, action string, id uuid.UUID, actor, reason string, now *time.Time, details map[string]any) error {
	body, err := json.Marshal(details)
	if err != nil {
		return err
	}
	return e.AuditLogInsert(ctx, &driver.AuditLogInsertParams{
		EntityType: "execution", EntityID: id.String(), Action: action, Actor: actor, Reason: reason, Details: body, Now: now,
	})
}

// ExecutionHeartbeat renews a running execution's lease (and its wake time, which follows the
// lease) if the fence is still the caller's and the lease was not released.
func (e *executor) ExecutionHeartbeat(ctx context.Context, params *driver.ExecutionHeartbeatParams) (bool, error) {
	var requested bool
	err := e.db.QueryRow(ctx, e.d.sql(`
		WITH n AS (SELECT coalesce($4::timestamptz, now()) AS now)
		UPDATE {schema}.execution SET
			lease_until = n.now + $3 * interval '1 microsecond',
			wake_at = n.now + $3 * interval '1 microsecond'
		FROM n
		WHERE id = $1 AND fence = $2 AND lease_until IS NOT NULL
		RETURNING suspend_requested`),
		pgUUID(params.ID), params.Fence, params.Lease.Microseconds(), params.Now).Scan(&requested)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, driver.ErrNotFound
	}
	return requested, err
}
