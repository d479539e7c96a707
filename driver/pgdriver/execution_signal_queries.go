package pgdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/commandbus/commandbus/driver"
)

// executionSignalSendSQL records a signal unless its execution ended or the id is taken, and
// wakes the execution for a new signal: now unless a live lease holds it, and then its runner's
// release (signal_wake). Locking the execution row orders the send after a concurrent checkpoint.
const executionSignalSendSQL = `
	WITH n AS (
		SELECT coalesce($5::timestamptz, now()) AS now
	), x AS (
		SELECT id, status IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED') AS ended, status
		FROM {schema}.execution WHERE id = $1 FOR UPDATE
	), ins AS (
		INSERT INTO {schema}.execution_signal (execution_id, signal_id, name, payload, received_at, traceparent)
		SELECT x.id, $2, $3, $4::jsonb, n.now, $6 FROM x, n WHERE NOT x.ended
		ON CONFLICT (execution_id, signal_id) DO NOTHING
		RETURNING execution_id
	), woken AS (
		UPDATE {schema}.execution e SET
			wake_at = CASE WHEN e.lease_until IS NOT NULL AND e.lease_until > n.now THEN e.wake_at ELSE n.now END,
			signal_wake = e.signal_wake OR (e.lease_until IS NOT NULL AND e.lease_until > n.now),
			updated_at = n.now
		FROM ins, n
		WHERE e.id = ins.execution_id
	)
	SELECT x.ended, x.status, EXISTS (SELECT 1 FROM ins) FROM x`

func (e *executor) ExecutionSignalSend(ctx context.Context, params *driver.ExecutionSignalSendParams) (*driver.ExecutionSignalSendResult, error) {
	if err := params.Normalize(); err != nil {
		return nil, err
	}
	var (
		ended, inserted bool
		status          string
	)
	err := e.db.QueryRow(ctx, e.d.sql(executionSignalSendSQL), pgUUID(params.ExecutionID), params.SignalID,
		params.Name, nullJSONText(params.Payload), params.Now, nullString(params.Traceparent)).Scan(&ended, &status, &inserted)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if ended {
		return nil, fmt.Errorf("signal %q: execution %s has ended (%s): %w", params.Name, params.ExecutionID, status, driver.ErrConflict)
	}
	return &driver.ExecutionSignalSendResult{SignalID: params.SignalID, Duplicate: !inserted}, nil
}

func (e *executor) ExecutionSignalListPending(ctx context.Context, id uuid.UUID) ([]*driver.ExecutionSignalRow, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`
		SELECT execution_id, signal_id, name, payload, received_at, consumed_at, traceparent
		FROM {schema}.execution_signal
		WHERE execution_id = $1 AND consumed_at IS NULL
		ORDER BY received_at, signal_id`), pgUUID(id))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.ExecutionSignalRow, error) {
		var (
			s       driver.ExecutionSignalRow
			execID  pgtype.UUID
			payload []byte
			tp      *string
		)
		err := row.Scan(&execID, &s.SignalID, &s.Name, &payload, &s.ReceivedAt, &s.ConsumedAt, &tp)
		s.ExecutionID, s.Payload, s.Traceparent = fromPgUUID(execID), payload, derefString(tp)
		return &s, err
	})
}

func (e *executor) ExecutionTimerList(ctx context.Context, params *driver.ExecutionTimerListParams) ([]*driver.ExecutionTimerRow, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`
		WITH n AS (SELECT coalesce($3::timestamptz, now()) AS now)
		SELECT execution_id, timer_id, name, fire_at, status, created_at, fired_at
		FROM {schema}.execution_timer, n
		WHERE execution_id = $1 AND status = 'PENDING' AND (NOT $2 OR fire_at <= n.now)
		ORDER BY fire_at, timer_id`), pgUUID(params.ExecutionID), params.Due, params.Now)
	if err != nil {
		return nil, err
	}
	return collectTimers(rows)
}

// ExecutionTimerListDueMany reads each execution's due timers with one index range scan (the
// lateral subquery; see executionLogManySQL).
func (e *executor) ExecutionTimerListDueMany(ctx context.Context, params *driver.ExecutionTimerListDueManyParams) ([]*driver.ExecutionTimerRow, error) {
	if len(params.ExecutionIDs) == 0 {
		return nil, nil
	}
	rows, err := e.db.Query(ctx, e.d.sql(`
		WITH n AS (SELECT coalesce($2::timestamptz, now()) AS now)
		SELECT t.execution_id, t.timer_id, t.name, t.fire_at, t.status, t.created_at, t.fired_at
		FROM unnest($1::uuid[]) AS i(id), n
		CROSS JOIN LATERAL (
			SELECT * FROM {schema}.execution_timer
			WHERE execution_id = i.id AND status = 'PENDING' AND fire_at <= n.now
		) t
		ORDER BY t.execution_id, t.fire_at, t.timer_id`), pgUUIDs(params.ExecutionIDs), params.Now)
	if err != nil {
		return nil, err
	}
	return collectTimers(rows)
}

func (e *executor) ExecutionNextWake(ctx context.Context, params *driver.ExecutionNextWakeParams) (*time.Time, error) {
	types := params.Types
	if types == nil {
		types = []string{}
	}
	var next *time.Time
	err := e.db.QueryRow(ctx, e.d.sql(`
		SELECT min(wake_at) FROM {schema}.execution
		WHERE wake_at > coalesce($2::timestamptz, now()) - $3 * interval '1 microsecond'
			AND (cardinality($1::text[]) = 0 OR type = ANY($1::text[]))`),
		types, params.Now, params.Lookback.Microseconds()).Scan(&next)
	return next, err
}

func collectTimers(rows pgx.Rows) ([]*driver.ExecutionTimerRow, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.ExecutionTimerRow, error) {
		var (
			t      driver.ExecutionTimerRow
			execID pgtype.UUID
			status string
		)
		err := row.Scan(&execID, &t.TimerID, &t.Name, &t.FireAt, &status, &t.CreatedAt, &t.FiredAt)
		t.ExecutionID, t.Status = fromPgUUID(execID), driver.TimerStatus(status)
		return &t, err
	})
}

func (e *executor) ExecutionTimerCancel(ctx context.Context, params *driver.ExecutionTimerCancelParams) error {
	var status string
	var cancelled bool
	err := e.db.QueryRow(ctx, e.d.sql(`
		WITH cancelled AS (
			UPDATE {schema}.execution_timer SET status = 'CANCELLED'
			WHERE execution_id = $1 AND timer_id = $2 AND status = 'PENDING'
			RETURNING status
		)
		SELECT status, false FROM {schema}.execution_timer
		WHERE execution_id = $1 AND timer_id = $2 AND NOT EXISTS (SELECT 1 FROM cancelled)
		UNION ALL SELECT status, true FROM cancelled`), pgUUID(params.ExecutionID), params.TimerID).Scan(&status, &cancelled)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.ErrNotFound
	}
	if err != nil {
		return err
	}
	if !cancelled {
		return fmt.Errorf("timer %q of execution %s is %s, not pending: %w", params.TimerID, params.ExecutionID, status, driver.ErrConflict)
	}
	return nil
}

func (e *executor) ExecutionWaitList(ctx context.Context, params *driver.ExecutionWaitListParams) ([]*driver.ExecutionWaitRow, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`
		WITH n AS (SELECT coalesce($3::timestamptz, now()) AS now)
		SELECT execution_id, wait_id, kind, name, timeout_at, opened_at
		FROM {schema}.execution_wait, n
		WHERE execution_id = $1 AND (NOT $2 OR timeout_at <= n.now)
		ORDER BY opened_at, wait_id`), pgUUID(params.ExecutionID), params.Expired, params.Now)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.ExecutionWaitRow, error) {
		var (
			w      driver.ExecutionWaitRow
			execID pgtype.UUID
			kind   string
		)
		err := row.Scan(&execID, &w.WaitID, &kind, &w.Name, &w.TimeoutAt, &w.OpenedAt)
		w.ExecutionID, w.Kind = fromPgUUID(execID), driver.WaitKind(kind)
		return &w, err
	})
}

// executionSignalOpsSQL writes the timers, signal consumptions and waits of checkpoints. It locks
// the executions whose fence still matches (in id order, as every batch does) so the checkpoint
// statement that follows in the same transaction applies to exactly these, and then sees their
// new timers and waits when it computes wake_at.
const executionSignalOpsSQL = `
	WITH n AS (
		SELECT coalesce($1::timestamptz, now()) AS now
	), locked AS (
		SELECT e.id FROM {schema}.execution e
		JOIN unnest($2::uuid[], $3::bigint[]) AS i(id, fence) ON e.id = i.id AND e.fence = i.fence
		ORDER BY e.id
		FOR UPDATE OF e
	), timers AS (
		INSERT INTO {schema}.execution_timer (execution_id, timer_id, name, fire_at, status, created_at)
		SELECT t.execution_id, t.timer_id, coalesce(t.name, ''),
			coalesce(t.fire_at, n.now + t.delay_us * interval '1 microsecond'), 'PENDING', n.now
		FROM jsonb_to_recordset($4::jsonb) AS t(execution_id uuid, timer_id text, name text, fire_at timestamptz, delay_us bigint), n
		WHERE t.execution_id IN (SELECT id FROM locked)
		ON CONFLICT (execution_id, timer_id) DO NOTHING
	), timer_changes AS (
		UPDATE {schema}.execution_timer x SET
			status = c.status,
			fired_at = CASE WHEN c.status = 'FIRED' THEN n.now END
		FROM jsonb_to_recordset($5::jsonb) AS c(execution_id uuid, id text, status text), n
		WHERE x.execution_id = c.execution_id AND x.timer_id = c.id AND x.status = 'PENDING'
			AND c.execution_id IN (SELECT id FROM locked)
	), signals AS (
		UPDATE {schema}.execution_signal s SET consumed_at = n.now
		FROM jsonb_to_recordset($6::jsonb) AS c(execution_id uuid, id text), n
		WHERE s.execution_id = c.execution_id AND s.signal_id = c.id AND s.consumed_at IS NULL
			AND c.execution_id IN (SELECT id FROM locked)
	), waits_opened AS (
		INSERT INTO {schema}.execution_wait (execution_id, wait_id, kind, name, timeout_at, opened_at)
		SELECT w.execution_id, w.wait_id, w.kind, coalesce(w.name, ''),
			coalesce(w.timeout_at, CASE WHEN w.timeout_us > 0 THEN n.now + w.timeout_us * interval '1 microsecond' END),
			n.now
		FROM jsonb_to_recordset($7::jsonb) AS w(execution_id uuid, wait_id text, kind text, name text, timeout_at timestamptz, timeout_us bigint), n
		WHERE w.execution_id IN (SELECT id FROM locked)
		ON CONFLICT (execution_id, wait_id) DO NOTHING
	), waits_closed AS (
		DELETE FROM {schema}.execution_wait w
		USING jsonb_to_recordset($8::jsonb) AS c(execution_id uuid, id text)
		WHERE w.execution_id = c.execution_id AND w.wait_id = c.id
			AND c.execution_id IN (SELECT id FROM locked)
	)
	SELECT count(*) FROM locked`

type (
	timerRecord struct {
		ExecutionID uuid.UUID  `json:"execution_id"`
		TimerID     string     `json:"timer_id"`
		Name        string     `json:"name"`
		FireAt      *time.Time `json:"fire_at"`
		DelayUS     int64      `json:"delay_us"`
	}
	timerChangeRecord struct {
		ExecutionID uuid.UUID `json:"execution_id"`
		ID          string    `json:"id"`
		Status      string    `json:"status"`
	}
	idRecord struct {
		ExecutionID uuid.UUID `json:"execution_id"`
		ID          string    `json:"id"`
	}
	waitRecord struct {
		ExecutionID uuid.UUID  `json:"execution_id"`
		WaitID      string     `json:"wait_id"`
		Kind        string     `json:"kind"`
		Name        string     `json:"name"`
		TimeoutAt   *time.Time `json:"timeout_at"`
		TimeoutUS   int64      `json:"timeout_us"`
	}
)

// jsonArray encodes records for jsonb_to_recordset ("[]" when there are none).
func jsonArray[T any](records []T) (string, error) {
	if len(records) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(records)
	return string(b), err
}

// signalOpsArgs returns the arguments of executionSignalOpsSQL for the checkpoints that carry
// signal, timer or wait changes.
func signalOpsArgs(params *driver.ExecutionCheckpointManyParams) ([]any, error) {
	var (
		ids     []pgtype.UUID
		fences  []int64
		timers  []timerRecord
		changes []timerChangeRecord
		signals []idRecord
		opened  []waitRecord
		closed  []idRecord
	)
	for _, c := range params.Checkpoints {
		if !c.HasSignalOps() {
			continue
		}
		ids, fences = append(ids, pgUUID(c.ID)), append(fences, c.Fence)
		for _, t := range c.Timers {
			timers = append(timers, timerRecord{ExecutionID: c.ID, TimerID: t.ID, Name: t.Name, FireAt: t.FireAt, DelayUS: t.Delay.Microseconds()})
		}
		for _, id := range c.CancelTimers {
			changes = append(changes, timerChangeRecord{ExecutionID: c.ID, ID: id, Status: string(driver.TimerCancelled)})
		}
		for _, id := range c.FireTimers {
			changes = append(changes, timerChangeRecord{ExecutionID: c.ID, ID: id, Status: string(driver.TimerFired)})
		}
		for _, id := range c.ConsumeSignals {
			signals = append(signals, idRecord{ExecutionID: c.ID, ID: id})
		}
		for _, w := range c.OpenWaits {
			opened = append(opened, waitRecord{ExecutionID: c.ID, WaitID: w.ID, Kind: string(w.Kind), Name: w.Name, TimeoutAt: w.TimeoutAt, TimeoutUS: w.Timeout.Microseconds()})
		}
		for _, id := range c.CloseWaits {
			closed = append(closed, idRecord{ExecutionID: c.ID, ID: id})
		}
	}
	args := []any{params.Now, ids, fences}
	for _, encode := range []func() (string, error){
		func() (string, error) { return jsonArray(timers) },
		func() (string, error) { return jsonArray(changes) },
		func() (string, error) { return jsonArray(signals) },
		func() (string, error) { return jsonArray(opened) },
		func() (string, error) { return jsonArray(closed) },
	} {
		s, err := encode()
		if err != nil {
			return nil, err
		}
		args = append(args, s)
	}
	return args, nil
}

// hasSignalOps reports whether any checkpoint of the batch carries signal, timer or wait changes.
func hasSignalOps(params *driver.ExecutionCheckpointManyParams) bool {
	for _, c := range params.Checkpoints {
		if c.HasSignalOps() {
			return true
		}
	}
	return false
}
