package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// readyTimeout bounds the database ping of /readyz.
const readyTimeout = 2 * time.Second

// ProbeConfig configures the probe handler a worker serves on its internal address.
type ProbeConfig struct {
	// Client is the client whose database /readyz pings. Required.
	Client *commandbus.Client
	// Gatherer is what /metrics exposes, without authentication: serve the handler on an
	// address only the cluster reaches. Default: prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Readiness, when set, is asked by /readyz before the ping; an error makes the instance not
	// ready. Default: Client.CheckWorkers.
	Readiness func(ctx context.Context) error
	// Logger receives why /readyz failed. Default: discards.
	Logger *slog.Logger
}

// NewProbeHandler returns the handler of a worker's internal address: /metrics (unauthenticated),
// /healthz (the process answers) and /readyz (the database answers a ping and the workers beat;
// it fails as soon as a graceful shutdown begins when Readiness says so). Anything else is 404.
func NewProbeHandler(cfg ProbeConfig) (http.Handler, error) {
	if cfg.Client == nil {
		return nil, errors.New("server: ProbeConfig.Client is required")
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeHealthy(w) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		checkReady(w, r, cfg.Client, cfg.Readiness, cfg.Logger)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteProblem(w, http.StatusNotFound, "NOT_FOUND", "No such route.", "This address serves /metrics, /healthz and /readyz.")
	})
	return mux, nil
}

func writeHealthy(w http.ResponseWriter) {
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// checkReady answers a readiness probe: ready (the workers' heartbeat when nil), then a ping of
// the database (no query over the queues).
func checkReady(w http.ResponseWriter, r *http.Request, client *commandbus.Client, ready func(context.Context) error, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if ready == nil {
		ready = func(context.Context) error { return client.CheckWorkers() }
	}
	// Not ready first: a shutting-down instance answers 503 without touching the database.
	if err := ready(ctx); err != nil {
		logger.Warn("readiness: not ready", "error", err, "worker_id", client.Config().WorkerID)
		httpx.WriteProblem(w, http.StatusServiceUnavailable, "NOT_READY", "The instance is not ready.", err.Error())
		return
	}
	if err := client.Driver().Executor().Ping(ctx); err != nil {
		logger.Warn("readiness: the database does not answer", "error", err, "worker_id", client.Config().WorkerID)
		httpx.WriteProblem(w, http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE", "The database does not answer.", "")
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
