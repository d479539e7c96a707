package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/internal/bench"
)

func newBenchEventsCommand() *cobra.Command {
	var cfg bench.EventsConfig
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Lifecycle events at the rate bench workflow produces: commit → publish latency to Kafka",
		Long: "bench events runs bench workflow with lifecycle events on: every event is written to the outbox in\n" +
			"its checkpoint's transaction and a relay publishes it to an in-process Kafka (kfake), keyed by\n" +
			"execution. It reports events/s and the latency from each event's write (just before its commit)\n" +
			"to Kafka's acknowledgement: p50, p99, max. The in-process Kafka is a test double kept out of the\n" +
			"release binary: run it from a build with the kfake tag (go run -tags kfake ./cmd/commandbus bench events).",
	}
	cmd.Flags().IntVar(&cfg.Workflows, "workflows", 2000, "workflows to run")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", 400, "executions run at once")
	cmd.Flags().IntVar(&cfg.Rate, "rate", 0, "workflows started per second (0: all at once, a burst)")
	cmd.Flags().DurationVar(&cfg.MaxLag, "max-lag", 0, "pace the workflows by the relay: checkpoints writing events wait while it lags more than this (0: no pacing)")
	cmd.Flags().BoolVar(&cfg.Handoff, "handoff", true, "hand each checkpoint's events to the relay right after the commit (orchestration.Runtime.HandOffOutbox), as serve and worker do by default (outbox.handoff); --handoff=false leaves them to its claims")
	return benchSubcommand(cmd, 24, func(ctx context.Context, db *database, logger *slog.Logger, progress io.Writer) (*bench.EventsResult, error) {
		cfg.Logger, cfg.Progress = logger, progress
		return bench.RunEvents(ctx, db, cfg)
	}, func(out io.Writer, res *bench.EventsResult) {
		fmt.Fprintf(out, "%s: %d workflows of %s in %.2fs = %.0f workflows/s; %d lifecycle events = %.0f events/s\n",
			res.Driver, res.Workflows, res.Shape, res.ElapsedS, res.WorkflowsPerS, res.Events, res.EventsPerS)
		fmt.Fprintf(out, "latency       write→publish (kfake) p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", res.P50Ms, res.P99Ms, res.MaxMs)
		fmt.Fprintf(out, "latency       commit→publish (kfake) p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d events timed from their commit)\n",
			res.CommitP50Ms, res.CommitP99Ms, res.CommitMaxMs, res.CommitTimed)
		fmt.Fprintf(out, "configuration concurrency=%d rate=%s max-lag=%s handoff=%t relay batch-size=2000 workers=2 gomaxprocs=%d\n",
			res.Config.Concurrency, rateLabel(res.Config.Rate), res.Config.MaxLag, res.Config.Handoff, res.GoMaxProcs)
		fmt.Fprintf(out, "relay         %d claims (%d empty); %d events handed over after their commit, %d of them left to the claims\n",
			res.Claims, res.EmptyClaims, res.HandedOff, res.HandedOffLeft)
	})
}

// rateLabel says how the workflows were started.
func rateLabel(rate int) string {
	if rate <= 0 {
		return "burst"
	}
	return fmt.Sprintf("%d/s", rate)
}
