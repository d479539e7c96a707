package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
)

// killResult is what `bench kill` reports.
type killResult struct {
	Config struct {
		Payments    int    `json:"payments"`
		Workers     int    `json:"workers"`
		KillEvery   string `json:"killEvery"`
		ProcessType string `json:"processType"`
		Preset      string `json:"behaviorPreset"`
	} `json:"config"`
	ElapsedS        float64              `json:"elapsedS"`
	Kills           int                  `json:"kills"`
	Settled         bool                 `json:"settled"`
	Counts          payments.BatchCounts `json:"counts"`
	TSQByCode       map[string]int       `json:"tsqByCode"`
	WaitTimeouts    int                  `json:"waitTimeouts"`
	LeftoverEffects int                  `json:"leftoverEffects"`
	Invariants      string               `json:"invariants"` // "ok" or the violations
}

func newBenchKillCommand() *cobra.Command {
	var (
		url       string
		keep      bool
		asJSON    bool
		n         int
		workers   int
		killEvery time.Duration
		timeout   time.Duration
		process   string
		preset    string
		seed      uint64
	)
	cmd := &cobra.Command{
		Use:   "kill",
		Short: "A batch of payments through `serve` and worker processes, killing a worker with SIGKILL every few seconds",
		Long: "bench kill runs the reference platform as a cluster of this binary's processes on one PostgreSQL\n" +
			"schema: one `serve` (REST API, console, workers) and --workers `worker` processes, every one of them\n" +
			"also a candidate for the network simulator's lease. It creates a batch of --payments through the API\n" +
			"and, until every payment has settled, kills a random worker with SIGKILL every --kill-every and starts\n" +
			"it again. Then it checks what a payments team must be able to trust: every payment terminal, none\n" +
			"parked for WAIT_TIMEOUT, one submission per payment, money conserved, and no hold, limit reservation,\n" +
			"FX contract or risk booking left live under a compensated or cancelled payment.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !isPostgresURL(url) {
				return errors.New("--database must be a postgres:// URL: the processes share one database")
			}
			typ, err := processType(process)
			if err != nil {
				return err
			}
			process = typ
			if workers < 1 || n < 1 || killEvery <= 0 {
				return errors.New("--workers, --payments and --kill-every must be positive")
			}
			ctx := cmd.Context()
			logger, err := cli.Logger(cmd, cmd.ErrOrStderr(), cli.LogOptions{Level: slog.LevelError})
			if err != nil {
				return err
			}
			progress := cmd.ErrOrStderr()
			if asJSON {
				progress = io.Discard
			}
			res, err := runKillBench(ctx, killBench{url: url, keep: keep, payments: n, workers: workers, killEvery: killEvery,
				timeout: timeout, process: process, preset: preset, seed: seed, logger: logger, progress: progress})
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%d payments, %d workers, %d kills in %.1fs: completed %d, compensated %d, failed %d, cancelled %d, in TSQ %d (WAIT_TIMEOUT %d); leftover effects %d; invariants %s\n",
					n, workers, res.Kills, res.ElapsedS, res.Counts.Completed, res.Counts.Compensated, res.Counts.Failed, res.Counts.Cancelled,
					res.Counts.InTSQ, res.WaitTimeouts, res.LeftoverEffects, res.Invariants)
			}
			if !res.Settled || res.WaitTimeouts > 0 || res.LeftoverEffects > 0 || res.Invariants != "ok" || res.Counts.Terminal() != n {
				return errors.New("bench kill: the cluster did not settle every payment cleanly (see above)")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "database", os.Getenv("COMMANDBUS_DATABASE_URL"), "PostgreSQL URL; the run gets a schema of its own")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the run's schema")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().IntVar(&n, "payments", 1000, "payments in the batch")
	cmd.Flags().IntVar(&workers, "workers", 2, "`worker` processes beside `serve`")
	cmd.Flags().DurationVar(&killEvery, "kill-every", 5*time.Second, "how often a random worker is killed with SIGKILL (and started again)")
	cmd.Flags().DurationVar(&timeout, "timeout", 15*time.Minute, "give up when the batch has not settled by then")
	cmd.Flags().StringVar(&process, "process", payments.TypePaymentStep, processTypeHelp)
	cmd.Flags().StringVar(&preset, "behavior", "happy", "the simulators' behaviour: a preset (happy, realistic, chaos) or a JSON/YAML file of per-step behaviour")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seeds the choice of the worker to kill")
	return cmd
}

type killBench struct {
	url, process, preset string
	keep                 bool
	payments, workers    int
	killEvery, timeout   time.Duration
	seed                 uint64
	logger               *slog.Logger
	progress             io.Writer
}

func runKillBench(ctx context.Context, kb killBench) (*killResult, error) {
	res := &killResult{TSQByCode: map[string]int{}}
	res.Config.Payments, res.Config.Workers, res.Config.KillEvery = kb.payments, kb.workers, kb.killEvery.String()
	res.Config.ProcessType, res.Config.Preset = kb.process, kb.preset

	var b [4]byte
	_, _ = crand.Read(b[:])
	schema := "commandbus_kill_" + hex.EncodeToString(b[:])
	db, err := openDatabase(ctx, kb.url, schema, 8)
	if err != nil {
		return nil, err
	}
	defer func() {
		if !kb.keep {
			dropCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = db.Executor().Exec(dropCtx, "DROP SCHEMA "+schema+" CASCADE")
		}
		db.Close()
	}()
	if err := migrateUp(ctx, db, kb.logger); err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "commandbus-kill-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	token := "kill-bench-" + hex.EncodeToString(b[:]) + "-operator"
	config := fmt.Sprintf("commandbus:\n  database:\n    url: %q\n    schema: %s\n  server:\n    addr: %q\n    tokens:\n      - {subject: kill-bench, token: %q, role: operator}\n  simulator:\n    enabled: true\n    poll-interval: 200ms\n",
		kb.url, schema, addr, token)
	configPath := filepath.Join(dir, "cluster.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cluster := &cluster{self: self, config: configPath, dir: dir}
	defer cluster.stopAll()
	if err := cluster.start("serve"); err != nil {
		return nil, err
	}
	for i := 1; i <= kb.workers; i++ {
		if err := cluster.start(fmt.Sprintf("worker-%d", i)); err != nil {
			return nil, err
		}
	}
	api := &apiClient{base: "http://" + addr, token: token}
	if err := api.waitReady(ctx, time.Minute); err != nil {
		return nil, fmt.Errorf("serve did not become ready (its log: %s): %w", cluster.logPath("serve"), err)
	}

	behavior, err := loadBehavior(kb.preset)
	if err != nil {
		return nil, err
	}
	var batch payments.BatchView
	if err := api.do(ctx, http.MethodPost, "/api/batches", map[string]any{"count": kb.payments, "processType": kb.process, "behavior": behavior}, &batch); err != nil {
		return nil, fmt.Errorf("creating the batch: %w", err)
	}
	fmt.Fprintf(kb.progress, "batch %s: %d payments; killing a worker every %s\n", batch.ID, kb.payments, kb.killEvery)

	rng := rand.New(rand.NewPCG(kb.seed, 0))
	started := time.Now()
	deadline := started.Add(kb.timeout)
	nextKill := started.Add(kb.killEvery)
	settledSince := time.Time{}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := time.Now()
		if now.After(deadline) {
			break
		}
		if !now.Before(nextKill) {
			victim := fmt.Sprintf("worker-%d", 1+rng.IntN(kb.workers))
			if err := cluster.kill(victim); err != nil {
				return nil, err
			}
			res.Kills++
			if err := cluster.start(victim); err != nil {
				return nil, err
			}
			nextKill = now.Add(kb.killEvery)
		}
		if err := api.do(ctx, http.MethodGet, "/api/batches/"+batch.ID.String(), nil, &batch); err != nil {
			fmt.Fprintf(kb.progress, "  reading the batch failed (%v); trying again\n", err)
		} else {
			c := batch.Counts
			fmt.Fprintf(kb.progress, "  %6.1fs terminal %d/%d (completed %d, compensated %d), waiting %d, in TSQ %d, kills %d\n",
				time.Since(started).Seconds(), c.Terminal(), kb.payments, c.Completed, c.Compensated, c.Waiting, c.InTSQ, res.Kills)
			// Settled: every payment terminal or parked, for two readings in a row.
			if c.Terminal()+c.InTSQ == kb.payments {
				if settledSince.IsZero() {
					settledSince = now
				} else {
					res.Settled = true
					break
				}
			} else {
				settledSince = time.Time{}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	res.ElapsedS = time.Since(started).Seconds()
	res.Counts = batch.Counts
	cluster.stopAll()

	// The checks read the database directly, with the platform's own invariants.
	client, err := commandbus.NewClient(db.Driver, &commandbus.Config{Logger: kb.logger})
	if err != nil {
		return nil, err
	}
	platform, err := payments.New(client, payments.Options{DisableSimulator: true, Logger: kb.logger})
	if err != nil {
		return nil, err
	}
	parked, err := db.Executor().ExecutionList(ctx, &driver.ExecutionListParams{Statuses: []driver.ExecutionStatus{driver.ExecutionWaitingForTSQ}, Limit: 100_000})
	if err != nil {
		return nil, err
	}
	for _, row := range parked {
		res.TSQByCode[row.ErrorCode]++
		if row.ErrorCode == "WAIT_TIMEOUT" {
			res.WaitTimeouts++
		}
	}
	if res.LeftoverEffects, err = platform.LeftoverEffects(ctx); err != nil {
		return nil, err
	}
	res.Invariants = "ok"
	if err := platform.CheckInvariants(ctx); err != nil {
		res.Invariants = err.Error()
	}
	return res, nil
}

// cluster runs this binary's `serve` and `worker` commands as child processes.
type cluster struct {
	self, config, dir string
	mu                sync.Mutex
	procs             map[string]*exec.Cmd
}

func (c *cluster) logPath(name string) string { return filepath.Join(c.dir, name+".log") }

func (c *cluster) start(name string) error {
	role := "worker"
	if name == "serve" {
		role = "serve"
	}
	logFile, err := os.OpenFile(c.logPath(name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.self, role, "--config", c.config, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); logFile.Close() }()
	c.mu.Lock()
	if c.procs == nil {
		c.procs = map[string]*exec.Cmd{}
	}
	c.procs[name] = cmd
	c.mu.Unlock()
	return nil
}

// kill ends a process with SIGKILL: no shutdown, no release of its leases.
func (c *cluster) kill(name string) error {
	c.mu.Lock()
	cmd := c.procs[name]
	delete(c.procs, name)
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", name, err)
	}
	return nil
}

// stopAll interrupts every process and waits a little for them to stop, then kills the rest.
func (c *cluster) stopAll() {
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	names := make([]string, 0, len(procs))
	for name, cmd := range procs {
		names = append(names, name)
		_ = cmd.Process.Signal(os.Interrupt)
	}
	sort.Strings(names)
	deadline := time.Now().Add(20 * time.Second)
	for _, name := range names {
		p := procs[name].Process
		for time.Now().Before(deadline) && p.Signal(syscall.Signal(0)) == nil {
			time.Sleep(100 * time.Millisecond)
		}
		_ = p.Kill()
	}
}

// apiClient calls the REST API with a bearer token.
type apiClient struct {
	base, token string
}

func (a *apiClient) waitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answered %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return last
}

func (a *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(raw)))
	}
	return json.Unmarshal(raw, out)
}

// freeLoopbackAddr returns a loopback address no one listens on now.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
