package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/internal/bench"
)

func newBenchSignalCommand() *cobra.Command {
	var cfg bench.SignalConfig
	cmd := &cobra.Command{
		Use:   "signal",
		Short: "Signal latency: send a signal to a waiting execution and time it until its runner resumes",
		Long: "bench signal creates --executions executions waiting for a signal, then sends each one signal\n" +
			"(--senders at a time, each waiting for its execution to resume before the next) and measures\n" +
			"from the send to the execution's runner seeing the signal. It reports p50/p99/max. Target on\n" +
			"PostgreSQL: p50 under 5 ms.",
	}
	cmd.Flags().IntVar(&cfg.Executions, "executions", 1000, "waiting executions, each sent one signal")
	cmd.Flags().IntVar(&cfg.Senders, "senders", 1, "concurrent senders (1: one signal at a time)")
	return benchSubcommand(cmd, 16, func(ctx context.Context, db *database, logger *slog.Logger, progress io.Writer) (*bench.SignalResult, error) {
		cfg.Logger, cfg.Progress = logger, progress
		return bench.RunSignal(ctx, db, cfg)
	}, printSignalResult)
}

func printSignalResult(out io.Writer, r *bench.SignalResult) {
	fmt.Fprintf(out, "driver        %s\n", r.Driver)
	fmt.Fprintf(out, "signals       %d in %.2fs\n", r.Executions, r.ElapsedS)
	fmt.Fprintf(out, "latency       p50 %.2f ms, p99 %.2f ms, max %.2f ms (signal sent to waiting execution resumed)\n", r.P50Ms, r.P99Ms, r.MaxMs)
	fmt.Fprintf(out, "configuration executions=%d senders=%d gomaxprocs=%d\n", r.Config.Executions, r.Config.Senders, r.GoMaxProcs)
}

func newBenchTimersCommand() *cobra.Command {
	var cfg bench.TimersConfig
	cmd := &cobra.Command{
		Use:   "timers",
		Short: "Timer lateness: N durable timers due within a window, none fired twice or lost",
		Long: "bench timers schedules --timers durable timers on --executions waiting executions (round robin),\n" +
			"due evenly within --window after --lead, and measures how late each execution's runner sees its\n" +
			"timers due (p50/p99/max lateness). It fails when a timer fired twice, was never seen due or is left\n" +
			"pending in the database.\n" +
			"Target on PostgreSQL: 10,000 timers within 1s with p99 lateness under 250 ms.",
	}
	cmd.Flags().IntVar(&cfg.Timers, "timers", 10000, "timers to schedule")
	cmd.Flags().IntVar(&cfg.Executions, "executions", 1000, "executions the timers are spread over (at most --timers)")
	cmd.Flags().DurationVar(&cfg.Window, "window", time.Second, "span the timers fall due in")
	cmd.Flags().DurationVar(&cfg.Lead, "lead", 0, "time from the start of scheduling to the first timer; scheduling must end within it (0: 2s + 300µs per execution)")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", 1000, "executions the engine runs at once")
	cmd.Flags().DurationVar(&cfg.Settle, "settle", time.Second, "how long the engine keeps running after the last timer, to catch one firing twice")
	return benchSubcommand(cmd, 24, func(ctx context.Context, db *database, logger *slog.Logger, progress io.Writer) (*bench.TimersResult, error) {
		cfg.Logger, cfg.Progress = logger, progress
		return bench.RunTimers(ctx, db, cfg)
	}, printTimersResult)
}

func printTimersResult(out io.Writer, r *bench.TimersResult) {
	fmt.Fprintf(out, "driver        %s\n", r.Driver)
	fmt.Fprintf(out, "timers        %d on %d executions, due within %s (scheduled in %.2fs)\n", r.Timers, r.Executions, r.Config.Window, r.ScheduleS)
	fmt.Fprintf(out, "fired         %d (fired twice %d, lost %d, left pending %d)\n", r.Fired, r.FiredTwice, r.Lost, r.Unfired)
	fmt.Fprintf(out, "lateness      p50 %.2f ms, p99 %.2f ms, max %.2f ms (due time to runner seeing it due)\n", r.P50LateMs, r.P99LateMs, r.MaxLateMs)
	fmt.Fprintf(out, "configuration window=%s lead=%s settle=%s concurrency=%d gomaxprocs=%d\n", r.Config.Window, r.Config.Lead, r.Config.Settle, r.Config.Concurrency, r.GoMaxProcs)
}
