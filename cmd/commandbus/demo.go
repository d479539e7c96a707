package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/examples/busdemo"
)

const demoDatabaseFile = "commandbus-demo.db"

func newDemoCommand() *cobra.Command {
	var (
		url      string
		count    int
		seed     uint64
		asJSON   bool
		behavior busdemo.Behavior
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a command-bus demonstration on embedded SQLite (no setup needed)",
		Long: "demo sends a batch of FX booking commands to a worker pool whose simulated provider sometimes\n" +
			"times out (retried), rejects (business failure with a reply) or fails permanently (troubleshooting\n" +
			"queue). It shows progress while the batch runs and a summary at the end. By default it uses a\n" +
			"fresh SQLite file, " + demoDatabaseFile + ", in the working directory.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), url, count, seed, behavior, asJSON)
		},
	}
	cmd.Flags().StringVar(&url, "database", "", "database URL; default: a fresh sqlite://"+demoDatabaseFile)
	cmd.Flags().IntVar(&count, "commands", 200, "commands to send")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the simulated provider, for reproducible runs")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON summary object")
	cmd.Flags().Float64Var(&behavior.TransientPct, "transient-pct", 10, "percent of attempts that time out (retried)")
	cmd.Flags().Float64Var(&behavior.BusinessPct, "business-pct", 3, "percent rejected on a business rule (FAILED with a reply)")
	cmd.Flags().Float64Var(&behavior.PermanentPct, "permanent-pct", 1, "percent failing permanently (troubleshooting queue)")
	cmd.Flags().DurationVar(&behavior.MaxDelay, "max-delay", 20*time.Millisecond, "most simulated provider latency")
	return cmd
}

// demoSummary is what the demo prints at the end.
type demoSummary struct {
	Commands     int            `json:"commands"`
	Statuses     map[string]int `json:"statuses"`
	InTSQ        int            `json:"in_tsq"`
	Replies      int64          `json:"replies"`
	ElapsedS     float64        `json:"elapsed_s"`
	CommandsPerS float64        `json:"commands_per_s"`
	P50Ms        float64        `json:"p50_ms"`
	P99Ms        float64        `json:"p99_ms"`
	Database     string         `json:"database"`
}

func runDemo(ctx context.Context, out, errOut io.Writer, url string, count int, seed uint64, behavior busdemo.Behavior, asJSON bool) error {
	if count < 1 {
		return fmt.Errorf("--commands must be at least 1")
	}
	if url == "" {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(demoDatabaseFile + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("starting fresh: %w", err)
			}
		}
		url = "sqlite://" + demoDatabaseFile
	}
	// The summary reports failures; per-command logs would only bury the progress bar.
	logger := slog.New(slog.DiscardHandler)
	db, err := openDatabase(ctx, url, "commandbus", 8)
	if err != nil {
		return err
	}
	defer db.close()
	if err := migrateUp(ctx, db, logger); err != nil {
		return err
	}
	demo := busdemo.New(behavior, seed)
	handlers := commandbus.NewHandlers()
	demo.Register(handlers)
	noJitter := 0.0
	client, err := commandbus.NewClient(db, &commandbus.Config{
		Handlers: handlers,
		Logger:   logger,
		Domains: map[string]*commandbus.DomainConfig{
			"fx": {ConcurrentMessages: 8, MaxAttempts: 4, Retry: commandbus.RetryPolicy{
				InitialDelay: commandbus.Duration(50 * time.Millisecond), MaxDelay: commandbus.Duration(time.Second), Jitter: &noJitter}},
			"payments": {ConcurrentMessages: 4},
		},
		FetchPollInterval: commandbus.Duration(200 * time.Millisecond),
	})
	if err != nil {
		return err
	}
	if !asJSON {
		fmt.Fprintf(errOut, "commandbus demo: %d FX bookings on %s (worker pool of 8; provider: %.0f%% time-outs, %.0f%% rejections, %.0f%% permanent failures)\n",
			count, redact(url), behavior.TransientPct, behavior.BusinessPct, behavior.PermanentPct)
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()
	commands := make([]commandbus.SendParams, count)
	for i := range commands {
		commands[i] = commandbus.SendParams{Domain: "fx", Args: busdemo.BookFx{
			PaymentID: fmt.Sprintf("PAY-%05d", i+1), Amount: fmt.Sprintf("%d.00", 100+i), From: "EUR", To: "USD",
		}, Opts: &commandbus.SendOpts{ReplyTo: "payments", IdempotencyKey: fmt.Sprintf("PAY-%05d:bookFx", i+1)}}
	}
	batch, err := client.CreateBatch(ctx, commandbus.BatchParams{Name: "demo " + start.Format(time.RFC3339), Commands: commands})
	if err != nil {
		return err
	}
	bar := newProgressBar(errOut, count)
	for {
		batch, err = client.GetBatch(ctx, batch.ID)
		if err != nil {
			return err
		}
		settled := int(batch.Counts[commandbus.StatusInTSQ])
		for status, n := range batch.Counts {
			if status.Terminal() {
				settled += int(n)
			}
		}
		if !asJSON {
			bar.update(settled, formatCounts(batch.Counts))
		}
		if settled == count {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	if !asJSON {
		bar.finish()
	}
	summary := demoSummary{Commands: count, Statuses: map[string]int{}, InTSQ: int(batch.Counts[commandbus.StatusInTSQ]),
		ElapsedS: elapsed.Seconds(), CommandsPerS: float64(count) / elapsed.Seconds(), Database: redact(url)}
	for status, n := range batch.Counts {
		summary.Statuses[string(status)] = int(n)
	}
	if stats, err := client.CommandStats(ctx, time.Hour); err == nil {
		for _, s := range stats {
			if s.Domain == "fx" {
				summary.P50Ms, summary.P99Ms = float64(s.P50.Microseconds())/1000, float64(s.P99.Microseconds())/1000
			}
		}
	}
	// Replies are handled asynchronously; give the last ones a moment to land.
	wantReplies := int64(summary.Statuses[string(commandbus.StatusCompleted)] + summary.Statuses[string(commandbus.StatusFailed)])
	deadline := time.Now().Add(5 * time.Second)
	for demo.Replies() < wantReplies && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	summary.Replies = demo.Replies()
	if asJSON {
		return writeJSON(out, summary)
	}
	tsq, err := client.TSQ().List(ctx, commandbus.TSQFilter{BatchID: batch.ID, Limit: 10})
	if err != nil {
		return err
	}
	printDemoSummary(out, summary, tsq, url)
	return nil
}

func formatCounts(counts map[commandbus.Status]int64) string {
	var parts []string
	for _, s := range []commandbus.Status{commandbus.StatusPending, commandbus.StatusRunning, commandbus.StatusCompleted, commandbus.StatusFailed, commandbus.StatusInTSQ} {
		if n := counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", strings.ToLower(string(s)), n))
		}
	}
	return strings.Join(parts, ", ")
}

func printDemoSummary(out io.Writer, s demoSummary, tsq []*commandbus.CommandRow, url string) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tCOMMANDS")
	statuses := make([]string, 0, len(s.Statuses))
	for status := range s.Statuses {
		statuses = append(statuses, status)
	}
	sort.Strings(statuses)
	for _, status := range statuses {
		fmt.Fprintf(tw, "%s\t%d\n", status, s.Statuses[status])
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "\n%d commands in %.2fs (%.0f/s); handling latency p50 %.1f ms, p99 %.1f ms; %d replies received\n",
		s.Commands, s.ElapsedS, s.CommandsPerS, s.P50Ms, s.P99Ms, s.Replies)
	if len(tsq) == 0 {
		fmt.Fprintln(out, "The troubleshooting queue is empty.")
		return
	}
	fmt.Fprintf(out, "\n%d in the troubleshooting queue, waiting for an operator:\n", s.InTSQ)
	for _, r := range tsq {
		fmt.Fprintf(out, "  %s  %s: %s\n", r.ID, r.ErrorCode, r.ErrorMessage)
	}
	fmt.Fprintf(out, "\nFix one with, for example:\n  go run ./cmd/commandbus tsq retry %s --database %s --reason \"provider re-enabled the pair\"\n", tsq[0].ID, redact(url))
}
