package cli

import (
	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
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
}

// register builds the runtime through cfg.Register, or an empty one when it is nil.
func (cfg Config) register(client *commandbus.Client) (*orchestration.Runtime, error) {
	if cfg.Register == nil {
		return orchestration.New(client, orchestration.Config{})
	}
	return cfg.Register(client)
}

// Commands returns the operational commands, ready to add to an application's root command:
//
//	migrate      apply, revert or show schema migrations of every registered line
//	tsq          the command troubleshooting queue (tsq processes: executions waiting in it)
//	dlq          the dead-letter queue: list and resubmit parked commands
//	executions   list, show, start, signal and act on executions of every model
//	schedules    list, create, pause, resume, trigger and delete durable schedules
//
// Each call returns new commands, so several roots (tests, say) can each hold their own.
func Commands(cfg Config) []*cobra.Command {
	return []*cobra.Command{
		newMigrateCommand(),
		newTSQCommand(cfg),
		newDLQCommand(),
		newExecutionsCommand(cfg),
		newSchedulesCommand(cfg),
	}
}
