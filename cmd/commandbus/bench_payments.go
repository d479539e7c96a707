package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/bench"
)

func newBenchPaymentsCommand() *cobra.Command {
	var (
		url    string
		keep   bool
		asJSON bool
		pool   int32
		cfg    bench.PaymentsConfig
	)
	cmd := &cobra.Command{
		Use:   "payments",
		Short: "End-to-end payments: the reference platform's bounded contexts, processes, FX API and network simulator",
		Long: "bench payments runs the reference payments platform with no simulated delay and no injected failure.\n" +
			"By default it creates one batch of --payments generated payments (RunScheduledPaymentsForDay) and\n" +
			"measures until every one is terminal: payments/s and acceptance-to-completion p50/p99. With --rate it\n" +
			"submits payments one by one through the API at that rate for --duration instead, spread over\n" +
			"--instances clients in this process (a cluster's replicas), and reports the backlog every second.\n" +
			"Afterwards it checks the platform's invariants (one submission per payment, money conserved).\n" +
			"With --amqp-url the --broker-domains (fx and payments by default) run over RabbitMQ through the outbox\n" +
			"relay and the AMQP consumer, and the backlog samples add the broker's queue depth.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			typ, err := processType(cfg.ProcessType)
			if err != nil {
				return err
			}
			cfg.ProcessType = typ
			ctx := cmd.Context()
			logger, err := cli.Logger(cmd, cmd.ErrOrStderr(), cli.LogOptions{Level: slog.LevelError})
			if err != nil {
				return err
			}
			db, err := benchDatabase(ctx, url, keep, pool, logger)
			if err != nil {
				return err
			}
			defer db.Close()
			cfg.Logger = logger
			if !asJSON {
				cfg.Progress = cmd.ErrOrStderr()
			}
			// The platform needs the concrete driver (the pgx pool or the SQLite handle) for its
			// business tables.
			res, err := bench.RunPayments(ctx, db.Driver, cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %d payments in %.2fs = %.0f payments/s; acceptance to completion p50 %.1f ms, p99 %.1f ms; duplicate submissions %d\n",
				res.Driver, res.Config.ProcessType, res.Payments, res.ElapsedS, res.PaymentsPerS, res.P50Ms, res.P99Ms, res.Duplicates)
			if res.Config.AMQPURL != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "  domains on RabbitMQ (AMQP 0-9-1, through the outbox relay): %s\n", strings.Join(res.Config.BrokerDomains, ", "))
				fmt.Fprintf(cmd.OutOrStdout(), "  relay claims %d (%.1f a payment), %d of them empty\n",
					res.RelayClaims, float64(res.RelayClaims)/float64(max(res.Payments, 1)), res.EmptyRelayClaims)
			}
			for _, s := range res.Backlog {
				line := fmt.Sprintf("  %6.1fs submitted %7d terminal %7d backlog %6d", s.AtS, s.Submitted, s.Terminal, s.Backlog)
				if res.Config.AMQPURL != "" {
					line += fmt.Sprintf(" broker queue depth %6d", s.BrokerDepth)
				}
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "database", os.Getenv("COMMANDBUS_DATABASE_URL"), "database URL (postgres://... or sqlite://FILE); empty: a temporary SQLite file")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the benchmark schema on PostgreSQL")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().Int32Var(&pool, "pool", 48, "PostgreSQL connections, shared by the instances")
	cmd.Flags().IntVar(&cfg.Payments, "payments", 5000, "payments in batch mode")
	cmd.Flags().StringVar(&cfg.ProcessType, "process", payments.TypePaymentManager, processTypeHelp)
	cmd.Flags().Float64Var(&cfg.Rate, "rate", 0, "submit this many payments per second through the API instead of one batch")
	cmd.Flags().DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to submit in rate mode")
	cmd.Flags().IntVar(&cfg.Instances, "instances", 1, "clients in this process, as replicas of a cluster")
	cmd.Flags().IntVar(&cfg.Concurrency, "concurrency", 48, "concurrent-messages of each domain, per instance")
	cmd.Flags().IntVar(&cfg.Executions, "executions", 400, "concurrent process executions, per instance")
	cmd.Flags().IntVar(&cfg.Submitters, "submitters", 32, "goroutines calling SubmitPayment in rate mode")
	cmd.Flags().BoolVar(&cfg.Handoff, "handoff", true, "with --amqp-url, hand each process checkpoint's outbox rows to the instance's relay right after the commit (orchestration.Runtime.HandOffOutbox), as serve and worker do by default (outbox.handoff); --handoff=false leaves them to its claims")
	cmd.Flags().IntVar(&cfg.Accounts, "accounts", bench.ChartAccounts, fmt.Sprintf("customers and beneficiaries per currency that rate mode pays from and to, in turn (1 to %d); few accounts measure row-lock convoys on them", bench.ChartAccounts))
	cmd.Flags().StringVar(&cfg.AMQPURL, "amqp-url", "", "carry --broker-domains over this RabbitMQ (amqp://...) through the outbox relay; empty: the PostgreSQL queue")
	cmd.Flags().StringSliceVar(&cfg.BrokerDomains, "broker-domains", nil, "domains on the broker with --amqp-url (default fx,payments)")
	return cmd
}
