package pgdriver

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) AuditLogInsert(ctx context.Context, params *driver.AuditLogInsertParams) error {
	_, err := e.db.Exec(ctx, e.d.sql(`
		INSERT INTO {schema}.audit_log (at, entity_type, entity_id, action, actor, reason, details)
		VALUES (coalesce($1::timestamptz, now()), $2, $3, $4, $5, $6, $7)`),
		params.Now, params.EntityType, params.EntityID, params.Action, params.Actor, params.Reason, nullJSON(params.Details))
	return err
}

func (e *executor) AuditLogList(ctx context.Context, params *driver.AuditLogListParams) ([]*driver.AuditLogRow, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`
		SELECT id, at, entity_type, entity_id, action, actor, reason, details
		FROM {schema}.audit_log
		WHERE ($1 = '' OR entity_type = $1) AND ($2 = '' OR entity_id = $2) AND ($3 = '' OR actor = $3)
		ORDER BY id DESC
		LIMIT $4`),
		params.EntityType, params.EntityID, params.Actor, limitOrDefault(params.Limit))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.AuditLogRow, error) {
		var r driver.AuditLogRow
		var details []byte
		err := row.Scan(&r.ID, &r.At, &r.EntityType, &r.EntityID, &r.Action, &r.Actor, &r.Reason, &details)
		r.Details = details
		return &r, err
	})
}
