package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// tsqFilter is the troubleshooting queue pages' filter form. Error matches the error code
// exactly; Batch (processes only) is a batch id.
type tsqFilter struct {
	Domain string
	Type   string
	Error  string
	Batch  string
}

// Query is the filter as URL parameters, to carry it from the list to a bulk action.
func (f tsqFilter) Query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"domain": f.Domain, "type": f.Type, "error": f.Error, "batch": f.Batch} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// Active says whether any field filters.
func (f tsqFilter) Active() bool {
	return f.Domain != "" || f.Type != "" || f.Error != "" || f.Batch != ""
}

// commandTSQRow is a parked command with the business item and process it belongs to.
type commandTSQRow struct {
	*commandbus.CommandRow
	Context *itemContext
}

type commandTSQData struct {
	Bulk      *bulkQueue
	Filter    tsqFilter
	Rows      []*commandTSQRow
	Counts    tsqCounts
	Truncated bool
}

// processRow is an execution in the process troubleshooting queue with where to read it, its
// business item and the commands it waits on in the command troubleshooting queue.
type processRow struct {
	*driver.ExecutionRow
	Href   string
	Item   *ItemContext
	Parked []*commandbus.CommandRow
}

type processTSQData struct {
	Bulk       *bulkQueue
	Filter     tsqFilter
	FilterErrs map[string]string
	Rows       []*processRow
	Counts     tsqCounts
	Truncated  bool
}

// tsqCounts label the queue tabs.
type tsqCounts struct {
	Commands  int64
	Processes int64
	DLQ       int64
}

// tsqLimit is how many items a queue page shows and a bulk action takes at most; tsqScan is how
// many rows a listing reads to filter on the error code.
const (
	tsqLimit = 200
	tsqScan  = 1000
)

func filterOf(r *http.Request) tsqFilter {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	return tsqFilter{Domain: strings.TrimSpace(q.Get("domain")), Type: strings.TrimSpace(q.Get("type")),
		Error: strings.TrimSpace(q.Get("error")), Batch: strings.TrimSpace(q.Get("batch"))}
}

// tsqCounts counts the three queues exactly, from the depth queries the overview uses.
func (c *Console) tsqCounts(ctx context.Context) (tsqCounts, error) {
	var n tsqCounts
	depths, err := c.client.QueueDepths(ctx)
	if err != nil {
		return n, err
	}
	for _, q := range depths {
		n.Commands += q.InTSQ
	}
	counts, err := c.client.Driver().Executor().ExecutionCountByStatus(ctx)
	if err != nil {
		return n, err
	}
	for _, s := range counts {
		if s.Status == driver.ExecutionWaitingForTSQ {
			n.Processes += s.Count
		}
	}
	dlq, err := c.client.DLQ().Depths(ctx)
	if err != nil {
		return n, err
	}
	for _, d := range dlq {
		n.DLQ += d.Count
	}
	return n, nil
}

// listCommandTSQ lists the commands of the command TSQ that match the filter, newest first, at
// most tsqLimit; truncated says more matched.
func (c *Console) listCommandTSQ(ctx context.Context, f tsqFilter) (rows []*commandbus.CommandRow, truncated bool, err error) {
	all, err := c.client.TSQ().List(ctx, commandbus.TSQFilter{Domain: f.Domain, Type: f.Type, Limit: tsqScan})
	if err != nil {
		return nil, false, err
	}
	for _, row := range all {
		if f.Error != "" && row.ErrorCode != f.Error {
			continue
		}
		if len(rows) == tsqLimit {
			return rows, true, nil
		}
		rows = append(rows, row)
	}
	return rows, len(all) == tsqScan, nil
}

// listProcessTSQ lists the executions of the process TSQ that match the filter, newest first, at
// most tsqLimit; truncated says more matched. A batch that is not an id is a validation error.
func (c *Console) listProcessTSQ(ctx context.Context, f tsqFilter) (rows []*driver.ExecutionRow, truncated bool, err error) {
	params := &driver.ExecutionListParams{Statuses: []driver.ExecutionStatus{driver.ExecutionWaitingForTSQ},
		Domain: f.Domain, Type: f.Type, Limit: tsqScan}
	if f.Batch != "" {
		if params.BatchID, err = uuid.Parse(f.Batch); err != nil {
			return nil, false, &commandbus.ValidationError{Field: "batch", Message: "Enter a batch id (a UUID), or leave it empty."}
		}
	}
	all, err := c.client.Driver().Executor().ExecutionList(ctx, params)
	if err != nil {
		return nil, false, err
	}
	for _, row := range all {
		if f.Error != "" && row.ErrorCode != f.Error {
			continue
		}
		if len(rows) == tsqLimit {
			return rows, true, nil
		}
		rows = append(rows, row)
	}
	return rows, len(all) == tsqScan, nil
}

// commandRowsWithContext adds to parked commands the business item and process each belongs to.
func (c *Console) commandRowsWithContext(ctx context.Context, rows []*commandbus.CommandRow) ([]*commandTSQRow, error) {
	var execIDs []uuid.UUID
	for _, row := range rows {
		if row.CorrelationID != uuid.Nil {
			execIDs = append(execIDs, row.CorrelationID)
		}
	}
	contexts, err := c.contextsOfExecutions(ctx, execIDs, nil)
	if err != nil {
		return nil, err
	}
	out := make([]*commandTSQRow, 0, len(rows))
	for _, row := range rows {
		out = append(out, &commandTSQRow{CommandRow: row, Context: contexts[row.CorrelationID]})
	}
	return out, nil
}

func (c *Console) commandTSQ(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f := filterOf(r)
	rows, truncated, err := c.listCommandTSQ(ctx, f)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	counts, err := c.tsqCounts(ctx)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	withContext, err := c.commandRowsWithContext(ctx, rows)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	p := c.newPage(w, r, "Troubleshooting queue: commands", "tsq")
	p.Data = commandTSQData{Bulk: c.commandBulkQueue(), Filter: f, Rows: withContext, Counts: counts, Truncated: truncated}
	c.render(w, r, http.StatusOK, "tsq_commands.html", p)
}

// processRows adds to executions their business items and the commands they wait on.
func (c *Console) processRows(ctx context.Context, rows []*driver.ExecutionRow) ([]*processRow, error) {
	ids := make([]uuid.UUID, 0, len(rows))
	for _, row := range rows {
		ids = append(ids, row.ID)
	}
	contexts, err := c.contextsOfExecutions(ctx, ids, rows)
	if err != nil {
		return nil, err
	}
	parked, err := c.parkedCommandsOfRows(ctx, rows)
	if err != nil {
		return nil, err
	}
	out := make([]*processRow, 0, len(rows))
	for _, row := range rows {
		pr := &processRow{ExecutionRow: row, Href: c.executionHref(row), Parked: parked[row.ID]}
		if x := contexts[row.ID]; x != nil {
			pr.Item = x.Item
		}
		out = append(out, pr)
	}
	return out, nil
}

func (c *Console) processTSQ(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f := filterOf(r)
	data := processTSQData{Bulk: c.processBulkQueue(), Filter: f, FilterErrs: map[string]string{}}
	status := http.StatusOK
	rows, truncated, err := c.listProcessTSQ(ctx, f)
	var invalid *commandbus.ValidationError
	switch {
	case errors.As(err, &invalid):
		data.FilterErrs[invalid.Field], status = invalid.Message, http.StatusUnprocessableEntity
	case err != nil:
		c.failed(w, r, err)
		return
	}
	if data.Counts, err = c.tsqCounts(ctx); err != nil {
		c.failed(w, r, err)
		return
	}
	if data.Rows, err = c.processRows(ctx, rows); err != nil {
		c.failed(w, r, err)
		return
	}
	data.Truncated = truncated
	p := c.newPage(w, r, "Troubleshooting queue: processes", "tsq")
	p.Data = data
	c.render(w, r, status, "tsq_processes.html", p)
}

type commandPageData struct {
	Row     *commandbus.CommandRow
	Data    string
	Result  string
	Headers []Fact
	Context *itemContext
	Return  string
	Audit   []*commandbus.AuditLogEntry
	Parked  bool
	DLQ     *commandbus.DLQEntry
}

func (c *Console) commandPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.errorPage(w, r, http.StatusNotFound, "Not found", "That is not a command id.")
		return
	}
	row, err := c.client.GetCommand(ctx, id)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	audit, err := c.client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "command", EntityID: id.String(), Limit: 100})
	if err != nil {
		c.failed(w, r, err)
		return
	}
	d := commandPageData{Row: row, Data: prettyJSON(row.Data), Result: prettyJSON(row.Result), Audit: audit,
		Parked: row.Status == commandbus.StatusInTSQ, Return: r.URL.Path}
	for k, v := range row.Headers {
		d.Headers = append(d.Headers, Fact{Label: k, Value: v})
	}
	sort.Slice(d.Headers, func(i, j int) bool { return d.Headers[i].Label < d.Headers[j].Label })
	if row.CorrelationID != uuid.Nil {
		contexts, err := c.contextsOfExecutions(ctx, []uuid.UUID{row.CorrelationID}, nil)
		if err != nil {
			c.failed(w, r, err)
			return
		}
		d.Context = contexts[row.CorrelationID]
	}
	if d.Parked {
		if d.DLQ, err = c.client.DLQ().Get(ctx, id); err != nil && !isNotFound(err) {
			c.failed(w, r, err)
			return
		}
	}
	p := c.newPage(w, r, "Command "+row.Type, "tsq")
	p.Data = d
	c.render(w, r, http.StatusOK, "command.html", p)
}

// ProcessView is what the console's process page shows of an execution; an extension's page
// may embed it (see Process) with the console's "why-stuck", "timeline" and
// "process-actions" blocks.
type ProcessView struct {
	Row      *driver.ExecutionRow
	State    string
	Timeline []*timelineStep
	Audit    []*commandbus.AuditLogEntry
	Actions  []processAction
	// Item is the business item the process runs, when an extension knows it.
	Item *ItemContext
	// Parked are the process's commands waiting in the command troubleshooting queue: what it
	// waits on, and what an operator must act on first.
	Parked []*commandbus.CommandRow
	// Return is the page an action started here comes back to.
	Return string
}

var processRegions = []string{"process-status", "process-timeline"}

// loadProcess reads what a process's page shows; the audit log only for a full page (live
// updates leave it alone).
func (c *Console) loadProcess(ctx context.Context, id uuid.UUID, ret string, full bool) (*ProcessView, error) {
	row, err := c.client.Driver().Executor().ExecutionGet(ctx, id)
	if err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			return nil, fmt.Errorf("%w: execution %s", commandbus.ErrNotFound, id)
		}
		return nil, err
	}
	log, err := c.client.Driver().Executor().ExecutionLogList(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &ProcessView{Row: row, State: prettyJSON(row.State), Timeline: c.buildTimeline(ctx, row, log),
		Actions: processActions(row, ret), Return: ret}
	if !row.Status.Terminal() {
		if d.Parked, err = c.parkedCommands(ctx, id); err != nil {
			return nil, err
		}
	}
	if full {
		if d.Audit, err = c.executionAudit(ctx, id); err != nil {
			return nil, err
		}
		commands, err := c.commandsAudit(ctx, id)
		if err != nil {
			return nil, err
		}
		d.Audit = append(d.Audit, commands...)
		sortAudit(d.Audit)
	}
	if href := c.executionHref(row); href != "/processes/"+row.ID.String() {
		items, err := c.itemsOf(ctx, []*driver.ExecutionRow{row})
		if err != nil {
			return nil, err
		}
		d.Item = items[row.ID]
	}
	return d, nil
}

func (c *Console) processPageOf(w http.ResponseWriter, r *http.Request, full bool) (*Page, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not an execution id", commandbus.ErrNotFound, r.PathValue("id"))
	}
	d, err := c.loadProcess(r.Context(), id, "/processes/"+id.String(), full)
	if err != nil {
		return nil, err
	}
	p := c.newPage(w, r, "Process "+d.Row.Type, "tsq")
	p.Data, p.LiveURL = d, "/live/processes/"+id.String()
	return p, nil
}

func (c *Console) processPage(w http.ResponseWriter, r *http.Request) {
	p, err := c.processPageOf(w, r, true)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "process.html", p)
}

func (c *Console) processLive(w http.ResponseWriter, r *http.Request) {
	p, err := c.processPageOf(w, r, false)
	if err != nil {
		httpx.WriteProblem(w, http.StatusNotFound, "NOT_FOUND", "No such execution.", err.Error())
		return
	}
	c.renderRegions(w, r, "process.html", p, processRegions...)
}

func commandFacts(row *commandbus.CommandRow) []Fact {
	facts := []Fact{
		{Label: "Command", Value: row.ID.String(), Href: "/commands/" + row.ID.String()},
		{Label: "Domain and type", Value: row.Domain + " / " + row.Type},
		{Label: "Status", Value: string(row.Status)},
		{Label: "Attempts", Value: fmt.Sprintf("%d of %d", row.Attempt, row.MaxAttempts)},
	}
	if row.ErrorCode != "" || row.ErrorMessage != "" {
		facts = append(facts, Fact{Label: "Error", Value: row.ErrorCode + ": " + row.ErrorMessage})
	}
	if row.CorrelationID != uuid.Nil {
		facts = append(facts, Fact{Label: "Correlation (process)", Value: row.CorrelationID.String(), Href: "/processes/" + row.CorrelationID.String()})
	}
	return facts
}

func (c *Console) commandAction(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.errorPage(w, r, http.StatusNotFound, "Not found", "That is not a command id.")
		return
	}
	row, err := c.client.GetCommand(r.Context(), id)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	tsq := c.client.TSQ()
	spec := &ActionPage{Nav: "tsq", Facts: commandFacts(row), Return: returnTo(r, "/tsq/commands")}
	if f, ok := c.itemFact(r.Context(), row.CorrelationID); ok {
		spec.Facts = append(spec.Facts, f)
	}
	short := shortID(id)
	switch r.PathValue("action") {
	case "retry":
		spec.Title, spec.Submit = "Retry command "+short, "Retry command"
		spec.Description = "The command goes back on its queue with a fresh attempt budget, and its handler runs it again " +
			"with the same idempotency key, so work it did already is not done twice."
		spec.Done = "Command " + short + " is back on its queue."
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			_, err := tsq.Retry(ctx, id, op)
			return err
		}
	case "cancel":
		spec.Title, spec.Submit, spec.Danger = "Cancel command "+short, "Cancel command", true
		spec.Description = "The command ends CANCELLED and is not run again. Its sender (a waiting process, if any) gets a " +
			"CANCELLED reply and treats it as a failure of the step."
		spec.Done = "Command " + short + " was cancelled."
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			_, err := tsq.Cancel(ctx, id, op)
			return err
		}
	case "complete":
		spec.Title, spec.Submit = "Complete command "+short, "Complete command"
		spec.Description = "The command ends COMPLETED with the result you give, and its sender gets the success reply as if " +
			"the handler had returned that result. Do this only when you know the work was done elsewhere."
		spec.Fields = []FormField{{Name: "result", Label: "Result (JSON)", Kind: "textarea",
			Hint: "The handler's result, shaped as its reply. Leave it empty for none.", Placeholder: `{"reference": "…"}`}}
		spec.Done = "Command " + short + " was completed."
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, form url.Values) error {
			result, err := jsonField(form, "result")
			if err != nil {
				return err
			}
			_, err = tsq.Complete(ctx, id, result, op)
			return err
		}
	default:
		c.errorPage(w, r, http.StatusNotFound, "Not found", "Commands can be retried, cancelled or completed.")
		return
	}
	if row.Status != commandbus.StatusInTSQ {
		spec.Unavailable = fmt.Sprintf("This command is %s, not in the troubleshooting queue, so there is nothing to do.", row.Status)
	}
	c.act(w, r, spec)
}

func (c *Console) processAction(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.errorPage(w, r, http.StatusNotFound, "Not found", "That is not an execution id.")
		return
	}
	row, err := c.client.Driver().Executor().ExecutionGet(r.Context(), id)
	if err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			err = fmt.Errorf("%w: execution %s", commandbus.ErrNotFound, id)
		}
		c.failed(w, r, err)
		return
	}
	ops := c.operationsFor(row)
	short := shortID(id)
	spec := &ActionPage{Nav: "tsq", Return: returnTo(r, "/tsq/processes"), Facts: []Fact{
		{Label: "Execution", Value: id.String(), Href: c.executionHref(row)},
		{Label: "Process type", Value: row.Type},
		{Label: "Status", Value: string(row.Status)},
		{Label: "Step", Value: row.Step},
	}}
	if row.ErrorCode != "" {
		spec.Facts = append(spec.Facts, Fact{Label: "Error", Value: row.ErrorCode + ": " + row.ErrorMessage})
	}
	if f, ok := c.itemFact(r.Context(), id); ok {
		spec.Facts = append(spec.Facts, f)
	}
	if !row.Status.Terminal() {
		parked, err := c.parkedCommands(r.Context(), id)
		if err != nil {
			c.failed(w, r, err)
			return
		}
		for _, cmd := range parked {
			spec.Facts = append(spec.Facts, Fact{Label: "Waiting on parked command",
				Value: cmd.Type + ": " + cmd.ErrorCode + ": " + cmd.ErrorMessage, Href: "/commands/" + cmd.ID.String()})
		}
	}
	allowed := !row.Status.Terminal() && row.Status != driver.ExecutionCompensating
	switch r.PathValue("action") {
	case "retry":
		spec.Title, spec.Submit = "Retry process "+short, "Retry process"
		spec.Description = "The process runs again from the top: completed steps return their recorded results and the step " +
			"it stopped at gets a fresh attempt budget. A command step sends its command again with the same step key."
		spec.Done = "Process " + short + " was retried."
		allowed = row.Status == driver.ExecutionWaitingForTSQ
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			return whileBusy(ctx, func() error { return ops.Retry(ctx, id, op) })
		}
	case "cancel", "compensate":
		compensate := r.PathValue("action") == "compensate"
		spec.Danger = true
		if compensate {
			spec.Title, spec.Submit = "Compensate and cancel process "+short, "Compensate and cancel"
			spec.Description = "The compensations of the steps it completed run in reverse order (released holds, cancelled " +
				"contracts, recalled submissions), then the process ends CANCELLED."
			spec.Done = "Process " + short + " is compensating and will end CANCELLED."
		} else {
			spec.Title, spec.Submit = "Cancel process "+short+" without compensation", "Cancel without compensation"
			spec.Description = "The process ends CANCELLED at once. Nothing it did is undone: no compensation runs. Use " +
				"\"Compensate and cancel\" instead if its completed steps must be reversed."
			spec.Done = "Process " + short + " was cancelled without compensation."
		}
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			if err := whileBusy(ctx, func() error { return ops.CancelOverride(ctx, id, compensate, op) }); err != nil {
				return err
			}
			if err := c.checkCancelled(ctx, id); err != nil {
				return err
			}
			if after, err := c.client.Driver().Executor().ExecutionGet(ctx, id); err == nil && after.Status == driver.ExecutionCancelled && compensate {
				spec.Done = "Process " + short + " was compensated and is CANCELLED."
			}
			return nil
		}
	case "complete":
		spec.Title, spec.Submit = "Complete process "+short, "Complete process"
		spec.Description = "The process ends COMPLETED now, with the state fields you give set first (for example the " +
			"evidence that the work was done). Steps it did not reach are not run."
		field := FormField{Name: "stateOverrides", Label: "State overrides (JSON object)", Kind: "textarea",
			Hint: "A JSON object of top-level state fields to set. Leave it empty to set none.", Placeholder: `{"evidence": "…"}`}
		if rule := c.completionRule(row.Type); rule != nil {
			field.Required = rule.Required
			if rule.Hint != "" {
				field.Hint = rule.Hint
			}
		}
		spec.Fields = []FormField{field}
		spec.Done = "Process " + short + " was completed."
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, form url.Values) error {
			raw, err := jsonField(form, "stateOverrides")
			if err != nil {
				return err
			}
			var overrides map[string]any
			if raw != nil {
				if err := json.Unmarshal(raw, &overrides); err != nil {
					return &commandbus.ValidationError{Field: "stateOverrides", Message: "Give a JSON object, such as {\"evidence\": \"…\"}."}
				}
			}
			if err := c.checkCompleteOverrides(row.Type, overrides); err != nil {
				return err
			}
			return whileBusy(ctx, func() error { return ops.CompleteOverride(ctx, id, overrides, op) })
		}
	case "skip":
		spec.Title, spec.Submit = "Skip the step of process "+short, "Skip step"
		spec.Description = "The step the process is at completes with the result you give, as if it had run, and the " +
			"process continues with the next step. Do this only when the step's work was done another way."
		spec.Fields = []FormField{
			{Name: "step", Label: "Step", Kind: "text", Value: row.Step, Required: true,
				Hint: "The step the process is at; it must match."},
			{Name: "result", Label: "Step result (JSON)", Kind: "textarea", Hint: "Shaped as the step's result. Leave it empty for none."},
		}
		spec.Done = "Process " + short + " skipped its step and continues."
		allowed = row.Status == driver.ExecutionWaitingForTSQ || row.Status == driver.ExecutionWaitingForAsync ||
			row.Status == driver.ExecutionWaitingForRetry
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, form url.Values) error {
			result, err := jsonField(form, "result")
			if err != nil {
				return err
			}
			step := strings.TrimSpace(form.Get("step"))
			return whileBusy(ctx, func() error { return ops.Skip(ctx, id, step, result, op) })
		}
	default:
		c.errorPage(w, r, http.StatusNotFound, "Not found", "Processes can be retried, cancelled, compensated, completed or skipped.")
		return
	}
	switch {
	case ops == nil:
		spec.Unavailable = "No manager for process type " + row.Type + " runs in this server, so it cannot act on it."
	case !allowed:
		spec.Unavailable = fmt.Sprintf("This process is %s; the action does not apply to it now.", row.Status)
	}
	c.act(w, r, spec)
}
