package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
)

// newDLQCommand is `dlq`: the dead-letter queue of parked commands.
func newDLQCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List and resubmit commands parked in the dead-letter queue",
		Long: "The dead-letter queue (the command_dlq table) records every command parked in the troubleshooting\n" +
			"queue: when, by whom, after how many attempts, with which error. Resubmitting puts the command back\n" +
			"with a fresh attempt budget and the same idempotency key; it is audited with --actor and --reason.",
	}
	cmd.AddCommand(newDLQListCommand(), newDLQResubmitCommand(), newDLQRedriveCommand())
	return cmd
}

func newDLQListCommand() *cobra.Command {
	var db DatabaseFlags
	var filter commandbus.DLQFilter
	var output outputFlag
	var broker brokerFlags
	var list listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List parked commands, most recently parked first (--broker: the broker's dead letters)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := list.check(); err != nil {
				return err
			}
			if broker.enabled {
				return listBrokerDeadLetters(cmd, &broker, &output, list.limit)
			}
			client, closeDB, err := openClient(cmd, &db)
			if err != nil {
				return err
			}
			defer closeDB()
			rows, err := readPagesAfter(cmd, &list, commandbus.DLQEntryCursor,
				func(after *commandbus.DLQCursor, limit int) ([]*commandbus.DLQEntry, error) {
					f := filter
					f.After, f.Limit = after, limit
					return client.DLQ().List(cmd.Context(), f)
				})
			if err != nil {
				return err
			}
			return writeList(cmd.OutOrStdout(), &output, rows, "the dead-letter queue is empty",
				"ID\tDOMAIN\tTYPE\tATTEMPTS\tERROR\tPARKED\tBY", func(r *commandbus.DLQEntry) string {
					return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s\t%s", r.CommandID, r.Command.Domain, r.Command.Type, r.Attempts,
						truncate(r.Error, 60), r.ParkedAt.UTC().Format(time.RFC3339), r.ParkedBy)
				})
		},
	}
	db.Register(cmd, "")
	cmd.Flags().StringVar(&filter.Domain, "domain", "", "only this domain")
	cmd.Flags().StringVar(&filter.Type, "type", "", "only this command type")
	cmd.Flags().StringVar(&filter.TenantID, "tenant", "", "only this tenant")
	list.register(cmd, 100)
	output.register(cmd)
	broker.register(cmd, true)
	return cmd
}

func newDLQResubmitCommand() *cobra.Command {
	var db DatabaseFlags
	var op commandbus.OperatorAction
	var bulk bulkFlags
	var output outputFlag
	cmd := &cobra.Command{
		Use:   "resubmit [ID]",
		Short: "Put a parked command back on its queue, with the same idempotency key",
		Long: "Put a parked command back on its queue, with the same idempotency key.\n\nWith an ID, resubmits that\n" +
			"command. Without, resubmits every parked command that matches the filters (--domain, --type, --tenant,\n" +
			"--error-code, --batch, --older-than): --dry-run lists them, --yes acts, each audited separately with\n" +
			"the one --reason.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := bulk.check(len(args) == 1); err != nil {
				return err
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
			dlq := client.DLQ()
			if len(args) == 0 {
				items, err := selectDLQ(cmd.Context(), client.Driver().Executor(), &bulk, time.Now(), bulkPage)
				if err != nil {
					return err
				}
				return runBulk(cmd, &output, "resubmit", bulk.dryRun, items, func(ctx context.Context, id uuid.UUID) (string, error) {
					row, err := dlq.Resubmit(ctx, id, op)
					if err != nil {
						return "", err
					}
					return string(row.Status), nil
				})
			}
			if bulk.dryRun {
				if _, err := dlq.Get(cmd.Context(), id); err != nil {
					return fmt.Errorf("parked command %s: %w", id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "would resubmit command %s; nothing changed\n", id)
				return nil
			}
			row, err := dlq.Resubmit(cmd.Context(), id, op)
			if err != nil {
				return fmt.Errorf("resubmit %s: %w", id, err)
			}
			if output.structured() {
				return output.writeOne(cmd.OutOrStdout(), row)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "command %s is now %s (resubmitted by %s: %s)\n", row.ID, row.Status, op.Actor, op.Reason)
			return nil
		},
	}
	db.Register(cmd, "")
	cmd.Flags().StringVar(&op.Actor, "actor", defaultActor(), "who resubmits (audited)")
	cmd.Flags().StringVar(&op.Reason, "reason", "", "why (audited; required)")
	_ = cmd.MarkFlagRequired("reason")
	bulk.register(cmd, "parked commands")
	output.register(cmd)
	return cmd
}
