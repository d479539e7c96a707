package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/schedule/scheduleweb"
	"github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/tenant"
	"github.com/commandbus/commandbus/tenant/tenantweb"
	"github.com/commandbus/commandbus/tracing"
)

// App is the application serve and worker are assembling, handed to Config.Setup: the client
// created from the configuration file, not started yet, and its runtime, with no model yet.
type App struct {
	// File is the configuration read from --config, with the command's flags applied.
	File *config.File
	// Client is created and not started: register the binary's command and reply handlers on
	// its Config().Handlers (commandbus.AddHandler) and the services that start and stop with it.
	Client *commandbus.Client
	// Runtime is the client's orchestration runtime: register the binary's models on it
	// (process.NewManager(app.Runtime, ...), workflow definitions).
	Runtime *orchestration.Runtime
	// Logger is the command's logger (--log-level).
	Logger *slog.Logger
	// Serving is true when the REST API and console will be served (serve; false for worker).
	Serving bool
	// Extensions mount the binary's own routes, console pages and business context into the REST
	// API and console; Setup appends to it. Ignored when not Serving.
	Extensions []server.Extension
}

// StackOptions configures StartStack.
type StackOptions struct {
	// File is the configuration: the library's keys, and where the database is (database.url,
	// database.schema) and the server's tokens. Required; StartStack sets its Logger and
	// MetricsRegisterer.
	File *config.File
	// Logger receives the stack's logs. Default: discards them.
	Logger *slog.Logger
	// Migrate applies pending migrations before anything starts (a demo does; a deployment runs
	// `migrate up` once instead). Default: false, and an unmigrated database is refused.
	Migrate bool
	// ServeAddr, when set, serves the REST API (/api), the console (/), /metrics, /healthz and
	// /readyz there; ":0" picks a free port (see Stack.Addr). Default: no HTTP server.
	ServeAddr string
	// MetricsAddr, when set, serves /metrics (without authentication), /healthz and /readyz on
	// this internal address, for probes and scrapers inside the cluster; ":0" picks a free port
	// (see Stack.MetricsAddr). Default: none.
	MetricsAddr string

	// interrupts replaces the process's SIGINT/SIGTERM in tests of run.
	interrupts <-chan os.Signal
}

// Stack is an application running in this process: the client with the workers of its enabled
// domains and its runtime, the brokered transports its configuration chooses, and optionally the
// REST API and console. serve and worker run one until interrupted; a binary's own commands (a
// demo) can start one with StartStack.
type Stack struct {
	// Database is the open database; Stop closes it.
	Database *Database
	// Client is the started client.
	Client *commandbus.Client
	// Runtime is the client's runtime, with the binary's models.
	Runtime *orchestration.Runtime
	// Scheduler fires the durable schedules (those created at runtime and those the models
	// declared on the runtime); on an instance whose process-execution feature is off it only
	// manages them. The REST API and console serve it (/api/schedules, the schedules page).
	Scheduler *schedule.Scheduler
	// Server is the REST API and console, or nil when not serving.
	Server *server.Server
	// Addr is the address the REST API listens on (the port chosen when ServeAddr ends in :0),
	// or "" when not serving.
	Addr string
	// MetricsAddr is the address of the internal probes and metrics (StackOptions.MetricsAddr),
	// or "" when none.
	MetricsAddr string

	// draining is set when a graceful shutdown begins: /readyz fails from then on.
	draining        atomic.Bool
	probes          *http.Server
	http            *http.Server
	closeTransports func()
	stopTracing     func(context.Context) error
	logger          *slog.Logger
}

// StartStack opens the database, creates the client, lets cfg.Configure adjust its
// configuration and cfg.Setup register the binary's handlers and models (cfg.Register when Setup
// is nil), wires the brokered transports, starts the client and, with opts.ServeAddr, serves the
// REST API and console. On an error everything started is stopped again. Stop the returned stack
// with Stop.
func StartStack(ctx context.Context, cfg Config, opts StackOptions) (*Stack, error) {
	if opts.File == nil {
		return nil, errors.New("cli: StartStack needs StackOptions.File")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = slog.New(tracing.LogHandler(logger.Handler())) // log lines carry trace and span ids
	file := opts.File
	if cfg.Configure != nil {
		if err := cfg.Configure(file); err != nil {
			return nil, err
		}
	}
	db, err := OpenDatabase(ctx, file.Database.URL, file.WithDefaults().Database.Schema, 0)
	if err != nil {
		return nil, err
	}
	s := &Stack{Database: db, logger: logger}
	ok := false
	defer func() {
		if !ok {
			s.Stop(context.Background())
		}
	}()
	if opts.Migrate {
		if err := MigrateUp(ctx, db, logger); err != nil {
			return nil, err
		}
	} else if err := requireSchema(ctx, db.Driver); err != nil {
		return nil, err
	}
	libConfig := &file.Config
	libConfig.Logger = logger
	tp, stopTracing, err := StartTracing(ctx, file.Tracing, logger)
	if err != nil {
		return nil, err
	}
	s.stopTracing = stopTracing
	if tp != nil {
		libConfig.TracerProvider = tp
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	libConfig.MetricsRegisterer = registry
	client, err := commandbus.NewClient(db.Driver, libConfig)
	if err != nil {
		return nil, err
	}
	s.Client = client
	app := &App{File: file, Client: client, Logger: logger, Serving: opts.ServeAddr != ""}
	if cfg.Setup != nil {
		if app.Runtime, err = orchestration.New(client, orchestration.Config{Admission: file.Tenants.Admission()}); err != nil {
			return nil, err
		}
		if err := cfg.Setup(ctx, app); err != nil {
			return nil, err
		}
	} else if app.Runtime, err = cfg.registerWith(client, file.Tenants); err != nil {
		return nil, err
	}
	s.Runtime = app.Runtime
	if s.Scheduler, err = schedule.New(s.Runtime, schedule.Config{Passive: !*client.Config().Features.ProcessExecution}); err != nil {
		return nil, err
	}
	if s.closeTransports, err = wireTransports(client, app.Runtime, logger); err != nil {
		return nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	if opts.ServeAddr != "" {
		tokens := make([]server.Token, len(file.Server.Tokens))
		for i, t := range file.Server.Tokens { // token-file was read into Token by config.Load
			tokens[i] = server.Token{Subject: t.Subject, Token: t.Token, SHA256: t.TokenSHA256, Role: t.Role}
		}
		extensions := append(app.Extensions, scheduleweb.New(s.Scheduler), tenantweb.New(tenant.New(client)))
		srv, err := server.New(server.Config{Client: client, Runtime: s.Runtime, Extensions: extensions,
			Tokens: tokens, Gatherer: registry, Logger: logger, BrokerDeadLetters: brokerDeadLetterReader(client),
			TrustedProxies: file.Server.TrustedProxyPrefixes(), SecureCookies: file.Server.SecureCookies, Readiness: s.ready})
		if err != nil {
			return nil, err
		}
		s.Server = srv
		listener, err := net.Listen("tcp", opts.ServeAddr)
		if err != nil {
			return nil, fmt.Errorf("serving on %s: %w", opts.ServeAddr, err)
		}
		s.Addr = listener.Addr().String()
		s.http = server.NewHTTPServer("", srv, server.Timeouts{ReadHeader: time.Duration(file.Server.ReadHeaderTimeout),
			Read: time.Duration(file.Server.ReadTimeout), Write: time.Duration(file.Server.WriteTimeout), Idle: time.Duration(file.Server.IdleTimeout)})
		go func() {
			if err := s.http.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("HTTP server stopped", "error", err, "addr", s.Addr)
			}
		}()
	}
	if opts.MetricsAddr != "" {
		probes, err := server.NewProbeHandler(server.ProbeConfig{Client: client, Gatherer: registry, Readiness: s.ready, Logger: logger})
		if err != nil {
			return nil, err
		}
		listener, err := net.Listen("tcp", opts.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("serving metrics and probes on %s: %w", opts.MetricsAddr, err)
		}
		s.MetricsAddr = listener.Addr().String()
		s.probes = server.NewHTTPServer("", probes, server.Timeouts{})
		go func() {
			if err := s.probes.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics and probes server stopped", "error", err, "addr", s.MetricsAddr)
			}
		}()
	}
	ok = true
	return s, nil
}

// ready is the stack's readiness beyond the database ping: not while shutting down, and the
// workers' claim loops beat.
func (s *Stack) ready(context.Context) error {
	if s.draining.Load() {
		return errors.New("shutting down")
	}
	return s.Client.CheckWorkers()
}

// BeginShutdown makes /readyz fail from now on, so load balancers stop sending work here before
// the servers stop. Stop calls it too.
func (s *Stack) BeginShutdown() { s.draining.Store(true) }

// Stop shuts the stack down gracefully within ctx: /readyz fails at once, then HTTP stops
// (requests in flight finish), then the client's workers (within ctx and the configuration's
// shutdown-timeout), the transports, the probes and the database. When ctx ends first, what is
// left is cut short: connections are closed and handlers still running are abandoned to their
// leases. It may be called on a stack whose start failed half way.
func (s *Stack) Stop(ctx context.Context) {
	s.BeginShutdown()
	if s.http != nil {
		httpCtx, cancel := ctx, context.CancelFunc(func() {})
		if _, bounded := ctx.Deadline(); !bounded {
			httpCtx, cancel = context.WithTimeout(ctx, 5*time.Second) // no budget given: the former bound
		}
		if err := s.http.Shutdown(httpCtx); err != nil {
			_ = s.http.Close()
		}
		cancel()
	}
	if s.Server != nil {
		s.Server.Close() // stops the console's sampler
	}
	if s.Client != nil {
		stopCtx, cancel := context.WithTimeout(ctx, s.Client.Config().ShutdownTimeout.Std())
		if err := s.Client.Stop(stopCtx); err != nil {
			s.logger.Warn("stopping the client", "error", err, "worker_id", s.Client.Config().WorkerID)
		}
		cancel()
	}
	if s.closeTransports != nil {
		s.closeTransports()
	}
	if s.stopTracing != nil {
		flushCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := s.stopTracing(flushCtx); err != nil {
			s.logger.Warn("flushing the last spans failed", "error", err)
		}
		cancel()
	}
	if s.probes != nil {
		_ = s.probes.Close()
	}
	if s.Database != nil {
		s.Database.Close()
	}
}

// run starts a stack, reports it to cfg.Ready, runs it until ctx ends (the binary's main ends it
// on SIGINT or SIGTERM) and stops it gracefully within server.shutdown-budget: /readyz fails
// first, server.drain-delay later the servers stop accepting, then the workers stop. A second
// interrupt during the shutdown stops at once.
func run(ctx context.Context, cfg Config, opts StackOptions) error {
	s, err := StartStack(ctx, cfg, opts)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// Interrupted while starting: StartStack stopped what it had started, as asked.
			return nil
		}
		return err
	}
	logger := s.logger
	if s.Addr != "" {
		logger.Info("serving the REST API and console", "url", "http://"+s.Addr+"/")
	}
	if s.MetricsAddr != "" {
		logger.Info("serving metrics and probes", "url", "http://"+s.MetricsAddr+"/metrics")
	}
	logger.Info("running; interrupt to stop", "driver", s.Database.Name(), "worker_id", s.Client.Config().WorkerID)
	if cfg.Ready != nil {
		cfg.Ready(s)
	}
	interrupts := opts.interrupts
	if interrupts == nil {
		<-ctx.Done()
		// Registered only now: the first interrupt is main's (it ended ctx), the next one ours.
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(ch)
		interrupts = ch
	} else {
		select {
		case <-ctx.Done():
		case <-interrupts:
		}
	}
	server := opts.File.WithDefaults().Server
	budget, drain := time.Duration(server.ShutdownBudget), time.Duration(server.DrainDelay)
	logger.Info("shutting down gracefully; interrupt again to stop at once", "worker_id", s.Client.Config().WorkerID,
		"budget", budget.String(), "drain_delay", drain.String())
	s.BeginShutdown()
	stopCtx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var forced atomic.Bool
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-interrupts:
			forced.Store(true)
			logger.Warn("second interrupt: stopping at once; commands and executions in flight return to their queues when their leases expire",
				"worker_id", s.Client.Config().WorkerID)
			cancel()
		case <-done:
		}
	}()
	if drain > 0 {
		select { // load balancers see /readyz fail and stop sending work
		case <-time.After(drain):
		case <-stopCtx.Done():
		}
	}
	s.Stop(stopCtx)
	if forced.Load() {
		return errors.New("stopped at once on a second interrupt")
	}
	if errors.Is(stopCtx.Err(), context.DeadlineExceeded) {
		logger.Warn("the graceful shutdown used its whole budget", "budget", budget.String(), "worker_id", s.Client.Config().WorkerID)
	}
	logger.Info("stopped", "worker_id", s.Client.Config().WorkerID)
	return nil
}
