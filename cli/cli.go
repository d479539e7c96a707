package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/orchestration"
)

// Config is how an application plugs its models into the operational commands.
type Config struct {
	// Register creates the client's runtime with every model the binary runs (processes,
	// workflows), without starting workers. The commands that act on executions by type (executions
	// start, signal, retry, cancel, complete, skip, suspend, resume and tsq processes retry, cancel,
	// complete) call it on a client that only sends and queries. Default (nil): a runtime with no
	// model, so those commands report that the binary does not run the execution's type.
	Register func(client *commandbus.Client) (*orchestration.Runtime, error)

	// CompletionRule, when set, is asked before an operator force-completes an execution
	// (`executions complete`, `tsq processes complete`) with the execution's type and the --state
	// overrides; an error refuses the completion and is shown to the operator. Pass the rule the
	// REST API and the console apply so the three agree. Default (nil): every completion is allowed.
	CompletionRule func(processType string, overrides map[string]any) error

	// Configure, when set, adjusts the configuration serve and worker read from --config before
	// the client is created: defaults for the binary's domains, say. Default: none.
	Configure func(file *config.File) error

	// Setup registers what serve and worker run: the binary's command and reply handlers on
	// app.Client, its models on app.Runtime, and, under serve, its routes and console pages
	// (app.Extensions). The client is started after Setup returns. Default (nil): serve and
	// worker run the models of Register and no handler of their own.
	Setup func(ctx context.Context, app *App) error

	// Ready, when set, is called once serve or worker runs (the client started and the REST API
	// listening), with the running stack: for a readiness signal, say. Default: none.
	Ready func(s *Stack)
}

// register builds the runtime through cfg.Register, or an empty one when it is nil.
func (cfg Config) register(client *commandbus.Client) (*orchestration.Runtime, error) {
	return cfg.registerWith(client, config.TenantsConfig{})
}

// registerWith builds the runtime as register does, with the configuration file's admission
// keys: all of them for the runtime built here; for one Register builds, the capacity-limited
// types (Register passes the other keys to orchestration.New itself, from
// config.TenantsConfig.Admission).
func (cfg Config) registerWith(client *commandbus.Client, tenants config.TenantsConfig) (*orchestration.Runtime, error) {
	if cfg.Register == nil {
		return orchestration.New(client, orchestration.Config{Admission: tenants.Admission()})
	}
	rt, err := cfg.Register(client)
	if err != nil {
		return nil, err
	}
	if err := rt.LimitCapacity(tenants.CapacityLimited...); err != nil {
		return nil, err
	}
	return rt, nil
}

// Commands returns the operational commands, ready to add to an application's root command:
//
//	migrate      apply, revert or show schema migrations of every registered line
//	tsq          the command troubleshooting queue (tsq processes: executions waiting in it)
//	dlq          the dead-letter queue: list and resubmit parked commands
//	executions   list, show, start, signal and act on executions of every model
//	schedules    list, create, pause, resume, trigger and delete durable schedules
//	tenants      list, create, show and update tenants (tier, own limit, status)
//	serve        the workers with the REST API and operator console (Setup, Configure)
//	worker       the workers of the domains a configuration file enables (Setup, Configure)
//	version      the binary's version, commit, Go version and platform (-o json)
//	token        generate a bearer token, or hash one for server.tokens[].token-sha256
//
// Every command takes --log-level and --log-format (text or json). Listings and shows take -o table|json|jsonl (and --json, the same as -o json); an empty
// listing in JSON is [], never null.
//
// Each call returns new commands, so several roots (tests, say) can each hold their own.
func Commands(cfg Config) []*cobra.Command {
	cmds := []*cobra.Command{
		newMigrateCommand(),
		newTSQCommand(cfg),
		newDLQCommand(),
		newExecutionsCommand(cfg),
		newSchedulesCommand(cfg),
		newTenantsCommand(),
		newServeCommand(cfg),
		newWorkerCommand(cfg),
		newVersionCommand(),
		newTokenCommand(),
	}
	for _, c := range cmds {
		addLogFlags(c)
	}
	return cmds
}
