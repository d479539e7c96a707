package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// Bulk actions act on many items of a troubleshooting queue at once: the items ticked on the
// list, or every item matching its filter. A GET shows what will be done to which items and asks
// for one reason; its POST (CSRF-protected, operators only) acts on exactly the items that page
// listed, one by one, each audited on its own as if acted on alone, and answers with what was
// done and what was refused, and why.

// maxBulkItems bounds one bulk action: a queue page shows at most as many.
const maxBulkItems = tsqLimit

// bulkQueue is a queue bulk actions work on.
type bulkQueue struct {
	Noun, Nouns string // "command", "commands"
	Path        string // the queue's page, where the operator goes back to
	Actions     []*bulkAction
	// items resolves ids (nil: every item matching the filter) to what the pages show.
	items func(ctx context.Context, ids []uuid.UUID, f tsqFilter) ([]*bulkItem, error)
	// workers is how many items are acted on at once.
	workers int
}

// bulkAction is one action a queue offers in bulk.
type bulkAction struct {
	Name        string // in the URL: "retry"
	Label       string // on the button: "Retry"
	Done        string // in the summary: "retried"
	Description string
	Danger      bool
	run         func(ctx context.Context, item *bulkItem, op commandbus.OperatorAction) error
}

// bulkItem is one item of a bulk action as the pages show it.
type bulkItem struct {
	ID   uuid.UUID
	Href string
	What string // "risk / BookRisk", "PaymentStep at awaitL1"
	// ErrorCode and ErrorMessage are why it waits in the queue; Status says where it is now
	// when it left the queue since.
	ErrorCode, ErrorMessage string
	Status                  string
	Item                    *ItemContext
	// Missing says the id names nothing in this queue's tables.
	Missing bool
	exec    *driver.ExecutionRow
}

// bulkOutcome is what became of one item.
type bulkOutcome struct {
	*bulkItem
	Done bool
	Why  string
}

type bulkData struct {
	Queue   *bulkQueue
	Action  *bulkAction
	Items   []*bulkItem
	Filter  tsqFilter
	All     bool
	Reason  string
	Errors  map[string]string
	Summary []fieldError
	// ContextLabel names the column of business context.
	ContextLabel string
	// After the action:
	Outcomes []*bulkOutcome
	Done     int
	Refused  int
}

func (q *bulkQueue) action(name string) *bulkAction {
	for _, a := range q.Actions {
		if a.Name == name {
			return a
		}
	}
	return nil
}

func (c *Console) commandBulkQueue() *bulkQueue {
	tsq := c.client.TSQ()
	return &bulkQueue{Noun: "command", Nouns: "commands", Path: "/tsq/commands", workers: 1,
		items: c.commandBulkItems,
		Actions: []*bulkAction{
			{Name: "retry", Label: "Retry", Done: "retried",
				Description: "Each command goes back on its queue with a fresh attempt budget and its idempotency key unchanged; " +
					"a process waiting for its reply goes on when it answers.",
				run: func(ctx context.Context, it *bulkItem, op commandbus.OperatorAction) error {
					_, err := tsq.Retry(ctx, it.ID, op)
					return err
				}},
			{Name: "cancel", Label: "Cancel", Done: "cancelled", Danger: true,
				Description: "Each command ends CANCELLED and is not run again; a process waiting for its reply gets a CANCELLED " +
					"reply and treats it as a failure of the step.",
				run: func(ctx context.Context, it *bulkItem, op commandbus.OperatorAction) error {
					_, err := tsq.Cancel(ctx, it.ID, op)
					return err
				}},
		}}
}

func (c *Console) processBulkQueue() *bulkQueue {
	ops := func(it *bulkItem) (process.Operations, error) {
		if it.exec == nil {
			return nil, fmt.Errorf("%w: execution %s", commandbus.ErrNotFound, it.ID)
		}
		o := c.operationsFor(it.exec)
		if o == nil {
			return nil, errors.New("no runtime for " + it.exec.Model + " type " + it.exec.Type + " runs in this server")
		}
		return o, nil
	}
	cancel := func(compensate bool) func(ctx context.Context, it *bulkItem, op commandbus.OperatorAction) error {
		return func(ctx context.Context, it *bulkItem, op commandbus.OperatorAction) error {
			o, err := ops(it)
			if err != nil {
				return err
			}
			if err := whileBusy(ctx, func() error { return o.CancelOverride(ctx, it.ID, compensate, op) }); err != nil {
				return err
			}
			return c.checkCancelled(ctx, it.ID)
		}
	}
	return &bulkQueue{Noun: "process", Nouns: "processes", Path: "/tsq/processes", workers: 4,
		items: c.processBulkItems,
		Actions: []*bulkAction{
			{Name: "retry", Label: "Retry", Done: "retried",
				Description: "Each process runs again from where it stopped: completed steps return their recorded results and " +
					"the step it stopped at gets a fresh attempt budget.",
				run: func(ctx context.Context, it *bulkItem, op commandbus.OperatorAction) error {
					o, err := ops(it)
					if err != nil {
						return err
					}
					return whileBusy(ctx, func() error { return o.Retry(ctx, it.ID, op) })
				}},
			{Name: "compensate", Label: "Compensate and cancel", Done: "compensated and cancelled", Danger: true,
				Description: "Each process runs the compensations of the steps it completed, in reverse order (released holds, " +
					"cancelled contracts, recalled submissions), then ends CANCELLED.",
				run: cancel(true)},
			{Name: "cancel", Label: "Cancel without compensation", Done: "cancelled", Danger: true,
				Description: "Each process ends CANCELLED at once and nothing it did is undone.",
				run:         cancel(false)},
		}}
}

// commandBulkItems reads the named commands, or lists the command TSQ's filtered items.
func (c *Console) commandBulkItems(ctx context.Context, ids []uuid.UUID, f tsqFilter) ([]*bulkItem, error) {
	var rows []*commandbus.CommandRow
	var missing []uuid.UUID
	if ids == nil {
		list, _, err := c.listCommandTSQ(ctx, f)
		if err != nil {
			return nil, err
		}
		rows = list
	}
	for _, id := range ids {
		row, err := c.client.GetCommand(ctx, id)
		switch {
		case isNotFound(err):
			missing = append(missing, id)
		case err != nil:
			return nil, err
		default:
			rows = append(rows, row)
		}
	}
	withContext, err := c.commandRowsWithContext(ctx, rows)
	if err != nil {
		return nil, err
	}
	out := make([]*bulkItem, 0, len(rows)+len(missing))
	for _, row := range withContext {
		it := &bulkItem{ID: row.ID, Href: "/commands/" + row.ID.String(), What: row.Domain + " / " + row.Type,
			ErrorCode: row.ErrorCode, ErrorMessage: row.ErrorMessage}
		if row.Status != commandbus.StatusInTSQ {
			it.Status = string(row.Status)
		}
		if row.Context != nil {
			it.Item = row.Context.Item
		}
		out = append(out, it)
	}
	for _, id := range missing {
		out = append(out, &bulkItem{ID: id, Missing: true, What: "no such command"})
	}
	return out, nil
}

// processBulkItems reads the named executions, or lists the process TSQ's filtered items.
func (c *Console) processBulkItems(ctx context.Context, ids []uuid.UUID, f tsqFilter) ([]*bulkItem, error) {
	var rows []*driver.ExecutionRow
	if ids == nil {
		list, _, err := c.listProcessTSQ(ctx, f)
		if err != nil {
			return nil, err
		}
		rows = list
	} else {
		read, err := c.executionsByID(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if r := read[id]; r != nil {
				rows = append(rows, r)
			}
		}
	}
	withContext, err := c.processRows(ctx, rows)
	if err != nil {
		return nil, err
	}
	byID := map[uuid.UUID]*bulkItem{}
	out := make([]*bulkItem, 0, len(rows))
	for _, row := range withContext {
		it := &bulkItem{ID: row.ID, Href: row.Href, What: row.Type + " at " + or(row.Step, "its start"), Item: row.Item,
			ErrorCode: row.ErrorCode, ErrorMessage: row.ErrorMessage, exec: row.ExecutionRow}
		if row.Status != driver.ExecutionWaitingForTSQ {
			it.Status = string(row.Status)
		}
		byID[row.ID] = it
		out = append(out, it)
	}
	for _, id := range ids {
		if byID[id] == nil {
			out = append(out, &bulkItem{ID: id, Missing: true, What: "no such process"})
		}
	}
	return out, nil
}

func or(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// bulkIDs reads the ids of a bulk form; more than maxBulkItems or one that is not an id is an
// error the operator can fix.
func bulkIDs(values []string) ([]uuid.UUID, error) {
	if len(values) > maxBulkItems {
		return nil, fmt.Errorf("a bulk action takes at most %d items at once; you chose %d", maxBulkItems, len(values))
	}
	ids := make([]uuid.UUID, 0, len(values))
	seen := map[uuid.UUID]bool{}
	for _, v := range values {
		id, err := uuid.Parse(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q is not an id", v)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// bulk serves a queue's bulk action: the confirmation on GET, the action on POST.
func (c *Console) bulk(queue func() *bulkQueue) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := queue()
		form := r.URL.Query()
		if r.Method == http.MethodPost {
			form = r.PostForm
		}
		action := q.action(form.Get("action"))
		if action == nil {
			c.errorPage(w, r, http.StatusBadRequest, "Choose an action",
				fmt.Sprintf("Choose what to do with the selected %s with one of the buttons above the list.", q.Nouns))
			return
		}
		d := &bulkData{Queue: q, Action: action, Filter: filterOf(r), All: form.Get("all") == "1" && r.Method != http.MethodPost,
			Errors: map[string]string{}}
		var ids []uuid.UUID
		if !d.All {
			var err error
			if ids, err = bulkIDs(form["id"]); err != nil {
				c.errorPage(w, r, http.StatusBadRequest, "Check the selection", "The selection cannot be used: "+err.Error()+".")
				return
			}
			if len(ids) == 0 {
				c.errorPage(w, r, http.StatusUnprocessableEntity, "Nothing selected",
					fmt.Sprintf("Tick the %s to act on, or choose all that match the filter, then press the button again.", q.Nouns))
				return
			}
		}
		items, err := q.items(r.Context(), ids, d.Filter)
		var invalid *commandbus.ValidationError
		switch {
		case errors.As(err, &invalid):
			c.errorPage(w, r, http.StatusUnprocessableEntity, "Check the filter", invalid.Message)
			return
		case err != nil:
			c.failed(w, r, err)
			return
		}
		d.Items = items
		if len(items) == 0 {
			c.errorPage(w, r, http.StatusUnprocessableEntity, "Nothing to act on",
				fmt.Sprintf("No %s match the filter any more.", q.Nouns))
			return
		}
		if r.Method != http.MethodPost {
			c.renderBulk(w, r, http.StatusOK, "bulk_confirm.html", d)
			return
		}
		d.Reason = strings.TrimSpace(form.Get("reason"))
		switch {
		case d.Reason == "":
			d.Errors["reason"] = "Say why you take this action: it is recorded in the audit log of every item."
		case reasonProblem(d.Reason) != "":
			d.Errors["reason"] = reasonProblem(d.Reason)
		}
		if msg, bad := d.Errors["reason"]; bad {
			d.Summary = []fieldError{{Field: "reason", Message: msg}}
			c.renderBulk(w, r, http.StatusUnprocessableEntity, "bulk_confirm.html", d)
			return
		}
		c.runBulk(r.Context(), q, d, commandbus.OperatorAction{Actor: httpx.Subject(r), Reason: d.Reason})
		c.logger.Info("console: bulk action", "queue", q.Nouns, "action", action.Name, "actor", httpx.Subject(r),
			"done", d.Done, "refused", d.Refused)
		c.renderBulk(w, r, http.StatusOK, "bulk_result.html", d)
	}
}

// runBulk acts on every item, a few at a time, and keeps the outcomes in the items' order.
func (c *Console) runBulk(ctx context.Context, q *bulkQueue, d *bulkData, op commandbus.OperatorAction) {
	d.Outcomes = make([]*bulkOutcome, len(d.Items))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(q.workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				it := d.Items[i]
				out := &bulkOutcome{bulkItem: it}
				if it.Missing {
					out.Why = "not found"
				} else if err := d.Action.run(ctx, it, op); err != nil {
					out.Why = c.refusal(ctx, it, err)
				} else {
					out.Done = true
				}
				d.Outcomes[i] = out
			}
		}()
	}
	for i := range d.Items {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, o := range d.Outcomes {
		if o.Done {
			d.Done++
		} else {
			d.Refused++
		}
	}
}

// refusal says why an item's action was refused, in an operator's words.
func (c *Console) refusal(ctx context.Context, it *bulkItem, err error) string {
	var invalid *commandbus.ValidationError
	switch {
	case errors.As(err, &invalid):
		return invalid.Field + ": " + invalid.Message
	case errors.Is(err, process.ErrBusy):
		return "a runner was working on it; try it again in a moment"
	case errors.Is(err, errNotApplied):
		return strings.TrimPrefix(err.Error(), errNotApplied.Error()+": ")
	case errors.Is(err, commandbus.ErrInvalidState):
		return "it no longer applies: " + strings.TrimPrefix(err.Error(), commandbus.ErrInvalidState.Error()+": ")
	case errors.Is(err, commandbus.ErrNotFound):
		return "not found"
	}
	// The cause stays in the log (database errors name tables and constraints).
	id := httpx.LogID(ctx)
	c.logger.Error("console: a bulk action failed on an item", "request_id", id, "id", it.ID, "error", err)
	return "failed; the cause was logged with request id " + id
}

func (c *Console) renderBulk(w http.ResponseWriter, r *http.Request, status int, name string, d *bulkData) {
	d.ContextLabel = c.contextLabel
	title := fmt.Sprintf("%s %d %s", d.Action.Label, len(d.Items), d.Queue.Nouns)
	if len(d.Items) == 1 {
		title = fmt.Sprintf("%s 1 %s", d.Action.Label, d.Queue.Noun)
	}
	if d.Outcomes != nil {
		title = fmt.Sprintf("%s: %d done, %d refused", d.Action.Label, d.Done, d.Refused)
	}
	p := c.newPage(w, r, title, "tsq")
	p.Data = d
	c.render(w, r, status, name, p)
}
