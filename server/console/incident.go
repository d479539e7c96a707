package console

import (
	"context"
	"sort"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// One incident, one place: a process whose command is parked in the command troubleshooting
// queue cannot go on until an operator acts on that command. The process's page, its business
// item's page and its row in the process TSQ say so at once, with the command's error (the root
// cause) and its actions, and both queues link to each other; the command's operator actions
// show in the process's audit log.

// maxProcessCommands bounds the commands read for one process (its steps' sends, retries and
// compensations).
const maxProcessCommands = 200

// executionCommands lists the commands an execution sent (its command steps' and
// compensations'), newest first, in the given statuses (every status when none). A process
// sends its commands with its execution id as correlation id; this is the one place that relies
// on it.
func (c *Console) executionCommands(ctx context.Context, execID uuid.UUID, statuses ...commandbus.Status) ([]*commandbus.CommandRow, error) {
	return c.client.ListCommands(ctx, &commandbus.ListParams{CorrelationID: execID, Kind: driver.CommandKindCommand,
		Statuses: statuses, Limit: maxProcessCommands})
}

// parkedCommands lists an execution's commands waiting in the command troubleshooting queue.
func (c *Console) parkedCommands(ctx context.Context, execID uuid.UUID) ([]*commandbus.CommandRow, error) {
	return c.executionCommands(ctx, execID, commandbus.StatusInTSQ)
}

// parkedCommandsOfRows looks up the parked commands of each non-terminal execution of a listing.
func (c *Console) parkedCommandsOfRows(ctx context.Context, rows []*driver.ExecutionRow) (map[uuid.UUID][]*commandbus.CommandRow, error) {
	out := map[uuid.UUID][]*commandbus.CommandRow{}
	for _, r := range rows {
		if r.Status.Terminal() {
			continue
		}
		parked, err := c.parkedCommands(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		if len(parked) > 0 {
			out[r.ID] = parked
		}
	}
	return out, nil
}

// commandsAudit is the audit log of an execution's commands (operator actions on them: retry,
// cancel, complete, resubmit), newest first.
func (c *Console) commandsAudit(ctx context.Context, execID uuid.UUID) ([]*commandbus.AuditLogEntry, error) {
	cmds, err := c.executionCommands(ctx, execID)
	if err != nil {
		return nil, err
	}
	var out []*commandbus.AuditLogEntry
	for _, cmd := range cmds {
		entries, err := c.client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "command", EntityID: cmd.ID.String(), Limit: 50})
		if err != nil {
			return nil, err
		}
		out = append(out, entries...)
	}
	sortAudit(out)
	return out, nil
}

// sortAudit orders audit entries newest first.
func sortAudit(entries []*commandbus.AuditLogEntry) {
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].At.After(entries[j].At) })
}
