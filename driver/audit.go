package driver

import (
	"context"
	"encoding/json"
	"time"
)

// AuditLogRow records an operator action (or another action taken on behalf of a person) on any
// entity. Command transitions are also kept on the command row itself; this log answers "who did
// what" across the whole system.
type AuditLogRow struct {
	ID         int64           `json:"id"`
	At         time.Time       `json:"at"`
	EntityType string          `json:"entityType,omitempty"` // "command", "execution", "batch", ...
	EntityID   string          `json:"entityId,omitempty"`
	Action     string          `json:"action,omitempty"`
	Actor      string          `json:"actor,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Details    json.RawMessage `json:"details,omitempty"`
}

// AuditLogInsertParams appends to the audit log.
type AuditLogInsertParams struct {
	EntityType string
	EntityID   string
	Action     string
	Actor      string
	Reason     string
	Details    json.RawMessage
	Now        *time.Time
}

// AuditLogListParams filters the audit log, newest first.
type AuditLogListParams struct {
	EntityType string
	EntityID   string
	Actor      string
	Limit      int
}

// AuditExecutor holds the audit log queries.
type AuditExecutor interface {
	AuditLogInsert(ctx context.Context, params *AuditLogInsertParams) error
	AuditLogList(ctx context.Context, params *AuditLogListParams) ([]*AuditLogRow, error)
}
