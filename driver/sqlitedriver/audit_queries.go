package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) AuditLogInsert(ctx context.Context, params *driver.AuditLogInsertParams) error {
	_, err := e.write.ExecContext(ctx, e.d.sql(`
		INSERT INTO {schema}.audit_log (at, entity_type, entity_id, action, actor, reason, details)
		VALUES (?, ?, ?, ?, ?, ?, json(?))`),
		micros(now(params.Now)), params.EntityType, params.EntityID, params.Action, params.Actor,
		params.Reason, nullJSON(params.Details))
	return err
}

func (e *executor) AuditLogList(ctx context.Context, params *driver.AuditLogListParams) ([]*driver.AuditLogRow, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT id, at, entity_type, entity_id, action, actor, reason, details
		FROM {schema}.audit_log
		WHERE (?1 = '' OR entity_type = ?1) AND (?2 = '' OR entity_id = ?2) AND (?3 = '' OR actor = ?3)
		ORDER BY id DESC
		LIMIT ?4`),
		params.EntityType, params.EntityID, params.Actor, driver.LimitOrDefault(params.Limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.AuditLogRow
	for rows.Next() {
		var r driver.AuditLogRow
		var at int64
		var details sql.NullString
		if err := rows.Scan(&r.ID, &at, &r.EntityType, &r.EntityID, &r.Action, &r.Actor, &r.Reason, &details); err != nil {
			return nil, err
		}
		r.At = fromMicros(at)
		if details.Valid {
			r.Details = json.RawMessage(details.String)
		}
		out = append(out, &r)
	}
	return out, rows.Err()
}
