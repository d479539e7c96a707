package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) ExecutionSignalSend(ctx context.Context, params *driver.ExecutionSignalSendParams) (*driver.ExecutionSignalSendResult, error) {
	if err := params.Normalize(); err != nil {
		return nil, err
	}
	nowUS := micros(now(params.Now))
	id := params.ExecutionID.String()
	result := &driver.ExecutionSignalSendResult{SignalID: params.SignalID}
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		var status string
		err := tx.QueryRowContext(ctx, e.d.sql(`SELECT status FROM {schema}.execution WHERE id = ?`), id).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			return driver.ErrNotFound
		}
		if err != nil {
			return err
		}
		if driver.ExecutionStatus(status).Terminal() {
			return fmt.Errorf("signal %q: execution %s has ended (%s): %w", params.Name, params.ExecutionID, status, driver.ErrConflict)
		}
		res, err := tx.ExecContext(ctx, e.d.sql(`
			INSERT INTO {schema}.execution_signal (execution_id, signal_id, name, payload, received_at, traceparent)
			VALUES (?, ?, ?, json(?), ?, ?)
			ON CONFLICT (execution_id, signal_id) DO NOTHING`),
			id, params.SignalID, params.Name, nullJSON(params.Payload), nowUS, nullText(params.Traceparent))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			result.Duplicate = true
			return nil
		}
		// Wake it now unless a runner holds it; then the runner's release wakes it.
		_, err = tx.ExecContext(ctx, e.d.sql(`
			UPDATE {schema}.execution SET
				wake_at = CASE WHEN lease_until IS NOT NULL AND lease_until > :now THEN wake_at ELSE :now END,
				signal_wake = signal_wake OR (lease_until IS NOT NULL AND lease_until > :now),
				updated_at = :now
			WHERE id = :id`), sql.Named("now", nowUS), sql.Named("id", id))
		return err
	})
	if err != nil {
		return nil, err
	}
	return result, nil
}

func (e *executor) ExecutionSignalListPending(ctx context.Context, id uuid.UUID) ([]*driver.ExecutionSignalRow, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT signal_id, name, payload, received_at, consumed_at, traceparent FROM {schema}.execution_signal
		WHERE execution_id = ? AND consumed_at IS NULL
		ORDER BY received_at, signal_id`), id.String())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.ExecutionSignalRow
	for rows.Next() {
		var (
			s          = &driver.ExecutionSignalRow{ExecutionID: id}
			payload    sql.NullString
			receivedAt int64
			consumedAt sql.NullInt64
			tp         sql.NullString
		)
		if err := rows.Scan(&s.SignalID, &s.Name, &payload, &receivedAt, &consumedAt, &tp); err != nil {
			return nil, err
		}
		if payload.Valid {
			s.Payload = json.RawMessage(payload.String)
		}
		s.ReceivedAt, s.ConsumedAt, s.Traceparent = fromMicros(receivedAt), fromNullMicros(consumedAt), tp.String
		out = append(out, s)
	}
	return out, rows.Err()
}

func (e *executor) ExecutionTimerList(ctx context.Context, params *driver.ExecutionTimerListParams) ([]*driver.ExecutionTimerRow, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT execution_id, timer_id, name, fire_at, status, created_at, fired_at FROM {schema}.execution_timer
		WHERE execution_id = ? AND status = 'PENDING' AND (NOT ? OR fire_at <= ?)
		ORDER BY fire_at, timer_id`), params.ExecutionID.String(), boolInt(params.Due), micros(now(params.Now)))
	if err != nil {
		return nil, err
	}
	return collectTimers(rows)
}

func (e *executor) ExecutionTimerListDueMany(ctx context.Context, params *driver.ExecutionTimerListDueManyParams) ([]*driver.ExecutionTimerRow, error) {
	if len(params.ExecutionIDs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(params.ExecutionIDs))
	for i, id := range params.ExecutionIDs {
		ids[i] = id.String()
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT execution_id, timer_id, name, fire_at, status, created_at, fired_at FROM {schema}.execution_timer
		WHERE execution_id IN (SELECT value FROM json_each(?)) AND status = 'PENDING' AND fire_at <= ?
		ORDER BY execution_id, fire_at, timer_id`), string(idsJSON), micros(now(params.Now)))
	if err != nil {
		return nil, err
	}
	return collectTimers(rows)
}

func (e *executor) ExecutionNextWake(ctx context.Context, params *driver.ExecutionNextWakeParams) (*time.Time, error) {
	query := `SELECT min(wake_at) FROM {schema}.execution WHERE wake_at > ?`
	args := []any{micros(now(params.Now).Add(-params.Lookback))}
	if len(params.Types) > 0 {
		types, err := json.Marshal(params.Types)
		if err != nil {
			return nil, err
		}
		query += ` AND type IN (SELECT value FROM json_each(?))`
		args = append(args, string(types))
	}
	var next sql.NullInt64
	if err := e.read.QueryRowContext(ctx, e.d.sql(query), args...).Scan(&next); err != nil {
		return nil, err
	}
	return fromNullMicros(next), nil
}

func collectTimers(rows *sql.Rows) ([]*driver.ExecutionTimerRow, error) {
	defer rows.Close()
	var out []*driver.ExecutionTimerRow
	for rows.Next() {
		var (
			t                 = &driver.ExecutionTimerRow{}
			executionID       string
			fireAt, createdAt int64
			firedAt           sql.NullInt64
			status            string
		)
		if err := rows.Scan(&executionID, &t.TimerID, &t.Name, &fireAt, &status, &createdAt, &firedAt); err != nil {
			return nil, err
		}
		var err error
		if t.ExecutionID, err = uuid.Parse(executionID); err != nil {
			return nil, fmt.Errorf("decoding execution id %q: %w", executionID, err)
		}
		t.FireAt, t.CreatedAt, t.FiredAt, t.Status = fromMicros(fireAt), fromMicros(createdAt), fromNullMicros(firedAt), driver.TimerStatus(status)
		out = append(out, t)
	}
	return out, rows.Err()
}

func (e *executor) ExecutionTimerCancel(ctx context.Context, params *driver.ExecutionTimerCancelParams) error {
	return e.inTx(ctx, func(tx *sql.Tx) error {
		var status string
		err := tx.QueryRowContext(ctx, e.d.sql(`SELECT status FROM {schema}.execution_timer WHERE execution_id = ? AND timer_id = ?`),
			params.ExecutionID.String(), params.TimerID).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			return driver.ErrNotFound
		}
		if err != nil {
			return err
		}
		if driver.TimerStatus(status) != driver.TimerPending {
			return fmt.Errorf("timer %q of execution %s is %s, not pending: %w", params.TimerID, params.ExecutionID, status, driver.ErrConflict)
		}
		_, err = tx.ExecContext(ctx, e.d.sql(`UPDATE {schema}.execution_timer SET status = 'CANCELLED' WHERE execution_id = ? AND timer_id = ?`),
			params.ExecutionID.String(), params.TimerID)
		return err
	})
}

func (e *executor) ExecutionWaitList(ctx context.Context, params *driver.ExecutionWaitListParams) ([]*driver.ExecutionWaitRow, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT wait_id, kind, name, timeout_at, opened_at FROM {schema}.execution_wait
		WHERE execution_id = ? AND (NOT ? OR timeout_at <= ?)
		ORDER BY opened_at, wait_id`), params.ExecutionID.String(), boolInt(params.Expired), micros(now(params.Now)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.ExecutionWaitRow
	for rows.Next() {
		var (
			w         = &driver.ExecutionWaitRow{ExecutionID: params.ExecutionID}
			kind      string
			timeoutAt sql.NullInt64
			openedAt  int64
		)
		if err := rows.Scan(&w.WaitID, &kind, &w.Name, &timeoutAt, &openedAt); err != nil {
			return nil, err
		}
		w.Kind, w.TimeoutAt, w.OpenedAt = driver.WaitKind(kind), fromNullMicros(timeoutAt), fromMicros(openedAt)
		out = append(out, w)
	}
	return out, rows.Err()
}

// writeSignalOps writes a checkpoint's timers, signal consumptions and waits if its fence still
// matches, and reports whether it did; the checkpoint statement runs next in the same
// transaction (SQLite's single writer keeps the fence from moving in between).
func (e *executor) writeSignalOps(ctx context.Context, tx *sql.Tx, c *driver.ExecutionCheckpoint, nowUS int64) (bool, error) {
	id := c.ID.String()
	var one int
	err := tx.QueryRowContext(ctx, e.d.sql(`SELECT 1 FROM {schema}.execution WHERE id = ? AND fence = ?`), id, c.Fence).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	exec := func(query string, args ...any) error {
		_, err := tx.ExecContext(ctx, e.d.sql(query), args...)
		return err
	}
	for _, t := range c.Timers {
		fireAt := nowUS + t.Delay.Microseconds()
		if t.FireAt != nil {
			fireAt = t.FireAt.UnixMicro()
		}
		if err := exec(`INSERT INTO {schema}.execution_timer (execution_id, timer_id, name, fire_at, status, created_at)
			VALUES (?, ?, ?, ?, 'PENDING', ?) ON CONFLICT (execution_id, timer_id) DO NOTHING`,
			id, t.ID, t.Name, fireAt, nowUS); err != nil {
			return false, fmt.Errorf("scheduling timer %q of execution %s: %w", t.ID, c.ID, err)
		}
	}
	for _, change := range []struct {
		ids     []string
		status  driver.TimerStatus
		firedAt any
	}{{c.CancelTimers, driver.TimerCancelled, nil}, {c.FireTimers, driver.TimerFired, nowUS}} {
		for _, timerID := range change.ids {
			if err := exec(`UPDATE {schema}.execution_timer SET status = ?, fired_at = ?
				WHERE execution_id = ? AND timer_id = ? AND status = 'PENDING'`,
				string(change.status), change.firedAt, id, timerID); err != nil {
				return false, err
			}
		}
	}
	for _, signalID := range c.ConsumeSignals {
		if err := exec(`UPDATE {schema}.execution_signal SET consumed_at = ?
			WHERE execution_id = ? AND signal_id = ? AND consumed_at IS NULL`, nowUS, id, signalID); err != nil {
			return false, err
		}
	}
	for _, w := range c.OpenWaits {
		var timeoutAt any
		switch {
		case w.TimeoutAt != nil:
			timeoutAt = w.TimeoutAt.UnixMicro()
		case w.Timeout > 0:
			timeoutAt = nowUS + w.Timeout.Microseconds()
		}
		if err := exec(`INSERT INTO {schema}.execution_wait (execution_id, wait_id, kind, name, timeout_at, opened_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (execution_id, wait_id) DO NOTHING`,
			id, w.ID, string(w.Kind), w.Name, timeoutAt, nowUS); err != nil {
			return false, fmt.Errorf("opening wait %q of execution %s: %w", w.ID, c.ID, err)
		}
	}
	for _, waitID := range c.CloseWaits {
		if err := exec(`DELETE FROM {schema}.execution_wait WHERE execution_id = ? AND wait_id = ?`, id, waitID); err != nil {
			return false, err
		}
	}
	return true, nil
}
