package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/internal/bench"
)

func newBenchSagaCommand() *cobra.Command {
	var cfg bench.SagaConfig
	cmd := &cobra.Command{
		Use:   "saga",
		Short: "Throughput of sagas: N three-step sagas, 10% failing at the last step and compensating",
		Long: "bench saga starts --sagas executions (StartMany, run by the pollers) of a saga debit → credit →\n" +
			"notify, all local no-ops, where one saga in --fail-every fails at notify with a business error and\n" +
			"compensates credit then debit (each compensation checkpointed durably), and measures until all\n" +
			"have ended (COMPLETED or COMPENSATED). Target on PostgreSQL: 3,000 sagas/s.",
	}
	cmd.Flags().IntVar(&cfg.Sagas, "sagas", 5000, "sagas to run")
	cmd.Flags().IntVar(&cfg.FailEvery, "fail-every", 10, "one saga in this many fails and compensates")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", 400, "executions run at once")
	return benchSubcommand(cmd, 24, func(ctx context.Context, db *database, logger *slog.Logger, progress io.Writer) (*bench.SagaResult, error) {
		cfg.Logger, cfg.Progress = logger, progress
		return bench.RunSaga(ctx, db, cfg)
	}, func(out io.Writer, res *bench.SagaResult) {
		fmt.Fprintf(out, "%s: %d sagas (%d completed, %d compensated) in %.2fs = %.0f sagas/s (fail-every %d, concurrency %d, gomaxprocs %d)\n",
			res.Driver, res.Sagas, res.Completed, res.Compensated, res.ElapsedS, res.SagasPerS, res.Config.FailEvery, res.Config.Concurrency, res.GoMaxProcs)
	})
}
