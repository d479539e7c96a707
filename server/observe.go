package server

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/commandbus/commandbus/server/internal/httpx"
)

// unmatchedRoute is the route label of a request no route takes (404, 405).
const unmatchedRoute = "unmatched"

// httpMetrics are the server's request metrics, labelled by route pattern (never by the ids in a
// path), method and status.
type httpMetrics struct {
	duration *prometheus.HistogramVec
}

// newHTTPMetrics registers the request metrics with reg; a registry that already has them (a
// second server in one process) lends its collector.
func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "commandbus_http_request_duration_seconds",
		Help:    "HTTP requests served, by route pattern, method and status, and how long they took (its _count is the number of requests).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route", "method", "status"})
	if reg != nil {
		if err := reg.Register(duration); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, err
			}
			existing, ok := already.ExistingCollector.(*prometheus.HistogramVec)
			if !ok {
				return nil, err
			}
			duration = existing
		}
	}
	return &httpMetrics{duration: duration}, nil
}

// statusRecorder remembers the status a handler wrote and how many body bytes.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusRecorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusRecorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer (deadlines, flushing).
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on when the connection supports it.
func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// methodLabel is r's method as a metric label: the standard methods, else OTHER, so a client
// cannot grow the label set.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return "OTHER"
}

// routeLabel is the path part of a mux pattern ("GET /api/payments/{id}" → "/api/payments/{id}").
func routeLabel(pattern string) string {
	if pattern == "" {
		return unmatchedRoute
	}
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return path
	}
	return pattern
}

// quietRoute reports a route logged at debug level: probes, scrapes and the console's live
// refreshes arrive every few seconds, and its static files with every page.
func quietRoute(route string) bool {
	switch route {
	case "/healthz", "/readyz", "/metrics", "/static/":
		return true
	}
	return strings.HasPrefix(route, "/live/")
}

// observe runs next for r with a request id (the client's X-Request-Id when usable, else a new
// one; answered in X-Request-Id and carried in the context for error logs), then logs the
// request and records its metrics under its route pattern. It returns the status answered.
func (s *Server) observe(w http.ResponseWriter, r *http.Request, pattern string, next func(http.ResponseWriter, *http.Request)) int {
	start := time.Now()
	id := httpx.IncomingRequestID(r)
	w.Header().Set(httpx.RequestIDHeader, id)
	r = r.WithContext(httpx.WithRequestID(r.Context(), id))
	rec := &statusRecorder{ResponseWriter: w}
	next(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	elapsed := time.Since(start)
	route := routeLabel(pattern)
	s.metrics.duration.WithLabelValues(route, methodLabel(r.Method), strconv.Itoa(rec.status)).Observe(elapsed.Seconds())
	level := slog.LevelInfo
	if quietRoute(route) && rec.status < 500 {
		level = slog.LevelDebug
	}
	s.cfg.Logger.LogAttrs(r.Context(), level, "http request", slog.String("request_id", id), slog.String("method", r.Method),
		slog.String("route", route), slog.String("path", r.URL.Path), slog.Int("status", rec.status),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000), slog.Int64("bytes", rec.bytes))
	return rec.status
}
