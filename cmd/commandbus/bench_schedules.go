package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/internal/bench"
)

func newBenchSchedulesCommand() *cobra.Command {
	var cfg bench.SchedulesConfig
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "Lateness of durable schedules: N schedules firing every second, across replicas",
		Long: "bench schedules creates --schedules schedules of a one-step workflow on cron \"* * * * * *\", runs\n" +
			"--replicas clients with their schedulers on the database (engines off: it measures starts),\n" +
			"and over --duration after --warmup reports each tick's lateness (tick to when its execution\n" +
			"became runnable: the commit of its insert, or its not-before time, the tick, when it was\n" +
			"inserted ahead) p50/p99/max, the ticks that started nothing, and duplicate starts (fires\n" +
			"recorded beyond the executions stored).",
	}
	cmd.Flags().IntVar(&cfg.Schedules, "schedules", 10000, "schedules firing every second")
	cmd.Flags().DurationVar(&cfg.Duration, "duration", 0, "measured window (default 10s)")
	cmd.Flags().DurationVar(&cfg.Warmup, "warmup", 0, "unmeasured start (default 3s)")
	cmd.Flags().IntVar(&cfg.Replicas, "replicas", 2, "clients with a scheduler each")
	cmd.Flags().IntVar(&cfg.ClaimBatch, "claim-batch", 500, "schedules one claim takes")
	cmd.Flags().IntVar(&cfg.StartConcurrency, "start-concurrency", 16, "executions one replica starts at once")
	cmd.Flags().DurationVar(&cfg.Lead, "lead", 0, "claim ticks this long ahead and insert their executions runnable from the tick (default 1s; negative: off)")
	cmd.Flags().BoolVar(&cfg.Engines, "engines", false, "run the replicas' engines too and report each tick's run lateness (tick to the first commit of its run)")
	return benchSubcommand(cmd, 40, func(ctx context.Context, db *database, logger *slog.Logger, progress io.Writer) (*bench.SchedulesResult, error) {
		cfg.Logger, cfg.Progress = logger, progress
		return bench.RunSchedules(ctx, db, cfg)
	}, func(out io.Writer, r *bench.SchedulesResult) {
		fmt.Fprintf(out, "%s: %d schedules every second, %d replicas: %d ticks in %s, %d started (%.0f/s), %d missing, %d duplicate starts\n",
			r.Driver, r.Schedules, r.Config.Replicas, r.Ticks, r.Config.Duration, r.Started, r.StartsPerS, r.Missing, r.Duplicates)
		fmt.Fprintf(out, "lateness (tick to runnable) p50 %.1f ms, p99 %.1f ms, max %.1f ms, earliest %.1f ms (claim-batch %d, start-concurrency %d, lead %s, gomaxprocs %d)\n",
			r.LatenessP50Ms, r.LatenessP99Ms, r.LatenessMaxMs, r.LatenessMinMs, r.Config.ClaimBatch, r.Config.StartConcurrency, r.Config.Lead, r.GoMaxProcs)
		if r.Config.Engines {
			fmt.Fprintf(out, "engines on: %d ticks ran, run lateness (tick to the first commit of the run) p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d ran before the tick\n",
				r.Ran, r.RunLatenessP50Ms, r.RunLatenessP99Ms, r.RunLatenessMaxMs, r.RunEarly)
		}
	})
}
