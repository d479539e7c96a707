package pgdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) TenantTierUpsert(ctx context.Context, params *driver.TenantTierUpsertParams) (*driver.TenantTierRow, error) {
	var r driver.TenantTierRow
	err := e.db.QueryRow(ctx, e.d.sql(`
		INSERT INTO {schema}.tenant_tier (tier, max_active, updated_at) VALUES ($1, $2, coalesce($3::timestamptz, now()))
		ON CONFLICT (tier) DO UPDATE SET max_active = excluded.max_active, updated_at = excluded.updated_at
		RETURNING tier, max_active, updated_at`), params.Tier, params.MaxActive, params.Now).Scan(&r.Tier, &r.MaxActive, &r.UpdatedAt)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (e *executor) TenantTierList(ctx context.Context) ([]*driver.TenantTierRow, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`SELECT tier, max_active, updated_at FROM {schema}.tenant_tier ORDER BY max_active, tier`))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.TenantTierRow, error) {
		var r driver.TenantTierRow
		return &r, row.Scan(&r.Tier, &r.MaxActive, &r.UpdatedAt)
	})
}

// tenantSelectSQL reads tenants with their limit in force, held slots and queue.
const tenantSelectSQL = `
	SELECT t.id, coalesce(t.name, ''), t.tier, t.status, t.max_active_override,
		coalesce(t.max_active_override, tt.max_active),
		(SELECT count(*) FROM {schema}.execution h WHERE h.tenant_id = t.id AND h.holds_slot)::int,
		(SELECT count(*) FROM {schema}.execution q WHERE q.tenant_id = t.id AND q.status = 'QUEUED')::int,
		(SELECT min(q.created_at) FROM {schema}.execution q WHERE q.tenant_id = t.id AND q.status = 'QUEUED'),
		t.last_admitted_at, t.created_at, t.updated_at
	FROM {schema}.tenant t JOIN {schema}.tenant_tier tt ON tt.tier = t.tier`

func scanTenant(row pgx.Row) (*driver.TenantRow, error) {
	var r driver.TenantRow
	var status string
	err := row.Scan(&r.ID, &r.Name, &r.Tier, &status, &r.MaxActiveOverride, &r.MaxActive, &r.Active, &r.Queued,
		&r.OldestQueuedAt, &r.LastAdmittedAt, &r.CreatedAt, &r.UpdatedAt)
	r.Status = driver.TenantStatus(status)
	return &r, err
}

func (e *executor) TenantGet(ctx context.Context, id string) (*driver.TenantRow, error) {
	r, err := scanTenant(e.db.QueryRow(ctx, e.d.sql(tenantSelectSQL+` WHERE t.id = $1`), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	return r, err
}

func (e *executor) TenantList(ctx context.Context, params *driver.TenantListParams) ([]*driver.TenantRow, error) {
	rows, err := e.db.Query(ctx, e.d.sql(tenantSelectSQL+`
		WHERE ($1 = '' OR t.status = $1) AND t.id > $2 ORDER BY t.id LIMIT $3`),
		string(params.Status), params.AfterID, limitOrDefault(params.Limit))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.TenantRow, error) { return scanTenant(row) })
}

// tenantWriteError maps a foreign-key violation (the tier) to ErrUnknownTier.
func tenantWriteError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return driver.ErrUnknownTier
	}
	return err
}

func (e *executor) TenantInsert(ctx context.Context, params *driver.TenantInsertParams) (*driver.TenantRow, error) {
	status := params.Status
	if status == "" {
		status = driver.TenantActive
	}
	var out *driver.TenantRow
	err := pgx.BeginFunc(ctx, e.db, func(tx pgx.Tx) error {
		in := &executor{d: e.d, db: tx}
		tag, err := tx.Exec(ctx, e.d.sql(`
			INSERT INTO {schema}.tenant (id, name, tier, status, max_active_override, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, coalesce($6::timestamptz, now()), coalesce($6::timestamptz, now()))
			ON CONFLICT (id) DO NOTHING`),
			params.ID, nullString(params.Name), params.Tier, string(status), params.MaxActiveOverride, params.Now)
		if err != nil {
			return tenantWriteError(err)
		}
		if tag.RowsAffected() == 0 {
			return driver.ErrConflict
		}
		details, _ := json.Marshal(map[string]any{"tier": params.Tier, "status": status, "maxActiveOverride": params.MaxActiveOverride})
		if err := in.AuditLogInsert(ctx, &driver.AuditLogInsertParams{EntityType: "tenant", EntityID: params.ID,
			Action: "TENANT_CREATE", Actor: params.Actor, Details: details, Now: params.Now}); err != nil {
			return err
		}
		out, err = in.TenantGet(ctx, params.ID)
		return err
	})
	return out, err
}

func (e *executor) TenantUpdate(ctx context.Context, params *driver.TenantUpdateParams) (*driver.TenantRow, *driver.TenantAdmission, error) {
	var out *driver.TenantRow
	var admission *driver.TenantAdmission
	err := pgx.BeginFunc(ctx, e.db, func(tx pgx.Tx) error {
		in := &executor{d: e.d, db: tx}
		before, err := scanTenant(tx.QueryRow(ctx, e.d.sql(tenantSelectSQL+` WHERE t.id = $1 FOR UPDATE OF t`), params.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return driver.ErrNotFound
		}
		if err != nil {
			return err
		}
		var status *string
		if params.Status != nil {
			s := string(*params.Status)
			status = &s
		}
		if _, err := tx.Exec(ctx, e.d.sql(`
			UPDATE {schema}.tenant SET name = coalesce($2, name), tier = coalesce($3, tier), status = coalesce($4, status),
				max_active_override = CASE WHEN $6 THEN NULL ELSE coalesce($5, max_active_override) END,
				updated_at = coalesce($7::timestamptz, now())
			WHERE id = $1`),
			params.ID, params.Name, params.Tier, status, params.MaxActiveOverride, params.ClearOverride, params.Now); err != nil {
			return tenantWriteError(err)
		}
		admissions, err := in.admit(ctx, []string{params.ID}, true, params.Now)
		if err != nil {
			return err
		}
		admission = admissions[0]
		if out, err = in.TenantGet(ctx, params.ID); err != nil {
			return err
		}
		details, _ := json.Marshal(map[string]any{
			"before":   map[string]any{"tier": before.Tier, "status": before.Status, "maxActiveOverride": before.MaxActiveOverride, "maxActive": before.MaxActive},
			"after":    map[string]any{"tier": out.Tier, "status": out.Status, "maxActiveOverride": out.MaxActiveOverride, "maxActive": out.MaxActive},
			"admitted": admission.Admitted, "failed": admission.Failed,
		})
		return in.AuditLogInsert(ctx, &driver.AuditLogInsertParams{EntityType: "tenant", EntityID: params.ID,
			Action: "TENANT_UPDATE", Actor: params.Actor, Reason: params.Reason, Details: details, Now: params.Now})
	})
	if err != nil {
		return nil, nil, err
	}
	return out, admission, nil
}

// tenantAdmitSQL runs one admission (see tenant_admit in migration 011).
const tenantAdmitSQL = `SELECT admitted, failed, locked, held, max_active, coalesce(tenant_status, '') FROM {schema}.tenant_admit($1, coalesce($2::timestamptz, now()), $3, $4)`

func scanAdmission(tenant string, row pgx.Row) (*driver.TenantAdmission, error) {
	a := &driver.TenantAdmission{TenantID: tenant}
	var status string
	err := row.Scan(&a.Admitted, &a.Failed, &a.Locked, &a.Held, &a.MaxActive, &status)
	a.Status = driver.TenantStatus(status)
	return a, err
}

// admit admits for each tenant in turn, in the order given (callers sort them).
func (e *executor) admit(ctx context.Context, tenants []string, wait bool, now any) ([]*driver.TenantAdmission, error) {
	out := make([]*driver.TenantAdmission, 0, len(tenants))
	for _, t := range tenants {
		a, err := scanAdmission(t, e.db.QueryRow(ctx, e.d.sql(tenantAdmitSQL), t, now, wait, nil))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func (e *executor) ExecutionQueue(ctx context.Context, params *driver.ExecutionQueueParams) ([]*driver.TenantAdmission, error) {
	if len(params.IDs) == 0 {
		return nil, nil
	}
	var out []*driver.TenantAdmission
	err := pgx.BeginFunc(ctx, e.db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, e.d.sql(`
			WITH q AS (
				UPDATE {schema}.execution SET status = 'QUEUED', wake_at = NULL
				WHERE id = ANY($1::uuid[]) AND status = 'PENDING' AND fence = 0 AND tenant_id IS NOT NULL
				RETURNING tenant_id
			)
			SELECT DISTINCT tenant_id FROM q`), pgUUIDs(params.IDs))
		if err != nil {
			return err
		}
		tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		// One order for every transaction that waits for tenant rows: no deadlock between them.
		sort.Strings(tenants)
		out, err = (&executor{d: e.d, db: tx}).admit(ctx, tenants, true, params.Now)
		return err
	})
	return out, err
}

func (e *executor) TenantAdmitNext(ctx context.Context, params *driver.TenantAdmitNextParams) ([]*driver.TenantAdmission, error) {
	maxTenants := params.MaxTenants
	if maxTenants <= 0 {
		maxTenants = 100
	}
	var perTenant *int
	if params.MaxPerTenant > 0 {
		perTenant = &params.MaxPerTenant
	}
	rows, err := e.db.Query(ctx, e.d.sql(`
		WITH n AS (SELECT coalesce($3::timestamptz, now()) AS now),
		c AS (
			SELECT t.id, t.last_admitted_at FROM {schema}.tenant t JOIN {schema}.tenant_tier tt ON tt.tier = t.tier
			WHERE t.status = 'active'
				AND EXISTS (SELECT 1 FROM {schema}.execution q WHERE q.tenant_id = t.id AND q.status = 'QUEUED')
				AND (SELECT count(*) FROM {schema}.execution h WHERE h.tenant_id = t.id AND h.holds_slot)
					< coalesce(t.max_active_override, tt.max_active)
			ORDER BY t.last_admitted_at NULLS FIRST, t.id
			LIMIT $1
		)
		SELECT c.id, a.admitted, a.failed, a.locked, a.held, a.max_active, coalesce(a.tenant_status, '')
		FROM c, n, LATERAL {schema}.tenant_admit(c.id, n.now, false, $2) a
		ORDER BY c.last_admitted_at NULLS FIRST, c.id`), maxTenants, perTenant, params.Now)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.TenantAdmission, error) {
		a := &driver.TenantAdmission{}
		var status string
		err := row.Scan(&a.TenantID, &a.Admitted, &a.Failed, &a.Locked, &a.Held, &a.MaxActive, &status)
		a.Status = driver.TenantStatus(status)
		return a, err
	})
}

func (e *executor) ExecutionFailUnknown(ctx context.Context, params *driver.ExecutionFailUnknownParams) ([]uuid.UUID, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`
		UPDATE {schema}.execution SET status = 'FAILED', wake_at = NULL,
			updated_at = coalesce($2::timestamptz, now()), completed_at = coalesce($2::timestamptz, now()),
			error_code = '`+driver.CodeUnknownDefinition+`',
			error_message = 'no definition of type ' || type || ' is registered'
		WHERE (status = 'QUEUED' OR holds_slot AND status = 'PENDING' AND fence = 0)
			AND NOT (type = ANY($1::text[]))
		RETURNING id`), params.KnownTypes, params.Now)
	if err != nil {
		return nil, err
	}
	return collectUUIDs(rows)
}

// ExecutionCancelQueued cancels a QUEUED execution; the status condition in the UPDATE orders it
// against an admission (tenant_admit locks the queued rows it admits): whichever commits first
// wins, and the other finds the row changed.
func (e *executor) ExecutionCancelQueued(ctx context.Context, params *driver.ExecutionCancelQueuedParams) (*driver.ExecutionRow, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	var out *driver.ExecutionRow
	err := pgx.BeginFunc(ctx, e.db, func(tx pgx.Tx) error {
		in := &executor{d: e.d, db: tx}
		x, err := scanExecution(tx.QueryRow(ctx, e.d.sql(`
			UPDATE {schema}.execution SET status = 'CANCELLED', error_code = 'CANCELLED', error_message = $5,
				fence = fence + 1, lease_until = NULL, wake_at = NULL, next_retry_at = NULL,
				updated_at = coalesce($4::timestamptz, now()), completed_at = coalesce($4::timestamptz, now())
			WHERE id = $1 AND model = $2 AND type = $3 AND status = 'QUEUED'
			RETURNING `+executionCols), pgUUID(params.ID), params.Model, params.Type, params.Now,
			driver.QueuedCancelMessage(params.Actor, params.Reason)), false)
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := in.ExecutionGet(ctx, params.ID); err != nil {
				return err
			}
			return fmt.Errorf("%w: execution %s is not a queued %s %q", driver.ErrConflict, params.ID, params.Model, params.Type)
		}
		if err != nil {
			return err
		}
		out = x
		var details any
		if len(params.Details) > 0 {
			details = string(params.Details)
		}
		var seq int
		if err := tx.QueryRow(ctx, e.d.sql(`
			INSERT INTO {schema}.execution_log (execution_id, seq, at, entry_type, name, step_status, actor, reason, request)
			SELECT $1, coalesce(max(seq), 0) + 1, coalesce($2::timestamptz, now()), $3, 'cancel', 'CANCELLED', $4, $5, $6::jsonb
			FROM {schema}.execution_log WHERE execution_id = $1
			RETURNING seq`),
			pgUUID(params.ID), params.Now, params.Action, params.Actor, nullString(params.Reason), details).Scan(&seq); err != nil {
			return err
		}
		if err := in.writeChangeOutbox(ctx, params.Outbox, out, seq, params.Now); err != nil {
			return err
		}
		return in.AuditLogInsert(ctx, &driver.AuditLogInsertParams{
			EntityType: "execution", EntityID: params.ID.String(), Action: params.Action, Actor: params.Actor,
			Reason: params.Reason, Details: params.Details, Now: params.Now,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
