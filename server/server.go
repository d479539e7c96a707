// Package server is the HTTP face of commandbus: the REST API (commands, executions, both
// troubleshooting queues), the operator console, Prometheus metrics and health. An application
// adds its own routes, pages and business context through Extensions. Every route needs a bearer token; viewers read, operators also act, and every action is
// audited with the token's subject. Errors are application/problem+json with a stable code.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/input"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/server/console"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// Config configures the server.
type Config struct {
	// Client is the commandbus client whose commands, executions and queues the server shows.
	Client *commandbus.Client
	// Runtime is the orchestration runtime whose executions the server operates (retry, cancel,
	// complete, skip). Without it, execution actions are refused as "no runtime for this type".
	Runtime *orchestration.Runtime
	// Extensions add an application's routes, console pages and business context, mounted in
	// order. Default: none, and the server serves only its generic API and console.
	Extensions []Extension
	// Tokens are the accepted bearer tokens.
	Tokens []Token
	// Gatherer is what /metrics exposes. Default: prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Logger receives one line per request (request id, route, status, duration; probes, scrapes,
	// the console's live refreshes and static files at debug level) and the causes of 500s under
	// the request's id. Default: discards.
	Logger *slog.Logger
	// MetricsRegisterer receives the HTTP request metrics (commandbus_http_request_duration_seconds
	// by route pattern, method and status). Default: Gatherer when it is also a Registerer (as a
	// *prometheus.Registry and the default gatherer are), else none.
	MetricsRegisterer prometheus.Registerer
	// ConsoleSampleInterval is how often the operator console samples throughput, queue depth and
	// the troubleshooting queues for its 15-minute charts. Default: 5s.
	ConsoleSampleInterval time.Duration
	// BrokerDeadLetters, when set, shows the broker's dead-letter queues on the console's
	// dead-letter page. Default: nil.
	BrokerDeadLetters console.BrokerDeadLetterReader
	// TrustedProxies are the TLS-terminating proxies in front of the server: only from them is
	// X-Forwarded-Proto: https believed, which makes the console's cookies Secure. Default: none.
	TrustedProxies []netip.Prefix
	// SecureCookies marks the console's cookies Secure on every response. Default: false (Secure
	// when the request came over TLS, directly or through a trusted proxy).
	SecureCookies bool
	// Readiness, when set, is asked by /readyz before its database ping; an error makes the
	// instance not ready (shutting down, workers stalled). Default: Client.CheckWorkers (the
	// client runs and its claim loops beat).
	Readiness func(ctx context.Context) error
}

// Server is the HTTP handler.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	tokens  *httpx.Tokens
	console *console.Console
	// docOps and docSchemas are what the extensions add to the OpenAPI document.
	docOps     []Operation
	docSchemas map[string]any
	document   func() object
	metrics    *httpMetrics
}

// New returns the server; it validates the tokens, mounts the console (package server/console)
// and the extensions, and starts the console's sampler, which Close stops.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("server: Client is required")
	}
	if cfg.Runtime != nil && cfg.Runtime.Client() != cfg.Client {
		return nil, errors.New("server: Runtime belongs to another client")
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MetricsRegisterer == nil {
		cfg.MetricsRegisterer, _ = cfg.Gatherer.(prometheus.Registerer)
	}
	tokens, err := httpx.NewTokens(cfg.Tokens)
	if err != nil {
		return nil, err
	}
	metrics, err := newHTTPMetrics(cfg.MetricsRegisterer)
	if err != nil {
		return nil, fmt.Errorf("server: registering the HTTP metrics: %w", err)
	}
	hooks := make([]console.Hooks, 0, len(cfg.Extensions))
	for _, ext := range cfg.Extensions {
		if ext != nil { // mountExtensions reports a nil one
			hooks = append(hooks, ext)
		}
	}
	con, err := console.New(console.Options{Client: cfg.Client, Runtime: cfg.Runtime, Tokens: cfg.Tokens, Hooks: hooks,
		Gatherer: cfg.Gatherer, Logger: cfg.Logger, SampleInterval: cfg.ConsoleSampleInterval, BrokerDeadLetters: cfg.BrokerDeadLetters,
		TrustedProxies: cfg.TrustedProxies, SecureCookies: cfg.SecureCookies})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), tokens: tokens, console: con, docSchemas: map[string]any{}, metrics: metrics}
	s.routes()
	if err := s.mountExtensions(); err != nil {
		return nil, err
	}
	s.document = sync.OnceValue(func() object { return openAPIDocument(s.docOps, s.docSchemas) })
	if err := s.console.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Console is the operator console the server mounts.
func (s *Server) Console() *console.Console { return s.console }

// Close stops the console's sampler. The handler still answers afterwards, with charts that no
// longer move; call Close when the HTTP server has shut down.
func (s *Server) Close() error { return s.console.Close() }

// ServeHTTP implements http.Handler. A request no route takes gets a problem document: 404 for a
// path no route has, 405 with an Allow header for a method the path's routes do not take. Every
// request gets an id (X-Request-Id, the client's when usable), a log line and its metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = withRequestTrace(r)
	_, pattern := s.mux.Handler(r)
	label := pattern
	if isCatchAll(pattern) && strings.HasPrefix(r.URL.Path, "/api/") {
		label = "" // an unknown API route, not a console page
	}
	serve := func(w http.ResponseWriter, r *http.Request) { s.route(w, r, pattern) }
	if quietRoute(routeLabel(label)) {
		s.observe(w, r, label, serve) // probes, scrapes, static files, live refreshes: no span
		return
	}
	r, span := startRequestSpan(s.cfg.Client.Tracer(), r, label)
	status := s.observe(w, r, label, serve)
	endRequestSpan(span, status)
}

// route serves r, whose mux pattern is pattern.
func (s *Server) route(w http.ResponseWriter, r *http.Request, pattern string) {
	if pattern != "" && !isCatchAll(pattern) {
		s.mux.ServeHTTP(w, r) // it sets the path values, which Handler does not
		return
	}
	allowed := s.allowedMethods(r)
	switch {
	case len(allowed) > 0:
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		httpx.WriteProblem(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "This route does not take the method.",
			fmt.Sprintf("%s %s takes %s.", r.Method, r.URL.Path, strings.Join(allowed, ", ")))
	case pattern != "" && !strings.HasPrefix(r.URL.Path, "/api/"):
		s.mux.ServeHTTP(w, r) // the console's page-not-found
	default:
		httpx.WriteProblem(w, http.StatusNotFound, "NOT_FOUND", "No such route.", "Nothing is served at "+input.Quote(r.URL.Path)+"; see /api/openapi.json.")
	}
}

// isCatchAll reports the console's catch-all page route, which answers every unknown path.
func isCatchAll(pattern string) bool { return pattern == "GET /" }

// allowedMethods lists the methods some route other than the catch-all takes on r's path.
func (s *Server) allowedMethods(r *http.Request) []string {
	var out []string
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := &http.Request{Method: method, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "" && !isCatchAll(pattern) {
			out = append(out, method)
		}
	}
	return out
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", s.viewer(promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}).ServeHTTP))
	s.mux.HandleFunc("GET /api/openapi.json", s.openAPI)

	s.mux.HandleFunc("GET /api/tsq/commands", s.viewer(s.listCommandTSQ))
	s.mux.HandleFunc("POST /api/tsq/commands/{id}/{action}", s.operator(s.actOnCommand))
	s.mux.HandleFunc("GET /api/tsq/processes", s.viewer(s.listProcessTSQ))
	s.mux.HandleFunc("POST /api/tsq/processes/{id}/{action}", s.operator(s.actOnProcess))
	s.mux.HandleFunc("GET /api/commands/{id}", s.viewer(s.getCommand))
	s.mux.HandleFunc("GET /api/processes/{id}", s.viewer(s.getProcess))
	s.mux.HandleFunc("GET /api/definitions", s.viewer(s.listDefinitions))
	s.mux.HandleFunc("GET /api/definitions/{model}/{type}", s.viewer(s.getDefinition))
	s.mux.HandleFunc("POST /api/definitions/{model}/{type}/start", s.operator(s.startDefinition))
	s.mux.HandleFunc("GET /api/executions", s.viewer(s.listExecutions))
	s.mux.HandleFunc("GET /api/executions/{id}", s.viewer(s.getExecution))
	s.mux.HandleFunc("POST /api/executions/{id}/{action}", s.operator(s.actOnExecution))
	s.mux.HandleFunc("POST /api/executions/{id}/signals/{name}", s.operator(s.signalExecution))
	s.mux.HandleFunc("GET /api/executions/{id}/timers", s.viewer(s.listExecutionTimers))
	s.mux.HandleFunc("DELETE /api/executions/{id}/timers/{timer}", s.operator(s.cancelExecutionTimer))
	s.mux.HandleFunc("GET /api/tsq/executions", s.viewer(s.listExecutionTSQ))
	s.mux.HandleFunc("GET /api/queues", s.viewer(s.queueDepths))
	s.mux.HandleFunc("GET /api/outbox", s.viewer(s.listOutbox))
	s.mux.HandleFunc("GET /api/dlq", s.viewer(s.listDLQ))
	s.mux.HandleFunc("POST /api/outbox/{id}/resend", s.operator(s.resendOutbox))
	s.mux.HandleFunc("POST /api/events", s.operator(s.receiveEvent))
	s.console.Register(s.mux)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) { writeHealthy(w) }

// readyz answers 200 when the database answers a ping and the instance is ready (Readiness, or
// the client's workers beating); it is cheap enough to probe every second.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	checkReady(w, r, s.cfg.Client, s.cfg.Readiness, s.cfg.Logger)
}
