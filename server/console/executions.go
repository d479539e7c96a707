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
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// The model-neutral console pages: the registered definitions (a workflow's DAG drawn), the
// executions of every model with filters, and one execution's page with its timeline, children,
// waits, signals, timers, attributes and the operator actions that apply to any model.

// executionsPageSize is how many executions the list shows per page.
const executionsPageSize = 50

// definitionCount is one status of a definition with how many executions are in it.
type definitionCount struct {
	Status driver.ExecutionStatus
	Count  int64
}

// definitionRow is a registered (model, type) with its executions counted by status.
type definitionRow struct {
	orchestration.Definition
	Href   string
	Counts []definitionCount
	Total  int64
}

// countsByType reads the execution counts, grouped by type (types are unique across models).
func (c *Console) countsByType(ctx context.Context) (map[string][]definitionCount, error) {
	counts, err := c.client.Driver().Executor().ExecutionCountByStatus(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]definitionCount{}
	for _, n := range counts {
		out[n.Type] = append(out[n.Type], definitionCount{Status: n.Status, Count: n.Count})
	}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool { return list[i].Status < list[j].Status })
	}
	return out, nil
}

func (c *Console) definitions(w http.ResponseWriter, r *http.Request) {
	var rows []*definitionRow
	if rt := c.runtime; rt != nil {
		counts, err := c.countsByType(r.Context())
		if err != nil {
			c.failed(w, r, err)
			return
		}
		for _, ops := range rt.All() {
			d := &definitionRow{Definition: rt.Describe(ops), Counts: counts[ops.Type()],
				Href: "/definitions/" + url.PathEscape(ops.Model()) + "/" + url.PathEscape(ops.Type())}
			for _, n := range d.Counts {
				d.Total += n.Count
			}
			rows = append(rows, d)
		}
	}
	p := c.newPage(w, r, "Definitions", "definitions")
	p.Data = map[string]any{"Rows": rows}
	c.render(w, r, http.StatusOK, "definitions.html", p)
}

// definitionData is what the definition page shows.
type definitionData struct {
	definitionRow
	Steps []orchestration.StepInfo
	DAG   *dagPicture
}

func (c *Console) definition(w http.ResponseWriter, r *http.Request) {
	model, typ := r.PathValue("model"), r.PathValue("type")
	var ops orchestration.Operations
	if rt := c.runtime; rt != nil {
		ops = rt.Operations(model, typ)
	}
	if ops == nil {
		c.errorPage(w, r, http.StatusNotFound, "Definition not found",
			fmt.Sprintf("No %s of type %q is registered with this server. The definitions page lists those that are.", model, typ))
		return
	}
	counts, err := c.countsByType(r.Context())
	if err != nil {
		c.failed(w, r, err)
		return
	}
	d := &definitionData{definitionRow: definitionRow{Definition: c.runtime.Describe(ops), Counts: counts[typ]}}
	for _, n := range d.Counts {
		d.Total += n.Count
	}
	d.Steps = orchestration.StepsOf(ops)
	if d.Topology != nil {
		d.DAG = layoutDAG(d.Topology, d.Steps)
	}
	p := c.newPage(w, r, strings.ToUpper(model[:1])+model[1:]+" "+typ, "definitions")
	p.Data = d
	c.render(w, r, http.StatusOK, "definition.html", p)
}

// executionFilter is the executions list's filter, from the query string.
type executionFilter struct {
	Model  string
	Type   string
	Status string
	Key    string
	// Attr is the attribute filter as typed: key=value pairs separated by commas.
	Attr   string
	Before string
}

// Query is the filter as URL parameters (without the page).
func (f executionFilter) Query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"model": f.Model, "type": f.Type, "status": f.Status, "key": f.Key, "attr": f.Attr} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// Active says whether any field filters.
func (f executionFilter) Active() bool {
	return f.Model != "" || f.Type != "" || f.Status != "" || f.Key != "" || f.Attr != ""
}

// parseExecutionFilter reads the filter and turns it into list parameters; every problem is a
// ValidationError naming its field (errors.Join of them all).
func parseExecutionFilter(q url.Values) (executionFilter, *driver.ExecutionListParams, error) {
	f := executionFilter{Model: strings.TrimSpace(q.Get("model")), Type: strings.TrimSpace(q.Get("type")),
		Status: strings.TrimSpace(q.Get("status")), Key: strings.TrimSpace(q.Get("key")),
		Attr: strings.TrimSpace(q.Get("attr")), Before: strings.TrimSpace(q.Get("before"))}
	params := &driver.ExecutionListParams{Model: f.Model, Type: f.Type, BusinessKey: f.Key, Limit: executionsPageSize + 1}
	var errs []error
	if f.Status != "" {
		for _, s := range strings.Split(f.Status, ",") {
			st := driver.ExecutionStatus(strings.ToUpper(strings.TrimSpace(s)))
			if !st.Valid() {
				errs = append(errs, &commandbus.ValidationError{Field: "status", Message: fmt.Sprintf(
					"%q is not an execution status; use one of QUEUED, PENDING, EXECUTING, WAITING_FOR_ASYNC, WAITING_FOR_RETRY, WAITING_FOR_TSQ, COMPENSATING, COMPENSATED, COMPLETED, CANCELLED, FAILED, SUSPENDED", s)})
				continue
			}
			params.Statuses = append(params.Statuses, st)
		}
	}
	attrs := map[string]string{}
	var pairs []string
	if f.Attr != "" {
		pairs = strings.Split(f.Attr, ",")
	}
	for k, vs := range q {
		if name, ok := strings.CutPrefix(k, "attr."); ok && len(vs) > 0 {
			pairs = append(pairs, name+"="+vs[0])
		}
	}
	for _, pair := range pairs {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || strings.TrimSpace(k) == "" {
			errs = append(errs, &commandbus.ValidationError{Field: "attr", Message: fmt.Sprintf("%q is not key=value; write it as region=EU (several separated by commas)", pair)})
			continue
		}
		attrs[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if len(attrs) > 0 {
		if err := driver.ValidateAttributeSearch(attrs); err != nil {
			errs = append(errs, &commandbus.ValidationError{Field: "attr", Message: err.Error()})
		} else {
			params.Attributes = attrs
			if f.Attr == "" { // attr.K=V parameters: show them in the form
				var shown []string
				for k, v := range attrs {
					shown = append(shown, k+"="+v)
				}
				sort.Strings(shown)
				f.Attr = strings.Join(shown, ", ")
			}
		}
	}
	if f.Before != "" {
		id, err := uuid.Parse(f.Before)
		if err != nil {
			errs = append(errs, &commandbus.ValidationError{Field: "before", Message: "the page marker is not an execution id; go back to the first page"})
		}
		params.BeforeID = id
	}
	return f, params, errors.Join(errs...)
}

// executionsData is what the executions list shows.
type executionsData struct {
	Filter   executionFilter
	Errors   map[string]string
	Models   []string
	Types    []string
	Statuses []driver.ExecutionStatus
	Rows     []*driver.ExecutionRow
	Next     string
	First    string
}

var allStatuses = []driver.ExecutionStatus{driver.ExecutionQueued, driver.ExecutionPending, driver.ExecutionExecuting, driver.ExecutionWaitingForAsync,
	driver.ExecutionWaitingForRetry, driver.ExecutionWaitingForTSQ, driver.ExecutionSuspended, driver.ExecutionCompensating,
	driver.ExecutionCompleted, driver.ExecutionCompensated, driver.ExecutionCancelled, driver.ExecutionFailed}

func (c *Console) executions(w http.ResponseWriter, r *http.Request) {
	f, params, err := parseExecutionFilter(r.URL.Query())
	d := &executionsData{Filter: f, Errors: map[string]string{}, Statuses: allStatuses}
	if rt := c.runtime; rt != nil {
		seen := map[string]bool{}
		for _, ops := range rt.All() {
			if !seen[ops.Model()] {
				seen[ops.Model()] = true
				d.Models = append(d.Models, ops.Model())
			}
			d.Types = append(d.Types, ops.Type())
		}
		if f.Model != "" && !seen[f.Model] { // a model stored but not run here still shows as chosen
			d.Models = append(d.Models, f.Model)
		}
	}
	status := http.StatusOK
	if err != nil {
		for _, e := range httpx.Flatten(err) {
			var v *commandbus.ValidationError
			if errors.As(e, &v) {
				d.Errors[v.Field] = strings.TrimSpace(d.Errors[v.Field] + " " + v.Message)
			}
		}
		status = http.StatusBadRequest
	} else {
		rows, err := c.client.Driver().Executor().ExecutionList(r.Context(), params)
		if err != nil {
			c.failed(w, r, err)
			return
		}
		if len(rows) > executionsPageSize {
			rows = rows[:executionsPageSize]
			q := f.Query()
			q.Set("before", rows[len(rows)-1].ID.String())
			d.Next = "/executions?" + q.Encode()
		}
		if f.Before != "" {
			d.First = "/executions"
			if q := f.Query().Encode(); q != "" {
				d.First += "?" + q
			}
		}
		d.Rows = rows
	}
	p := c.newPage(w, r, "Executions", "executions")
	p.Data = d
	c.render(w, r, status, "executions.html", p)
}

// timelineBar is one step of an execution on the shared time axis of its timeline.
type timelineBar struct {
	Name   string
	Status string
	Start  *time.Time
	End    *time.Time
	Error  string
	// X, W place the bar; Y its row; LabelY the text baseline.
	X, W, Y, LabelY int
}

// timelineChart is the bars of an execution's steps laid out on one time axis.
type timelineChart struct {
	Bars          []*timelineBar
	Width, Height int
	// AxisX and AxisEnd are where the time axis starts and ends.
	AxisX, AxisEnd int
	From, To       time.Time
	Span           time.Duration
}

const (
	chartLabelW = 180
	chartBarW   = 560
	chartRowH   = 26
)

// layoutTimeline places the bars on a shared axis from the earliest start to the latest end.
func layoutTimeline(bars []*timelineBar, now time.Time) *timelineChart {
	ch := &timelineChart{Bars: bars, Width: chartLabelW + chartBarW + 20, Height: 24 + len(bars)*chartRowH,
		AxisX: chartLabelW, AxisEnd: chartLabelW + chartBarW}
	for _, b := range bars {
		if b.Start == nil {
			continue
		}
		end := now
		if b.End != nil {
			end = *b.End
		}
		if ch.From.IsZero() || b.Start.Before(ch.From) {
			ch.From = *b.Start
		}
		if end.After(ch.To) {
			ch.To = end
		}
	}
	ch.Span = ch.To.Sub(ch.From)
	span := max(ch.Span, time.Millisecond)
	for i, b := range bars {
		b.Y, b.LabelY = 20+i*chartRowH, 20+i*chartRowH+15
		if b.Start == nil {
			continue
		}
		end := now
		if b.End != nil {
			end = *b.End
		}
		b.X = chartLabelW + int(float64(chartBarW)*float64(b.Start.Sub(ch.From))/float64(span))
		b.W = max(int(float64(chartBarW)*float64(end.Sub(*b.Start))/float64(span)), 3)
	}
	return ch
}

// barDone says which step statuses end a step's bar.
var barDone = map[string]bool{
	"COMPLETED": true, "SKIPPED": true, "FAILED": true, "TIMED_OUT": true, "REPLY_FAILED": true,
	"SATISFIED": true, "RECORDED": true,
}

// stepBars builds an execution's bars from its log: a step runs from its first start (or first
// entry) to its last entry when that ends it, else until now. A declarative model's steps come
// in the order of its layers, those that have not run included; any other model's in the order
// they first ran.
func stepBars(topo *orchestration.Topology, row *driver.ExecutionRow, log []*driver.ExecutionLogEntry) []*timelineBar {
	var bars []*timelineBar
	byName := map[string]*timelineBar{}
	if topo != nil {
		for _, layer := range topo.Layers {
			for _, id := range layer {
				b := &timelineBar{Name: id, Status: "PENDING"}
				byName[id] = b
				bars = append(bars, b)
			}
		}
	}
	for _, e := range log {
		switch e.EntryType {
		case "STEP", "COMMAND", "WAIT", "SIDE_EFFECT", "TRY", "CONFIRM", "CANCEL": // the last three: a TCC participant's phases
		default:
			continue
		}
		b := byName[e.Name]
		if b == nil {
			if topo != nil {
				continue
			}
			b = &timelineBar{Name: e.Name}
			byName[e.Name] = b
			bars = append(bars, b)
		}
		start := e.At
		if e.StartedAt != nil {
			start = *e.StartedAt
		}
		if b.Start == nil || start.Before(*b.Start) {
			b.Start = &start
		}
		b.Status = e.StepStatus
		if e.StepStatus == "PENDING" {
			b.Status = "WAITING"
		}
		at := e.At
		b.End = nil
		if barDone[e.StepStatus] {
			b.End = &at
		}
		b.Error = ""
		if e.ErrorCode != "" || e.ErrorMessage != "" {
			b.Error = e.ErrorCode + ": " + e.ErrorMessage
		}
	}
	for _, b := range bars {
		if b.Start != nil && b.End == nil && row.Status.Terminal() {
			end := *b.Start
			if row.CompletedAt != nil && row.CompletedAt.After(end) {
				end = *row.CompletedAt
			}
			b.End = &end
		}
	}
	return bars
}

// Took is how long the step ran, zero while it runs or when it has not run.
func (b *timelineBar) Took() time.Duration {
	if b.Start == nil || b.End == nil {
		return 0
	}
	return b.End.Sub(*b.Start)
}

// executionAction is a link to an action on an execution.
type executionAction struct {
	Key    string
	Label  string
	Href   string
	Danger bool
}

// executionData is what an execution's page shows.
type executionData struct {
	Row        *driver.ExecutionRow
	Definition string
	Timeline   *timelineChart
	Log        []*driver.ExecutionLogEntry
	Parent     *driver.ExecutionRow
	Children   []*driver.ExecutionRow
	Signals    []*driver.ExecutionSignalRow
	Timers     []*driver.ExecutionTimerRow
	Waits      []*driver.ExecutionWaitRow
	Attributes []Fact
	Actions    []executionAction
	// ProcessPage links to the process page with its command details, for processes.
	ProcessPage string
	// NoRuntime says this server runs no runtime for the execution's model and type.
	NoRuntime bool
	State     string
	// Audit is the operator actions on the execution, newest first.
	Audit []*commandbus.AuditLogEntry
	// Participants are the phases of each participant, for models that have them (TCC).
	Participants *orchestration.ParticipantPhases
	// Compensation is the compensation path, when the execution compensated or started to.
	Compensation *compensationPath
}

// executionActionsOf lists the actions the execution's status allows (the models check again).
func executionActionsOf(row *driver.ExecutionRow) []executionAction {
	base := "/executions/" + row.ID.String() + "/"
	var out []executionAction
	if row.Status.Terminal() {
		return nil
	}
	if row.Status == driver.ExecutionWaitingForTSQ {
		out = append(out, executionAction{Key: "retry", Label: "Retry…", Href: base + "retry"})
	}
	out = append(out, executionAction{Key: "signal", Label: "Send a signal…", Href: base + "signal"})
	if row.Status == driver.ExecutionSuspended || row.SuspendRequested {
		out = append(out, executionAction{Key: "resume", Label: "Resume…", Href: base + "resume"})
	} else {
		out = append(out, executionAction{Key: "suspend", Label: "Suspend…", Href: base + "suspend"})
	}
	if row.Status != driver.ExecutionCompensating {
		out = append(out,
			executionAction{Key: "cancel", Label: "Cancel…", Href: base + "cancel", Danger: true},
			executionAction{Key: "compensate", Label: "Compensate and cancel…", Href: base + "compensate", Danger: true})
	}
	return out
}

// getExecution reads an execution by the path's id.
func (c *Console) getExecution(ctx context.Context, raw string) (*driver.ExecutionRow, error) {
	id, err := uuid.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not an execution id", commandbus.ErrNotFound, raw)
	}
	row, err := c.client.Driver().Executor().ExecutionGet(ctx, id)
	if errors.Is(err, driver.ErrNotFound) {
		return nil, fmt.Errorf("%w: execution %s", commandbus.ErrNotFound, id)
	}
	return row, err
}

// executionRegions are the execution page's live regions.
var executionRegions = []string{"execution-status", "execution-timeline", "execution-participants", "execution-compensation", "execution-waits"}

// executionPageOf reads what an execution's page shows; the audit log only for a full page
// (live updates leave it alone).
func (c *Console) executionPageOf(w http.ResponseWriter, r *http.Request, full bool) (*Page, error) {
	ctx := r.Context()
	row, err := c.getExecution(ctx, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	exec := c.client.Driver().Executor()
	log, err := exec.ExecutionLogList(ctx, row.ID)
	if err != nil {
		return nil, err
	}
	d := &executionData{Row: row, Log: log, State: prettyJSON(row.State),
		Definition: "/definitions/" + url.PathEscape(row.Model) + "/" + url.PathEscape(row.Type)}
	rt := c.runtime
	var ops orchestration.Operations
	if rt != nil {
		ops = rt.OperationsFor(row)
	}
	d.NoRuntime = ops == nil
	if row.Model == "process" {
		d.ProcessPage = c.executionHref(row)
	}
	var topo *orchestration.Topology
	if ops != nil {
		topo = orchestration.Describe(ops).Topology
	}
	d.Timeline = layoutTimeline(stepBars(topo, row, log), c.client.Now())
	d.Compensation = compensationOf(log)
	if ops != nil {
		if d.Participants, err = orchestration.ParticipantPhasesOf(ctx, ops, row.ID); err != nil {
			return nil, err
		}
	}
	if row.ParentID != uuid.Nil {
		if d.Parent, err = exec.ExecutionGet(ctx, row.ParentID); err != nil && !errors.Is(err, driver.ErrNotFound) {
			return nil, err
		}
	}
	if d.Children, err = exec.ExecutionList(ctx, &driver.ExecutionListParams{ParentID: row.ID, Limit: 200}); err != nil {
		return nil, err
	}
	attrs, err := exec.ExecutionAttributes(ctx, row.ID)
	if err != nil {
		return nil, err
	}
	for k, v := range attrs {
		d.Attributes = append(d.Attributes, Fact{Label: k, Value: v,
			Href: "/executions?" + url.Values{"attr": {k + "=" + v}}.Encode()})
	}
	sort.Slice(d.Attributes, func(i, j int) bool { return d.Attributes[i].Label < d.Attributes[j].Label })
	if rt != nil {
		if d.Signals, err = rt.PendingSignals(ctx, row.ID); err != nil {
			return nil, err
		}
		if d.Timers, err = rt.Timers(ctx, row.ID); err != nil {
			return nil, err
		}
		if d.Waits, err = rt.OpenWaits(ctx, row.ID); err != nil {
			return nil, err
		}
	}
	if ops != nil {
		d.Actions = executionActionsOf(row)
	}
	if full {
		if d.Audit, err = c.executionAudit(ctx, row.ID); err != nil {
			return nil, err
		}
	}
	p := c.newPage(w, r, row.Type+" "+shortID(row.ID), "executions")
	p.Data, p.LiveURL = d, "/live/executions/"+row.ID.String()
	return p, nil
}

func (c *Console) executionPage(w http.ResponseWriter, r *http.Request) {
	p, err := c.executionPageOf(w, r, true)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "execution.html", p)
}

func (c *Console) executionLive(w http.ResponseWriter, r *http.Request) {
	p, err := c.executionPageOf(w, r, false)
	if err != nil {
		if errors.Is(err, commandbus.ErrNotFound) {
			httpx.WriteProblem(w, http.StatusNotFound, "NOT_FOUND", "No such execution.", err.Error())
			return
		}
		c.logger.Error("console: live execution failed", "path", r.URL.Path, "error", err)
		httpx.WriteProblem(w, http.StatusInternalServerError, "INTERNAL", "The page could not be read.", "")
		return
	}
	c.renderRegions(w, r, "execution.html", p, executionRegions...)
}

// executionFacts describe an execution on a confirmation page.
func executionFacts(row *driver.ExecutionRow) []Fact {
	facts := []Fact{
		{Label: "Execution", Value: row.ID.String(), Href: "/executions/" + row.ID.String()},
		{Label: "Model and type", Value: row.Model + " / " + row.Type},
		{Label: "Status", Value: string(row.Status)},
	}
	if row.Step != "" {
		facts = append(facts, Fact{Label: "Step", Value: row.Step})
	}
	if row.ErrorCode != "" {
		facts = append(facts, Fact{Label: "Error", Value: row.ErrorCode + ": " + row.ErrorMessage})
	}
	return facts
}

func (c *Console) executionAction(w http.ResponseWriter, r *http.Request) {
	row, err := c.getExecution(r.Context(), r.PathValue("id"))
	if err != nil {
		c.failed(w, r, err)
		return
	}
	var ops orchestration.Operations
	rt := c.runtime
	if rt != nil {
		ops = rt.OperationsFor(row)
	}
	id, short := row.ID, shortID(row.ID)
	page := "/executions/" + id.String()
	spec := &ActionPage{Nav: "executions", Return: page, Facts: executionFacts(row)}
	allowed := !row.Status.Terminal()
	switch r.PathValue("action") {
	case "suspend":
		spec.Title, spec.Submit = "Suspend execution "+short, "Suspend"
		spec.Description = "The execution pauses: a step that is running finishes, no other starts, and nothing runs it " +
			"until an operator resumes it. Signals and replies that arrive meanwhile are kept."
		spec.Done = "Execution " + short + " is suspended (or will be once its running step finishes)."
		allowed = allowed && row.Status != driver.ExecutionSuspended && !row.SuspendRequested
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			return ops.Suspend(ctx, id, op)
		}
	case "resume":
		spec.Title, spec.Submit = "Resume execution "+short, "Resume"
		spec.Description = "The execution continues where it stopped, with the status it had before the suspend."
		spec.Done = "Execution " + short + " was resumed."
		allowed = row.Status == driver.ExecutionSuspended || row.SuspendRequested
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			return ops.Resume(ctx, id, op)
		}
	case "retry":
		spec.Title, spec.Submit = "Retry execution "+short, "Retry"
		spec.Description = "The execution leaves the troubleshooting queue and runs again from where it stopped; the step " +
			"that failed gets a fresh attempt budget."
		spec.Done = "Execution " + short + " was retried."
		allowed = row.Status == driver.ExecutionWaitingForTSQ
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			return whileBusy(ctx, func() error { return ops.Retry(ctx, id, op) })
		}
	case "cancel", "compensate":
		compensate := r.PathValue("action") == "compensate"
		spec.Danger = true
		if compensate {
			spec.Title, spec.Submit = "Compensate and cancel execution "+short, "Compensate and cancel"
			spec.Description = "The compensations of the steps it completed run in reverse order, then the execution ends CANCELLED."
			spec.Done = "Execution " + short + " is compensating and will end CANCELLED."
		} else {
			spec.Title, spec.Submit = "Cancel execution "+short+" without compensation", "Cancel without compensation"
			spec.Description = "The execution ends CANCELLED at once and nothing it did is undone. Its running children are cancelled too."
			spec.Done = "Execution " + short + " was cancelled without compensation."
		}
		allowed = allowed && row.Status != driver.ExecutionCompensating
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			if err := whileBusy(ctx, func() error { return ops.CancelOverride(ctx, id, compensate, op) }); err != nil {
				return err
			}
			return c.checkCancelled(ctx, id)
		}
	case "signal":
		spec.Title, spec.Submit = "Send a signal to execution "+short, "Send signal"
		spec.Description = "The signal is delivered to the execution: a step waiting for a signal of this name completes " +
			"with the payload as its result; a signal nothing waits for yet is kept until a step asks for it."
		spec.Fields = []FormField{
			{Name: "name", Label: "Signal name", Kind: "text", Required: true, Value: r.URL.Query().Get("name"),
				Hint: "The name the waiting step listens for."},
			{Name: "payload", Label: "Payload (JSON)", Kind: "textarea", Placeholder: `{"approved": true}`,
				Hint: "Any JSON value; leave it empty for none."},
		}
		spec.Done = "The signal was sent to execution " + short + "."
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, form url.Values) error {
			payload, err := jsonField(form, "payload")
			if err != nil {
				return err
			}
			name := strings.TrimSpace(form.Get("name"))
			sent, dup, err := rt.Signal(ctx, id, name, payload, "")
			if err != nil {
				return err
			}
			details, _ := json.Marshal(map[string]any{"signal": name, "signalId": sent, "duplicate": dup})
			if err := c.client.Driver().Executor().AuditLogInsert(ctx, &driver.AuditLogInsertParams{EntityType: "execution",
				EntityID: id.String(), Action: "SIGNAL_SEND", Actor: op.Actor, Reason: op.Reason, Details: details}); err != nil {
				c.logger.Error("console: writing the audit log of a signal failed", "execution_id", id, "error", err)
			}
			spec.Done = fmt.Sprintf("Signal %q was sent to execution %s.", name, short)
			return nil
		}
	default:
		c.errorPage(w, r, http.StatusNotFound, "Not found",
			"Executions can be suspended, resumed, retried, cancelled, compensated and sent signals.")
		return
	}
	switch {
	case ops == nil:
		spec.Unavailable = "No model runs " + row.Model + " type " + row.Type + " in this server, so it cannot act on it."
	case !allowed:
		spec.Unavailable = fmt.Sprintf("This execution is %s; the action does not apply to it now.", row.Status)
	}
	c.act(w, r, spec)
}

func (c *Console) timerCancel(w http.ResponseWriter, r *http.Request) {
	row, err := c.getExecution(r.Context(), r.PathValue("id"))
	if err != nil {
		c.failed(w, r, err)
		return
	}
	rt := c.runtime
	id, short, timerID := row.ID, shortID(row.ID), r.PathValue("timer")
	spec := &ActionPage{Nav: "executions", Return: "/executions/" + id.String(), Facts: executionFacts(row), Danger: true,
		Title: "Cancel timer " + timerID + " of execution " + short, Submit: "Cancel timer",
		Description: "The timer never fires. The execution runs at once and its model decides what the cancellation means: " +
			"a workflow's sleep step completes.",
		Done: "Timer " + timerID + " of execution " + short + " was cancelled."}
	spec.Facts = append(spec.Facts, Fact{Label: "Timer", Value: timerID})
	if rt == nil {
		spec.Unavailable = "This server runs no orchestration runtime, so it cannot act on timers."
	} else {
		timers, err := rt.Timers(r.Context(), id)
		if err != nil {
			c.failed(w, r, err)
			return
		}
		found := false
		for _, t := range timers {
			if t.TimerID == timerID {
				found = true
				spec.Facts = append(spec.Facts, Fact{Label: "Fires at", Value: formatTime(t.FireAt)})
			}
		}
		if !found {
			spec.Unavailable = "The execution has no pending timer " + timerID + ": it fired or was cancelled already."
		}
	}
	spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
		return whileBusy(ctx, func() error { return rt.CancelTimer(ctx, id, timerID, op) })
	}
	c.act(w, r, spec)
}

// routeExecutions registers the model-neutral pages.
func (c *Console) routeExecutions(mux *http.ServeMux) {
	mux.HandleFunc("GET /definitions", c.viewer(c.definitions))
	mux.HandleFunc("GET /definitions/{model}/{type}", c.viewer(c.definition))
	mux.HandleFunc("GET /executions", c.viewer(c.executions))
	mux.HandleFunc("GET /executions/{id}", c.viewer(c.executionPage))
	mux.HandleFunc("GET /live/executions/{id}", c.live(c.executionLive))
	mux.HandleFunc("GET /executions/{id}/timers/{timer}/cancel", c.operator(c.timerCancel))
	mux.HandleFunc("POST /executions/{id}/timers/{timer}/cancel", c.operator(c.timerCancel))
	mux.HandleFunc("GET /executions/{id}/{action}", c.operator(c.executionAction))
	mux.HandleFunc("POST /executions/{id}/{action}", c.operator(c.executionAction))
}
