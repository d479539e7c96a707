package console

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// A queue row says what it is about: the business item an execution runs (as the extensions
// describe it, with a link to it) and the process it belongs to. The item names either its
// execution (a process in the process TSQ) or its execution through the command's correlation
// id (a command step's command).

// itemContext is the business item and process a queue item belongs to; either may be nil.
type itemContext struct {
	Item      *ItemContext
	Execution *driver.ExecutionRow
	// ProcessHref is where the process reads best: its business item's page, if it has one.
	ProcessHref string
	// ProcessInTSQ says the process waits in the process troubleshooting queue too.
	ProcessInTSQ bool
}

func isNotFound(err error) bool {
	return err != nil && (errors.Is(err, commandbus.ErrNotFound) || errors.Is(err, driver.ErrNotFound))
}

// executionHref is where an execution reads best: the page an extension gives it, else its
// process page.
func (c *Console) executionHref(row *driver.ExecutionRow) string {
	for _, ext := range c.hooks {
		if href := ext.ExecutionPage(row); href != "" {
			return href
		}
	}
	return "/processes/" + row.ID.String()
}

// executionsByID reads the executions with these ids; ids that name none are absent.
func (c *Console) executionsByID(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*driver.ExecutionRow, error) {
	out := map[uuid.UUID]*driver.ExecutionRow{}
	for _, id := range ids {
		if _, done := out[id]; done || id == uuid.Nil {
			continue
		}
		row, err := c.client.Driver().Executor().ExecutionGet(ctx, id)
		if errors.Is(err, driver.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[id] = row
	}
	return out, nil
}

// itemsOf asks the extensions what the executions run; the first that knows one wins.
func (c *Console) itemsOf(ctx context.Context, rows []*driver.ExecutionRow) (map[uuid.UUID]*ItemContext, error) {
	out := map[uuid.UUID]*ItemContext{}
	if len(rows) == 0 {
		return out, nil
	}
	for _, ext := range c.hooks {
		found, err := ext.ExecutionContexts(ctx, rows)
		if err != nil {
			return nil, err
		}
		for id, x := range found {
			if _, known := out[id]; !known && x != nil {
				out[id] = x
			}
		}
	}
	return out, nil
}

// contextsOfExecutions resolves the business item and process of items that name their
// execution; known rows (a listing's) save reading them again.
func (c *Console) contextsOfExecutions(ctx context.Context, ids []uuid.UUID, known []*driver.ExecutionRow) (map[uuid.UUID]*itemContext, error) {
	rows := map[uuid.UUID]*driver.ExecutionRow{}
	for _, r := range known {
		rows[r.ID] = r
	}
	var missing []uuid.UUID
	for _, id := range ids {
		if rows[id] == nil {
			missing = append(missing, id)
		}
	}
	read, err := c.executionsByID(ctx, missing)
	if err != nil {
		return nil, err
	}
	for id, r := range read {
		rows[id] = r
	}
	list := make([]*driver.ExecutionRow, 0, len(rows))
	for _, r := range rows {
		list = append(list, r)
	}
	items, err := c.itemsOf(ctx, list)
	if err != nil {
		return nil, err
	}
	out := map[uuid.UUID]*itemContext{}
	for id, r := range rows {
		out[id] = &itemContext{Execution: r, Item: items[id], ProcessHref: c.executionHref(r),
			ProcessInTSQ: r.Status == driver.ExecutionWaitingForTSQ}
	}
	return out, nil
}

// itemFact names the business item a process runs (by its execution id), for a confirmation
// page.
func (c *Console) itemFact(ctx context.Context, execID uuid.UUID) (Fact, bool) {
	if execID == uuid.Nil || len(c.hooks) == 0 {
		return Fact{}, false
	}
	contexts, err := c.contextsOfExecutions(ctx, []uuid.UUID{execID}, nil)
	if err != nil {
		c.logger.Warn("console: reading the business item of a process failed", "execution_id", execID, "error", err)
		return Fact{}, false
	}
	x := contexts[execID]
	if x == nil || x.Item == nil || x.Item.Fact.Label == "" {
		return Fact{}, false
	}
	return x.Item.Fact, true
}

// operationsFor returns the runtime's operations on an execution's (model, type), or nil.
func (c *Console) operationsFor(row *driver.ExecutionRow) process.Operations {
	if c.runtime == nil {
		return nil
	}
	return c.runtime.OperationsFor(row)
}

// completionRule is the first rule a hook sets for processType, or nil.
func (c *Console) completionRule(processType string) *CompletionRule {
	for _, h := range c.hooks {
		if rule := h.CompletionRule(processType); rule != nil {
			return rule
		}
	}
	return nil
}

// checkCompleteOverrides applies the rule the REST API applies too: printable texts, and the
// hooks' completion rule for the type.
func (c *Console) checkCompleteOverrides(processType string, overrides map[string]any) error {
	var check func(map[string]any) error
	if rule := c.completionRule(processType); rule != nil {
		check = rule.Check
	}
	return httpx.CheckCompleteOverrides(overrides, check)
}
