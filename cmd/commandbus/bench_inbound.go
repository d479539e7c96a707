package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/internal/bench"
)

func newBenchInboundCommand() *cobra.Command {
	var cfg bench.InboundConfig
	cmd := &cobra.Command{
		Use:   "inbound",
		Short: "Inbound events: deliveries per second and latency of an event-triggered start, redeliveries included",
		Long: "bench inbound delivers --events distinct inbound events to a workflow they trigger, with --duplicates\n" +
			"redeliveries (a fraction of --events) shuffled in, from --senders goroutines, through the runtime's\n" +
			"ReceiveEvent (the path of POST /api/events and the AMQP and Kafka event consumers). It reports\n" +
			"deliveries per second and the p50/p99/max latency of one delivery, and fails when an event started\n" +
			"twice or not at all. The executions are started, not run.",
	}
	cmd.Flags().IntVar(&cfg.Events, "events", 5000, "distinct events")
	cmd.Flags().Float64Var(&cfg.Duplicates, "duplicates", 0.2, "redeliveries, as a fraction of --events (negative: none)")
	cmd.Flags().IntVar(&cfg.Senders, "senders", 8, "concurrent senders")
	return benchSubcommand(cmd, 16, func(ctx context.Context, db *database, logger *slog.Logger, progress io.Writer) (*bench.InboundResult, error) {
		cfg.Logger, cfg.Progress = logger, progress
		return bench.RunInbound(ctx, db, cfg)
	}, printEventsResult)
}

func printEventsResult(out io.Writer, r *bench.InboundResult) {
	fmt.Fprintf(out, "driver        %s\n", r.Driver)
	fmt.Fprintf(out, "deliveries    %d of %d distinct events in %.2fs: %.0f/s\n", r.Deliveries, r.Events, r.ElapsedS, r.DeliveriesPerS)
	fmt.Fprintf(out, "outcomes      %d started, %d duplicates; %d executions stored\n", r.Started, r.Duplicates, r.Executions)
	fmt.Fprintf(out, "latency       p50 %.2f ms, p99 %.2f ms, max %.2f ms (one delivery: parse, inbox check, idempotent start, inbox record)\n", r.P50Ms, r.P99Ms, r.MaxMs)
	fmt.Fprintf(out, "configuration events=%d duplicates=%g senders=%d seed=%d gomaxprocs=%d\n", r.Config.Events, r.Config.Duplicates, r.Config.Senders, r.Config.Seed, r.GoMaxProcs)
}
