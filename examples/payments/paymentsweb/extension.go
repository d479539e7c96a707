// Package paymentsweb is the reference payments platform's face in the commandbus server: its
// REST routes (payments, batches, approvals, network responses) with their OpenAPI operations,
// its console pages, and the payment context the console shows beside executions and queue
// items. Mount it with server.Config{Extensions: []server.Extension{paymentsweb.New(platform)}}.
package paymentsweb

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/input"
	"github.com/commandbus/commandbus/server"
)

//go:embed templates/*.html
var templates embed.FS

// Extension serves the payments platform in the server; see New.
type Extension struct {
	server.ExtensionBase
	platform *payments.Platform
	m        *server.Mount
	client   *commandbus.Client
}

// New returns the extension serving platform.
func New(platform *payments.Platform) *Extension { return &Extension{platform: platform} }

var _ server.Extension = (*Extension)(nil)

// Mount registers the payment routes, pages and navigation.
func (c *Extension) Mount(m *server.Mount) error {
	if c.platform == nil {
		return errors.New("paymentsweb: the platform is nil")
	}
	if c.m != nil {
		return errors.New("paymentsweb: the extension is mounted in a server already; make one per server")
	}
	c.m, c.client = m, m.Client()
	if err := m.Templates(templates, "templates/*.html"); err != nil {
		return err
	}
	api := func(pattern string, h http.HandlerFunc) { m.HandleAPI(pattern, server.RoleViewer, h) }
	apiOperator := func(pattern string, h http.HandlerFunc) { m.HandleAPI(pattern, server.RoleOperator, h) }
	apiOperator("POST /api/payments", c.submitPayment)
	api("GET /api/payments", c.listPayments)
	api("GET /api/payments/{id}", c.getPayment)
	api("GET /api/payments/{processId}/status", c.getPaymentStatus)
	apiOperator("POST /api/batches", c.createBatchAPI)
	api("GET /api/batches", c.listBatches)
	api("GET /api/batches/{id}", c.getBatch)
	api("GET /api/approvals", c.listApprovals)
	apiOperator("POST /api/approvals/{id}/{decision}", c.decideApproval)
	api("GET /api/network/pending", c.listPendingNetwork)
	apiOperator("POST /api/network/pending/{id}/respond", c.respondNetwork)
	m.Document(operations(), schemas())

	page := func(pattern string, h http.HandlerFunc) { m.HandlePage(pattern, server.RoleViewer, h) }
	operator := func(pattern string, h http.HandlerFunc) { m.HandlePage(pattern, server.RoleOperator, h) }
	page("GET /batches", c.batches)
	m.HandleLive("GET /live/batches", c.batchesLive)
	operator("GET /batches/new", c.newBatchForm)
	operator("POST /batches/new", c.createBatch)
	page("GET /batches/{id}", c.batch)
	m.HandleLive("GET /live/batches/{id}", c.batchLive)
	page("GET /payments", c.payments)
	page("GET /payments/{id}", c.payment)
	m.HandleLive("GET /live/payments/{id}", c.paymentLive)
	page("GET /approvals", c.approvals)
	operator("GET /approvals/{id}/{decision}", c.approvalAction)
	operator("POST /approvals/{id}/{decision}", c.approvalAction)
	page("GET /network", c.network)
	operator("GET /network/{id}/{answer}", c.networkAction)
	operator("POST /network/{id}/{answer}", c.networkAction)

	m.Nav(server.NavEntry{Key: "batches", Label: "Batches", Href: "/batches"},
		server.NavEntry{Key: "payments", Label: "Payments", Href: "/payments"},
		server.NavEntry{Key: "approvals", Label: "Approvals", Href: "/approvals", AfterQueues: true},
		server.NavEntry{Key: "network", Label: "Network responses", Href: "/network", AfterQueues: true})
	m.ContextLabel("Payment")
	m.SearchHint(server.SearchHint{Label: "Payment id, idempotency key, account, execution, command or batch id",
		Placeholder: "Payment, key, account or id",
		Help: "The search matches whole values exactly: a payment id, a payment's idempotency key, an account (such as CUST-GBP-001), " +
			"or the id of an execution, a command or a batch. Copy the value from where you found it and try again.",
		Prompt: "Type an id, a key or an account in the search box and press Search."})
	return nil
}

// isPaymentType says whether an execution type runs a payment.
func isPaymentType(typ string) bool {
	return payments.IsPaymentProcess(typ)
}

// paymentIDOf is the payment an execution runs (its business key), or uuid.Nil.
func paymentIDOf(row *driver.ExecutionRow) uuid.UUID {
	if row == nil || !isPaymentType(row.Type) {
		return uuid.Nil
	}
	id, err := uuid.Parse(row.BusinessKey)
	if err != nil {
		return uuid.Nil
	}
	return id
}

// ExecutionPage is a payment's page for the executions that run payments.
func (c *Extension) ExecutionPage(row *driver.ExecutionRow) string {
	if id := paymentIDOf(row); id != uuid.Nil {
		return "/payments/" + id.String()
	}
	return ""
}

// ExecutionContexts describes the payments the executions run: amount, parties, reference and
// batch.
func (c *Extension) ExecutionContexts(ctx context.Context, rows []*driver.ExecutionRow) (map[uuid.UUID]*server.ItemContext, error) {
	var ids []uuid.UUID
	for _, r := range rows {
		if id := paymentIDOf(r); id != uuid.Nil {
			ids = append(ids, id)
		}
	}
	facts, err := c.paymentFacts(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := map[uuid.UUID]*server.ItemContext{}
	for _, r := range rows {
		if v := facts[paymentIDOf(r)]; v != nil {
			x, err := c.itemContext(v)
			if err != nil {
				return nil, err
			}
			out[r.ID] = x
		}
	}
	return out, nil
}

// itemContext is how the console shows a payment beside a queue item.
func (c *Extension) itemContext(v *payments.PaymentView) (*server.ItemContext, error) {
	summary, err := c.m.Fragment("payment-context", v)
	if err != nil {
		return nil, err
	}
	href := "/payments/" + v.ID.String()
	return &server.ItemContext{Noun: "payment", Href: href, Summary: summary,
		Brief: "payment " + server.ShortID(v.ID) + ", " + server.FormatMoney(v.Amount.Decimal(), v.Currency),
		Fact: server.Fact{Label: "Payment", Value: fmt.Sprintf("%s: %s from %s to %s", server.ShortID(v.ID), server.FormatMoney(v.Amount.Decimal(), v.Currency),
			v.DebitAccount, v.CreditAccount), Href: href}}, nil
}

// paymentFacts reads the facts of payments by id.
func (c *Extension) paymentFacts(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*payments.PaymentView, error) {
	if len(ids) == 0 {
		return map[uuid.UUID]*payments.PaymentView{}, nil
	}
	return c.platform.PaymentFacts(ctx, ids)
}

// CompletionRule completes a payment only on the evidence that it was made.
func (c *Extension) CompletionRule(processType string) *server.CompletionRule {
	if !isPaymentType(processType) {
		return nil
	}
	return &server.CompletionRule{Required: true,
		Hint:  `A JSON object of top-level state fields to set. A payment needs the evidence that it was made, such as {"evidence": "SWIFT gpi tracker shows ACSC"}.`,
		Check: func(overrides map[string]any) error { return payments.CheckCompletion(processType, overrides) }}
}

// Overview adds the pending approvals and network responses and the latest batches.
func (c *Extension) Overview(ctx context.Context) (*server.Overview, error) {
	batches, err := c.platform.ListBatches(ctx, payments.ListParams{Limit: 5})
	if err != nil {
		return nil, err
	}
	if err := c.markOperatorWaits(ctx, batches); err != nil {
		return nil, err
	}
	// The cards count up to overviewCount rows; one more read says there are more.
	approvals, err := c.platform.ListApprovals(ctx, payments.ApprovalFilter{Status: payments.ApprovalPending, Limit: overviewCount + 1})
	if err != nil {
		return nil, err
	}
	pending, err := c.platform.ListPendingNetworkResponses(ctx, payments.ListParams{Limit: overviewCount + 1})
	if err != nil {
		return nil, err
	}
	approvalCount, approvalUnit := countCard(len(approvals), "pending")
	pendingCount, pendingUnit := countCard(len(pending), "pending")
	return &server.Overview{
		Cards: []server.Card{
			{ID: "count-approvals", Label: "Risk approvals", Value: approvalCount, Unit: approvalUnit, Href: "/approvals"},
			{ID: "count-network", Label: "Network responses", Value: pendingCount, Unit: pendingUnit, Href: "/network"},
		},
		Panels: []server.Panel{{ID: "batches", Title: "Batch progress", Template: "ov-batches", Data: batches,
			LinkHref: "/batches", LinkText: "All batches"}},
	}, nil
}

// overviewCount is the most rows an overview card counts.
const overviewCount = 1000

// countCard is a card's value and unit for n rows read with a limit of overviewCount+1: beyond
// overviewCount, the card says "or more" instead of passing a cap off as the count.
func countCard(n int, unit string) (int64, string) {
	if n > overviewCount {
		return overviewCount, "or more " + unit
	}
	return int64(n), unit
}

// maxAccountPayments bounds the payments listed for an account.
const maxAccountPayments = 100

// accountSection is an account found by a search, with its payments.
type accountSection struct {
	Account  *payments.Account
	Payments []*payments.PaymentView
}

// Search finds payments by id, idempotency key or execution id, an account with its payments,
// and batches by id.
func (c *Extension) Search(ctx context.Context, q string) (*server.SearchResult, error) {
	res := &server.SearchResult{}
	seen := map[string]bool{}
	add := func(h server.SearchHit) {
		if !seen[h.Href] {
			seen[h.Href] = true
			res.Hits = append(res.Hits, h)
		}
	}
	id, isID := uuid.Parse(q)
	terms := []string{q}
	if isID == nil && id.String() != q {
		terms = append(terms, id.String())
	}
	var d accountSection
	account, err := c.platform.GetAccount(ctx, q)
	if server.IsNotFound(err) && strings.ToUpper(q) != q {
		account, err = c.platform.GetAccount(ctx, strings.ToUpper(q))
	}
	switch {
	case err == nil:
		d.Account = account
		terms = append(terms, account.ID)
	case !server.IsNotFound(err):
		return nil, err
	}
	for i, term := range terms {
		if slices.Contains(terms[:i], term) {
			continue
		}
		found, err := c.platform.SearchPayments(ctx, term, maxAccountPayments)
		if err != nil {
			return nil, err
		}
		for _, v := range found {
			short := server.ShortID(v.ID)
			switch {
			case d.Account != nil && (v.DebitAccount == d.Account.ID || v.CreditAccount == d.Account.ID):
				if !slices.ContainsFunc(d.Payments, func(p *payments.PaymentView) bool { return p.ID == v.ID }) {
					d.Payments = append(d.Payments, v)
				}
			case v.IdempotencyKey == q:
				add(server.SearchHit{Kind: "Payment", Label: "Payment " + short + " with idempotency key " + q, Href: "/payments/" + v.ID.String()})
			case v.ExecutionID == id:
				add(server.SearchHit{Kind: "Payment", Label: "Payment " + short + ", run by execution " + server.ShortID(id), Href: "/payments/" + v.ID.String()})
			default:
				add(server.SearchHit{Kind: "Payment", Label: "Payment " + short, Href: "/payments/" + v.ID.String()})
			}
		}
	}
	if d.Account != nil {
		section, err := c.m.Fragment("search-account", &d)
		if err != nil {
			return nil, err
		}
		res.Sections = append(res.Sections, section)
	}
	if isID == nil {
		b, err := c.platform.GetBatch(ctx, id)
		switch {
		case err == nil:
			add(server.SearchHit{Kind: "Batch", Label: "Batch " + server.ShortID(id) + " for " + b.ScheduledFor, Href: "/batches/" + id.String()})
		case !errors.Is(err, commandbus.ErrNotFound):
			return nil, err
		}
	}
	return res, nil
}

// Helpers over the server's console, so the pages read like the console's own.

func (c *Extension) newPage(w http.ResponseWriter, r *http.Request, title, nav string) *server.Page {
	return c.m.NewPage(w, r, title, nav)
}

func (c *Extension) render(w http.ResponseWriter, r *http.Request, status int, name string, p *server.Page) {
	c.m.Render(w, r, status, name, p)
}

func (c *Extension) renderRegions(w http.ResponseWriter, r *http.Request, name string, p *server.Page, regions ...string) {
	c.m.RenderRegions(w, r, name, p, regions...)
}

func (c *Extension) failed(w http.ResponseWriter, r *http.Request, err error) { c.m.Failed(w, r, err) }

func (c *Extension) errorPage(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	c.m.ErrorPage(w, r, status, title, message)
}

func (c *Extension) redirectWith(w http.ResponseWriter, r *http.Request, to, kind, message string) {
	c.m.RedirectWith(w, r, to, kind, message)
}

func (c *Extension) act(w http.ResponseWriter, r *http.Request, a *server.ActionPage) {
	c.m.Act(w, r, a)
}

func (c *Extension) loadProcess(ctx context.Context, id uuid.UUID, ret string, full bool) (*server.ProcessView, error) {
	return c.m.Process(ctx, id, ret, full)
}

func (c *Extension) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var dup *payments.DuplicatePaymentError
	if errors.As(err, &dup) && dup.Compared && !dup.SameRequest {
		fields := make([]server.FieldProblem, 0, len(dup.Differences))
		for _, f := range dup.Differences {
			fields = append(fields, server.FieldProblem{Field: f, Message: "differs from the first request with this idempotency key"})
		}
		server.WriteProblem(w, server.Problem{Status: http.StatusConflict, Code: "IDEMPOTENCY_KEY_REUSED",
			Title:      "This idempotency key was used for a different request; nothing new was created.",
			Detail:     fmt.Sprintf("Idempotency key %q belongs to payment %s, whose request differs in %s. Send the same request to get its answer again, or use a new key for a new payment.", dup.IdempotencyKey, dup.ExistingID, strings.Join(dup.Differences, ", ")),
			ExistingID: dup.ExistingID.String(), Errors: fields})
		return
	}
	if errors.As(err, &dup) {
		server.WriteProblem(w, server.Problem{Status: http.StatusConflict, Code: "DUPLICATE_IDEMPOTENCY_KEY",
			Title: "A payment with this idempotency key exists; nothing new was created.", Detail: err.Error(), ExistingID: dup.ExistingID.String()})
		return
	}
	c.m.WriteError(w, r, err)
}

func writeProblem(w http.ResponseWriter, status int, code, title, detail string) {
	server.WriteProblem(w, server.Problem{Status: status, Code: code, Title: title, Detail: detail})
}

// fieldError is an error shown next to its field and listed in the summary above the form.
type fieldError struct {
	Field   string
	Message string
}

// tsqScan bounds how many items of an operator queue a page reads.
const tsqScan = 1000

func sortAudit(entries []*commandbus.AuditLogEntry) {
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].At.After(entries[j].At) })
}

func shortID(id uuid.UUID) string { return server.ShortID(id) }

// flatten lists the errors joined in err.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func unknownAction(w http.ResponseWriter, r *http.Request, actions []string) {
	writeProblem(w, http.StatusNotFound, "NOT_FOUND", "No such action.",
		fmt.Sprintf("%s is not an action here; use %v.", input.Quote(r.PathValue("action")), actions))
}

// terminal reports whether a payment status is final.
func terminal(status string) bool {
	switch status {
	case "COMPLETED", "COMPENSATED", "CANCELLED", "FAILED":
		return true
	}
	return false
}
