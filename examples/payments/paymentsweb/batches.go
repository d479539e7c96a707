package paymentsweb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/server"
)

// maxConsoleBatch bounds a batch created from the console: the request creates every payment
// before it answers. Larger batches go through the API or the CLI.
const maxConsoleBatch = 100_000

type batchesData struct {
	Batches []*payments.BatchView
	Page    *paging
}

// batchesPage lists the batches, newest first, a page at a time: ?limit=N batches (1 to 200,
// default 50; each is counted when read), ?before=MARKER the batches after the last one of the
// previous page. A page whose size or marker cannot be read has Page.Problem set and no rows.
func (c *Extension) batchesPage(w http.ResponseWriter, r *http.Request) (*server.Page, error) {
	page := readPaging(r, "/batches", "before", defaultPaymentListLimit, maxBatchListLimit, nil)
	params := payments.ListParams{Limit: page.Size + 1}
	params.After = page.timeCursor()
	d := batchesData{Page: page}
	if page.Problem == "" {
		list, err := c.platform.ListBatches(r.Context(), params)
		if err != nil {
			return nil, err
		}
		d.Batches = cut(page, list, func(b *payments.BatchView) string { return timeKey(b.CreatedAt, b.ID) })
		if err := c.markOperatorWaits(r.Context(), d.Batches); err != nil {
			return nil, err
		}
	}
	p := c.newPage(w, r, "Batches", "batches")
	p.Data, p.LiveURL = d, "/live/batches"
	if q := page.query(); len(q) > 0 {
		p.LiveURL += "?" + q.Encode()
	}
	return p, nil
}

func (c *Extension) batches(w http.ResponseWriter, r *http.Request) {
	p, err := c.batchesPage(w, r)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	c.render(w, r, p.Data.(batchesData).Page.status(), "batches.html", p)
}

func (c *Extension) batchesLive(w http.ResponseWriter, r *http.Request) {
	p, err := c.batchesPage(w, r)
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "INTERNAL", "The batches could not be read.", err.Error())
		return
	}
	if page := p.Data.(batchesData).Page; page.Problem != "" {
		writeProblem(w, http.StatusBadRequest, "BAD_REQUEST", "The page cannot be read.", page.Problem)
		return
	}
	c.renderRegions(w, r, "batches.html", p, "batches-table")
}

// countRow is one line of a batch's counts, with the payment status that lists its payments.
type countRow struct {
	Label  string
	Status string
	Count  int
}

type batchData struct {
	Batch *payments.BatchView
	// Waiting says what the batch waits for when only operators can move it on.
	Waiting  *operatorWait
	Summary  *payments.Summary
	Counts   []countRow
	Terminal int
	Items    []*payments.PaymentView
	Status   string
	Statuses []string
	// Page pages the batch's payments.
	Page *paging
}

func batchCountRows(b payments.BatchCounts) []countRow {
	return []countRow{
		{"Not started", "ACCEPTED", b.NotStarted}, {"Pending", "PENDING", b.Pending}, {"Running", "PROCESSING", b.Running},
		{"Waiting for a response", "WAITING", b.Waiting}, {"Waiting to retry", "RETRYING", b.Retrying},
		{"In the troubleshooting queue", "IN_TSQ", b.InTSQ}, {"Compensating", "COMPENSATING", b.Compensating},
		{"Completed", "COMPLETED", b.Completed}, {"Compensated", "COMPENSATED", b.Compensated},
		{"Failed", "FAILED", b.Failed}, {"Cancelled", "CANCELLED", b.Cancelled},
	}
}

// batchPage is a batch's progress and its payments, newest first (filtered by a process status:
// newest process first), a page at a time: ?status filters them, ?limit=N payments (1 to 1000,
// default 100), ?before=MARKER the payments after the last one of the previous page. A page
// whose size or marker cannot be read has Page.Problem set and no payments listed.
func (c *Extension) batchPage(w http.ResponseWriter, r *http.Request) (*server.Page, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a batch id", commandbus.ErrNotFound, r.PathValue("id"))
	}
	ctx := r.Context()
	b, err := c.platform.GetBatch(ctx, id)
	if err != nil {
		return nil, err
	}
	sum, err := c.platform.Summary(ctx, id)
	if err != nil {
		return nil, err
	}
	waiting, err := c.batchOperatorWait(ctx, b, &operatorLookups{})
	if err != nil {
		return nil, err
	}
	if waiting != nil {
		b.Status = batchWaitingForOperators
	}
	status := strings.TrimSpace(r.URL.Query().Get("status"))
	keep := url.Values{}
	if status != "" {
		keep.Set("status", status)
	}
	page := readPaging(r, "/batches/"+id.String(), "before", server.DefaultListLimit, server.MaxListLimit, keep)
	filter := payments.PaymentFilter{BatchID: id, Status: status, Limit: page.Size + 1}
	if page.Marker != "" {
		var ok bool
		if filter.After, ok = parsePaymentKey(page.Marker); !ok {
			page.fail(badMarker)
		}
	}
	var items []*payments.PaymentView
	if page.Problem == "" {
		items, err = c.platform.ListPayments(ctx, filter)
		var invalid *commandbus.ValidationError
		switch {
		case errors.As(err, &invalid) && invalid.Field == "cursor":
			// A marker of the unfiltered list names no process to resume a status's list after.
			page.fail(badMarker)
		case err != nil:
			return nil, err
		default:
			items = cut(page, items, paymentKey)
		}
	}
	p := c.newPage(w, r, "Batch "+shortID(id), "batches")
	p.Data = batchData{Batch: b, Waiting: waiting, Summary: sum, Counts: batchCountRows(b.Counts), Terminal: b.Counts.Terminal(), Items: items,
		Status: status, Statuses: paymentStatuses, Page: page}
	p.LiveURL = "/live/batches/" + id.String() + "?" + page.query().Encode()
	return p, nil
}

func (c *Extension) batch(w http.ResponseWriter, r *http.Request) {
	p, err := c.batchPage(w, r)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	c.render(w, r, p.Data.(batchData).Page.status(), "batch.html", p)
}

func (c *Extension) batchLive(w http.ResponseWriter, r *http.Request) {
	p, err := c.batchPage(w, r)
	if err != nil {
		writeProblem(w, http.StatusNotFound, "NOT_FOUND", "The batch could not be read.", err.Error())
		return
	}
	if page := p.Data.(batchData).Page; page.Problem != "" {
		writeProblem(w, http.StatusBadRequest, "BAD_REQUEST", "The page cannot be read.", page.Problem)
		return
	}
	c.renderRegions(w, r, "batch.html", p, "batch-progress", "batch-items")
}

// behaviorColumn is one column of the behaviour table: a StepBehavior field by its JSON name.
type behaviorColumn struct {
	Key     string
	Label   string
	Percent bool
}

var behaviorColumns = []behaviorColumn{
	{"failPermanentPct", "Permanent failure %", true},
	{"failTransientPct", "Transient failure %", true},
	{"failBusinessRulePct", "Business failure %", true},
	{"timeoutPct", "Timeout %", true},
	{"pendingPct", "Pending for an operator %", true},
	{"minDurationMs", "Delay from (ms)", false},
	{"maxDurationMs", "Delay to (ms)", false},
}

var behaviorStepLabels = map[string]string{
	payments.StepCheckBalance: "Check balance (process manager)", payments.StepCheckDailyLimit: "Check daily limit (process manager)",
	payments.StepBookRisk: "Book risk (step process)", payments.StepBookFx: "Book FX", payments.StepSubmitPayment: "Submit payment",
	payments.StepAwaitRiskApproval: "Risk approval (step process)", payments.StepAwaitL1: "Network L1 (step process)",
	payments.StepAwaitL2: "Network L2 (step process)", payments.StepAwaitL3: "Network L3 (step process)",
	payments.StepAwaitL4: "Network L4 (step process)",
}

type behaviorRow struct {
	Step   string
	Label  string
	Values map[string]string
}

type option struct {
	Value string
	Label string
}

// batchForm is the "New batch" form, its confirmation and its errors.
type batchForm struct {
	ProcessType  string
	Count        string
	Day          string
	Preset       string
	Rows         []behaviorRow
	Columns      []behaviorColumn
	ProcessTypes []option
	Presets      []option
	Errors       map[string]string
	Summary      []fieldError
	FormError    string
	// The confirmation step.
	Reason   string
	Hidden   []server.Fact
	Behavior *payments.Behavior
	Custom   []behaviorRow
}

func (f *batchForm) addError(field, message string) {
	if _, dup := f.Errors[field]; !dup {
		f.Errors[field] = message
		f.Summary = append(f.Summary, fieldError{Field: field, Message: message})
	}
}

var batchProcessTypes = []option{
	{payments.TypePaymentStep, "Payment (step process): risk, approval, FX, submission, network L1–L4"},
	{payments.TypePaymentManager, "Payment (process manager): balance, daily limit, FX, submission"},
	{payments.TypePaymentSaga, "Payment (saga): balance, daily limit, FX, submission as a saga with compensations"},
}

var batchPresets = []option{
	{payments.PresetHappy, "Happy: everything succeeds at once"},
	{payments.PresetRealistic, "Realistic: rare failures, some items pending for operators"},
	{payments.PresetChaos, "Chaos: frequent failures of every kind"},
	{"custom", "Custom: the table below"},
}

func (c *Extension) blankBatchForm() *batchForm {
	f := &batchForm{ProcessType: payments.TypePaymentStep, Count: "100", Day: c.client.Now().UTC().Format(time.DateOnly),
		Preset: payments.PresetHappy, Columns: behaviorColumns, ProcessTypes: batchProcessTypes, Presets: batchPresets,
		Errors: map[string]string{}}
	for _, step := range payments.BehaviorSteps {
		f.Rows = append(f.Rows, behaviorRow{Step: step, Label: behaviorStepLabels[step], Values: map[string]string{}})
	}
	return f
}

func (c *Extension) renderBatchForm(w http.ResponseWriter, r *http.Request, status int, f *batchForm) {
	p := c.newPage(w, r, "New batch", "batches")
	p.Data = f
	c.render(w, r, status, "batch_new.html", p)
}

func (c *Extension) newBatchForm(w http.ResponseWriter, r *http.Request) {
	c.renderBatchForm(w, r, http.StatusOK, c.blankBatchForm())
}

// readBatchForm fills the form from a POST and parses it, noting every problem.
func (c *Extension) readBatchForm(form url.Values) (*batchForm, int, string, *payments.Behavior) {
	f := c.blankBatchForm()
	f.ProcessType, f.Count, f.Day, f.Preset = form.Get("processType"), strings.TrimSpace(form.Get("count")),
		strings.TrimSpace(form.Get("day")), form.Get("preset")
	for _, row := range f.Rows {
		for _, col := range behaviorColumns {
			row.Values[col.Key] = strings.TrimSpace(form.Get(row.Step + "." + col.Key))
		}
	}
	count, err := strconv.Atoi(f.Count)
	if err != nil || count < 1 || count > maxConsoleBatch {
		f.addError("count", fmt.Sprintf("Enter a whole number from 1 to %s.", server.FormatNumber(maxConsoleBatch)))
	}
	if _, err := time.Parse(time.DateOnly, f.Day); err != nil {
		f.addError("day", "Enter a date as YYYY-MM-DD.")
	}
	if !payments.IsPaymentProcess(f.ProcessType) {
		f.addError("processType", "Choose how the payments run.")
	}
	var behavior *payments.Behavior
	switch f.Preset {
	case payments.PresetHappy, payments.PresetRealistic, payments.PresetChaos:
		behavior, _ = payments.Preset(f.Preset)
	case "custom":
		behavior = &payments.Behavior{Name: "custom", Steps: map[string]payments.StepBehavior{}}
		for _, row := range f.Rows {
			fields := map[string]any{}
			for _, col := range behaviorColumns {
				raw := row.Values[col.Key]
				if raw == "" {
					continue
				}
				name := row.Step + "." + col.Key
				if col.Percent {
					v, err := strconv.ParseFloat(raw, 64)
					if err != nil || v < 0 || v > 100 {
						f.addError(name, "Enter a percentage from 0 to 100.")
						continue
					}
					fields[col.Key] = v
				} else {
					v, err := strconv.Atoi(raw)
					if err != nil || v < 0 {
						f.addError(name, "Enter whole milliseconds, 0 or more.")
						continue
					}
					fields[col.Key] = v
				}
			}
			if len(fields) == 0 {
				continue
			}
			var sb payments.StepBehavior
			encoded, _ := json.Marshal(fields)
			_ = json.Unmarshal(encoded, &sb)
			behavior.Steps[row.Step] = sb
		}
		for _, e := range flatten(behavior.Validate()) {
			if v, ok := e.(*commandbus.ValidationError); ok {
				f.addError(strings.TrimPrefix(v.Field, "behavior.steps."), v.Message)
			}
		}
	default:
		f.addError("preset", "Choose a behaviour.")
	}
	return f, count, f.Day, behavior
}

// fillFromPreset writes a preset's steps into the table, so it can be edited as a custom one.
func (f *batchForm) fillFromPreset(b *payments.Behavior) {
	for _, row := range f.Rows {
		sb := b.Step(row.Step)
		encoded, _ := json.Marshal(sb)
		var values map[string]any
		_ = json.Unmarshal(encoded, &values)
		for _, col := range behaviorColumns {
			row.Values[col.Key] = ""
			if v, ok := values[col.Key]; ok {
				row.Values[col.Key] = fmt.Sprint(v)
			}
		}
	}
}

// createBatch is the New batch form's POST: "Load preset into the table" fills the table,
// a valid form goes to the confirmation step, and the confirmation creates the batch.
func (c *Extension) createBatch(w http.ResponseWriter, r *http.Request) {
	form := r.PostForm
	f, count, day, behavior := c.readBatchForm(form)
	if form.Has("load") {
		f.Errors, f.Summary = map[string]string{}, nil
		preset := form.Get("preset")
		if preset == "custom" || preset == "" {
			preset = payments.PresetRealistic
		}
		b, err := payments.Preset(preset)
		if err == nil {
			f.fillFromPreset(b)
			f.Preset = "custom"
		}
		c.renderBatchForm(w, r, http.StatusOK, f)
		return
	}
	if len(f.Errors) > 0 || form.Has("edit") {
		status := http.StatusUnprocessableEntity
		if len(f.Errors) == 0 {
			status = http.StatusOK
		}
		c.renderBatchForm(w, r, status, f)
		return
	}
	f.Behavior = behavior
	if f.Preset != "custom" {
		f.fillFromPreset(behavior) // for the confirmation's table; the hidden fields carry the form
	}
	for _, row := range f.Rows {
		if _, ok := behavior.Steps[row.Step]; ok {
			f.Custom = append(f.Custom, row)
		}
	}
	for key, values := range form {
		switch key {
		case "csrf", "reason", "confirmed", "edit", "load":
			continue
		}
		for _, v := range values {
			if v != "" {
				f.Hidden = append(f.Hidden, server.Fact{Label: key, Value: v})
			}
		}
	}
	if form.Get("confirmed") != "1" {
		c.renderBatchConfirm(w, r, http.StatusOK, f)
		return
	}
	f.Reason = strings.TrimSpace(form.Get("reason"))
	if f.Reason == "" {
		f.addError("reason", "Say why you create this batch: it is recorded in the audit log.")
	} else if msg := server.ReasonProblem(f.Reason); msg != "" {
		f.addError("reason", msg)
	}
	if f.Reason == "" || server.ReasonProblem(f.Reason) != "" {
		c.renderBatchConfirm(w, r, http.StatusUnprocessableEntity, f)
		return
	}
	batch, err := c.platform.CreateBatch(r.Context(), count, day, f.ProcessType, behavior)
	if err != nil {
		fields := 0
		for _, e := range flatten(err) {
			if v, ok := e.(*commandbus.ValidationError); ok {
				fields++
				f.addError(strings.TrimPrefix(v.Field, "behavior.steps."), v.Message)
			}
		}
		if fields == 0 {
			c.m.Logger().Error("console: creating a batch failed", "actor", server.Subject(r), "error", err)
			f.FormError = "The batch could not be created: " + err.Error()
			c.renderBatchForm(w, r, http.StatusInternalServerError, f)
			return
		}
		c.renderBatchForm(w, r, http.StatusUnprocessableEntity, f)
		return
	}
	c.auditBatch(r.Context(), batch, behavior, server.Subject(r), f.Reason)
	c.redirectWith(w, r, "/batches/"+batch.ID.String(), "success",
		fmt.Sprintf("Batch %s created: %s payments for %s run as %s.", shortID(batch.ID), server.FormatNumber(batch.Total), batch.ScheduledFor, batch.ProcessType))
}

func (c *Extension) renderBatchConfirm(w http.ResponseWriter, r *http.Request, status int, f *batchForm) {
	p := c.newPage(w, r, "Create this batch?", "batches")
	p.Data = f
	c.render(w, r, status, "batch_confirm.html", p)
}

// auditBatch records who created a batch and why.
func (c *Extension) auditBatch(ctx context.Context, b *payments.BatchView, behavior *payments.Behavior, actor, reason string) {
	details, _ := json.Marshal(map[string]any{"total": b.Total, "day": b.ScheduledFor, "processType": b.ProcessType, "behavior": behavior})
	if err := c.client.Driver().Executor().AuditLogInsert(ctx, &driver.AuditLogInsertParams{EntityType: "batch", EntityID: b.ID.String(),
		Action: "BATCH_CREATED", Actor: actor, Reason: reason, Details: details, Now: plumbing.DriverNow(c.client)}); err != nil {
		c.m.Logger().Error("console: writing the audit log failed", "batch", b.ID, "error", err)
	}
}
