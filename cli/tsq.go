package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// newTSQCommand is `tsq`: the command troubleshooting queue, with `tsq processes` for executions.
func newTSQCommand(cfg Config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tsq",
		Short: "Inspect and fix commands in the troubleshooting queue",
		Long: "The troubleshooting queue (TSQ) holds commands that failed permanently or ran out of retries.\n" +
			"Every action is audited with --actor and --reason.",
	}
	cmd.AddCommand(newTSQListCommand(), newTSQShowCommand(),
		newTSQActionCommand("retry", "Put a command back on its queue with a fresh attempt budget"),
		newTSQActionCommand("cancel", "Cancel a command; its sender gets a CANCELLED reply"),
		newTSQActionCommand("complete", "Complete a command with an operator-supplied --result; its sender gets a success reply"),
		newTSQProcessesCommand(cfg))
	return cmd
}

// openClient opens the database and a client that only sends and queries.
func openClient(cmd *cobra.Command, db *DatabaseFlags) (*commandbus.Client, func(), error) {
	database, err := openMigrated(cmd.Context(), db.URL, db.Schema, 4)
	if err != nil {
		return nil, nil, err
	}
	client, err := commandbus.NewClient(database, nil)
	if err != nil {
		database.Close()
		return nil, nil, err
	}
	return client, database.Close, nil
}

func newTSQListCommand() *cobra.Command {
	var db DatabaseFlags
	var filter commandbus.TSQFilter
	var batch string
	var output outputFlag
	var list listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List commands waiting in the troubleshooting queue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := list.check(); err != nil {
				return err
			}
			if batch != "" {
				id, err := uuid.Parse(batch)
				if err != nil {
					return usageErrorf("--batch: %v", err)
				}
				filter.BatchID = id
			}
			client, closeDB, err := openClient(cmd, &db)
			if err != nil {
				return err
			}
			defer closeDB()
			rows, err := readPages(cmd, &list, func(r *commandbus.CommandRow) uuid.UUID { return r.ID },
				func(before uuid.UUID, limit int) ([]*commandbus.CommandRow, error) {
					return client.ListCommands(cmd.Context(), &commandbus.ListParams{Statuses: []driver.CommandStatus{driver.CommandStatusInTSQ},
						Domain: filter.Domain, Type: filter.Type, TenantID: filter.TenantID, BatchID: filter.BatchID, BeforeID: before, Limit: limit})
				})
			if err != nil {
				return err
			}
			return writeList(cmd.OutOrStdout(), &output, rows, "the troubleshooting queue is empty",
				"ID\tDOMAIN\tTYPE\tATTEMPTS\tERROR\tPARKED", func(r *commandbus.CommandRow) string {
					parked := ""
					if r.ParkedAt != nil {
						parked = r.ParkedAt.UTC().Format(time.RFC3339)
					}
					return fmt.Sprintf("%s\t%s\t%s\t%d/%d\t%s: %s\t%s", r.ID, r.Domain, r.Type, r.Attempt, r.MaxAttempts, r.ErrorCode, truncate(r.ErrorMessage, 60), parked)
				})
		},
	}
	db.Register(cmd, "")
	cmd.Flags().StringVar(&filter.Domain, "domain", "", "only this domain")
	cmd.Flags().StringVar(&filter.Type, "type", "", "only this command type")
	cmd.Flags().StringVar(&filter.TenantID, "tenant", "", "only this tenant")
	cmd.Flags().StringVar(&batch, "batch", "", "only this batch id")
	list.register(cmd, 100)
	output.register(cmd)
	return cmd
}

func newTSQShowCommand() *cobra.Command {
	var db DatabaseFlags
	var output outputFlag
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a command with its audit trail",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return usageErrorf("command id: %v", err)
			}
			client, closeDB, err := openClient(cmd, &db)
			if err != nil {
				return err
			}
			defer closeDB()
			row, err := client.GetCommand(cmd.Context(), id)
			if err != nil {
				return fmt.Errorf("command %s: %w", id, err)
			}
			out := cmd.OutOrStdout()
			if output.structured() {
				return output.writeOne(out, row)
			}
			printCommand(out, row)
			return nil
		},
	}
	db.Register(cmd, "")
	output.register(cmd)
	return cmd
}

func printCommand(out io.Writer, r *commandbus.CommandRow) {
	fmt.Fprintf(out, "command     %s\n", r.ID)
	fmt.Fprintf(out, "domain/type %s / %s\n", r.Domain, r.Type)
	fmt.Fprintf(out, "status      %s (attempt %d of %d)\n", r.Status, r.Attempt, r.MaxAttempts)
	if r.ErrorCode != "" {
		fmt.Fprintf(out, "error       %s: %s\n", r.ErrorCode, r.ErrorMessage)
	}
	if r.CorrelationID != uuid.Nil {
		fmt.Fprintf(out, "correlation %s\n", r.CorrelationID)
	}
	if r.ReplyTo != "" {
		fmt.Fprintf(out, "reply to    %s\n", r.ReplyTo)
	}
	if r.IdempotencyKey != "" {
		fmt.Fprintf(out, "idempotency %s\n", r.IdempotencyKey)
	}
	fmt.Fprintf(out, "data        %s\n", r.Data)
	if len(r.Result) > 0 {
		fmt.Fprintf(out, "result      %s\n", r.Result)
	}
	fmt.Fprintln(out, "audit:")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, e := range r.Audit {
		detail := strings.TrimSpace(strings.Join([]string{e.Actor, e.Reason, joinNonEmpty(": ", e.ErrorCode, e.ErrorMessage)}, "  "))
		fmt.Fprintf(tw, "  %s\t%s\t%s→%s\t#%d\t%s\n", e.At.UTC().Format("2006-01-02 15:04:05.000Z"), e.Event, e.From, e.To, e.Attempt, detail)
	}
	_ = tw.Flush()
}

func newTSQActionCommand(action, short string) *cobra.Command {
	var db DatabaseFlags
	var op commandbus.OperatorAction
	var result string
	var bulk bulkFlags
	var output outputFlag
	cmd := &cobra.Command{
		Use:   action + " [ID]",
		Short: short,
		Long: short + ".\n\nWith an ID, acts on that command. Without, acts on every command in the troubleshooting queue that\n" +
			"matches the filters (--domain, --type, --tenant, --error-code, --batch, --older-than): --dry-run lists\n" +
			"them, --yes acts, each audited separately with the one --reason.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := bulk.check(len(args) == 1); err != nil {
				return err
			}
			if action == "complete" && result != "" && !json.Valid([]byte(result)) {
				return usageErrorf("--result must be JSON, got %q", result)
			}
			var id uuid.UUID
			if len(args) == 1 {
				var err error
				if id, err = uuid.Parse(args[0]); err != nil {
					return usageErrorf("command id: %v", err)
				}
			}
			client, closeDB, err := openClient(cmd, &db)
			if err != nil {
				return err
			}
			defer closeDB()
			tsq := client.TSQ()
			act := func(ctx context.Context, id uuid.UUID) (*commandbus.CommandRow, error) {
				switch action {
				case "retry":
					return tsq.Retry(ctx, id, op)
				case "cancel":
					return tsq.Cancel(ctx, id, op)
				default:
					return tsq.Complete(ctx, id, json.RawMessage(result), op)
				}
			}
			if len(args) == 0 {
				items, err := selectCommands(cmd.Context(), client.Driver().Executor(), &bulk, time.Now())
				if err != nil {
					return err
				}
				return runBulk(cmd, &output, action, bulk.dryRun, items, func(ctx context.Context, id uuid.UUID) (string, error) {
					row, err := act(ctx, id)
					if err != nil {
						return "", err
					}
					return string(row.Status), nil
				})
			}
			if bulk.dryRun {
				row, err := client.GetCommand(cmd.Context(), id)
				if err != nil {
					return fmt.Errorf("command %s: %w", id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "would %s command %s (now %s); nothing changed\n", action, id, row.Status)
				return nil
			}
			row, err := act(cmd.Context(), id)
			if err != nil {
				return fmt.Errorf("%s %s: %w", action, id, err)
			}
			if output.structured() {
				return output.writeOne(cmd.OutOrStdout(), row)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "command %s is now %s (by %s: %s)\n", row.ID, row.Status, op.Actor, op.Reason)
			return nil
		},
	}
	db.Register(cmd, "")
	cmd.Flags().StringVar(&op.Actor, "actor", defaultActor(), "who takes the action (audited)")
	cmd.Flags().StringVar(&op.Reason, "reason", "", "why (audited; required)")
	_ = cmd.MarkFlagRequired("reason")
	if action == "complete" {
		cmd.Flags().StringVar(&result, "result", "", "the result to record and reply with, as JSON")
	}
	bulk.register(cmd, "commands")
	output.register(cmd)
	return cmd
}
