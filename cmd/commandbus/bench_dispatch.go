package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/internal/bench"
)

func newBenchDispatchCommand() *cobra.Command {
	var cfg bench.DispatchConfig
	cmd := &cobra.Command{
		Use:   "dispatch",
		Short: "Tenant admission: admitted starts/s, enqueue to running, limit violations, fairness behind a backlog",
		Long: "bench dispatch creates --tenants tenants (one in ten ENTERPRISE, three in ten PRO, the rest FREE)\n" +
			"and runs --replicas clients with a capacity-limited one-step workflow. It measures enqueue to\n" +
			"running with a free slot (one execution per tenant, one at a time), the admitted starts per\n" +
			"second of --items executions started from every replica at once, limit violations seen by the\n" +
			"steps and by an independent sampler of the database, and how long a FREE tenant's first\n" +
			"execution waits while an ENTERPRISE tenant has --backlog queued.",
	}
	cmd.Flags().IntVar(&cfg.Tenants, "tenants", 100, "tenants, of a fixed tier mix")
	cmd.Flags().IntVar(&cfg.Items, "items", 10000, "executions of the throughput phase")
	cmd.Flags().IntVar(&cfg.Backlog, "backlog", 20000, "the ENTERPRISE tenant's queue in the fairness phase")
	cmd.Flags().IntVar(&cfg.Replicas, "replicas", 2, "clients (engines) on the database")
	cmd.Flags().DurationVar(&cfg.Work, "work", 0, "each execution's step duration (default 2ms)")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", 200, "executions one replica runs at once")
	cmd.Flags().IntVar(&cfg.StartBatch, "start-batch", 100, "executions per start")
	return benchSubcommand(cmd, 24, func(ctx context.Context, db *database, logger *slog.Logger, progress io.Writer) (*bench.DispatchResult, error) {
		cfg.Logger, cfg.Progress = logger, progress
		return bench.RunDispatch(ctx, db, cfg)
	}, func(out io.Writer, r *bench.DispatchResult) {
		fmt.Fprintf(out, "%s: %d tenants (%d slots), %d replicas: %d executions admitted in %.2fs = %.0f admitted starts/s (work %s, concurrency %d, start batch %d, gomaxprocs %d)\n",
			r.Driver, r.Tenants, r.Slots, r.Config.Replicas, r.Items, r.ElapsedS, r.AdmittedPerS, r.Config.Work, r.Config.Concurrency, r.Config.StartBatch, r.GoMaxProcs)
		fmt.Fprintf(out, "enqueue to running with a free slot: p50 %.1f ms, p99 %.1f ms\n", r.FreeSlotP50Ms, r.FreeSlotP99Ms)
		fmt.Fprintf(out, "limit violations: %d seen by the steps, %d in %d samples of the database\n", r.StepViolations, r.SampledViolations, r.Samples)
		fmt.Fprintf(out, "a FREE tenant's first execution ran %.1f ms after its start, behind %d queued for an ENTERPRISE tenant\n", r.FreeBehindBacklogMs, r.BacklogQueued)
	})
}
