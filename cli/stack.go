package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/schedule/scheduleweb"
	"github.com/commandbus/commandbus/server"
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

	http            *http.Server
	closeTransports func()
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
	}
	libConfig := &file.Config
	libConfig.Logger = logger
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
		if app.Runtime, err = orchestration.New(client, orchestration.Config{}); err != nil {
			return nil, err
		}
		if err := cfg.Setup(ctx, app); err != nil {
			return nil, err
		}
	} else if app.Runtime, err = cfg.register(client); err != nil {
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
		extensions := append(app.Extensions, scheduleweb.New(s.Scheduler))
		srv, err := server.New(server.Config{Client: client, Runtime: s.Runtime, Extensions: extensions,
			Tokens: tokens, Gatherer: registry, Logger: logger, BrokerDeadLetters: brokerDeadLetterReader(client)})
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
	ok = true
	return s, nil
}

// Stop shuts the stack down gracefully: HTTP first, then the client's workers (bounded by the
// configuration's shutdown-timeout), the transports and the database. It may be called on a
// stack whose start failed half way.
func (s *Stack) Stop(ctx context.Context) {
	if s.http != nil {
		shutdownCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = s.http.Shutdown(shutdownCtx)
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
	if s.Database != nil {
		s.Database.Close()
	}
}

// run starts a stack, reports it to cfg.Ready, runs it until ctx ends and stops it gracefully.
func run(ctx context.Context, cfg Config, opts StackOptions) error {
	s, err := StartStack(ctx, cfg, opts)
	if err != nil {
		return err
	}
	logger := s.logger
	if s.Addr != "" {
		logger.Info("serving the REST API and console", "url", "http://"+s.Addr+"/")
	}
	logger.Info("running; interrupt to stop", "driver", s.Database.Name(), "worker_id", s.Client.Config().WorkerID)
	if cfg.Ready != nil {
		cfg.Ready(s)
	}
	<-ctx.Done()
	logger.Info("shutting down gracefully", "worker_id", s.Client.Config().WorkerID)
	s.Stop(context.Background())
	return nil
}
