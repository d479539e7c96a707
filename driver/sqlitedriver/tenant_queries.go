package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) TenantTierUpsert(ctx context.Context, params *driver.TenantTierUpsertParams) (*driver.TenantTierRow, error) {
	at := now(params.Now)
	_, err := e.write.ExecContext(ctx, e.d.sql(`
		INSERT INTO {schema}.tenant_tier (tier, max_active, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (tier) DO UPDATE SET max_active = excluded.max_active, updated_at = excluded.updated_at`),
		params.Tier, params.MaxActive, micros(at))
	if err != nil {
		return nil, err
	}
	return &driver.TenantTierRow{Tier: params.Tier, MaxActive: params.MaxActive, UpdatedAt: at}, nil
}

func (e *executor) TenantTierList(ctx context.Context) ([]*driver.TenantTierRow, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`SELECT tier, max_active, updated_at FROM {schema}.tenant_tier ORDER BY max_active, tier`))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.TenantTierRow
	for rows.Next() {
		var r driver.TenantTierRow
		var updated int64
		if err := rows.Scan(&r.Tier, &r.MaxActive, &updated); err != nil {
			return nil, err
		}
		r.UpdatedAt = fromMicros(updated)
		out = append(out, &r)
	}
	return out, rows.Err()
}

// tenantSelectSQL reads tenants with their limit in force, held slots and queue.
const tenantSelectSQL = `
	SELECT t.id, coalesce(t.name, ''), t.tier, t.status, t.max_active_override,
		coalesce(t.max_active_override, tt.max_active),
		(SELECT count(*) FROM {schema}.execution h WHERE h.tenant_id = t.id AND h.holds_slot = 1),
		(SELECT count(*) FROM {schema}.execution q WHERE q.tenant_id = t.id AND q.status = 'QUEUED'),
		(SELECT min(q.created_at) FROM {schema}.execution q WHERE q.tenant_id = t.id AND q.status = 'QUEUED'),
		t.last_admitted_at, t.created_at, t.updated_at
	FROM {schema}.tenant t JOIN {schema}.tenant_tier tt ON tt.tier = t.tier`

func scanTenant(row rowScanner) (*driver.TenantRow, error) {
	var r driver.TenantRow
	var status string
	var override sql.NullInt64
	var oldest, last sql.NullInt64
	var created, updated int64
	if err := row.Scan(&r.ID, &r.Name, &r.Tier, &status, &override, &r.MaxActive, &r.Active, &r.Queued,
		&oldest, &last, &created, &updated); err != nil {
		return nil, err
	}
	r.Status = driver.TenantStatus(status)
	if override.Valid {
		v := int(override.Int64)
		r.MaxActiveOverride = &v
	}
	r.OldestQueuedAt, r.LastAdmittedAt = fromNullMicros(oldest), fromNullMicros(last)
	r.CreatedAt, r.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &r, nil
}

func (e *executor) TenantGet(ctx context.Context, id string) (*driver.TenantRow, error) {
	return tenantGet(ctx, e.d, e.read, id)
}

func tenantGet(ctx context.Context, d *Driver, q querier, id string) (*driver.TenantRow, error) {
	r, err := scanTenant(q.QueryRowContext(ctx, d.sql(tenantSelectSQL+` WHERE t.id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	return r, err
}

func (e *executor) TenantList(ctx context.Context, params *driver.TenantListParams) ([]*driver.TenantRow, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(tenantSelectSQL+`
		WHERE (? = '' OR t.status = ?) AND t.id > ? ORDER BY t.id LIMIT ?`),
		string(params.Status), string(params.Status), params.AfterID, driver.LimitOrDefault(params.Limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.TenantRow
	for rows.Next() {
		r, err := scanTenant(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// tierExists reports whether the tier has a row (SQLite does not enforce the foreign key).
func (e *executor) tierExists(ctx context.Context, tx *sql.Tx, tier string) error {
	var one int
	err := tx.QueryRowContext(ctx, e.d.sql(`SELECT 1 FROM {schema}.tenant_tier WHERE tier = ?`), tier).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return driver.ErrUnknownTier
	}
	return err
}

func (e *executor) audit(ctx context.Context, tx *sql.Tx, params *driver.AuditLogInsertParams) error {
	_, err := tx.ExecContext(ctx, e.d.sql(`
		INSERT INTO {schema}.audit_log (at, entity_type, entity_id, action, actor, reason, details)
		VALUES (?, ?, ?, ?, ?, ?, json(?))`),
		micros(now(params.Now)), params.EntityType, params.EntityID, params.Action, params.Actor,
		params.Reason, nullJSON(params.Details))
	return err
}

func (e *executor) TenantInsert(ctx context.Context, params *driver.TenantInsertParams) (*driver.TenantRow, error) {
	status := params.Status
	if status == "" {
		status = driver.TenantActive
	}
	at := micros(now(params.Now))
	var out *driver.TenantRow
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		if err := e.tierExists(ctx, tx, params.Tier); err != nil {
			return err
		}
		var override any
		if params.MaxActiveOverride != nil {
			override = *params.MaxActiveOverride
		}
		res, err := tx.ExecContext(ctx, e.d.sql(`
			INSERT INTO {schema}.tenant (id, name, tier, status, max_active_override, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`),
			params.ID, nullText(params.Name), params.Tier, string(status), override, at, at)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return driver.ErrConflict
		}
		details, _ := json.Marshal(map[string]any{"tier": params.Tier, "status": status, "maxActiveOverride": params.MaxActiveOverride})
		if err := e.audit(ctx, tx, &driver.AuditLogInsertParams{EntityType: "tenant", EntityID: params.ID,
			Action: "TENANT_CREATE", Actor: params.Actor, Details: details, Now: params.Now}); err != nil {
			return err
		}
		out, err = tenantGet(ctx, e.d, tx, params.ID)
		return err
	})
	return out, err
}

func (e *executor) TenantUpdate(ctx context.Context, params *driver.TenantUpdateParams) (*driver.TenantRow, *driver.TenantAdmission, error) {
	at := micros(now(params.Now))
	var out *driver.TenantRow
	var admission *driver.TenantAdmission
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		before, err := tenantGet(ctx, e.d, tx, params.ID)
		if err != nil {
			return err
		}
		if params.Tier != nil {
			if err := e.tierExists(ctx, tx, *params.Tier); err != nil {
				return err
			}
		}
		var status, override any
		if params.Status != nil {
			status = string(*params.Status)
		}
		if params.MaxActiveOverride != nil {
			override = *params.MaxActiveOverride
		}
		if _, err := tx.ExecContext(ctx, e.d.sql(`
			UPDATE {schema}.tenant SET name = coalesce(?, name), tier = coalesce(?, tier), status = coalesce(?, status),
				max_active_override = CASE WHEN ? THEN NULL ELSE coalesce(?, max_active_override) END,
				updated_at = ?
			WHERE id = ?`), params.Name, params.Tier, status, params.ClearOverride, override, at, params.ID); err != nil {
			return err
		}
		if admission, err = e.admitTx(ctx, tx, params.ID, at, 0); err != nil {
			return err
		}
		if out, err = tenantGet(ctx, e.d, tx, params.ID); err != nil {
			return err
		}
		details, _ := json.Marshal(map[string]any{
			"before":   map[string]any{"tier": before.Tier, "status": before.Status, "maxActiveOverride": before.MaxActiveOverride, "maxActive": before.MaxActive},
			"after":    map[string]any{"tier": out.Tier, "status": out.Status, "maxActiveOverride": out.MaxActiveOverride, "maxActive": out.MaxActive},
			"admitted": admission.Admitted, "failed": admission.Failed,
		})
		return e.audit(ctx, tx, &driver.AuditLogInsertParams{EntityType: "tenant", EntityID: params.ID,
			Action: "TENANT_UPDATE", Actor: params.Actor, Reason: params.Reason, Details: details, Now: params.Now})
	})
	if err != nil {
		return nil, nil, err
	}
	e.wakeIfAdmitted(ctx, admission)
	return out, admission, nil
}

// wakeIfAdmitted wakes the pending pollers when admissions made executions runnable.
func (e *executor) wakeIfAdmitted(ctx context.Context, admissions ...*driver.TenantAdmission) {
	for _, a := range admissions {
		if a != nil && a.Admitted > 0 {
			_ = e.Notify(ctx, []string{driver.TopicExecutions})
			return
		}
	}
}

// admitTx is one admission for one tenant (the PostgreSQL driver's tenant_admit): SQLite runs one
// writer at a time, so counting the held slots and admitting cannot race another admission.
func (e *executor) admitTx(ctx context.Context, tx *sql.Tx, tenant string, nowUS int64, maxPerTenant int) (*driver.TenantAdmission, error) {
	a := &driver.TenantAdmission{TenantID: tenant}
	var status string
	err := tx.QueryRowContext(ctx, e.d.sql(`
		SELECT t.status, coalesce(t.max_active_override, tt.max_active)
		FROM {schema}.tenant t JOIN {schema}.tenant_tier tt ON tt.tier = t.tier WHERE t.id = ?`), tenant).Scan(&status, &a.MaxActive)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	a.Status = driver.TenantStatus(status)
	if a.Status == "" || a.Status == driver.TenantDeleted {
		code, message := driver.CodeTenantNotFound, "tenant "+tenant+" does not exist"
		if a.Status == driver.TenantDeleted {
			code, message = driver.CodeTenantDeleted, "tenant "+tenant+" is deleted"
		}
		res, err := tx.ExecContext(ctx, e.d.sql(`
			UPDATE {schema}.execution SET status = 'FAILED', wake_at = NULL, updated_at = ?, completed_at = ?,
				error_code = ?, error_message = ?
			WHERE tenant_id = ? AND status = 'QUEUED'`), nowUS, nowUS, code, message, tenant)
		if err != nil {
			return nil, err
		}
		n, _ := res.RowsAffected()
		a.Failed = int(n)
		return a, nil
	}
	if err := tx.QueryRowContext(ctx, e.d.sql(`SELECT count(*) FROM {schema}.execution WHERE tenant_id = ? AND holds_slot = 1`), tenant).Scan(&a.Held); err != nil {
		return nil, err
	}
	if a.Status != driver.TenantActive {
		return a, nil
	}
	free := a.MaxActive - a.Held
	if maxPerTenant > 0 {
		free = min(free, maxPerTenant)
	}
	if free <= 0 {
		return a, nil
	}
	res, err := tx.ExecContext(ctx, e.d.sql(`
		UPDATE {schema}.execution SET status = 'PENDING', holds_slot = 1, admitted_at = ?, wake_at = ?, updated_at = ?
		WHERE id IN (SELECT id FROM {schema}.execution WHERE tenant_id = ? AND status = 'QUEUED'
			ORDER BY created_at, id LIMIT ?)`), nowUS, nowUS, nowUS, tenant, free)
	if err != nil {
		return nil, err
	}
	n, _ := res.RowsAffected()
	a.Admitted = int(n)
	a.Held += a.Admitted
	if a.Admitted > 0 {
		if _, err := tx.ExecContext(ctx, e.d.sql(`UPDATE {schema}.tenant SET last_admitted_at = ? WHERE id = ?`), nowUS, tenant); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (e *executor) ExecutionQueue(ctx context.Context, params *driver.ExecutionQueueParams) ([]*driver.TenantAdmission, error) {
	if len(params.IDs) == 0 {
		return nil, nil
	}
	nowUS := micros(now(params.Now))
	var out []*driver.TenantAdmission
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		ids := make([]any, len(params.IDs))
		for i, id := range params.IDs {
			ids[i] = id.String()
		}
		rows, err := tx.QueryContext(ctx, e.d.sql(`
			UPDATE {schema}.execution SET status = 'QUEUED', wake_at = NULL
			WHERE id IN (`+placeholders(len(ids))+`) AND status = 'PENDING' AND fence = 0 AND tenant_id IS NOT NULL
			RETURNING tenant_id`), ids...)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		var tenants []string
		for rows.Next() {
			var t string
			if err := rows.Scan(&t); err != nil {
				rows.Close()
				return err
			}
			if !seen[t] {
				seen[t] = true
				tenants = append(tenants, t)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		sort.Strings(tenants)
		for _, t := range tenants {
			a, err := e.admitTx(ctx, tx, t, nowUS, 0)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.wakeIfAdmitted(ctx, out...)
	return out, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func (e *executor) TenantAdmitNext(ctx context.Context, params *driver.TenantAdmitNextParams) ([]*driver.TenantAdmission, error) {
	maxTenants := params.MaxTenants
	if maxTenants <= 0 {
		maxTenants = 100
	}
	nowUS := micros(now(params.Now))
	var out []*driver.TenantAdmission
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, e.d.sql(`
			SELECT t.id FROM {schema}.tenant t JOIN {schema}.tenant_tier tt ON tt.tier = t.tier
			WHERE t.status = 'active'
				AND EXISTS (SELECT 1 FROM {schema}.execution q WHERE q.tenant_id = t.id AND q.status = 'QUEUED')
				AND (SELECT count(*) FROM {schema}.execution h WHERE h.tenant_id = t.id AND h.holds_slot = 1)
					< coalesce(t.max_active_override, tt.max_active)
			ORDER BY t.last_admitted_at IS NOT NULL, t.last_admitted_at, t.id
			LIMIT ?`), maxTenants)
		if err != nil {
			return err
		}
		var tenants []string
		for rows.Next() {
			var t string
			if err := rows.Scan(&t); err != nil {
				rows.Close()
				return err
			}
			tenants = append(tenants, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, t := range tenants {
			a, err := e.admitTx(ctx, tx, t, nowUS, params.MaxPerTenant)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.wakeIfAdmitted(ctx, out...)
	return out, nil
}

func (e *executor) ExecutionFailUnknown(ctx context.Context, params *driver.ExecutionFailUnknownParams) ([]uuid.UUID, error) {
	nowUS := micros(now(params.Now))
	known := make([]any, 0, len(params.KnownTypes)+2)
	known = append(known, nowUS, nowUS)
	notIn := ""
	if len(params.KnownTypes) > 0 {
		notIn = ` AND type NOT IN (` + placeholders(len(params.KnownTypes)) + `)`
		for _, t := range params.KnownTypes {
			known = append(known, t)
		}
	}
	var ids []uuid.UUID
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		ids = ids[:0]
		rows, err := tx.QueryContext(ctx, e.d.sql(`
			UPDATE {schema}.execution SET status = 'FAILED', wake_at = NULL, updated_at = ?, completed_at = ?,
				error_code = '`+driver.CodeUnknownDefinition+`',
				error_message = 'no definition of type ' || type || ' is registered'
			WHERE (status = 'QUEUED' OR holds_slot = 1 AND status = 'PENDING' AND fence = 0)`+notIn+`
			RETURNING id`), known...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return err
			}
			id, err := uuid.Parse(s)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 {
		_ = e.Notify(ctx, []string{driver.TopicExecutions}) // a failed slot holder's slot was handed on
	}
	return ids, nil
}

// ExecutionCancelQueued cancels a QUEUED execution; the writer's transaction serializes it with
// every admission, and the status condition decides which applied.
func (e *executor) ExecutionCancelQueued(ctx context.Context, params *driver.ExecutionCancelQueuedParams) (*driver.ExecutionRow, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	nowUS := micros(now(params.Now))
	var out *driver.ExecutionRow
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		x, err := scanExecution(tx.QueryRowContext(ctx, e.d.sql(`
			UPDATE {schema}.execution SET status = 'CANCELLED', error_code = 'CANCELLED', error_message = ?,
				fence = fence + 1, lease_until = NULL, wake_at = NULL, next_retry_at = NULL,
				updated_at = ?, completed_at = ?
			WHERE id = ? AND model = ? AND type = ? AND status = 'QUEUED'
			RETURNING `+executionCols), driver.QueuedCancelMessage(params.Actor, params.Reason), nowUS, nowUS,
			params.ID.String(), params.Model, params.Type))
		if errors.Is(err, sql.ErrNoRows) {
			var one int
			err := tx.QueryRowContext(ctx, e.d.sql(`SELECT 1 FROM {schema}.execution WHERE id = ?`), params.ID.String()).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return driver.ErrNotFound
			}
			if err != nil {
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
		if err := tx.QueryRowContext(ctx, e.d.sql(`
			INSERT INTO {schema}.execution_log (execution_id, seq, at, entry_type, name, step_status, actor, reason, request)
			SELECT ?, coalesce(max(seq), 0) + 1, ?, ?, 'cancel', 'CANCELLED', ?, ?, json(?)
			FROM {schema}.execution_log WHERE execution_id = ?
			RETURNING seq`),
			params.ID.String(), nowUS, params.Action, params.Actor, nullText(params.Reason), details, params.ID.String()).Scan(&seq); err != nil {
			return err
		}
		if err := e.writeChangeOutbox(ctx, tx, params.Outbox, out, seq, nowUS); err != nil {
			return err
		}
		in := &executor{d: e.d, read: tx, write: tx, tx: tx, notify: e.notify}
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
