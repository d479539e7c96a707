package cli

import (
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
)

// newTSQProcessesCommand is `commandbus tsq processes`: the process troubleshooting queue.
func newTSQProcessesCommand(cfg Config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "processes",
		Short: "Inspect and fix process executions in the troubleshooting queue",
		Long: "Executions wait in the troubleshooting queue after a permanent step failure, exhausted retries, a\n" +
			"wait timeout, a deadline or a nondeterministic replay. Every action is audited with --actor and --reason.",
	}
	cmd.AddCommand(newTSQProcessesListCommand(), newTSQProcessesShowCommand(),
		newTSQProcessesActionCommand(cfg, "retry", "Resume an execution with a fresh attempt budget"),
		newTSQProcessesActionCommand(cfg, "cancel", "Cancel an execution (--compensate runs its compensations first)"),
		newTSQProcessesActionCommand(cfg, "complete", "Force-complete an execution (--state sets state fields first)"))
	return cmd
}

// openProcesses opens the database with every model of this binary registered on one runtime
// (through cfg.Register), so executions of their types can be acted on. It starts no workers.
func openProcesses(cmd *cobra.Command, db *DatabaseFlags, cfg Config) (*commandbus.Client, *orchestration.Runtime, func(), error) {
	database, err := openMigrated(cmd.Context(), db.URL, db.Schema, 4)
	if err != nil {
		return nil, nil, nil, err
	}
	client, err := commandbus.NewClient(database.Driver, &commandbus.Config{Logger: slog.New(slog.DiscardHandler)})
	var rt *orchestration.Runtime
	if err == nil {
		rt, err = cfg.register(client)
	}
	if err != nil {
		database.Close()
		return nil, nil, nil, err
	}
	return client, rt, database.Close, nil
}

func newTSQProcessesListCommand() *cobra.Command {
	var db DatabaseFlags
	var output outputFlag
	var typ string
	var list listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List executions waiting in the troubleshooting queue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := list.check(); err != nil {
				return err
			}
			database, err := openMigrated(cmd.Context(), db.URL, db.Schema, 2)
			if err != nil {
				return err
			}
			defer database.Close()
			rows, err := readPages(cmd, &list, rowID, func(before uuid.UUID, limit int) ([]*driver.ExecutionRow, error) {
				return database.Executor().ExecutionList(cmd.Context(), &driver.ExecutionListParams{
					Statuses: []driver.ExecutionStatus{driver.ExecutionWaitingForTSQ}, Model: process.Model, Type: typ, BeforeID: before, Limit: limit})
			})
			if err != nil {
				return err
			}
			return writeList(cmd.OutOrStdout(), &output, rows, "the process troubleshooting queue is empty",
				"ID\tTYPE\tSTEP\tERROR\tSINCE", func(x *driver.ExecutionRow) string {
					return fmt.Sprintf("%s\t%s\t%s\t%s: %s\t%s", x.ID, x.Type, x.Step, x.ErrorCode, truncate(x.ErrorMessage, 60), x.UpdatedAt.UTC().Format("2006-01-02 15:04:05Z"))
				})
		},
	}
	db.Register(cmd, "")
	cmd.Flags().StringVar(&typ, "type", "", "only this process type")
	list.register(cmd, 200)
	output.register(cmd)
	return cmd
}

func newTSQProcessesShowCommand() *cobra.Command {
	var db DatabaseFlags
	var output outputFlag
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show an execution with its state and log",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return usageErrorf("execution id: %v", err)
			}
			database, err := openMigrated(cmd.Context(), db.URL, db.Schema, 2)
			if err != nil {
				return err
			}
			defer database.Close()
			exec := database.Executor()
			row, err := exec.ExecutionGet(cmd.Context(), id)
			if err != nil {
				return fmt.Errorf("execution %s: %w", id, err)
			}
			log, err := exec.ExecutionLogList(cmd.Context(), id)
			if err != nil {
				return err
			}
			if output.structured() {
				return output.writeOne(cmd.OutOrStdout(), process.InstanceJSON{ExecutionRow: row, Log: log})
			}
			printExecution(cmd.OutOrStdout(), row, log)
			return nil
		},
	}
	db.Register(cmd, "")
	output.register(cmd)
	return cmd
}

func printExecution(out io.Writer, x *driver.ExecutionRow, log []*driver.ExecutionLogEntry) {
	fmt.Fprintf(out, "execution   %s\ntype        %s (domain %s)\nstatus      %s at %s\n", x.ID, x.Type, x.Domain, x.Status, x.Step)
	if x.CurrentWait != "" {
		fmt.Fprintf(out, "waiting on  %s\n", x.CurrentWait)
	}
	if x.ErrorCode != "" {
		fmt.Fprintf(out, "error       %s: %s\n", x.ErrorCode, x.ErrorMessage)
	}
	fmt.Fprintf(out, "state       %s\nlog:\n", x.State)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, e := range log {
		attempt := ""
		if e.Attempt > 0 {
			attempt = fmt.Sprintf("attempt %d", e.Attempt)
			if e.MaxAttempts > 0 {
				attempt += fmt.Sprintf(" of %d", e.MaxAttempts)
			}
		}
		timing := ""
		if d, ok := e.Latency(); ok {
			timing = fmt.Sprintf("started %s took %s", e.StartedAt.UTC().Format("15:04:05.000"), d)
		}
		fmt.Fprintf(tw, "  %3d\t%s\t%s %s\t%s\t%s\t%s\t%s\n", e.Seq, e.At.UTC().Format("15:04:05.000"), e.EntryType, e.Name, e.StepStatus, attempt,
			timing, joinNonEmpty("  ", joinNonEmpty(": ", e.ErrorCode, e.ErrorMessage), e.Actor, e.Reason))
	}
	_ = tw.Flush()
}

// newTSQProcessesActionCommand is `tsq processes retry|cancel|complete`: the same as the
// executions action of that name.
func newTSQProcessesActionCommand(cfg Config, action, short string) *cobra.Command {
	return newExecutionActionCommand(cfg, action, short, process.Model)
}

// rowID is the paging key of an execution row.
func rowID(x *driver.ExecutionRow) uuid.UUID { return x.ID }
