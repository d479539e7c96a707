package paymentsweb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/server"
)

// paymentStatuses are the statuses the payments list filters on.
var paymentStatuses = []string{"SCHEDULED", "ACCEPTED", "PENDING", "PROCESSING", "WAITING", "RETRYING", "IN_TSQ",
	"COMPENSATING", "COMPLETED", "COMPENSATED", "CANCELLED", "FAILED"}

type paymentFilterForm struct {
	Status      string
	ProcessType string
	Batch       string
	Limit       int
}

type paymentsData struct {
	Filter       paymentFilterForm
	Errors       map[string]string
	Items        []*payments.PaymentView
	Statuses     []string
	ProcessTypes []string
	Limits       []int
	Page         *paging
}

// paymentPageSizes are the page sizes the payments filter offers.
var paymentPageSizes = []int{50, 100, 200, 500}

// payments lists the payments, newest first (filtered by a process status: newest process
// first), a page at a time: ?limit=N payments (1 to 1000, default 50), ?before=MARKER the
// payments after the last one of the previous page.
func (c *Extension) payments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	keep := url.Values{}
	for _, name := range []string{"status", "processType", "batch"} {
		if v := strings.TrimSpace(q.Get(name)); v != "" {
			keep.Set(name, v)
		}
	}
	page := readPaging(r, "/payments", "before", defaultPaymentListLimit, server.MaxListLimit, keep)
	d := paymentsData{Filter: paymentFilterForm{Status: q.Get("status"), ProcessType: q.Get("processType"),
		Batch: strings.TrimSpace(q.Get("batch")), Limit: page.Size},
		Errors: map[string]string{}, Statuses: paymentStatuses, ProcessTypes: payments.ProcessTypes, Limits: paymentPageSizes, Page: page}
	if !slices.Contains(d.Limits, page.Size) {
		d.Limits = slices.Sorted(slices.Values(append(slices.Clone(d.Limits), page.Size)))
	}
	filter := payments.PaymentFilter{Status: d.Filter.Status, ProcessType: d.Filter.ProcessType, Limit: page.Size + 1}
	if d.Filter.Batch != "" {
		id, err := uuid.Parse(d.Filter.Batch)
		if err != nil {
			d.Errors["batch"] = "Enter a batch id (a UUID), or leave it empty."
		}
		filter.BatchID = id
	}
	if page.Marker != "" {
		var ok bool
		if filter.After, ok = parsePaymentKey(page.Marker); !ok {
			page.fail(badMarker)
		}
	}
	status := page.status()
	switch {
	case len(d.Errors) > 0:
		status = http.StatusUnprocessableEntity
	case page.Problem == "":
		items, err := c.platform.ListPayments(r.Context(), filter)
		var invalid *commandbus.ValidationError
		if errors.As(err, &invalid) && invalid.Field == "cursor" {
			// A marker of the unfiltered list names no process to resume a status's list after.
			page.fail(badMarker)
			status = page.status()
			break
		}
		if err != nil {
			c.failed(w, r, err)
			return
		}
		d.Items = cut(page, items, paymentKey)
	}
	p := c.newPage(w, r, "Payments", "payments")
	p.Data = d
	c.render(w, r, status, "payments.html", p)
}

type paymentData struct {
	Payment  *payments.PaymentView
	Process  *server.ProcessView
	Approval *payments.Approval
	Pending  []*payments.PendingNetworkResponse
	Audit    []*commandbus.AuditLogEntry
	Levels   []levelRow
	Return   string
}

var paymentRegions = []string{"payment-status", "payment-timeline"}

// levelRow is one network confirmation level of a step-process payment as an operator reads it:
// a level the payment has not reached says so, and only the level it waits at says WAITING.
type levelRow struct {
	Level           int
	Status          string
	Reference       string
	Error           string
	TransientErrors int
}

// levelRows tells each confirmation level's state: received (or failed) when the network
// answered; waiting, held for an operator, stopped or not received at the level the payment is
// at; not reached beyond it.
func levelRows(v *payments.PaymentView, pending []*payments.PendingNetworkResponse) []levelRow {
	held := map[int]bool{}
	for _, n := range pending {
		held[n.Level] = true
	}
	current := 0
	for n := 1; n <= 4; n++ {
		if name := fmt.Sprintf("awaitL%d", n); v.CurrentWait == name || v.Step == name {
			current = n
		}
	}
	out := make([]levelRow, 0, len(v.Network))
	for _, l := range v.Network {
		row := levelRow{Level: l.Level, Reference: l.Reference, TransientErrors: l.TransientErrors}
		if l.ErrorCode != "" || l.ErrorMessage != "" {
			row.Error = l.ErrorCode + ": " + l.ErrorMessage
		}
		switch {
		case l.Received && l.ErrorCode != "":
			row.Status = "FAILED"
		case l.Received:
			row.Status = "RECEIVED"
		case l.Level != current:
			row.Status = "NOT REACHED"
		case terminal(v.Status):
			row.Status = "NOT RECEIVED"
		case held[l.Level]:
			row.Status = "WAITING FOR OPERATOR"
		case v.Status == "IN_TSQ":
			row.Status = "STOPPED"
		default:
			row.Status = "WAITING"
		}
		out = append(out, row)
	}
	return out
}

func (c *Extension) paymentPage(w http.ResponseWriter, r *http.Request, full bool) (*server.Page, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a payment id", commandbus.ErrNotFound, r.PathValue("id"))
	}
	ctx := r.Context()
	v, err := c.platform.GetPayment(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &paymentData{Payment: v, Return: "/payments/" + id.String()}
	if v.ExecutionID != uuid.Nil {
		d.Process, err = c.loadProcess(ctx, v.ExecutionID, d.Return, full)
		if err != nil && !server.IsNotFound(err) {
			return nil, err
		}
		if d.Process != nil {
			d.Audit = d.Process.Audit
		}
	}
	if v.Risk != nil && v.Risk.ApprovalID != "" {
		if aid, err := uuid.Parse(v.Risk.ApprovalID); err == nil {
			if d.Approval, err = c.platform.GetApproval(ctx, aid); err != nil && !server.IsNotFound(err) {
				return nil, err
			}
			if full {
				entries, err := c.client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "approval", EntityID: aid.String(), Limit: 50})
				if err != nil {
					return nil, err
				}
				d.Audit = append(d.Audit, entries...)
			}
		}
	}
	if d.Pending, err = c.pendingFor(ctx, id); err != nil {
		return nil, err
	}
	d.Levels = levelRows(v, d.Pending)
	if full {
		// Answers to the network are audited by the pending response's id; their details name
		// the payment. Recent ones are enough for the page.
		answers, err := c.client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "network-response", Limit: 500})
		if err != nil {
			return nil, err
		}
		for _, e := range answers {
			var details struct {
				PaymentID uuid.UUID `json:"paymentId"`
			}
			if json.Unmarshal(e.Details, &details) == nil && details.PaymentID == id {
				d.Audit = append(d.Audit, e)
			}
		}
		sortAudit(d.Audit)
	}
	p := c.newPage(w, r, "Payment "+shortID(id), "payments")
	p.Data, p.LiveURL = d, "/live/payments/"+id.String()
	return p, nil
}

// pendingFor lists the network confirmations waiting for an operator on one payment, reading
// every page of the pending list.
func (c *Extension) pendingFor(ctx context.Context, paymentID uuid.UUID) ([]*payments.PendingNetworkResponse, error) {
	var out []*payments.PendingNetworkResponse
	params := payments.ListParams{Limit: server.MaxListLimit}
	for {
		page, err := c.platform.ListPendingNetworkResponses(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, n := range page {
			if n.PaymentID == paymentID {
				out = append(out, n)
			}
		}
		if len(page) < params.Limit {
			return out, nil
		}
		last := page[len(page)-1]
		params.After = &payments.PageCursor{At: last.CreatedAt, ID: last.ID}
	}
}

func (c *Extension) payment(w http.ResponseWriter, r *http.Request) {
	p, err := c.paymentPage(w, r, true)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "payment.html", p)
}

func (c *Extension) paymentLive(w http.ResponseWriter, r *http.Request) {
	p, err := c.paymentPage(w, r, false)
	if err != nil {
		writeProblem(w, http.StatusNotFound, "NOT_FOUND", "The payment could not be read.", err.Error())
		return
	}
	c.renderRegions(w, r, "payment.html", p, paymentRegions...)
}

type approvalRow struct {
	*payments.Approval
	Payment *payments.PaymentView
}

type approvalsData struct {
	Items []*approvalRow
	Page  *paging
}

// approvals lists the pending approvals, oldest first, a page at a time: ?limit=N approvals (1
// to 1000, default 100), ?after=MARKER the approvals after the last one of the previous page.
func (c *Extension) approvals(w http.ResponseWriter, r *http.Request) {
	page := readPaging(r, "/approvals", "after", server.DefaultListLimit, server.MaxListLimit, nil)
	filter := payments.ApprovalFilter{Status: payments.ApprovalPending, Limit: page.Size + 1}
	filter.After = page.timeCursor()
	d := approvalsData{Page: page}
	if page.Problem == "" {
		list, err := c.platform.ListApprovals(r.Context(), filter)
		if err != nil {
			c.failed(w, r, err)
			return
		}
		list = cut(page, list, func(a *payments.Approval) string { return timeKey(a.RequestedAt, a.ID) })
		ids := make([]uuid.UUID, 0, len(list))
		for _, a := range list {
			ids = append(ids, a.PaymentID)
		}
		facts, err := c.paymentFacts(r.Context(), ids)
		if err != nil {
			c.failed(w, r, err)
			return
		}
		d.Items = make([]*approvalRow, 0, len(list))
		for _, a := range list {
			d.Items = append(d.Items, &approvalRow{Approval: a, Payment: facts[a.PaymentID]})
		}
	}
	p := c.newPage(w, r, "Risk approvals", "approvals")
	p.Data = d
	c.render(w, r, page.status(), "approvals.html", p)
}

func (c *Extension) approvalAction(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.errorPage(w, r, http.StatusNotFound, "Not found", "That is not an approval id.")
		return
	}
	a, err := c.platform.GetApproval(r.Context(), id)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	short := shortID(id)
	spec := &server.ActionPage{Nav: "approvals", Return: c.m.ReturnTo(r, "/approvals"), Facts: []server.Fact{
		{Label: "Payment", Value: a.PaymentID.String(), Href: "/payments/" + a.PaymentID.String()},
		{Label: "Amount", Value: server.FormatMoney(a.Amount.Decimal(), a.Currency)},
		{Label: "Risk reference", Value: a.RiskReference},
		{Label: "Requested", Value: server.FormatTime(a.RequestedAt)},
		{Label: "Status", Value: a.Status},
	}}
	switch r.PathValue("decision") {
	case "approve":
		spec.Title, spec.Submit = "Approve payment "+shortID(a.PaymentID), "Approve"
		spec.Description = "The payment passes its risk check and continues: FX if needed, submission, then the network's confirmations."
		spec.Done = "Approval " + short + " approved; the payment continues."
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			return c.platform.Approve(ctx, id, op.Actor, op.Reason)
		}
	case "reject":
		spec.Title, spec.Submit, spec.Danger = "Reject payment "+shortID(a.PaymentID), "Reject", true
		spec.Description = "The payment fails its risk check: it compensates (its risk booking is unwound) and ends COMPENSATED."
		spec.Done = "Approval " + short + " rejected; the payment compensates."
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			return c.platform.Reject(ctx, id, op.Actor, op.Reason)
		}
	default:
		c.errorPage(w, r, http.StatusNotFound, "Not found", "An approval can be approved or rejected.")
		return
	}
	if a.Status != payments.ApprovalPending {
		spec.Unavailable = fmt.Sprintf("This approval is %s already, so there is nothing to decide.", a.Status)
		if a.Actor != "" {
			spec.Unavailable = fmt.Sprintf("This approval was %s by %s already, so there is nothing to decide.", strings.ToLower(a.Status), a.Actor)
		}
	}
	c.act(w, r, spec)
}

type networkRow struct {
	*payments.PendingNetworkResponse
	Payment *payments.PaymentView
}

type networkData struct {
	Items []*networkRow
	Page  *paging
}

// network lists the network confirmations pending for an operator, oldest first, a page at a
// time: ?limit=N (1 to 1000, default 100), ?after=MARKER the confirmations after the last one of
// the previous page.
func (c *Extension) network(w http.ResponseWriter, r *http.Request) {
	page := readPaging(r, "/network", "after", server.DefaultListLimit, server.MaxListLimit, nil)
	params := payments.ListParams{Limit: page.Size + 1}
	params.After = page.timeCursor()
	d := networkData{Page: page}
	if page.Problem == "" {
		list, err := c.platform.ListPendingNetworkResponses(r.Context(), params)
		if err != nil {
			c.failed(w, r, err)
			return
		}
		list = cut(page, list, func(n *payments.PendingNetworkResponse) string { return timeKey(n.CreatedAt, n.ID) })
		ids := make([]uuid.UUID, 0, len(list))
		for _, n := range list {
			ids = append(ids, n.PaymentID)
		}
		facts, err := c.paymentFacts(r.Context(), ids)
		if err != nil {
			c.failed(w, r, err)
			return
		}
		d.Items = make([]*networkRow, 0, len(list))
		for _, n := range list {
			d.Items = append(d.Items, &networkRow{PendingNetworkResponse: n, Payment: facts[n.PaymentID]})
		}
	}
	p := c.newPage(w, r, "Pending network responses", "network")
	p.Data = d
	c.render(w, r, page.status(), "network.html", p)
}

func (c *Extension) networkAction(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.errorPage(w, r, http.StatusNotFound, "Not found", "That is not a pending response id.")
		return
	}
	n, err := c.platform.GetPendingNetworkResponse(r.Context(), id)
	switch {
	case server.IsNotFound(err):
		n = nil
	case err != nil:
		c.failed(w, r, err)
		return
	case n.Status != payments.NetworkPending:
		n = nil
	}
	spec := &server.ActionPage{Nav: "network", Return: c.m.ReturnTo(r, "/network")}
	if n != nil {
		spec.Facts = []server.Fact{
			{Label: "Payment", Value: n.PaymentID.String(), Href: "/payments/" + n.PaymentID.String()},
			{Label: "Confirmation level", Value: fmt.Sprintf("L%d", n.Level)},
			{Label: "Waiting since", Value: server.FormatTime(n.CreatedAt)},
		}
	} else {
		spec.Unavailable = "This response is not pending any more: it was answered already."
	}
	answer := ""
	switch r.PathValue("answer") {
	case "accept":
		answer = payments.AnswerAccept
		spec.Title, spec.Submit = "Answer success", "Answer success"
		spec.Description = "The network confirms this level for the payment, which goes on to the next level."
		spec.Done = "Answered success; the payment continues."
	case "reject":
		answer = payments.AnswerReject
		spec.Title, spec.Submit, spec.Danger = "Answer failure", "Answer failure", true
		spec.Description = "The network rejects the payment at this level: it compensates (the submission is recalled, FX " +
			"cancelled, risk unwound) and ends COMPENSATED."
		spec.Done = "Answered failure; the payment compensates."
	default:
		c.errorPage(w, r, http.StatusNotFound, "Not found", "A pending response is answered with success (accept) or failure (reject).")
		return
	}
	if n != nil {
		spec.Title += fmt.Sprintf(" to L%d of payment %s", n.Level, shortID(n.PaymentID))
	}
	spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
		return c.platform.RespondNetwork(ctx, id, answer, op.Actor, op.Reason)
	}
	c.act(w, r, spec)
}
