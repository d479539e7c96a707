package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/internal/relaybench"
)

func newBenchRelayCommand() *cobra.Command {
	var (
		url     string
		keep    bool
		asJSON  bool
		brokers string
		cfg     relaybench.Config
	)
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Throughput of the outbox relay to Kafka or RabbitMQ, and commit→publish latency",
		Long: "bench relay writes --messages outbox messages and relays them to --target (kafka: an in-process\n" +
			"kfake cluster unless --brokers is given; amqp: the broker at --amqp-url, on a scratch queue).\n" +
			"Without --rate it writes them all first and times the relay draining them (throughput); with\n" +
			"--rate it writes that many per second, one per transaction, while the relay runs, and reports\n" +
			"the latency from each commit to the broker's acknowledgement (p50, p99). The in-process kfake\n" +
			"cluster is only in builds with the kfake tag (go run -tags kfake ./cmd/commandbus bench relay).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			logger, err := cli.Logger(cmd, cmd.ErrOrStderr(), cli.LogOptions{Level: slog.LevelWarn})
			if err != nil {
				return err
			}
			db, err := benchDatabase(ctx, url, keep, 16, logger)
			if err != nil {
				return err
			}
			defer db.Close()
			if brokers != "" {
				cfg.Brokers = strings.Split(brokers, ",")
			}
			cfg.Logger = logger
			if !asJSON {
				fmt.Fprintf(cmd.ErrOrStderr(), "bench relay: %d messages to %s on %s\n", cfg.Messages, cfg.Target, db.Name())
			}
			res, err := relaybench.Run(ctx, db, cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "target        %s (%s)\n", res.Config.Target, res.Driver)
			fmt.Fprintf(out, "messages      %d in %.2fs\n", res.Messages, res.ElapsedS)
			fmt.Fprintf(out, "throughput    %.0f messages/s\n", res.MessagesPerS)
			if res.Config.Rate > 0 {
				fmt.Fprintf(out, "latency       commit→publish p50 %.1f ms, p99 %.1f ms, max %.1f ms at %d messages/s\n", res.P50Ms, res.P99Ms, res.MaxMs, res.Config.Rate)
			}
			fmt.Fprintf(out, "configuration batch-size=%d workers=%d write-batch=%d keys=%d gomaxprocs=%d\n",
				res.Config.BatchSize, res.Config.Workers, res.Config.WriteBatch, res.Config.Keys, res.GoMaxProcs)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "database", os.Getenv("COMMANDBUS_DATABASE_URL"), "database URL (postgres://... or sqlite://FILE); empty: a temporary SQLite file")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the benchmark schema on PostgreSQL")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&cfg.Target, "target", relaybench.TargetKafka, "kafka or amqp")
	cmd.Flags().IntVar(&cfg.Messages, "messages", 20000, "messages to relay")
	cmd.Flags().IntVar(&cfg.Rate, "rate", 0, "messages written per second, one per transaction (0: write all first, then drain)")
	cmd.Flags().IntVar(&cfg.WriteBatch, "write-batch", 1000, "messages per transaction when --rate is 0")
	cmd.Flags().IntVar(&cfg.BatchSize, "batch-size", 2000, "messages the relay claims and publishes at once")
	cmd.Flags().IntVar(&cfg.Workers, "workers", 2, "concurrent relay loops")
	cmd.Flags().DurationVar(&cfg.PollInterval, "poll-interval", time.Second, "the relay's sweeper interval")
	cmd.Flags().IntVar(&cfg.Keys, "keys", 10000, "distinct business keys")
	cmd.Flags().StringVar(&brokers, "brokers", "", "Kafka brokers (comma-separated); empty: in-process kfake")
	cmd.Flags().StringVar(&cfg.AMQPURL, "amqp-url", envOr("COMMANDBUS_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"), "RabbitMQ for --target amqp")
	return cmd
}
