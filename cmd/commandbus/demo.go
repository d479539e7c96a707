package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/onboarding"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/examples/trip"
	"github.com/commandbus/commandbus/tcc"
	"github.com/commandbus/commandbus/workflow"
)

const demoDatabaseFile = "commandbus-demo.db"

// demoFlags are the demo's options.
type demoFlags struct {
	url      string
	payments int
	process  string
	behavior string
	seed     uint64
	asJSON   bool
	serve    string
	resume   bool
	verbose  bool
	// logger, when set, replaces the demo's own (quiet unless --verbose) logger: --log-level given.
	logger *slog.Logger
}

func newDemoCommand() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the reference payments platform on embedded SQLite: a batch of payments end to end",
		Long: "demo runs the reference payments platform in one process — workers for the accounts, limits,\n" +
			"risk, fx and payments domains, the payment processes, the simulated FX API and payment network —\n" +
			"and pushes a batch of payments through risk, FX, submission and network confirmations. It shows a\n" +
			"live progress bar, then a summary: final statuses, throughput, end-to-end latency and what waits\n" +
			"for an operator. By default it uses a fresh SQLite file, " + demoDatabaseFile + ", in the working\n" +
			"directory. Interrupt it halfway and run it again with --resume: every payment still reaches a\n" +
			"definitive outcome, and none is submitted twice.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cli.LogLevelGiven(cmd) || f.verbose {
				level := slog.LevelWarn // --verbose
				logger, err := cli.Logger(cmd, cmd.ErrOrStderr(), cli.LogOptions{Level: level})
				if err != nil {
					return err
				}
				f.logger = logger
			} else if _, err := cli.Logger(cmd, io.Discard, cli.LogOptions{}); err != nil {
				return err // a bad --log-format
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	cmd.Flags().StringVar(&f.url, "database", "", "database URL; default: sqlite://"+demoDatabaseFile+" (fresh unless --resume)")
	cmd.Flags().IntVar(&f.payments, "payments", 200, "payments in the batch")
	cmd.Flags().StringVar(&f.process, "process", payments.TypePaymentStep, processTypeHelp)
	cmd.Flags().StringVar(&f.behavior, "behavior", payments.PresetRealistic, "a preset (happy, realistic, chaos) or a JSON/YAML file of per-step behaviour")
	cmd.Flags().Uint64Var(&f.seed, "seed", 1, "seed of the simulators and the batch generator, for reproducible runs")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print one JSON summary object")
	cmd.Flags().StringVar(&f.serve, "serve", "", "serve the REST API and console on ADDR (e.g. 127.0.0.1:8080) while running and afterwards, until interrupted")
	cmd.Flags().BoolVar(&f.resume, "resume", false, "continue the demo database of an interrupted run instead of starting a new batch")
	cmd.Flags().BoolVar(&f.verbose, "verbose", false, "log warnings and errors to stderr")
	_ = cmd.Flags().MarkDeprecated("verbose", "use --log-level warn")
	return cmd
}

// demoSummary is the demo's --json object.
type demoSummary struct {
	Payments             int `json:"payments"`
	Completed            int `json:"completed"`
	Compensated          int `json:"compensated"`
	Failed               int `json:"failed"`
	Cancelled            int `json:"cancelled"`
	InTSQ                int `json:"in_tsq"`
	Waiting              int `json:"waiting"`
	DuplicateSubmissions int `json:"duplicate_submissions"`
	// LeftoverEffects counts holds, limit reservations, FX contracts and risk bookings left live
	// under compensated or cancelled payments: always 0.
	LeftoverEffects int `json:"leftover_effects"`
	// Onboarding counts the onboarding workflows the demo ran beside the batch, by status.
	Onboarding map[driver.ExecutionStatus]int `json:"onboarding,omitempty"`
	// Trips counts the trip bookings (TCC transactions) the demo ran beside the batch, by outcome.
	Trips        map[tcc.Status]int `json:"trips,omitempty"`
	ElapsedS     float64            `json:"elapsed_s"`
	PaymentsPerS float64            `json:"payments_per_s"`
	P50Ms        float64            `json:"p50_ms"`
	P99Ms        float64            `json:"p99_ms"`
}

func processType(name string) (string, error) {
	switch strings.ToLower(name) {
	case "step", strings.ToLower(payments.TypePaymentStep):
		return payments.TypePaymentStep, nil
	case "manager", strings.ToLower(payments.TypePaymentManager):
		return payments.TypePaymentManager, nil
	case "saga", strings.ToLower(payments.TypePaymentSaga):
		return payments.TypePaymentSaga, nil
	}
	return "", fmt.Errorf("--process must be %s, %s or %s (as processType in the API), got %q",
		payments.TypePaymentStep, payments.TypePaymentManager, payments.TypePaymentSaga, name)
}

// processTypeHelp describes --process of demo and the payments benchmarks: the API's processType
// values (the short names step, manager and saga are accepted too).
var processTypeHelp = payments.TypePaymentStep + " (the step process: risk, approval, FX, submission, confirmations), " +
	payments.TypePaymentManager + " (the process manager: balance, limit, FX, submission) or " +
	payments.TypePaymentSaga + " (the same steps on the saga engine): the processType values of the API; step, manager and saga are accepted too"

func loadBehavior(spec string) (*payments.Behavior, error) {
	if b, err := payments.Preset(spec); err == nil {
		return b, nil
	}
	if _, err := os.Stat(spec); err != nil {
		return nil, fmt.Errorf("--behavior %q is neither a preset (happy, realistic, chaos) nor a readable file", spec)
	}
	return payments.LoadBehavior(spec)
}

func runDemo(ctx context.Context, out, errOut io.Writer, f demoFlags) error {
	if f.payments < 1 && !f.resume {
		return fmt.Errorf("--payments must be at least 1")
	}
	typ, err := processType(f.process)
	if err != nil {
		return err
	}
	behavior, err := loadBehavior(f.behavior)
	if err != nil {
		return err
	}
	url := f.url
	if url == "" {
		url = "sqlite://" + demoDatabaseFile
		if !f.resume {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				if err := os.Remove(demoDatabaseFile + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("starting fresh: %w", err)
				}
			}
		}
	}
	level := slog.LevelError + 4 // the summary reports failures; logs would bury the progress bar
	if f.verbose {
		level = slog.LevelWarn
	}
	logger := f.logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: level}))
	}
	cfg := &config.File{Database: config.DatabaseConfig{URL: url}}
	operatorToken, viewerToken := randomToken("operator"), randomToken("viewer")
	cfg.Server.Tokens = []config.TokenConfig{
		{Subject: "demo-operator", Token: operatorToken, Role: "operator"},
		{Subject: "demo-viewer", Token: viewerToken, Role: "viewer"},
	}
	cfg.Process.PendingPollInterval = commandbus.Duration(100 * time.Millisecond)
	cfg.Process.RetryPollInterval = commandbus.Duration(200 * time.Millisecond)
	cfg.Process.TimeoutCheckInterval = commandbus.Duration(time.Second)
	cfg.Process.DeadlineCheckInterval = commandbus.Duration(time.Second)
	cfg.FetchPollInterval = commandbus.Duration(200 * time.Millisecond)
	s, err := startStack(ctx, stackOptions{Config: cfg, Logger: logger, Migrate: true, Seed: f.seed, Simulator: true, ServeAddr: f.serve, Concurrency: 8})
	if err != nil {
		return err
	}
	defer s.Stop(context.Background())
	if s.Addr != "" {
		fmt.Fprintf(errOut, "Console and API: http://%s/   operator token: %s\n                                      viewer token:   %s\n", s.Addr, operatorToken, viewerToken)
	}

	var batchID uuid.UUID
	if f.resume {
		batches, err := s.platform.ListBatches(ctx, payments.ListParams{Limit: 1})
		if err != nil {
			return err
		}
		if len(batches) == 0 {
			return fmt.Errorf("--resume: no batch in %s to continue", redact(url))
		}
		batchID = batches[0].ID
		if !f.asJSON {
			fmt.Fprintf(errOut, "commandbus demo: resuming batch %s (%d payments) on %s\n", batchID, batches[0].Total, redact(url))
		}
	} else {
		if !f.asJSON {
			fmt.Fprintf(errOut, "commandbus demo: %d payments through the %s process on %s, behaviour %q\n", f.payments, typ, redact(url), behavior.Name)
		}
		batch, err := s.platform.CreateBatch(ctx, f.payments, time.Now().Format(time.DateOnly), typ, behavior)
		if err != nil {
			return err
		}
		batchID = batch.ID
		if err := startOnboardings(ctx, s.onboarding); err != nil {
			return err
		}
		if err := startTrips(ctx, s.trips); err != nil {
			return err
		}
	}
	start := time.Now()
	sum, err := waitForBatch(ctx, s.platform, batchID, errOut, !f.asJSON)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	result := demoSummary{
		Payments: sum.Total, Completed: sum.Completed, Compensated: sum.Compensated, Failed: sum.Failed,
		Cancelled: sum.Cancelled, InTSQ: sum.InTSQ, Waiting: sum.Waiting + sum.InProgress + sum.NotStarted,
		DuplicateSubmissions: sum.DuplicateSubmissions, ElapsedS: round2(elapsed.Seconds()),
		PaymentsPerS: round2(float64(sum.Total) / elapsed.Seconds()), P50Ms: round2(sum.LatencyP50Ms), P99Ms: round2(sum.LatencyP99Ms),
	}
	if result.LeftoverEffects, err = s.platform.LeftoverEffects(ctx); err != nil {
		return err
	}
	if result.Onboarding, err = waitForOnboardings(ctx, s.onboarding); err != nil {
		return err
	}
	if result.Trips, err = waitForTrips(ctx, s.trips); err != nil {
		return err
	}
	if err := s.platform.CheckInvariants(ctx); err != nil {
		return fmt.Errorf("invariants violated: %w", err)
	}
	if f.asJSON {
		if err := writeJSON(out, result); err != nil {
			return err
		}
	} else if err := printDemoSummary(ctx, out, s, result, url); err != nil {
		return err
	}
	if s.Addr != "" {
		fmt.Fprintf(errOut, "\nStill serving http://%s/ — interrupt (Ctrl-C) to stop.\n", s.Addr)
		<-ctx.Done()
	}
	return nil
}

// demoApplicants are the onboarding workflows the demo runs beside the batch, one per path: a
// straight run, a busy KYC provider (retries), a sanctioned country (compensation) and a bouncing
// welcome pack (troubleshooting queue).
var demoApplicants = []onboarding.Applicant{
	{Name: "Ada Lovelace", Email: "ada@example.com", Country: "GB", CreditLimit: 5000},
	{Name: "Busy Bee", Email: "bee@example.com", Country: "FR"},
	{Name: "Eve", Email: "eve@example.com", Country: "XS"},
	{Name: "Bob", Email: "bob@bounce.example", Country: "DE"},
}

func startOnboardings(ctx context.Context, flow *onboarding.Flow) error {
	for _, a := range demoApplicants {
		if _, err := flow.Start(ctx, a, workflow.WithBusinessKey(a.Email)); err != nil {
			return fmt.Errorf("starting the onboarding of %s: %w", a.Email, err)
		}
	}
	return nil
}

// demoTrips are the trip bookings (TCC transactions) the demo runs beside the batch, one per
// outcome: confirmed, confirmed without the optional car, and cancelled (no hotel room, so the
// seat is released).
var demoTrips = []trip.Booking{
	{Traveller: "Ada Lovelace", Flight: "LH 400", Destination: "New York", Nights: 3},
	{Traveller: "Cy Young", Flight: "BA 117", Destination: "Boston", Nights: 2, CarClass: "none"},
	{Traveller: "Bob", Flight: "AT 1", Destination: "Atlantis", Nights: 7},
}

func startTrips(ctx context.Context, agency *trip.Agency) error {
	for _, b := range demoTrips {
		if _, err := agency.Start(ctx, b, tcc.WithBusinessKey(b.Traveller)); err != nil {
			return fmt.Errorf("starting the trip of %s: %w", b.Traveller, err)
		}
	}
	return nil
}

// waitForTrips waits (at most a minute) until every trip booking has its outcome, and counts them
// by outcome.
func waitForTrips(ctx context.Context, agency *trip.Agency) (map[tcc.Status]int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		rows, err := agency.List(ctx, tcc.ListParams{Limit: 1000})
		if err != nil {
			return nil, err
		}
		counts, moving := map[tcc.Status]int{}, 0
		for _, r := range rows {
			res, err := agency.Result(ctx, r.ID)
			if err != nil {
				return nil, err
			}
			counts[res.Status]++
			switch res.Status {
			case tcc.StatusTrying, tcc.StatusConfirming, tcc.StatusCanceling:
				moving++
			}
		}
		if moving == 0 || time.Now().After(deadline) {
			return counts, nil
		}
		select {
		case <-ctx.Done():
			return counts, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitForOnboardings waits (at most a minute) until no onboarding workflow runs or waits for a
// retry, and counts them by status.
func waitForOnboardings(ctx context.Context, flow *onboarding.Flow) (map[driver.ExecutionStatus]int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		rows, err := flow.List(ctx, workflow.ListParams{Limit: 1000})
		if err != nil {
			return nil, err
		}
		counts, moving := map[driver.ExecutionStatus]int{}, 0
		for _, r := range rows {
			counts[r.Status]++
			switch r.Status {
			case driver.ExecutionPending, driver.ExecutionExecuting, driver.ExecutionWaitingForRetry, driver.ExecutionCompensating:
				moving++
			}
		}
		if moving == 0 || time.Now().After(deadline) {
			return counts, nil
		}
		select {
		case <-ctx.Done():
			return counts, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// waitForBatch shows progress until every payment of the batch has settled: terminal, in the
// troubleshooting queue, waiting for an operator (a pending approval or a network answer left to
// one), or waiting out a wait the simulated network will never answer. It never ends while a
// payment runs, waits for a reply, a due retry or an answer the simulator will give, or while the
// simulator has answers scheduled.
func waitForBatch(ctx context.Context, p *payments.Platform, batchID uuid.UUID, errOut io.Writer, show bool) (*payments.Summary, error) {
	var bar *progressBar
	for {
		sum, err := p.Summary(ctx, batchID)
		if err != nil {
			return nil, err
		}
		progress, err := p.BatchProgress(ctx, batchID)
		if err != nil {
			return nil, err
		}
		if bar == nil {
			bar = newProgressBar(errOut, sum.Total)
		}
		terminal := sum.Completed + sum.Compensated + sum.Failed + sum.Cancelled
		settled := terminal + sum.InTSQ
		if show {
			bar.update(settled, fmt.Sprintf("completed %d, compensated %d, failed %d, in TSQ %d, waiting %d, running %d",
				sum.Completed, sum.Compensated, sum.Failed, sum.InTSQ, sum.Waiting, sum.InProgress+sum.NotStarted))
		}
		if sum.NotStarted == 0 && progress.Settled() {
			// The summary was read before the progress: read it again, now that nothing moves.
			if sum, err = p.Summary(ctx, batchID); err != nil {
				return nil, err
			}
			if show {
				bar.update(sum.Completed+sum.Compensated+sum.Failed+sum.Cancelled+sum.InTSQ, "settled")
				bar.finish()
			}
			return sum, nil
		}
		select {
		case <-ctx.Done():
			if show {
				bar.finish()
			}
			return nil, fmt.Errorf("interrupted; run the demo again with --resume to finish the batch: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func printDemoSummary(ctx context.Context, out io.Writer, s *stack, r demoSummary, url string) error {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OUTCOME\tPAYMENTS")
	for _, row := range []struct {
		name string
		n    int
	}{{"completed", r.Completed}, {"compensated", r.Compensated}, {"failed", r.Failed}, {"cancelled", r.Cancelled},
		{"in the troubleshooting queue", r.InTSQ}, {"waiting (operator, network or retry)", r.Waiting}} {
		fmt.Fprintf(tw, "%s\t%d\n", row.name, row.n)
	}
	fmt.Fprintf(tw, "total\t%d\n", r.Payments)
	_ = tw.Flush()
	fmt.Fprintf(out, "\n%d payments in %.1fs (%.1f payments/s); end-to-end latency of completed payments p50 %.0f ms, p99 %.0f ms\n",
		r.Payments, r.ElapsedS, r.PaymentsPerS, r.P50Ms, r.P99Ms)
	fmt.Fprintf(out, "duplicate submissions: %d; effects left under compensated payments: %d; balances conserved per currency: yes\n",
		r.DuplicateSubmissions, r.LeftoverEffects)
	if len(r.Onboarding) > 0 {
		var parts []string
		for _, st := range []struct {
			status driver.ExecutionStatus
			label  string
		}{{driver.ExecutionCompleted, "completed"}, {driver.ExecutionCompensated, "compensated"},
			{driver.ExecutionWaitingForTSQ, "in the troubleshooting queue"}, {driver.ExecutionWaitingForAsync, "waiting"}} {
			if n := r.Onboarding[st.status]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, st.label))
			}
		}
		fmt.Fprintf(out, "onboarding workflows (parallel checks, retries, a compensation, a parked step): %s\n", strings.Join(parts, ", "))
	}
	if len(r.Trips) > 0 {
		var parts []string
		for _, st := range []tcc.Status{tcc.StatusConfirmed, tcc.StatusCanceled, tcc.StatusFailed} {
			if n := r.Trips[st]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, strings.ToLower(string(st))))
			}
		}
		fmt.Fprintf(out, "trip bookings (TCC: a car optional, no room cancels the seat): %s\n", strings.Join(parts, ", "))
	}

	tsq, err := s.Client.Driver().Executor().ExecutionList(ctx, &driver.ExecutionListParams{
		Statuses: []driver.ExecutionStatus{driver.ExecutionWaitingForTSQ}, Limit: 5})
	if err != nil {
		return err
	}
	if len(tsq) > 0 {
		fmt.Fprintf(out, "\nIn the troubleshooting queue (first %d):\n", len(tsq))
		for _, x := range tsq {
			fmt.Fprintf(out, "  %s  %s at %s: %s: %s\n", x.ID, x.Type, x.Step, x.ErrorCode, x.ErrorMessage)
		}
		fmt.Fprintf(out, "\nAct on one from a terminal:\n  go run ./cmd/commandbus executions retry %s --database %s --reason \"cause fixed\"\n", tsq[0].ID, redact(url))
	}
	approvals, err := s.platform.ListApprovals(ctx, payments.ApprovalFilter{Status: "PENDING", Limit: 1000})
	if err == nil && len(approvals) > 0 {
		fmt.Fprintf(out, "\n%d risk approval(s) wait for an operator (console: Approvals).\n", len(approvals))
	}
	pending, err := s.platform.ListPendingNetworkResponses(ctx, payments.ListParams{Limit: 1000})
	if err == nil && len(pending) > 0 {
		fmt.Fprintf(out, "%d network response(s) wait for an operator (console: Pending network responses).\n", len(pending))
	}
	if s.Addr == "" {
		fmt.Fprintf(out, "\nSee it all in the console: go run ./cmd/commandbus demo --resume --serve 127.0.0.1:8080\n")
	}
	return nil
}
