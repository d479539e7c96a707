package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/internal/bench"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure commandbus on a real database",
		Long: "bench runs end-to-end benchmarks against the database given by --database. On PostgreSQL\n" +
			"each run uses a fresh schema that is dropped afterwards (--keep to keep it); on SQLite, a\n" +
			"fresh file in a temporary directory unless --database names one.",
	}
	var cpuProfile, memProfile string
	var profileFile *os.File
	cmd.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process (not of the database) to this file, for go tool pprof")
	cmd.PersistentFlags().StringVar(&memProfile, "memprofile", "", "write a memory profile of this process to this file at the end, with every allocation of the run (go tool pprof -sample_index=alloc_space)")
	cmd.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if memProfile != "" {
			if err := checkWritable(memProfile); err != nil {
				return fmt.Errorf("--memprofile: %w", err)
			}
		}
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		profileFile = f
		return nil
	}
	cmd.PersistentPostRunE = func(cmd *cobra.Command, args []string) error {
		if memProfile != "" {
			if err := writeMemProfile(memProfile); err != nil {
				return fmt.Errorf("--memprofile: %w", err)
			}
		}
		if profileFile == nil {
			return nil
		}
		pprof.StopCPUProfile()
		return profileFile.Close()
	}
	cmd.AddCommand(newBenchBusCommand(), newBenchProcessCommand(), newBenchWorkflowCommand(), newBenchSagaCommand(), newBenchResumeCommand(), newBenchSignalCommand(), newBenchTimersCommand(), newBenchPaymentsCommand(), newBenchRelayCommand(), newBenchKillCommand(), newBenchInboundCommand(), newBenchEventsCommand(), newBenchSchedulesCommand(), newBenchTccCommand(), newBenchDispatchCommand())
	return cmd
}

// benchDatabase opens a scratch database for one benchmark run.
func benchDatabase(ctx context.Context, url string, keep bool, poolSize int32, logger *slog.Logger) (*database, error) {
	if url == "" {
		dir, err := os.MkdirTemp("", "commandbus-bench-")
		if err != nil {
			return nil, err
		}
		url = "sqlite://" + filepath.Join(dir, "bench.db")
	}
	schema := ""
	if isPostgresURL(url) {
		var b [4]byte
		_, _ = rand.Read(b[:])
		schema = "commandbus_bench_" + hex.EncodeToString(b[:])
	}
	db, err := openDatabase(ctx, url, schema, poolSize)
	if err != nil {
		return nil, err
	}
	if err := migrateUp(ctx, db, logger); err != nil {
		db.Close()
		return nil, err
	}
	return cli.NewDatabase(db.Driver, func() {
		if schema != "" && !keep {
			dropCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := db.Executor().Exec(dropCtx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				logger.Warn("dropping benchmark schema failed", "schema", schema, "error", err)
			}
		}
		db.Close()
	}), nil
}

func newBenchBusCommand() *cobra.Command {
	var (
		url    string
		keep   bool
		asJSON bool
		cfg    bench.BusConfig
	)
	cmd := &cobra.Command{
		Use:   "bus",
		Short: "Throughput and latency of the command bus: send, handle, complete, reply",
		Long: "bench bus sends --commands no-op commands in batches while workers run, and measures the whole\n" +
			"path: batched send (COPY on PostgreSQL), claim, handler, batched completion and the reply.\n" +
			"--replies written (default) writes each reply to a reply queue; handled also runs a no-op reply\n" +
			"handler on it (twice the queue work); none sends commands without replyTo.",
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
			cfg.Logger = logger
			if !asJSON {
				cfg.Progress = cmd.ErrOrStderr()
				fmt.Fprintf(cmd.ErrOrStderr(), "bench bus: %d commands on %s\n", cfg.Commands, db.Name())
			}
			res, err := bench.RunBus(ctx, db, cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			printBusResult(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "database", os.Getenv("COMMANDBUS_DATABASE_URL"), "database URL (postgres://... or sqlite://FILE); empty: a temporary SQLite file")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the benchmark schema on PostgreSQL")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().IntVar(&cfg.Commands, "commands", 20000, "commands to send")
	cmd.Flags().IntVar(&cfg.SendBatch, "send-batch", 1000, "commands per SendBatch call")
	cmd.Flags().IntVar(&cfg.Senders, "senders", 2, "concurrent senders")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", 1000, "concurrent-messages of the benchmark domain")
	cmd.Flags().IntVar(&cfg.FetchBatch, "fetch-batch", 1000, "most commands claimed per query")
	cmd.Flags().DurationVar(&cfg.FetchCooldown, "fetch-cooldown", 2*time.Millisecond, "least time between claims of one queue")
	cmd.Flags().StringVar(&cfg.Replies, "replies", bench.RepliesWritten, "written, handled or none")
	cmd.Flags().BoolVar(&cfg.Tracing, "tracing", false, "record every span with the OpenTelemetry SDK (batch processor, discarding exporter) to show tracing's overhead")
	return cmd
}

func printBusResult(out io.Writer, r *bench.BusResult) {
	fmt.Fprintf(out, "driver        %s\n", r.Driver)
	fmt.Fprintf(out, "commands      %d in %.2fs\n", r.Commands, r.ElapsedS)
	fmt.Fprintf(out, "throughput    %.0f commands/s (send %.0f/s)\n", r.CommandsPerS, r.SendPerS)
	fmt.Fprintf(out, "latency       p50 %.1f ms, p99 %.1f ms (send commit to %s)\n", r.P50Ms, r.P99Ms, map[bool]string{true: "reply handled", false: "handler done"}[r.Config.Replies == bench.RepliesHandled])
	fmt.Fprintf(out, "configuration replies=%s concurrency=%d fetch-batch=%d send-batch=%d senders=%d gomaxprocs=%d\n",
		r.Config.Replies, r.Config.Concurrency, r.Config.FetchBatch, r.Config.SendBatch, r.Config.Senders, r.GoMaxProcs)
	fmt.Fprintf(out, "tracing       %s%s\n", bench.TracingLabel(r.Config.Tracing), spansLabel(r.Spans))
}

func newBenchProcessCommand() *cobra.Command {
	var cfg bench.ProcessConfig
	cmd := &cobra.Command{
		Use:   "process",
		Short: "Throughput of sequential processes: N processes of --steps checkpointed steps",
		Long: "bench process starts --processes executions (StartBatch, run by the pollers) of a process with\n" +
			"--steps no-op steps, each checkpointed durably, and measures until all are COMPLETED. It reports\n" +
			"processes/s and the checkpoint latency (a step's group commit) p50/p99.",
	}
	cmd.Flags().IntVar(&cfg.Processes, "processes", 5000, "processes to run")
	cmd.Flags().IntVar(&cfg.Steps, "steps", 5, "checkpointed steps per process")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", 400, "executions run at once")
	cmd.Flags().BoolVar(&cfg.Tracing, "tracing", false, "record every span with the OpenTelemetry SDK (batch processor, discarding exporter) to show tracing's overhead")
	return benchSubcommand(cmd, 24, func(ctx context.Context, db *database, logger *slog.Logger, progress io.Writer) (*bench.ProcessResult, error) {
		cfg.Logger, cfg.Progress = logger, progress
		return bench.RunProcess(ctx, db, cfg)
	}, func(out io.Writer, res *bench.ProcessResult) {
		fmt.Fprintf(out, "%s: %d processes × %d steps in %.2fs = %.0f processes/s (%.0f checkpoints/s); checkpoint p50 %.1f ms, p99 %.1f ms (concurrency %d; tracing %s%s)\n",
			res.Driver, res.Processes, res.Steps, res.ElapsedS, res.ProcessesPerS, res.CheckpointsS, res.P50Ms, res.P99Ms, res.Config.Concurrency,
			bench.TracingLabel(res.Config.Tracing), spansLabel(res.Spans))
	})
}

func newBenchWorkflowCommand() *cobra.Command {
	var cfg bench.WorkflowConfig
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Throughput of workflows: N five-step DAGs (one step, three in parallel, one)",
		Long: "bench workflow starts --workflows executions (StartMany, run by the pollers) of a workflow whose DAG\n" +
			"is one step, then three in parallel, then one, all local no-ops, each step checkpointed durably,\n" +
			"and measures until all are COMPLETED. It reports workflows/s and steps/s.",
	}
	cmd.Flags().IntVar(&cfg.Workflows, "workflows", 5000, "workflows to run")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", 400, "executions run at once")
	cmd.Flags().BoolVar(&cfg.Events, "events", false, "publish lifecycle events to an in-process Kafka through the outbox (off: none derived)")
	return benchSubcommand(cmd, 24, func(ctx context.Context, db *database, logger *slog.Logger, progress io.Writer) (*bench.WorkflowResult, error) {
		cfg.Logger, cfg.Progress = logger, progress
		return bench.RunWorkflow(ctx, db, cfg)
	}, func(out io.Writer, res *bench.WorkflowResult) {
		fmt.Fprintf(out, "%s: %d workflows of %s in %.2fs = %.0f workflows/s (%.0f steps/s; concurrency %d; lifecycle events %s)\n",
			res.Driver, res.Workflows, res.Shape, res.ElapsedS, res.WorkflowsPerS, res.StepsPerS, res.Config.Concurrency, eventsLabel(res))
	})
}

// eventsLabel says whether the workflow benchmark published lifecycle events, and how many.
func eventsLabel(res *bench.WorkflowResult) string {
	if !res.Config.Events {
		return "off"
	}
	return fmt.Sprintf("on: %d to kfake", res.Events)
}

func newBenchResumeCommand() *cobra.Command {
	var cfg bench.ResumeConfig
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Resume latency: deliver the response a waiting process needs and time it to completion",
	}
	cmd.Flags().IntVar(&cfg.Processes, "processes", 1000, "waiting processes to resume")
	cmd.Flags().IntVar(&cfg.Deliverers, "deliverers", 4, "concurrent response deliverers")
	return benchSubcommand(cmd, 16, func(ctx context.Context, db *database, logger *slog.Logger, _ io.Writer) (*bench.ResumeResult, error) {
		cfg.Logger = logger
		return bench.RunResume(ctx, db, cfg)
	}, func(out io.Writer, res *bench.ResumeResult) {
		fmt.Fprintf(out, "%s: resume latency over %d processes: p50 %.2f ms, p99 %.2f ms (%d concurrent deliverers)\n",
			res.Driver, res.Processes, res.P50Ms, res.P99Ms, res.Config.Deliverers)
	})
}

// benchRun runs one benchmark on the bench database with its logger and, unless --json, a
// progress writer. A result returned with an error (a benchmark that measured, then found a
// fault) is printed before the error is reported.
type benchRun[R any] func(ctx context.Context, db *database, logger *slog.Logger, progress io.Writer) (*R, error)

// benchSubcommand completes a bench subcommand: the --database, --keep and --json flags, the
// database (a pool of poolSize on PostgreSQL), then run, whose result is printed as one JSON
// object or by print.
func benchSubcommand[R any](cmd *cobra.Command, poolSize int32, run benchRun[R], print func(out io.Writer, r *R)) *cobra.Command {
	var (
		url    string
		keep   bool
		asJSON bool
	)
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		logger, err := cli.Logger(cmd, cmd.ErrOrStderr(), cli.LogOptions{Level: slog.LevelWarn})
		if err != nil {
			return err
		}
		db, err := benchDatabase(ctx, url, keep, poolSize, logger)
		if err != nil {
			return err
		}
		defer db.Close()
		var progress io.Writer
		if !asJSON {
			progress = cmd.ErrOrStderr()
		}
		res, runErr := run(ctx, db, logger, progress)
		if res == nil {
			return runErr
		}
		if asJSON {
			if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
				return err
			}
		} else {
			print(cmd.OutOrStdout(), res)
		}
		return runErr
	}
	cmd.Flags().StringVar(&url, "database", os.Getenv("COMMANDBUS_DATABASE_URL"), "database URL (postgres://... or sqlite://FILE); empty: a temporary SQLite file")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the benchmark schema on PostgreSQL")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// spansLabel states how many spans a traced benchmark recorded.
func spansLabel(spans int64) string {
	if spans == 0 {
		return ""
	}
	return fmt.Sprintf(", %d spans", spans)
}

// checkWritable fails when path cannot be created, before a run whose profile would be lost.
func checkWritable(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// writeMemProfile writes the allocations of the run so far to path (pprof's allocs profile).
func writeMemProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
