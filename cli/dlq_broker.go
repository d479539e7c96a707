package cli

import (
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/server/console"
	"github.com/commandbus/commandbus/transport/amqp"
)

// brokerFlags name the AMQP broker whose dead letters `dlq list --broker` and `dlq redrive` see.
type brokerFlags struct {
	enabled bool
	url     string
	prefix  string
}

func (b *brokerFlags) register(cmd *cobra.Command, withSwitch bool) {
	if withSwitch {
		cmd.Flags().BoolVar(&b.enabled, "broker", false, "list the broker's dead letters (APP.DLQ, APP.PARKED.Q) instead of command_dlq")
	}
	url := os.Getenv("COMMANDBUS_AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	prefix := os.Getenv("COMMANDBUS_AMQP_PREFIX")
	if prefix == "" {
		prefix = outbox.DefaultPrefix
	}
	cmd.Flags().StringVar(&b.url, "amqp-url", url, "the AMQP 0-9-1 broker (env COMMANDBUS_AMQP_URL)")
	cmd.Flags().StringVar(&b.prefix, "amqp-prefix", prefix, "the queue-name prefix (env COMMANDBUS_AMQP_PREFIX)")
}

func (b *brokerFlags) topology() amqp.Topology { return amqp.Topology{Prefix: b.prefix} }

// listBrokerDeadLetters prints the counts of the broker's dead-letter and parking queues and up
// to limit of their messages, which stay where they are.
func listBrokerDeadLetters(cmd *cobra.Command, b *brokerFlags, output *outputFlag, limit int) error {
	if _, err := output.get(); err != nil {
		return err
	}
	report, err := amqp.ListDeadLetters(cmd.Context(), b.url, b.topology(), limit)
	if err != nil {
		return fmt.Errorf("broker dead letters: %w", err)
	}
	out := cmd.OutOrStdout()
	if output.structured() {
		return output.writeOne(out, report)
	}
	queues := make([]string, 0, len(report.Counts))
	for q := range report.Counts {
		queues = append(queues, q)
	}
	sort.Strings(queues)
	for _, q := range queues {
		fmt.Fprintf(out, "%s: %d message(s)\n", q, report.Counts[q])
	}
	if len(report.Messages) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	return writeList(out, &outputFlag{format: OutputTable}, report.Messages, "", "QUEUE\tMESSAGE\tCOMMAND\tFROM\tERROR", func(d *amqp.DeadLetter) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", d.Queue, d.MessageID, d.CommandID, d.OriginalQueue, truncate(d.Error, 60))
	})
}

// newDLQRedriveCommand is `dlq redrive`: broker dead letters back to the queues they came from.
func newDLQRedriveCommand() *cobra.Command {
	var b brokerFlags
	var parked bool
	var max int
	cmd := &cobra.Command{
		Use:   "redrive",
		Short: "Move the broker's dead letters back to the queues they came from",
		Long: "Messages a consumer could not process (not an envelope, naming a command this database does not hold)\n" +
			"wait in the broker's dead-letter queue (APP.DLQ); those of a schema version no consumer reads yet in\n" +
			"APP.PARKED.Q (--parked). Once the cause is fixed, redrive puts them back on their queues. Commands\n" +
			"parked in the database (command_dlq) are resubmitted with `dlq resubmit`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			moved, err := amqp.RedriveDeadLetters(cmd.Context(), b.url, b.topology(), parked, max)
			fmt.Fprintf(cmd.OutOrStdout(), "%d message(s) moved back to their queues\n", moved)
			return err
		},
	}
	b.register(cmd, false)
	cmd.Flags().BoolVar(&parked, "parked", false, "redrive the parking queue (APP.PARKED.Q) instead of APP.DLQ")
	cmd.Flags().IntVar(&max, "max", 0, "most messages to move (0: all)")
	return cmd
}

// brokerDeadLetterReader is the console's view of client's AMQP 0-9-1 broker dead letters, or
// nil when no domain uses that transport.
func brokerDeadLetterReader(client *commandbus.Client) console.BrokerDeadLetterReader {
	if len(plumbing.AMQPDomains(client)) == 0 {
		return nil
	}
	cfg := client.Config().AMQP
	topology := amqp.Topology{Prefix: cfg.Prefix, BackoutThreshold: cfg.BackoutThreshold}
	return func(ctx context.Context, limit int) (*console.BrokerDeadLetters, error) {
		report, err := amqp.ListDeadLetters(ctx, cfg.URL, topology, limit)
		if err != nil {
			return nil, err
		}
		out := &console.BrokerDeadLetters{}
		for _, q := range []string{topology.DeadLetterQueue(), topology.ParkingQueue()} {
			out.Counts = append(out.Counts, console.BrokerQueueCount{Queue: q, Messages: report.Counts[q]})
		}
		for _, m := range report.Messages {
			out.Messages = append(out.Messages, console.BrokerDeadLetter{Queue: m.Queue, OriginalQueue: m.OriginalQueue,
				MessageID: m.MessageID, CommandID: m.CommandID, Type: m.Type, Error: m.Error})
		}
		return out, nil
	}
}
