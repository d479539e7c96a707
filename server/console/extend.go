package console

import (
	"context"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus/server/internal/httpx"
)

// What an application's pages register and render with. server.Mount hands these to
// extensions; an application that serves the console without the server calls them directly.

// Viewer guards a console page any signed-in principal may see: others go to the sign-in page,
// and forms are checked for their origin and CSRF token.
func (c *Console) Viewer(h http.HandlerFunc) http.HandlerFunc { return c.viewer(h) }

// Operator guards a console page only the operator role may use; a viewer gets a 403 page.
func (c *Console) Operator(h http.HandlerFunc) http.HandlerFunc { return c.operator(h) }

// Live guards a JSON endpoint the console's script polls for a page's live regions (answer it
// with RenderRegions): no redirects, a 401 problem it can show.
func (c *Console) Live(h http.HandlerFunc) http.HandlerFunc { return c.live(h) }

// AddTemplates adds an application's console templates: every file of fsys matching pattern is
// a page rendered in the console's layout, except files whose name starts with "_", which hold
// shared {{define}} blocks available to every page and to Fragment. Templates have the console's
// functions (short, money, time, num, …) and partials. Call it before Start.
func (c *Console) AddTemplates(fsys fs.FS, pattern string) error {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return fmt.Errorf("console: extension templates: %w", err)
	}
	set := extensionTemplates{fsys: fsys}
	for _, name := range names {
		if strings.HasPrefix(path.Base(name), "_") {
			set.partials = append(set.partials, name)
		} else {
			set.pages = append(set.pages, name)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("console: extension templates: no file matches %q", pattern)
	}
	c.extensionTemplates = append(c.extensionTemplates, set)
	return nil
}

// AddNav adds entries to the console's main navigation.
func (c *Console) AddNav(entries ...NavEntry) { c.nav = append(c.nav, entries...) }

// SetContextLabel names the column the console's queues show ItemContext summaries in
// ("Payment").
func (c *Console) SetContextLabel(label string) { c.contextLabel = label }

// SetSearchHint words the console's search for what the hooks find.
func (c *Console) SetSearchHint(h SearchHint) { c.searchHint = h }

// NewPage starts a console page with title, marking the navigation entry nav current.
func (c *Console) NewPage(w http.ResponseWriter, r *http.Request, title, nav string) *Page {
	return c.newPage(w, r, title, nav)
}

// Render writes the page template name (a page file's base name) with status.
func (c *Console) Render(w http.ResponseWriter, r *http.Request, status int, name string, p *Page) {
	c.render(w, r, status, name, p)
}

// RenderRegions answers a live poll with the named {{define}} regions of the page template name.
func (c *Console) RenderRegions(w http.ResponseWriter, r *http.Request, name string, p *Page, regions ...string) {
	c.renderRegions(w, r, name, p, regions...)
}

// Fragment renders an application's {{define}} block name (from a "_" template file) with
// data. The templates are parsed by Start: call it from handlers and hooks.
func (c *Console) Fragment(name string, data any) (template.HTML, error) {
	return c.fragment(name, data)
}

// Failed renders err as an error page: 404 for commandbus.ErrNotFound, 400 for a
// *commandbus.ValidationError, else a logged 500.
func (c *Console) Failed(w http.ResponseWriter, r *http.Request, err error) { c.failed(w, r, err) }

// ErrorPage renders a page that says what went wrong and what to do.
func (c *Console) ErrorPage(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	c.errorPage(w, r, status, title, message)
}

// RedirectWith sends the browser to the console path to with a flash message; kind is
// "success" or "error".
func (c *Console) RedirectWith(w http.ResponseWriter, r *http.Request, to, kind, message string) {
	c.redirectWith(w, r, to, kind, message)
}

// Act runs the console's confirmation flow for an operator action: a GET shows what the action
// does and asks for a reason; a valid POST runs a.Run audited with the session's subject and
// redirects to a.Return with a.Done.
func (c *Console) Act(w http.ResponseWriter, r *http.Request, a *ActionPage) { c.act(w, r, a) }

// Process reads what the console's process page shows of execution id (its timeline, state,
// actions and parked commands; the audit log only when full), for a page that embeds it. ret
// is where actions started from it return.
func (c *Console) Process(ctx context.Context, id uuid.UUID, ret string, full bool) (*ProcessView, error) {
	return c.loadProcess(ctx, id, ret, full)
}

// ReturnTo is the console path a form or link asks to go back to ("return"), else fallback.
func ReturnTo(r *http.Request, fallback string) string { return returnTo(r, fallback) }

// CanAct reports whether the request context's principal has the operator role.
func CanAct(ctx context.Context) bool { return httpx.CanAct(ctx) }

// IsNotFound reports an error that says the thing asked for does not exist.
func IsNotFound(err error) bool { return isNotFound(err) }

// ShortID is how the console shows an id: its last eight characters.
func ShortID(id uuid.UUID) string { return shortID(id) }

// FormatTime is how the console shows a time: UTC to the second, "—" when zero.
func FormatTime(t time.Time) string { return formatTime(t) }

// FormatMoney is how the console shows an amount: the currency's minor units, thousands grouped.
func FormatMoney(amount decimal.Decimal, currency string) string {
	return formatMoney(amount, currency)
}

// ReasonProblem says what is wrong with an operator's reason entered in a console form, or ""
// (the rule every console action applies).
func ReasonProblem(reason string) string { return reasonProblem(reason) }

// FormatNumber is how the console shows a count: thousands grouped ("12,500").
func FormatNumber(n int) string { return formatNumber(n) }
