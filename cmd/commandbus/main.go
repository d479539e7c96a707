// Command commandbus runs the commandbus engine: workers, migrations, operator tools, benchmarks
// and the demo.
//
//	go run ./cmd/commandbus demo              # the reference platform on embedded SQLite
//	commandbus migrate up --database URL      # apply schema migrations
//	commandbus worker --config worker.yml     # run the workers of the configured domains
//	commandbus tsq list --database URL        # the troubleshooting queue
//	commandbus dlq list|resubmit --database URL # the dead-letter queue
//	commandbus bench bus --database URL --json
//
// The operational commands (migrate, tsq, dlq, executions) and serve and worker come from package
// cli, with this binary's models plugged in (models.go); demo, bench and simulate live here.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	os.Exit(cli.ExitCode(err))
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "commandbus",
		Short:         "Reliable multi-step business processes on PostgreSQL",
		Long:          "commandbus runs command handlers, durable processes and the operator tools of the commandbus engine.\nStart with `commandbus demo`.",
		SilenceUsage:  true,
		SilenceErrors: false,
		Version:       "build", // --version prints cli.VersionTemplate
	}
	root.SetVersionTemplate(cli.VersionTemplate())
	root.AddCommand(cli.Commands((&platformModels{}).cliConfig())...)
	root.AddCommand(
		newBenchCommand(),
		newDemoCommand(),
		newSimulateCommand(),
	)
	cli.PrepareRoot(root)
	return root
}
