package server

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/server/console"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// Extension adds an application's own face to the server: REST routes with their OpenAPI
// operations, console pages and navigation, and the business context the generic console shows
// beside executions and queue items. The server knows nothing of the application's domain; an
// extension is how it learns. Embed ExtensionBase to implement only the hooks you need.
type Extension interface {
	// Mount registers the extension's routes, pages, templates and navigation. New calls it
	// once; an error fails New.
	Mount(m *Mount) error
	// The console's hooks: the page where an execution reads best, the business item an
	// execution runs, search, overview additions and the completion rule (which the REST API
	// applies too).
	console.Hooks
}

// ExtensionBase implements every hook of Extension but Mount as doing nothing; embed it.
type ExtensionBase struct{}

// ExecutionPage returns "": executions read best on the process page.
func (ExtensionBase) ExecutionPage(*driver.ExecutionRow) string { return "" }

// ExecutionContexts knows no execution.
func (ExtensionBase) ExecutionContexts(context.Context, []*driver.ExecutionRow) (map[uuid.UUID]*ItemContext, error) {
	return nil, nil
}

// Search finds nothing.
func (ExtensionBase) Search(context.Context, string) (*SearchResult, error) { return nil, nil }

// Overview adds nothing.
func (ExtensionBase) Overview(context.Context) (*Overview, error) { return nil, nil }

// CompletionRule sets no rule.
func (ExtensionBase) CompletionRule(string) *CompletionRule { return nil }

// The console's types an extension builds and renders with; see package server/console.
type (
	// ItemContext is the business item an execution runs, as the console shows it.
	ItemContext = console.ItemContext
	// CompletionRule is what completing an execution by hand requires.
	CompletionRule = console.CompletionRule
	// SearchResult is what an extension's search found.
	SearchResult = console.SearchResult
	// SearchHit is one thing a search found, with the page that shows it.
	SearchHit = console.SearchHit
	// SearchHint words the console's search box for what the extensions find.
	SearchHint = console.SearchHint
	// Overview is what an extension adds to the console's overview.
	Overview = console.Overview
	// Card is one count on the overview.
	Card = console.Card
	// Panel is one section of the overview.
	Panel = console.Panel
	// NavEntry is one entry of the console's main navigation.
	NavEntry = console.NavEntry
	// Page is what every console template receives.
	Page = console.Page
	// ProcessView is what the console's process page shows of an execution.
	ProcessView = console.ProcessView
	// ActionPage is an operator action run through the console's confirmation flow.
	ActionPage = console.ActionPage
	// Fact is one line of a confirmation page.
	Fact = console.Fact
)

// Mount is what an extension registers on and renders with. Routes registered here get the
// server's authentication: API routes a bearer token with the role given, console pages a
// session, CSRF checks on forms and the console's security headers.
type Mount struct {
	s *Server
	c *console.Console
	// errs are the registrations refused; New reports them.
	errs []error
}

// Client is the server's commandbus client.
func (m *Mount) Client() *commandbus.Client { return m.s.cfg.Client }

// Logger is the server's logger.
func (m *Mount) Logger() *slog.Logger { return m.s.cfg.Logger }

// HandleAPI registers a REST route; role is RoleViewer or RoleOperator. A bad role, or a pattern
// that conflicts with a route registered already, fails New.
func (m *Mount) HandleAPI(pattern, role string, h http.HandlerFunc) {
	if m.checkRole(pattern, role) {
		m.handle(pattern, m.s.require(role, h))
	}
}

// checkRole records a role that is neither viewer nor operator.
func (m *Mount) checkRole(pattern, role string) bool {
	if role != RoleViewer && role != RoleOperator {
		m.errs = append(m.errs, fmt.Errorf("route %q: role must be %q or %q, got %q", pattern, RoleViewer, RoleOperator, role))
		return false
	}
	return true
}

// handle registers h, recording the mux's refusal (a bad or conflicting pattern) as an error.
func (m *Mount) handle(pattern string, h http.HandlerFunc) {
	defer func() {
		if v := recover(); v != nil {
			m.errs = append(m.errs, fmt.Errorf("route %q: %v", pattern, v))
		}
	}()
	m.s.mux.HandleFunc(pattern, h)
}

// Document adds the extension's operations and component schemas to /api/openapi.json. An
// operationId or a schema name the document has already fails New.
func (m *Mount) Document(ops []Operation, extra map[string]any) {
	ids := map[string]bool{}
	for _, o := range builtinOperations() {
		ids[o.ID] = true
	}
	for _, o := range m.s.docOps {
		ids[o.ID] = true
	}
	for _, o := range ops {
		if o.ID == "" || ids[o.ID] {
			m.errs = append(m.errs, fmt.Errorf("OpenAPI operation %s %s: the operationId %q is empty or taken", o.Method, o.Path, o.ID))
			continue
		}
		ids[o.ID] = true
		m.s.docOps = append(m.s.docOps, o)
	}
	builtin := schemas()
	for name, schema := range extra {
		if _, taken := builtin[name]; taken || m.s.docSchemas[name] != nil {
			m.errs = append(m.errs, fmt.Errorf("OpenAPI schema %q: the name is taken", name))
			continue
		}
		m.s.docSchemas[name] = schema
	}
}

// HandlePage registers a console page; role is RoleViewer or RoleOperator. A bad role, or a
// pattern that conflicts with a route registered already, fails New.
func (m *Mount) HandlePage(pattern, role string, h http.HandlerFunc) {
	if !m.checkRole(pattern, role) {
		return
	}
	if role == RoleOperator {
		m.handle(pattern, m.c.Operator(h))
		return
	}
	m.handle(pattern, m.c.Viewer(h))
}

// HandleLive registers a JSON endpoint the console's script polls for a page's live regions
// (answer it with RenderRegions).
func (m *Mount) HandleLive(pattern string, h http.HandlerFunc) { m.handle(pattern, m.c.Live(h)) }

// Templates adds the extension's console templates: every file of fsys matching pattern is a
// page rendered in the console's layout, except files whose name starts with "_", which hold
// shared {{define}} blocks available to every page and to Fragment. Templates have the console's
// functions (short, money, time, num, …) and partials.
func (m *Mount) Templates(fsys fs.FS, pattern string) error { return m.c.AddTemplates(fsys, pattern) }

// Nav adds entries to the console's main navigation.
func (m *Mount) Nav(entries ...NavEntry) { m.c.AddNav(entries...) }

// ContextLabel names the column the console's queues show ItemContext summaries in ("Payment").
func (m *Mount) ContextLabel(label string) { m.c.SetContextLabel(label) }

// SearchHint words the console's search for what the extension finds.
func (m *Mount) SearchHint(h SearchHint) { m.c.SetSearchHint(h) }

// NewPage starts a console page with title, marking the navigation entry nav current.
func (m *Mount) NewPage(w http.ResponseWriter, r *http.Request, title, nav string) *Page {
	return m.c.NewPage(w, r, title, nav)
}

// Render writes the page template name (a page file's base name) with status.
func (m *Mount) Render(w http.ResponseWriter, r *http.Request, status int, name string, p *Page) {
	m.c.Render(w, r, status, name, p)
}

// RenderRegions answers a live poll with the named {{define}} regions of the page template name.
func (m *Mount) RenderRegions(w http.ResponseWriter, r *http.Request, name string, p *Page, regions ...string) {
	m.c.RenderRegions(w, r, name, p, regions...)
}

// Fragment renders the extension's {{define}} block name (from a "_" template file) with data.
// The templates are parsed when every extension is mounted: call it from handlers and hooks, not
// from Mount.
func (m *Mount) Fragment(name string, data any) (template.HTML, error) {
	return m.c.Fragment(name, data)
}

// Failed renders err as an error page: 404 for commandbus.ErrNotFound, 400 for a
// *commandbus.ValidationError, else a logged 500.
func (m *Mount) Failed(w http.ResponseWriter, r *http.Request, err error) { m.c.Failed(w, r, err) }

// ErrorPage renders a page that says what went wrong and what to do.
func (m *Mount) ErrorPage(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	m.c.ErrorPage(w, r, status, title, message)
}

// RedirectWith sends the browser to the console path to with a flash message; kind is
// "success" or "error".
func (m *Mount) RedirectWith(w http.ResponseWriter, r *http.Request, to, kind, message string) {
	m.c.RedirectWith(w, r, to, kind, message)
}

// Act runs the console's confirmation flow for an operator action: a GET shows what the action
// does and asks for a reason; a valid POST runs a.Run audited with the session's subject and
// redirects to a.Return with a.Done.
func (m *Mount) Act(w http.ResponseWriter, r *http.Request, a *ActionPage) { m.c.Act(w, r, a) }

// ReturnTo is the console path a form or link asks to go back to ("return"), else fallback.
func (m *Mount) ReturnTo(r *http.Request, fallback string) string {
	return console.ReturnTo(r, fallback)
}

// Process reads what the console's process page shows of execution id (its timeline, state,
// actions and parked commands; the audit log only when full), for a page of the extension that
// embeds it. ret is where actions started from it return.
func (m *Mount) Process(ctx context.Context, id uuid.UUID, ret string, full bool) (*ProcessView, error) {
	return m.c.Process(ctx, id, ret, full)
}

// WriteJSON writes v as indented JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) { httpx.WriteJSON(w, status, v) }

// WriteProblem writes a problem document.
func WriteProblem(w http.ResponseWriter, p Problem) { httpx.WriteProblemDoc(w, p) }

// Subject is the subject of the token a request authenticated with ("" when none): the actor an
// operator action is audited with.
func Subject(r *http.Request) string { return httpx.Subject(r) }

// RequestID is the id the server logs request r under (and answers in X-Request-Id), for an
// extension's own log lines.
func RequestID(r *http.Request) string { return httpx.RequestID(r) }

// WriteError writes err as the problem document the API answers with: 400 for validation
// errors (each field named), 404 not found, 409 conflicts, else a logged 500.
func (m *Mount) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	m.s.writeError(w, r, err)
}

// DecodeBody reads the request body, one JSON object of at most 64 KiB with no unknown field,
// into v; the error is a problem Mount.WriteError reports field by field.
func DecodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeBody(w, r, v)
}

// Items is a list response: {"items": list}, with a nil list sent as [].
func Items[T any](list []T) map[string]any { return httpx.Items(list) }

// CanAct reports whether the request context's principal has the operator role.
func CanAct(ctx context.Context) bool { return httpx.CanAct(ctx) }

// IsNotFound reports an error that says the thing asked for does not exist.
func IsNotFound(err error) bool { return console.IsNotFound(err) }

// mountExtensions mounts the configured extensions, in order.
func (s *Server) mountExtensions() error {
	var errs []error
	for i, ext := range s.cfg.Extensions {
		if ext == nil {
			errs = append(errs, fmt.Errorf("server: Extensions[%d] is nil", i))
			continue
		}
		m := &Mount{s: s, c: s.console}
		if err := ext.Mount(m); err != nil {
			m.errs = append(m.errs, err)
		}
		if err := errors.Join(m.errs...); err != nil {
			errs = append(errs, fmt.Errorf("server: mounting Extensions[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// ShortID is how the console shows an id: its last eight characters.
func ShortID(id uuid.UUID) string { return console.ShortID(id) }

// FormatTime is how the console shows a time: UTC to the second, "—" when zero.
func FormatTime(t time.Time) string { return console.FormatTime(t) }

// FormatMoney is how the console shows an amount: the currency's minor units, thousands grouped.
func FormatMoney(amount decimal.Decimal, currency string) string {
	return console.FormatMoney(amount, currency)
}

// ReasonProblem says what is wrong with an operator's reason entered in a console form, or ""
// (the rule every console action applies).
func ReasonProblem(reason string) string { return console.ReasonProblem(reason) }

// FormatNumber is how the console shows a count: thousands grouped ("12,500").
func FormatNumber(n int) string { return console.FormatNumber(n) }
