package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/commandbus/commandbus/driver"
)

const scheduleCols = `id, name, model, type, trigger_kind, cron, zone, interval_ms, initial_delay_ms, input,
	description, enabled, misfire_policy, misfire_limit, source, spec_hash, next_fire_at, waiting_execution_id,
	last_fire_at, last_execution_id, last_error, fire_count, lease_until, lease_holder, fence, created_at, updated_at`

func scanSchedule(row pgx.Row) (*driver.ScheduleRow, error) {
	var (
		s                                       driver.ScheduleRow
		id, waiting, last                       pgtype.UUID
		trigger, misfire, source                string
		cron, zone, desc, hash, lastErr, holder *string
		intervalMS, delayMS                     int64
		input                                   []byte
	)
	if err := row.Scan(&id, &s.Name, &s.Model, &s.Type, &trigger, &cron, &zone, &intervalMS, &delayMS, &input,
		&desc, &s.Enabled, &misfire, &s.MisfireLimit, &source, &hash, &s.NextFireAt, &waiting,
		&s.LastFireAt, &last, &lastErr, &s.FireCount, &s.LeaseUntil, &holder, &s.Fence, &s.CreatedAt, &s.UpdatedAt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, driver.ErrNotFound
		}
		return nil, err
	}
	s.ID = fromPgUUID(id)
	s.Trigger, s.Misfire, s.Source = driver.TriggerKind(trigger), driver.MisfirePolicy(misfire), driver.ScheduleSource(source)
	s.Cron, s.Zone, s.Description, s.SpecHash = derefString(cron), derefString(zone), derefString(desc), derefString(hash)
	s.LastError, s.LeaseHolder = derefString(lastErr), derefString(holder)
	s.Interval, s.InitialDelay = time.Duration(intervalMS)*time.Millisecond, time.Duration(delayMS)*time.Millisecond
	s.Input = input
	if waiting.Valid {
		w := fromPgUUID(waiting)
		s.WaitingExecutionID = &w
	}
	if last.Valid {
		l := fromPgUUID(last)
		s.LastExecutionID = &l
	}
	utcPtr(&s.NextFireAt)
	utcPtr(&s.LastFireAt)
	utcPtr(&s.LeaseUntil)
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return &s, nil
}

func utcPtr(t **time.Time) {
	if *t != nil {
		u := (*t).UTC()
		*t = &u
	}
}

func scheduleInput(def *driver.ScheduleDefinition) []byte {
	if len(def.Input) == 0 {
		return []byte("{}")
	}
	return def.Input
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
	row := e.db.QueryRow(ctx, e.d.sql(`
		INSERT INTO {schema}.schedule (id, name, model, type, trigger_kind, cron, zone, interval_ms, initial_delay_ms,
			input, description, enabled, misfire_policy, misfire_limit, source, spec_hash, next_fire_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $18)
		ON CONFLICT (name) DO NOTHING
		RETURNING `+scheduleCols),
		pgUUID(params.ID), params.Name, params.Model, params.Type, string(params.Trigger), nullString(params.Cron),
		nullString(params.Zone), params.Interval.Milliseconds(), params.InitialDelay.Milliseconds(),
		scheduleInput(&params.ScheduleDefinition), nullString(params.Description), params.Enabled, string(misfire),
		params.MisfireLimit, string(source), nullString(params.SpecHash), params.NextFireAt, params.Now)
	s, err := scanSchedule(row)
	switch {
	case errors.Is(err, driver.ErrNotFound): // the name exists
		if !params.IfAbsent {
			return nil, false, fmt.Errorf("%w: a schedule named %q exists", driver.ErrConflict, params.Name)
		}
		existing, err := e.ScheduleGetByName(ctx, params.Name)
		return existing, false, err
	case err != nil:
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return nil, false, fmt.Errorf("%w: schedule %s exists", driver.ErrConflict, params.ID)
		}
		return nil, false, err
	}
	return s, true, nil
}

func (e *executor) ScheduleGet(ctx context.Context, id uuid.UUID) (*driver.ScheduleRow, error) {
	return scanSchedule(e.db.QueryRow(ctx, e.d.sql(`SELECT `+scheduleCols+` FROM {schema}.schedule WHERE id = $1`), pgUUID(id)))
}

func (e *executor) ScheduleGetByName(ctx context.Context, name string) (*driver.ScheduleRow, error) {
	return scanSchedule(e.db.QueryRow(ctx, e.d.sql(`SELECT `+scheduleCols+` FROM {schema}.schedule WHERE name = $1`), name))
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
	return e.querySchedules(ctx, `SELECT `+scheduleCols+` FROM {schema}.schedule WHERE name > $1 ORDER BY name LIMIT $2`, after, limit)
}

func (e *executor) querySchedules(ctx context.Context, query string, args ...any) ([]*driver.ScheduleRow, error) {
	rows, err := e.db.Query(ctx, e.d.sql(query), args...)
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
	return scanSchedule(e.db.QueryRow(ctx, e.d.sql(`
		UPDATE {schema}.schedule SET model = $2, type = $3, trigger_kind = $4, cron = $5, zone = $6, interval_ms = $7,
			initial_delay_ms = $8, input = $9, description = $10, enabled = $11, misfire_policy = $12, misfire_limit = $13,
			spec_hash = $14, next_fire_at = $15,
			waiting_execution_id = CASE WHEN $16 THEN NULL ELSE waiting_execution_id END,
			fence = fence + 1, lease_until = NULL, lease_holder = NULL, updated_at = $17
		WHERE id = $1
		RETURNING `+scheduleCols),
		pgUUID(params.ID), params.Model, params.Type, string(params.Trigger), nullString(params.Cron), nullString(params.Zone),
		params.Interval.Milliseconds(), params.InitialDelay.Milliseconds(), scheduleInput(&params.ScheduleDefinition),
		nullString(params.Description), params.Enabled, string(misfire), params.MisfireLimit, nullString(params.SpecHash),
		params.NextFireAt, params.ClearWaiting, params.Now))
}

func (e *executor) ScheduleDelete(ctx context.Context, id uuid.UUID) error {
	tag, err := e.db.Exec(ctx, e.d.sql(`DELETE FROM {schema}.schedule WHERE id = $1`), pgUUID(id))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: schedule %s", driver.ErrNotFound, id)
	}
	return nil
}

func (e *executor) ScheduleClaimDue(ctx context.Context, params *driver.ScheduleClaimDueParams) ([]*driver.ScheduleRow, error) {
	if params.Limit <= 0 || params.Lease <= 0 || params.Now.IsZero() {
		return nil, errors.New("ScheduleClaimDue: Now, Limit and Lease are required")
	}
	// Committed asynchronously (no wait for the WAL flush): a claim lost in a crash of the
	// database only frees the schedule, and the insert of the tick's execution that follows
	// flushes it anyway.
	return e.querySchedules(ctx, `
		WITH n AS (
			SELECT set_config('synchronous_commit', 'off', true) AS async_commit
		), due AS (
			SELECT id FROM {schema}.schedule, n
			WHERE enabled AND next_fire_at <= $1 AND (lease_until IS NULL OR lease_until < $1)
			ORDER BY next_fire_at
			LIMIT $2
			FOR UPDATE OF schedule SKIP LOCKED
		)
		UPDATE {schema}.schedule s SET lease_until = $3, lease_holder = $4, fence = s.fence + 1
		FROM due WHERE s.id = due.id
		RETURNING `+prefixCols("s.", scheduleCols), params.Now, params.Limit, params.Now.Add(params.Lease), params.Holder)
}

func (e *executor) ScheduleFiredMany(ctx context.Context, params *driver.ScheduleFiredManyParams) (int, error) {
	if len(params.Fired) == 0 {
		return 0, nil
	}
	n := len(params.Fired)
	ids, waiting, lastIDs := make([]pgtype.UUID, n), make([]pgtype.UUID, n), make([]pgtype.UUID, n)
	fences, fires := make([]int64, n), make([]int64, n)
	next, lastAt := make([]*time.Time, n), make([]*time.Time, n)
	errs := make([]*string, n)
	for i, f := range params.Fired {
		ids[i], fences[i], fires[i], next[i], lastAt[i], errs[i] = pgUUID(f.ID), f.Fence, int64(f.Fires), f.NextFireAt, f.LastFireAt, nullString(f.LastError)
		if f.WaitingExecutionID != nil {
			waiting[i] = pgUUID(*f.WaitingExecutionID)
		}
		if f.LastExecutionID != nil {
			lastIDs[i] = pgUUID(*f.LastExecutionID)
		}
	}
	// Committed asynchronously (no wait for the WAL flush), after the ticks' executions were
	// inserted durably: a record lost in a crash of the database has the ticks fired again, with
	// the same execution ids, which starts nothing twice.
	tag, err := e.db.Exec(ctx, e.d.sql(`
		WITH n AS (
			SELECT set_config('synchronous_commit', 'off', true) AS async_commit
		)
		UPDATE {schema}.schedule s SET next_fire_at = f.next, waiting_execution_id = f.waiting,
			last_fire_at = coalesce(f.last_at, s.last_fire_at), last_execution_id = coalesce(f.last_id, s.last_execution_id),
			fire_count = s.fire_count + f.fires, last_error = f.err, lease_until = NULL, lease_holder = NULL, updated_at = $9
		FROM unnest($1::uuid[], $2::bigint[], $3::timestamptz[], $4::uuid[], $5::timestamptz[], $6::uuid[], $7::bigint[], $8::text[])
			AS f(id, fence, next, waiting, last_at, last_id, fires, err), n
		WHERE s.id = f.id AND s.fence = f.fence`),
		ids, fences, next, waiting, lastAt, lastIDs, fires, errs, params.Now)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

func (e *executor) ScheduleRearm(ctx context.Context, params *driver.ScheduleRearmParams) (int, error) {
	tag, err := e.db.Exec(ctx, e.d.sql(`
		UPDATE {schema}.schedule s
		SET next_fire_at = coalesce((SELECT x.completed_at FROM {schema}.execution x WHERE x.id = s.waiting_execution_id), $1)
				+ s.interval_ms * interval '1 millisecond',
			waiting_execution_id = NULL, fence = s.fence + 1, updated_at = $1
		WHERE s.waiting_execution_id IS NOT NULL AND s.next_fire_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM {schema}.execution x WHERE x.id = s.waiting_execution_id AND x.completed_at IS NULL)`), params.Now)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

func (e *executor) ScheduleNextDue(ctx context.Context) (*time.Time, error) {
	var next *time.Time
	err := e.db.QueryRow(ctx, e.d.sql(`SELECT min(next_fire_at) FROM {schema}.schedule WHERE enabled AND next_fire_at IS NOT NULL`)).Scan(&next)
	if err != nil {
		return nil, err
	}
	utcPtr(&next)
	return next, nil
}

const jobLeaseCols = `name, holder, lease_until, next_run_at, last_holder, last_started_at, last_finished_at, last_error, runs`

func scanJobLease(row pgx.Row) (*driver.JobLeaseRow, error) {
	var (
		j                           driver.JobLeaseRow
		holder, lastHolder, lastErr *string
	)
	if err := row.Scan(&j.Name, &holder, &j.LeaseUntil, &j.NextRunAt, &lastHolder, &j.LastStartedAt, &j.LastFinishedAt, &lastErr, &j.Runs); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, driver.ErrNotFound
		}
		return nil, err
	}
	j.Holder, j.LastHolder, j.LastError = derefString(holder), derefString(lastHolder), derefString(lastErr)
	j.NextRunAt = j.NextRunAt.UTC()
	utcPtr(&j.LeaseUntil)
	utcPtr(&j.LastStartedAt)
	utcPtr(&j.LastFinishedAt)
	return &j, nil
}

func (e *executor) JobLeaseAcquire(ctx context.Context, params *driver.JobLeaseAcquireParams) (*driver.JobLeaseRow, bool, error) {
	if params.Name == "" || params.Holder == "" || params.Lease <= 0 || params.Now.IsZero() {
		return nil, false, errors.New("JobLeaseAcquire: Name, Holder, Lease and Now are required")
	}
	row, err := scanJobLease(e.db.QueryRow(ctx, e.d.sql(`
		INSERT INTO {schema}.job_lease AS j (name, holder, lease_until, next_run_at, last_started_at)
		VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until,
			last_started_at = excluded.last_started_at
		WHERE j.next_run_at <= $4 AND (j.lease_until IS NULL OR j.lease_until < $4)
		RETURNING `+jobLeaseCols), params.Name, params.Holder, params.Now.Add(params.Lease), params.Now))
	switch {
	case errors.Is(err, driver.ErrNotFound):
		current, err := scanJobLease(e.db.QueryRow(ctx, e.d.sql(`SELECT `+jobLeaseCols+` FROM {schema}.job_lease WHERE name = $1`), params.Name))
		return current, false, err
	case err != nil:
		return nil, false, err
	}
	return row, true, nil
}

func (e *executor) JobLeaseRelease(ctx context.Context, params *driver.JobLeaseReleaseParams) (bool, error) {
	tag, err := e.db.Exec(ctx, e.d.sql(`
		UPDATE {schema}.job_lease SET holder = NULL, lease_until = NULL, next_run_at = $3, last_holder = $2,
			last_finished_at = $5, last_error = $4, runs = runs + 1
		WHERE name = $1 AND holder = $2`), params.Name, params.Holder, params.NextRunAt, nullString(params.Error), params.Now)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) JobLeaseList(ctx context.Context) ([]*driver.JobLeaseRow, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`SELECT `+jobLeaseCols+` FROM {schema}.job_lease ORDER BY name`))
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

// prefixCols qualifies every column of a comma-separated list with prefix.
func prefixCols(prefix, cols string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = prefix + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}
