package console

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

//go:embed templates/*.html static/*
var consoleFiles embed.FS

// consoleWindow is how far back the overview's charts reach.
const consoleWindow = 15 * time.Minute

// liveRefresh is how often console.js asks for fresh numbers.
const liveRefresh = 3 * time.Second

const (
	flashCookie = "commandbus_flash"
	loginCookie = "commandbus_login"
)

// Options configures a Console.
type Options struct {
	// Client is the commandbus client whose commands, executions and queues the console shows.
	// Required.
	Client *commandbus.Client
	// Runtime is the orchestration runtime whose executions the console operates and whose
	// definitions it draws. Without it, execution actions are refused as "no runtime for this
	// type" and the definitions page is empty.
	Runtime *orchestration.Runtime
	// Tokens are the accepted tokens: an operator signs in with one, and its role decides
	// whether they may act. Default: none, and nobody can sign in.
	Tokens []Token
	// Hooks tell the console the application's business context, in order. Default: none.
	Hooks []Hooks
	// Gatherer is where the sampler reads throughput from. Default: prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Logger receives request errors and audit lines. Default: discards.
	Logger *slog.Logger
	// SampleInterval is how often the console samples throughput, queue depth and the
	// troubleshooting queues for its 15-minute charts. Default: 5s.
	SampleInterval time.Duration
	// BrokerDeadLetters, when set, shows the broker's dead-letter and parking queues on the
	// dead-letter page. Default: nil (the page shows the database's records only).
	BrokerDeadLetters BrokerDeadLetterReader
	// TrustedProxies are the TLS-terminating proxies whose X-Forwarded-Proto: https makes the
	// console's cookies Secure. Default: none; only a TLS connection to the server counts.
	TrustedProxies []netip.Prefix
	// SecureCookies marks every cookie Secure, for a console only reached over HTTPS. Default: false.
	SecureCookies bool
}

// Console is the operator console: server-rendered pages (html/template) over the same client
// as the REST API, with the pages extensions add, with its templates and assets embedded. Pages
// read completely without JavaScript; console.js only refreshes the regions of a page marked
// live. Build it with New, register its routes with Register, add extension pages, then Start
// it; Close stops its sampler.
type Console struct {
	client  *commandbus.Client
	runtime *orchestration.Runtime
	tokens  *httpx.Tokens
	hooks   []Hooks
	logger  *slog.Logger
	pages   map[string]*template.Template
	assets  map[string]string // file name → URL with a content hash, for long caching
	static  http.Handler
	// fragments holds the extensions' shared blocks, for Fragment.
	fragments *template.Template
	// What the extensions mounted: their templates, navigation and wording.
	extensionTemplates []extensionTemplates
	nav                []NavEntry
	contextLabel       string
	searchHint         SearchHint
	// key signs the CSRF tokens, the sign-in form and flash messages. It derives from the tokens
	// (consoleKey), so replicas with the same configuration accept each other's forms.
	key []byte
	// trustedProxies and secureCookies decide when cookies are Secure (see secure).
	trustedProxies []netip.Prefix
	secureCookies  bool
	origin         *http.CrossOriginProtection
	sampler        *sampler
	started        bool
	// brokerReader reads the broker's dead letters (Options.BrokerDeadLetters).
	brokerReader BrokerDeadLetterReader

	// The overview is shared by everyone watching it: it is read at most once per interval.
	overviewMu   sync.Mutex
	overviewAt   time.Time
	overviewLast *overviewData
}

// New returns a console over opts.Client; it validates the options and the tokens. Nothing runs
// until Start.
func New(opts Options) (*Console, error) {
	if opts.Client == nil {
		return nil, errors.New("console: Client is required")
	}
	if opts.Runtime != nil && opts.Runtime.Client() != opts.Client {
		return nil, errors.New("console: Runtime belongs to another client")
	}
	for i, h := range opts.Hooks {
		if h == nil {
			return nil, fmt.Errorf("console: Hooks[%d] is nil", i)
		}
	}
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.DefaultGatherer
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	tokens, err := httpx.NewTokens(opts.Tokens)
	if err != nil {
		return nil, err
	}
	key := consoleKey(tokens)
	c := &Console{
		client: opts.Client, runtime: opts.Runtime, tokens: tokens, hooks: opts.Hooks,
		logger: opts.Logger.With("component", "console"),
		assets: consoleAssets, key: key, contextLabel: "Context", searchHint: defaultSearchHint,
		origin:         http.NewCrossOriginProtection(),
		sampler:        newSampler(opts.Client, opts.Gatherer, opts.SampleInterval, opts.Logger),
		brokerReader:   opts.BrokerDeadLetters,
		trustedProxies: opts.TrustedProxies, secureCookies: opts.SecureCookies,
	}
	static, _ := fs.Sub(consoleFiles, "static")
	files := http.FileServerFS(static)
	c.static = http.StripPrefix("/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Asset URLs carry a content hash, so a browser may keep them.
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	}))
	return c, nil
}

// Register registers the console's pages on mux, the catch-all "GET /" (the console's
// page-not-found, which answers paths under /api/ with a problem document) included.
func (c *Console) Register(mux *http.ServeMux) { c.routes(mux) }

// Start parses the templates, the console's and those extensions added with AddTemplates, and
// starts the sampler behind the overview's charts. Call it once, after every extension is
// added and before serving.
func (c *Console) Start() error {
	if c.started {
		return errors.New("console: Start called twice")
	}
	if err := c.parseTemplates(); err != nil {
		return err
	}
	c.started = true
	c.sampler.start()
	return nil
}

// Close stops the console's sampler. The pages still answer afterwards, with charts that no
// longer move; call Close when the HTTP server has shut down.
func (c *Console) Close() error {
	if c.started {
		c.sampler.stop()
	}
	return nil
}

func (c *Console) routes(mux *http.ServeMux) {
	mux.Handle("GET /static/", c.static)
	mux.HandleFunc("GET /login", c.headers(c.loginPage))
	mux.HandleFunc("POST /login", c.headers(c.login))
	mux.HandleFunc("POST /logout", c.viewer(c.logout))

	mux.HandleFunc("GET /{$}", c.viewer(c.overview))
	mux.HandleFunc("GET /live/overview", c.live(c.overviewLive))

	mux.HandleFunc("GET /tsq", c.viewer(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/tsq/commands", http.StatusSeeOther)
	}))
	mux.HandleFunc("GET /tsq/commands", c.viewer(c.commandTSQ))
	mux.HandleFunc("GET /tsq/processes", c.viewer(c.processTSQ))
	mux.HandleFunc("GET /tsq/commands/{id}/{action}", c.operator(c.commandAction))
	mux.HandleFunc("POST /tsq/commands/{id}/{action}", c.operator(c.commandAction))
	mux.HandleFunc("GET /tsq/processes/{id}/{action}", c.operator(c.processAction))
	mux.HandleFunc("POST /tsq/processes/{id}/{action}", c.operator(c.processAction))
	mux.HandleFunc("GET /tsq/commands/bulk", c.operator(c.bulk(c.commandBulkQueue)))
	mux.HandleFunc("POST /tsq/commands/bulk", c.operator(c.bulk(c.commandBulkQueue)))
	mux.HandleFunc("GET /tsq/processes/bulk", c.operator(c.bulk(c.processBulkQueue)))
	mux.HandleFunc("POST /tsq/processes/bulk", c.operator(c.bulk(c.processBulkQueue)))
	mux.HandleFunc("GET /dlq", c.viewer(c.dlq))
	mux.HandleFunc("GET /dlq/{id}/resubmit", c.operator(c.dlqResubmit))
	mux.HandleFunc("POST /dlq/{id}/resubmit", c.operator(c.dlqResubmit))
	mux.HandleFunc("GET /outbox", c.viewer(c.outbox))
	mux.HandleFunc("GET /outbox/{id}/resend", c.operator(c.outboxResend))
	mux.HandleFunc("POST /outbox/{id}/resend", c.operator(c.outboxResend))
	mux.HandleFunc("GET /search", c.viewer(c.search))
	mux.HandleFunc("GET /commands/{id}", c.viewer(c.commandPage))
	mux.HandleFunc("GET /processes/{id}", c.viewer(c.processPage))
	mux.HandleFunc("GET /live/processes/{id}", c.live(c.processLive))
	c.routeExecutions(mux)

	mux.HandleFunc("GET /", c.notFound)
}

// headers sets the console's security headers: nothing runs but our own script and style, no
// page may frame the console, and nothing is cached.
func (c *Console) headers(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next(w, r)
	}
}

// viewer lets any signed-in principal in and sends everyone else to the sign-in page.
func (c *Console) viewer(next http.HandlerFunc) http.HandlerFunc {
	return c.headers(func(w http.ResponseWriter, r *http.Request) {
		p, ok := c.authenticate(r)
		if !ok {
			target := "/login"
			if r.Method == http.MethodGet && r.URL.Path != "/" {
				target += "?next=" + url.QueryEscape(r.URL.RequestURI())
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
			return
		}
		r = r.WithContext(httpx.WithPrincipal(r.Context(), p))
		if r.Method == http.MethodPost {
			if err := c.checkForm(r); err != nil {
				c.errorPage(w, r, http.StatusForbidden, "Request refused", err.Error())
				return
			}
		}
		next(w, r)
	})
}

// operator is viewer plus the operator role. A viewer is refused here, whatever the templates
// show: the handler is where the rule lives.
func (c *Console) operator(next http.HandlerFunc) http.HandlerFunc {
	return c.headers(func(w http.ResponseWriter, r *http.Request) {
		p, ok := c.authenticate(r)
		if !ok {
			c.viewer(next)(w, r) // redirects to the sign-in page
			return
		}
		if p.Role != httpx.RoleOperator {
			r = r.WithContext(httpx.WithPrincipal(r.Context(), p))
			c.errorPage(w, r, http.StatusForbidden, "Operators only",
				fmt.Sprintf("You are signed in as %s with the %s role, which can look but not act. Sign in with an operator token to act.", p.Subject, p.Role))
			return
		}
		c.viewer(next)(w, r)
	})
}

// live guards the JSON endpoints console.js polls: no redirects, a 401 it can show.
func (c *Console) live(next http.HandlerFunc) http.HandlerFunc {
	return c.headers(func(w http.ResponseWriter, r *http.Request) {
		p, ok := c.authenticate(r)
		if !ok {
			httpx.WriteProblem(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Sign in again.", "")
			return
		}
		next(w, r.WithContext(httpx.WithPrincipal(r.Context(), p)))
	})
}

// checkForm refuses a POST that did not come from a console page of this origin: the browser's
// Sec-Fetch-Site/Origin must say same-origin, and the form must carry the session's CSRF token.
func (c *Console) checkForm(r *http.Request) error {
	if err := c.origin.Check(r); err != nil {
		return errors.New("the request came from another site; use the console's own forms")
	}
	r.Body = http.MaxBytesReader(nil, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		return errors.New("the form could not be read")
	}
	want := c.csrfToken(r)
	if want == "" || !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(want)) {
		return errors.New("the form has expired or did not come from this console; go back, reload the page and try again")
	}
	return nil
}

// sessionToken is what a request authenticates with: the session cookie's id, or the
// Authorization header's token. The CSRF token is bound to it.
func sessionToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return strings.TrimPrefix(h, "Bearer ")
	}
	if ck, err := r.Cookie(httpx.SessionCookie); err == nil {
		return ck.Value
	}
	return ""
}

func (c *Console) mac(parts ...string) string {
	m := hmac.New(sha256.New, c.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrfToken is bound to the session, so a token taken from one session is useless in another.
func (c *Console) csrfToken(r *http.Request) string {
	token := sessionToken(r)
	if token == "" {
		return ""
	}
	return c.mac("csrf", token)
}

// Principal is who signed in: the subject actions are audited with, and the role.
type Principal = httpx.Principal

// Page is what every console template receives: the layout reads its fields, the page's own
// template its Data. Start one with NewPage.
type Page struct {
	// Title is the page's title; Nav the key of the navigation entry marked current.
	Title string
	Nav   string
	// User is the signed-in principal; CanAct says it has the operator role; CSRF is the token
	// every form posts.
	User   *Principal
	CanAct bool
	CSRF   string
	Flash  *flash
	// LiveURL, when set, is polled for the page's live regions every Live milliseconds.
	LiveURL string
	Live    int
	// Menu is the navigation the extensions add; Search and ContextLabel word the search box
	// and the column of business context.
	Menu         []NavEntry
	Search       SearchHint
	ContextLabel string
	// Now is the server's clock, for the ages in queue rows.
	Now  time.Time
	Data any
}

// flash is a message carried across a redirect (post/redirect/get).
type flash struct {
	Kind    string // "success" or "error"
	Message string
}

func (c *Console) newPage(w http.ResponseWriter, r *http.Request, title, nav string) *Page {
	p := &Page{Title: title, Nav: nav, Menu: c.nav, Search: c.searchHint, ContextLabel: c.contextLabel, Live: int(liveRefresh / time.Millisecond), Now: c.client.Now()}
	if pr, ok := httpx.PrincipalFrom(r.Context()); ok {
		p.User, p.CanAct, p.CSRF = &pr, pr.Role == httpx.RoleOperator, c.csrfToken(r)
	}
	if !strings.HasPrefix(r.URL.Path, "/live/") { // a poll must not eat the next page's message
		p.Flash = c.takeFlash(w, r)
	}
	return p
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p *Page) {
	t, ok := c.pages[name]
	if !ok {
		c.logger.Error("console: no such template", "template", name)
		http.Error(w, "no such page template", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		c.logger.Error("console: rendering failed", "template", name, "path", r.URL.Path, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderRegions answers console.js with the named regions of a page, rendered by the same
// templates as the full page.
func (c *Console) renderRegions(w http.ResponseWriter, r *http.Request, name string, p *Page, regions ...string) {
	c.renderRegionsWith(w, r, name, p, nil, regions...)
}

// renderRegionsWith is renderRegions with regions rendered already (an extension's panels).
func (c *Console) renderRegionsWith(w http.ResponseWriter, r *http.Request, name string, p *Page, rendered map[string]string, regions ...string) {
	t := c.pages[name]
	out := map[string]string{}
	for region, html := range rendered {
		out[region] = html
	}
	for _, region := range regions {
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, region, p); err != nil {
			c.logger.Error("console: rendering a live region failed", "template", name, "region", region, "error", err)
			httpx.WriteProblem(w, http.StatusInternalServerError, "INTERNAL", "The page could not be rendered.", "")
			return
		}
		out[region] = buf.String()
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"regions": out, "at": time.Now().UTC()})
}

// errorPage renders a page that says what went wrong and what to do.
func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	p := c.newPage(w, r, title, "")
	p.Data = map[string]any{"Status": status, "Message": message}
	c.render(w, r, status, "error.html", p)
}

// failed renders an unexpected error as a 500 page and logs it.
func (c *Console) failed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, commandbus.ErrNotFound) {
		c.errorPage(w, r, http.StatusNotFound, "Not found", err.Error())
		return
	}
	var invalid *commandbus.ValidationError
	if errors.As(err, &invalid) {
		c.errorPage(w, r, http.StatusBadRequest, "Invalid request", err.Error())
		return
	}
	// The cause stays in the log (database errors name tables and constraints); the page gives
	// the request id it is logged under.
	id := httpx.LogID(r.Context())
	c.logger.Error("console: request failed", "request_id", id, "method", r.Method, "path", r.URL.Path, "error", err)
	c.errorPage(w, r, http.StatusInternalServerError, "Something went wrong",
		"The server could not complete the request. The cause was logged with request id "+id+".")
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		httpx.WriteProblem(w, http.StatusNotFound, "NOT_FOUND", "No such resource.", "")
		return
	}
	c.headers(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := c.authenticate(r); ok {
			r = r.WithContext(httpx.WithPrincipal(r.Context(), p))
		}
		c.errorPage(w, r, http.StatusNotFound, "Page not found", "There is no console page at "+r.URL.Path+".")
	})(w, r)
}

// setFlash keeps a message for the next page, signed so nobody else can plant one.
func (c *Console) setFlash(w http.ResponseWriter, r *http.Request, kind, message string) {
	value := base64.RawURLEncoding.EncodeToString([]byte(kind + "\n" + message))
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: value + "." + c.mac("flash", value), Path: "/",
		MaxAge: 120, HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
}

func (c *Console) takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
	value, sig, ok := strings.Cut(ck.Value, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(c.mac("flash", value))) {
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil {
		return nil
	}
	kind, message, _ := strings.Cut(string(raw), "\n")
	return &flash{Kind: kind, Message: message}
}

// redirectWith sends the browser on with a flash message (post/redirect/get).
func (c *Console) redirectWith(w http.ResponseWriter, r *http.Request, to, kind, message string) {
	c.setFlash(w, r, kind, message)
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// localPath returns target when it is a path on this site, else fallback: redirects never leave
// the console.
func localPath(target, fallback string) string {
	if target == "" || !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "//") || strings.ContainsAny(target, "\\\r\n") {
		return fallback
	}
	u, err := url.Parse(target)
	if err != nil || u.Host != "" || u.Scheme != "" {
		return fallback
	}
	return target
}

// defaultSearchHint words the search for what the console finds without extensions.
var defaultSearchHint = SearchHint{Label: "Execution or command id", Placeholder: "Execution or command id",
	Help:   "The search matches whole values exactly: the id of an execution or a command. Copy the value from where you found it and try again.",
	Prompt: "Type an execution or command id in the search box and press Search."}

// consoleAssets maps each static file to its URL with a content hash.
var consoleAssets = func() map[string]string {
	out := map[string]string{}
	statics, err := fs.ReadDir(consoleFiles, "static")
	if err != nil {
		panic(err) // the files are embedded: only a broken build gets here
	}
	for _, e := range statics {
		data, err := consoleFiles.ReadFile("static/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(data)
		out[e.Name()] = "/static/" + e.Name() + "?v=" + hex.EncodeToString(sum[:6])
	}
	return out
}()

// parseTemplates parses every page, the console's and the extensions', with the layout, the
// console's partials and the extensions' shared blocks.
func (c *Console) parseTemplates() error {
	funcs := consoleFuncs(c.assets)
	// shared parses the shared blocks into t: the console's partials, then each extension's.
	shared := func(t *template.Template) (*template.Template, error) {
		t, err := t.ParseFS(consoleFiles, "templates/layout.html", "templates/partials.html")
		if err != nil {
			return nil, err
		}
		for _, ext := range c.extensionTemplates {
			if len(ext.partials) == 0 {
				continue
			}
			if t, err = t.ParseFS(ext.fsys, ext.partials...); err != nil {
				return nil, err
			}
		}
		return t, nil
	}
	fragments, err := shared(template.New("fragments").Funcs(funcs))
	if err != nil {
		return fmt.Errorf("console: templates: %w", err)
	}
	c.fragments = fragments
	c.pages = map[string]*template.Template{}
	add := func(fsys fs.FS, name string) error {
		base := path.Base(name)
		if _, dup := c.pages[base]; dup {
			return fmt.Errorf("console: templates: two pages are named %s", base)
		}
		t, err := shared(template.New(base).Funcs(funcs))
		if err == nil {
			t, err = t.ParseFS(fsys, name)
		}
		if err != nil {
			return fmt.Errorf("console: templates: %w", err)
		}
		c.pages[base] = t
		return nil
	}
	names, err := fs.Glob(consoleFiles, "templates/*.html")
	if err != nil {
		return err
	}
	for _, name := range names {
		if base := path.Base(name); base != "layout.html" && base != "partials.html" {
			if err := add(consoleFiles, name); err != nil {
				return err
			}
		}
	}
	for _, ext := range c.extensionTemplates {
		for _, name := range ext.pages {
			if err := add(ext.fsys, name); err != nil {
				return err
			}
		}
	}
	return nil
}
