package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/examples/fulfilment"
	"github.com/commandbus/commandbus/examples/onboarding"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/examples/payments/paymentsweb"
	"github.com/commandbus/commandbus/orchestration"
)

// platformModels plugs this binary's models into the reusable commands of package cli: the
// payments platform (its bounded contexts' handlers, its processes, its simulator, its API
// routes and console pages), the onboarding workflow and the fulfilment saga. serve and worker run them through
// configure and setup; the operational commands through registerModels. setup keeps what it
// created, so that the demo can drive the platform it started.
type platformModels struct {
	// seed seeds the simulator and the batch generator. Default (0): the time.
	seed uint64
	// simulator runs the network simulator whatever simulator.enabled says (the demo does).
	simulator bool
	// concurrency is each payments domain's concurrent-messages when the file sets none.
	// Default: 8.
	concurrency int

	platform   *payments.Platform
	onboarding *onboarding.Flow
}

// cliConfig returns the cli configuration of this binary, with m's hooks.
func (m *platformModels) cliConfig() cli.Config {
	return cli.Config{
		Register: registerModels,
		// The same rule as the REST API and the console: a payment is completed by hand only on
		// evidence that it was made.
		CompletionRule: payments.CheckCompletion,
		Configure:      m.configure,
		Setup:          m.setup,
	}
}

// configure gives the platform's domains their defaults; the file's settings win.
func (m *platformModels) configure(file *config.File) error {
	concurrency := m.concurrency
	if concurrency == 0 {
		concurrency = 8
	}
	domains := payments.DefaultDomainConfigs(concurrency)
	for name, d := range file.Domains {
		domains[name] = d
	}
	file.Domains = domains
	return nil
}

// setup registers the onboarding workflow, the fulfilment saga and the payments platform on app, with the file's
// simulator.poll-interval, payments.max-amounts and fx.url (command-steps are read by the
// processes themselves), and mounts the platform's routes and pages.
func (m *platformModels) setup(_ context.Context, app *cli.App) error {
	opts, err := payments.ConfigOptions(app.File)
	if err != nil {
		return err
	}
	seed := m.seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	opts.Seed, opts.DisableSimulator, opts.Logger = seed, !(m.simulator || app.File.Simulator.Enabled), app.Logger
	opts.Runtime = app.Runtime
	if m.onboarding, err = onboarding.Register(app.Runtime); err != nil {
		return err
	}
	if _, err := fulfilment.NewShop(fulfilment.DemoStock()).Register(app.Runtime); err != nil {
		return err
	}
	if m.platform, err = payments.New(app.Client, opts); err != nil {
		return err
	}
	app.Extensions = append(app.Extensions, paymentsweb.New(m.platform))
	return nil
}

// registerModels creates the client's runtime with every model this binary runs: the payments
// platform's processes (its simulator off), the onboarding workflow and the fulfilment saga.
func registerModels(client *commandbus.Client) (*orchestration.Runtime, error) {
	rt, err := orchestration.New(client, orchestration.Config{})
	if err != nil {
		return nil, err
	}
	if _, err := payments.New(client, payments.Options{Runtime: rt, DisableSimulator: true}); err != nil {
		return nil, err
	}
	if _, err := onboarding.Register(rt); err != nil {
		return nil, err
	}
	if _, err := fulfilment.NewShop(fulfilment.DemoStock()).Register(rt); err != nil {
		return nil, err
	}
	return rt, nil
}

// stack is the reference platform running in this process (see cli.Stack), with the platform and
// the onboarding flow the demo drives.
type stack struct {
	*cli.Stack
	platform   *payments.Platform
	onboarding *onboarding.Flow
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

// startStack starts the reference platform as serve does, with the demo's choices.
func startStack(ctx context.Context, opts stackOptions) (*stack, error) {
	m := &platformModels{seed: opts.Seed, simulator: opts.Simulator, concurrency: opts.Concurrency}
	s, err := cli.StartStack(ctx, m.cliConfig(), cli.StackOptions{File: opts.Config, Logger: opts.Logger,
		Migrate: opts.Migrate, ServeAddr: opts.ServeAddr})
	if err != nil {
		return nil, err
	}
	return &stack{Stack: s, platform: m.platform, onboarding: m.onboarding}, nil
}

// randomToken returns a fresh bearer token.
func randomToken(prefix string) string {
	var b [18]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// The helpers of package cli that the commands kept here (demo, bench, simulate) share with the
// operational ones.
type (
	database      = cli.Database
	databaseFlags = cli.DatabaseFlags
)

var (
	openDatabase  = cli.OpenDatabase
	migrateUp     = cli.MigrateUp
	redact        = cli.Redact
	isPostgresURL = cli.IsPostgresURL
	envOr         = cli.EnvOr
	writeJSON     = cli.WriteJSON
)
