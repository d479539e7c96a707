package commandbus

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// GetCommand returns a command with its audit trail, or ErrNotFound.
func (c *Client) GetCommand(ctx context.Context, id uuid.UUID) (*CommandRow, error) {
	return c.exec.CommandGetByID(ctx, id)
}

// ListParams filters a command listing; zero fields do not filter.
type ListParams = driver.CommandListParams

// ListCommands lists commands newest first, by status, domain, type, tenant, batch or
// correlation id. Pass the last row's CreatedAt and ID as BeforeCreatedAt/BeforeID for the next
// page.
func (c *Client) ListCommands(ctx context.Context, params *ListParams) ([]*CommandRow, error) {
	if params == nil {
		params = &ListParams{}
	}
	return c.exec.CommandList(ctx, params)
}

// QueueDepth counts one queue's commands by state.
type QueueDepth = driver.QueueDepth

// QueueDepths returns the depth of every queue that has unfinished commands.
func (c *Client) QueueDepths(ctx context.Context) ([]*QueueDepth, error) {
	return c.exec.CommandQueueDepths(ctx)
}

// CommandStat is a per-domain, per-type summary: counts by status and handling latency.
type CommandStat = driver.CommandStat

// CommandStats summarises commands created in the last window, per domain and type, with p50 and
// p99 handling latency (claim to completion) of those completed.
func (c *Client) CommandStats(ctx context.Context, window time.Duration) ([]*CommandStat, error) {
	return c.exec.CommandStats(ctx, &driver.CommandStatsParams{Since: c.Now().Add(-window)})
}

// AuditLogEntry is one operator action.
type AuditLogEntry = driver.AuditLogRow

// AuditLog lists operator actions, newest first.
func (c *Client) AuditLog(ctx context.Context, params *driver.AuditLogListParams) ([]*AuditLogEntry, error) {
	if params == nil {
		params = &driver.AuditLogListParams{}
	}
	return c.exec.AuditLogList(ctx, params)
}
