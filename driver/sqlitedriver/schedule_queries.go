package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/commandbus/commandbus/driver"
)

const scheduleCols = `id, name, model, type, trigger_kind, cron, zone, interval_ms, initial_delay_ms, input,
	description, enabled, misfire_policy, misfire_limit, source, spec_hash, next_fire_at, waiting_execution_id,
	last_fire_at, last_execution_id, last_error, fire_count, lease_until, lease_holder, fence, created_at, updated_at`

type scanner interface{ Scan(dest ...any) error }

func scanSchedule(row scanner) (*driver.ScheduleRow, error) {
	var (
		s                                                      driver.ScheduleRow
		id, trigger, misfire, source, input                    string
		cron, zone, desc, hash, lastErr, holder, waiting, last sql.NullString
		intervalMS, delayMS, created, updated                  int64
		enabled                                                int64
		next, lastAt, leaseUntil                               sql.NullInt64
	)
	if err := row.Scan(&id, &s.Name, &s.Model, &s.Type, &trigger, &cron, &zone, &intervalMS, &delayMS, &input,
		&desc, &enabled, &misfire, &s.MisfireLimit, &source, &hash, &next, &waiting,
		&lastAt, &last, &lastErr, &s.FireCount, &leaseUntil, &holder, &s.Fence, &created, &updated); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, driver.ErrNotFound
		}
		return nil, err
	}
	var err error
	if s.ID, err = uuid.Parse(id); err != nil {
		return nil, err
	}
	s.Trigger, s.Misfire, s.Source = driver.TriggerKind(trigger), driver.MisfirePolicy(misfire), driver.ScheduleSource(source)
	s.Cron, s.Zone, s.Description, s.SpecHash = cron.String, zone.String, desc.String, hash.String
	s.LastError, s.LeaseHolder = lastErr.String, holder.String
	s.Interval, s.InitialDelay = time.Duration(intervalMS)*time.Millisecond, time.Duration(delayMS)*time.Millisecond
	s.Input = []byte(input)
	s.Enabled = enabled != 0
	s.NextFireAt, s.LastFireAt, s.LeaseUntil = fromNullMicros(next), fromNullMicros(lastAt), fromNullMicros(leaseUntil)
	s.CreatedAt, s.UpdatedAt = fromMicros(created), fromMicros(updated)
	if w, err := parseNullUUID(waiting); err != nil {
		return nil, err
	} else if w != uuid.Nil {
		s.WaitingExecutionID = &w
	}
	if l, err := parseNullUUID(last); err != nil {
		return nil, err
	} else if l != uuid.Nil {
		s.LastExecutionID = &l
	}
	return &s, nil
}

func scheduleInput(def *driver.ScheduleDefinition) string {
	if len(def.Input) == 0 {
		return "{}"
	}
	return string(def.Input)
}

func nullUUIDPtr(id *uuid.UUID) any {
	if id == nil {
		return nil
	}
	return nullUUID(*id)
}

func (e *executor) ScheduleInsert(ctx context.Context, params *driver.ScheduleInsertParams) (*driver.ScheduleRow, bool, error) {
	if err := params.Validate(); err != nil {
		return nil, false, err
	}
	source := params.Source
	if source == "" {
		source = driver.ScheduleFromAPI
	}
	misfire := params.Misfire
	if misfire == "" {
		misfire = driver.MisfireFireOnce
	}
	at := micros(params.Now)
	s, err := scanSchedule(e.write.QueryRowContext(ctx, e.d.sql(`
		INSERT INTO {schema}.schedule (id, name, model, type, trigger_kind, cron, zone, interval_ms, initial_delay_ms,
			input, description, enabled, misfire_policy, misfire_limit, source, spec_hash, next_fire_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO NOTHING
		RETURNING `+scheduleCols),
		params.ID.String(), params.Name, params.Model, params.Type, string(params.Trigger), nullText(params.Cron),
		nullText(params.Zone), params.Interval.Milliseconds(), params.InitialDelay.Milliseconds(),
		scheduleInput(&params.ScheduleDefinition), nullText(params.Description), boolInt(params.Enabled), string(misfire),
		params.MisfireLimit, string(source), nullText(params.SpecHash), nullMicros(params.NextFireAt), at, at))
	switch {
	case errors.Is(err, driver.ErrNotFound):
		if !params.IfAbsent {
			return nil, false, fmt.Errorf("%w: a schedule named %q exists", driver.ErrConflict, params.Name)
		}
		existing, err := e.ScheduleGetByName(ctx, params.Name)
		return existing, false, err
	case err != nil:
		if isUniqueViolation(err) {
			return nil, false, fmt.Errorf("%w: schedule %s exists", driver.ErrConflict, params.ID)
		}
		return nil, false, err
	}
	return s, true, nil
}

func (e *executor) ScheduleGet(ctx context.Context, id uuid.UUID) (*driver.ScheduleRow, error) {
	return scanSchedule(e.read.QueryRowContext(ctx, e.d.sql(`SELECT `+scheduleCols+` FROM {schema}.schedule WHERE id = ?`), id.String()))
}

func (e *executor) ScheduleGetByName(ctx context.Context, name string) (*driver.ScheduleRow, error) {
	return scanSchedule(e.read.QueryRowContext(ctx, e.d.sql(`SELECT `+scheduleCols+` FROM {schema}.schedule WHERE name = ?`), name))
}

func (e *executor) ScheduleList(ctx context.Context, params *driver.ScheduleListParams) ([]*driver.ScheduleRow, error) {
	limit := 500
	if params != nil && params.Limit > 0 {
		limit = params.Limit
	}
	after := ""
	if params != nil {
		after = params.AfterName
	}
	return e.querySchedules(ctx, e.read, `SELECT `+scheduleCols+` FROM {schema}.schedule WHERE name > ? ORDER BY name LIMIT ?`, after, limit)
}

func (e *executor) querySchedules(ctx context.Context, q querier, query string, args ...any) ([]*driver.ScheduleRow, error) {
	rows, err := q.QueryContext(ctx, e.d.sql(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.ScheduleRow
	for rows.Next() {
		s, err := scanSchedule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func (e *executor) ScheduleUpdate(ctx context.Context, params *driver.ScheduleUpdateParams) (*driver.ScheduleRow, error) {
	misfire := params.Misfire
	if misfire == "" {
		misfire = driver.MisfireFireOnce
	}
	return scanSchedule(e.write.QueryRowContext(ctx, e.d.sql(`
		UPDATE {schema}.schedule SET model = ?, type = ?, trigger_kind = ?, cron = ?, zone = ?, interval_ms = ?,
			initial_delay_ms = ?, input = ?, description = ?, enabled = ?, misfire_policy = ?, misfire_limit = ?,
			spec_hash = ?, next_fire_at = ?,
			waiting_execution_id = CASE WHEN ? THEN NULL ELSE waiting_execution_id END,
			fence = fence + 1, lease_until = NULL, lease_holder = NULL, updated_at = ?
		WHERE id = ?
		RETURNING `+scheduleCols),
		params.Model, params.Type, string(params.Trigger), nullText(params.Cron), nullText(params.Zone),
		params.Interval.Milliseconds(), params.InitialDelay.Milliseconds(), scheduleInput(&params.ScheduleDefinition),
		nullText(params.Description), boolInt(params.Enabled), string(misfire), params.MisfireLimit, nullText(params.SpecHash),
		nullMicros(params.NextFireAt), boolInt(params.ClearWaiting), micros(params.Now), params.ID.String()))
}

func (e *executor) ScheduleDelete(ctx context.Context, id uuid.UUID) error {
	res, err := e.write.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.schedule WHERE id = ?`), id.String())
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: schedule %s", driver.ErrNotFound, id)
	}
	return nil
}

func (e *executor) ScheduleClaimDue(ctx context.Context, params *driver.ScheduleClaimDueParams) ([]*driver.ScheduleRow, error) {
	if params.Limit <= 0 || params.Lease <= 0 || params.Now.IsZero() {
		return nil, errors.New("ScheduleClaimDue: Now, Limit and Lease are required")
	}
	at := micros(params.Now)
	out, err := e.querySchedules(ctx, e.write, `
		UPDATE {schema}.schedule SET lease_until = ?, lease_holder = ?, fence = fence + 1
		WHERE id IN (
			SELECT id FROM {schema}.schedule
			WHERE enabled = 1 AND next_fire_at <= ? AND (lease_until IS NULL OR lease_until < ?)
			ORDER BY next_fire_at
			LIMIT ?)
		RETURNING `+scheduleCols, micros(params.Now.Add(params.Lease)), params.Holder, at, at, params.Limit)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NextFireAt.Before(*out[j].NextFireAt) })
	return out, nil
}

func (e *executor) ScheduleFiredMany(ctx context.Context, params *driver.ScheduleFiredManyParams) (int, error) {
	if len(params.Fired) == 0 {
		return 0, nil
	}
	written := 0
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		written = 0
		for _, f := range params.Fired {
			res, err := tx.ExecContext(ctx, e.d.sql(`
				UPDATE {schema}.schedule SET next_fire_at = ?, waiting_execution_id = ?,
					last_fire_at = coalesce(?, last_fire_at), last_execution_id = coalesce(?, last_execution_id),
					fire_count = fire_count + ?, last_error = ?, lease_until = NULL, lease_holder = NULL, updated_at = ?
				WHERE id = ? AND fence = ?`),
				nullMicros(f.NextFireAt), nullUUIDPtr(f.WaitingExecutionID), nullMicros(f.LastFireAt), nullUUIDPtr(f.LastExecutionID),
				f.Fires, nullText(f.LastError), micros(params.Now), f.ID.String(), f.Fence)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			written += int(n)
		}
		return nil
	})
	return written, err
}

func (e *executor) ScheduleRearm(ctx context.Context, params *driver.ScheduleRearmParams) (int, error) {
	at := micros(params.Now)
	res, err := e.write.ExecContext(ctx, e.d.sql(`
		UPDATE {schema}.schedule AS s
		SET next_fire_at = coalesce((SELECT x.completed_at FROM {schema}.execution x WHERE x.id = s.waiting_execution_id), ?)
				+ interval_ms * 1000,
			waiting_execution_id = NULL, fence = fence + 1, updated_at = ?
		WHERE waiting_execution_id IS NOT NULL AND next_fire_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM {schema}.execution x WHERE x.id = s.waiting_execution_id AND x.completed_at IS NULL)`),
		at, at)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

func (e *executor) ScheduleNextDue(ctx context.Context) (*time.Time, error) {
	var next sql.NullInt64
	if err := e.read.QueryRowContext(ctx, e.d.sql(`SELECT min(next_fire_at) FROM {schema}.schedule WHERE enabled = 1 AND next_fire_at IS NOT NULL`)).Scan(&next); err != nil {
		return nil, err
	}
	return fromNullMicros(next), nil
}

const jobLeaseCols = `name, holder, lease_until, next_run_at, last_holder, last_started_at, last_finished_at, last_error, runs`

func scanJobLease(row scanner) (*driver.JobLeaseRow, error) {
	var (
		j                             driver.JobLeaseRow
		holder, lastHolder, lastErr   sql.NullString
		leaseUntil, started, finished sql.NullInt64
		nextRun                       int64
	)
	if err := row.Scan(&j.Name, &holder, &leaseUntil, &nextRun, &lastHolder, &started, &finished, &lastErr, &j.Runs); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, driver.ErrNotFound
		}
		return nil, err
	}
	j.Holder, j.LastHolder, j.LastError = holder.String, lastHolder.String, lastErr.String
	j.LeaseUntil, j.LastStartedAt, j.LastFinishedAt = fromNullMicros(leaseUntil), fromNullMicros(started), fromNullMicros(finished)
	j.NextRunAt = fromMicros(nextRun)
	return &j, nil
}

func (e *executor) JobLeaseAcquire(ctx context.Context, params *driver.JobLeaseAcquireParams) (*driver.JobLeaseRow, bool, error) {
	if params.Name == "" || params.Holder == "" || params.Lease <= 0 || params.Now.IsZero() {
		return nil, false, errors.New("JobLeaseAcquire: Name, Holder, Lease and Now are required")
	}
	at := micros(params.Now)
	row, err := scanJobLease(e.write.QueryRowContext(ctx, e.d.sql(`
		INSERT INTO {schema}.job_lease AS j (name, holder, lease_until, next_run_at, last_started_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until,
			last_started_at = excluded.last_started_at
		WHERE j.next_run_at <= excluded.next_run_at
			AND (j.lease_until IS NULL OR j.lease_until < excluded.next_run_at)
		RETURNING `+jobLeaseCols), params.Name, params.Holder, micros(params.Now.Add(params.Lease)), at, at))
	switch {
	case errors.Is(err, driver.ErrNotFound):
		current, err := scanJobLease(e.write.QueryRowContext(ctx, e.d.sql(`SELECT `+jobLeaseCols+` FROM {schema}.job_lease WHERE name = ?`), params.Name))
		return current, false, err
	case err != nil:
		return nil, false, err
	}
	return row, true, nil
}

func (e *executor) JobLeaseRelease(ctx context.Context, params *driver.JobLeaseReleaseParams) (bool, error) {
	res, err := e.write.ExecContext(ctx, e.d.sql(`
		UPDATE {schema}.job_lease SET holder = NULL, lease_until = NULL, next_run_at = ?, last_holder = ?,
			last_finished_at = ?, last_error = ?, runs = runs + 1
		WHERE name = ? AND holder = ?`), micros(params.NextRunAt), params.Holder, micros(params.Now), nullText(params.Error),
		params.Name, params.Holder)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

func (e *executor) JobLeaseList(ctx context.Context) ([]*driver.JobLeaseRow, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`SELECT `+jobLeaseCols+` FROM {schema}.job_lease ORDER BY name`))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.JobLeaseRow
	for rows.Next() {
		j, err := scanJobLease(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// isUniqueViolation reports whether err is SQLite's primary key or UNIQUE constraint failure.
func isUniqueViolation(err error) bool {
	var serr *sqlite.Error
	if !errors.As(err, &serr) {
		return false
	}
	return serr.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || serr.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE
}
