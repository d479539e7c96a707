package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"github.com/commandbus/commandbus/examples/onboarding"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/examples/payments/paymentsweb"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/server"
)

// stack is the reference platform in one process: the client with the workers of its enabled
// domains, the payments platform (bounded contexts, processes, simulator), and optionally the
// REST API and console.
type stack struct {
	db              *database
	client          *commandbus.Client
	platform        *payments.Platform
	onboarding      *onboarding.Flow
	server          *server.Server
	http            *http.Server
	addr            string
	closeTransports func()
	logger          *slog.Logger
}

// stackOptions configures startStack.
type stackOptions struct {
	// Config is the configuration (the library's, and database, server, simulator, payments, fx).
	Config *config.File
	Logger *slog.Logger
	// Migrate applies pending migrations first (the demo does; production runs `migrate up`).
	Migrate bool
	// Seed seeds the simulator and the batch generator.
	Seed uint64
	// Simulator runs the network simulator (risk approvals, L1–L4).
	Simulator bool
	// ServeAddr, when set, serves the REST API and console there.
	ServeAddr string
	// Concurrency is each payments domain's concurrent-messages when the configuration sets none.
	Concurrency int
}

func startStack(ctx context.Context, opts stackOptions) (*stack, error) {
	file := opts.Config
	cfg := &file.Config
	db, err := openDatabase(ctx, file.Database.URL, file.WithDefaults().Database.Schema, 0)
	if err != nil {
		return nil, err
	}
	s := &stack{db: db, logger: opts.Logger}
	ok := false
	defer func() {
		if !ok {
			s.stop(context.Background())
		}
	}()
	if opts.Migrate {
		if err := migrateUp(ctx, db, opts.Logger); err != nil {
			return nil, err
		}
	}
	concurrency := opts.Concurrency
	if concurrency == 0 {
		concurrency = 8
	}
	domains := payments.DefaultDomainConfigs(concurrency)
	for name, d := range cfg.Domains {
		domains[name] = d // the file's settings win
	}
	cfg.Domains = domains
	cfg.Logger = opts.Logger
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.MetricsRegisterer = registry
	// payments.New needs the concrete driver (it reaches the business tables through it).
	client, err := commandbus.NewClient(db.Driver, cfg)
	if err != nil {
		return nil, err
	}
	s.client = client
	// The file's simulator.poll-interval, payments.max-amounts and fx.url; command-steps are read
	// by the processes themselves.
	platformOpts, err := payments.ConfigOptions(file)
	if err != nil {
		return nil, err
	}
	platformOpts.Seed, platformOpts.DisableSimulator, platformOpts.Logger = opts.Seed, !opts.Simulator, opts.Logger
	// One runtime runs every model of the binary: the payment processes and the onboarding
	// workflow.
	if platformOpts.Runtime, err = orchestration.New(client, orchestration.Config{}); err != nil {
		return nil, err
	}
	if s.onboarding, err = onboarding.Register(platformOpts.Runtime); err != nil {
		return nil, err
	}
	platform, err := payments.New(client, platformOpts)
	if err != nil {
		return nil, err
	}
	s.platform = platform
	if s.closeTransports, err = wireTransports(client, opts.Logger); err != nil {
		return nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	if opts.ServeAddr != "" {
		srv, err := server.New(server.Config{Client: client, Runtime: platform.Runtime(), Extensions: []server.Extension{paymentsweb.New(platform)}, Tokens: serverTokens(file.Server.Tokens), Gatherer: registry, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
		listener, err := net.Listen("tcp", opts.ServeAddr)
		if err != nil {
			return nil, fmt.Errorf("serving on %s: %w", opts.ServeAddr, err)
		}
		s.server, s.addr = srv, listener.Addr().String()
		s.http = &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := s.http.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				opts.Logger.Error("HTTP server stopped", "error", err)
			}
		}()
	}
	ok = true
	return s, nil
}

// stop shuts everything down gracefully: HTTP first, then the workers.
func (s *stack) stop(ctx context.Context) {
	if s.http != nil {
		shutdownCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = s.http.Shutdown(shutdownCtx)
		cancel()
	}
	if s.server != nil {
		s.server.Close() // stops the console's sampler
	}
	if s.client != nil {
		stopCtx, cancel := context.WithTimeout(ctx, s.client.Config().ShutdownTimeout.Std())
		if err := s.client.Stop(stopCtx); err != nil {
			s.logger.Warn("stopping the client", "error", err)
		}
		cancel()
	}
	if s.closeTransports != nil {
		s.closeTransports()
	}
	if s.db != nil {
		s.db.Close()
	}
}

// randomToken returns a fresh bearer token.
func randomToken(prefix string) string {
	var b [18]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// serverTokens converts the file's server.tokens to the server's.
func serverTokens(tokens []config.TokenConfig) []server.Token {
	out := make([]server.Token, len(tokens))
	for i, t := range tokens {
		out[i] = server.Token(t)
	}
	return out
}
