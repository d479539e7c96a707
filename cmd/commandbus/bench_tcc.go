package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/internal/bench"
)

func newBenchTccCommand() *cobra.Command {
	var cfg bench.TccConfig
	cmd := &cobra.Command{
		Use:   "tcc",
		Short: "Throughput of TCC transactions: N transactions of three local participants",
		Long: "bench tcc starts --transactions TCC transactions (StartMany, run by the pollers) of three local\n" +
			"no-op participants: three tries, then three confirms, each outcome checkpointed durably; it\n" +
			"measures until all are CONFIRMED and reports transactions/s and phases/s.",
	}
	cmd.Flags().IntVar(&cfg.Transactions, "transactions", 5000, "transactions to run")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", 400, "transactions run at once")
	return benchSubcommand(cmd, 24, func(ctx context.Context, db *database, logger *slog.Logger, progress io.Writer) (*bench.TccResult, error) {
		cfg.Logger, cfg.Progress = logger, progress
		return bench.RunTcc(ctx, db, cfg)
	}, func(out io.Writer, res *bench.TccResult) {
		fmt.Fprintf(out, "%s: %d TCC transactions of %s in %.2fs = %.0f transactions/s (%.0f phases/s; concurrency %d, start batch %d, gomaxprocs %d)\n",
			res.Driver, res.Transactions, res.Shape, res.ElapsedS, res.TransactionsPerS, res.PhasesPerS, res.Config.Concurrency, res.Config.StartBatch, res.GoMaxProcs)
	})
}
