package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/workflow"
)

// SchedulesConfig configures the schedules benchmark.
type SchedulesConfig struct {
	// Schedules firing every second. Default: 10000.
	Schedules int `json:"schedules"`
	// Duration is how long ticks are measured, after Warmup. Default: 10s.
	Duration time.Duration `json:"duration_ns"`
	// Warmup runs the schedulers before measuring (their first ticks are not counted).
	// Default: 3s.
	Warmup time.Duration `json:"warmup_ns"`
	// Replicas is how many clients, each with its scheduler, fire the schedules on one database.
	// Default: 2.
	Replicas int `json:"replicas"`
	// ClaimBatch and StartConcurrency tune each scheduler (schedule.Config). Defaults: 500, 16.
	ClaimBatch       int `json:"claim_batch"`
	StartConcurrency int `json:"start_concurrency"`
	// Lead is schedule.Config.Lead: how far ahead ticks are claimed and their executions
	// inserted, runnable from the tick. Default: schedule.DefaultLead; negative: off.
	Lead time.Duration `json:"lead_ns"`
	// Engines runs the replicas' engines too, so the executions run (a one-step no-op
	// workflow), and measures the ticks' run lateness besides. Default: off, the benchmark
	// measures starts.
	Engines  bool         `json:"engines"`
	Logger   *slog.Logger `json:"-"`
	Progress io.Writer    `json:"-"`
}

// SchedulesResult is what the schedules benchmark prints.
type SchedulesResult struct {
	Driver    string `json:"driver"`
	Schedules int    `json:"schedules"`
	// Ticks is how many (schedule, second) ticks fell in the measured window; Started how many
	// of them started their execution, Missing how many did not.
	Ticks   int `json:"ticks"`
	Started int `json:"started"`
	Missing int `json:"missing"`
	// Duplicates is the fires recorded on the schedules beyond the executions stored: a tick
	// fired twice counts one. Zero means each tick started once.
	Duplicates int64 `json:"duplicates"`
	// Lateness is from the tick to when its execution became runnable, as its replica saw it:
	// the commit of the insert, or the execution's not-before time (the tick) when the insert
	// committed ahead of it. LatenessMinMs below 0 would mean a tick runnable before its time.
	LatenessP50Ms float64 `json:"lateness_p50_ms"`
	LatenessP99Ms float64 `json:"lateness_p99_ms"`
	LatenessMaxMs float64 `json:"lateness_max_ms"`
	// LatenessMinMs is the earliest: negative would mean a tick runnable before its time.
	LatenessMinMs float64 `json:"lateness_min_ms"`
	// With Engines: Ran is how many ticks' executions ran in the window, RunLateness from the
	// tick to the first commit of an engine's run of its execution (after its step ran), and
	// RunEarly how many of those committed before the tick (0 unless a tick ran early).
	Ran              int             `json:"ran,omitempty"`
	RunLatenessP50Ms float64         `json:"run_lateness_p50_ms,omitempty"`
	RunLatenessP99Ms float64         `json:"run_lateness_p99_ms,omitempty"`
	RunLatenessMaxMs float64         `json:"run_lateness_max_ms,omitempty"`
	RunEarly         int             `json:"run_early,omitempty"`
	StartsPerS       float64         `json:"starts_per_s"`
	Config           SchedulesConfig `json:"config"`
	GoMaxProcs       int             `json:"gomaxprocs"`
}

// WithDefaults fills unset fields.
func (c SchedulesConfig) WithDefaults() SchedulesConfig {
	if c.Schedules == 0 {
		c.Schedules = 10000
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Warmup == 0 {
		c.Warmup = 3 * time.Second
	}
	if c.Replicas == 0 {
		c.Replicas = 2
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = 500
	}
	if c.StartConcurrency == 0 {
		c.StartConcurrency = 16
	}
	if c.Lead == 0 {
		c.Lead = schedule.DefaultLead
	}
	return c
}

// RunSchedules creates cfg.Schedules schedules of a one-step workflow firing every second
// (cron "* * * * * *"), runs cfg.Replicas clients with their schedulers on the database (their
// engines off unless cfg.Engines: the benchmark measures starts), and measures, over
// cfg.Duration after cfg.Warmup, how late each tick's execution became runnable (and, with
// engines, ran) and whether any tick started twice.
func RunSchedules(ctx context.Context, drv driver.Driver, cfg SchedulesConfig) (*SchedulesResult, error) {
	cfg = cfg.WithDefaults()
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var mu sync.Mutex
	committed := make(map[uuid.UUID]time.Time, cfg.Schedules*int((cfg.Duration+cfg.Warmup)/time.Second+4))
	ran := map[uuid.UUID]time.Time{}
	observe := func(c commandbus.ExecutionCommit) {
		if !c.Inserted {
			at := time.Now()
			mu.Lock()
			if _, seen := ran[c.Execution.ID]; !seen {
				ran[c.Execution.ID] = at
			}
			mu.Unlock()
			return
		}
		// Runnable from the commit, or from its not-before time when it was committed ahead of
		// its tick: the pollers take it up no earlier.
		at := time.Now()
		if wake := c.Execution.WakeAt; wake != nil && wake.After(at) {
			at = *wake
		}
		mu.Lock()
		if _, seen := committed[c.Execution.ID]; !seen {
			committed[c.Execution.ID] = at
		}
		mu.Unlock()
	}
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	off := cfg.Engines
	var clients []*commandbus.Client
	var schedulers []*schedule.Scheduler
	for i := range cfg.Replicas {
		ccfg := &commandbus.Config{Logger: logger, ExecutionObserver: observe, WorkerID: fmt.Sprintf("bench-replica-%d", i)}
		ccfg.Features.ProcessExecution = &off
		client, err := commandbus.NewClient(drv, ccfg)
		if err != nil {
			return nil, err
		}
		rt, err := orchestration.New(client, orchestration.Config{})
		if err != nil {
			return nil, err
		}
		if _, err := workflow.Register(rt, workflow.New("BenchScheduled", 1).Step("a", noop)); err != nil {
			return nil, err
		}
		s, err := schedule.New(rt, schedule.Config{ClaimBatch: cfg.ClaimBatch, StartConcurrency: cfg.StartConcurrency,
			MisfireThreshold: time.Second, Lead: cfg.Lead})
		if err != nil {
			return nil, err
		}
		clients, schedulers = append(clients, client), append(schedulers, s)
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "creating %d schedules...\n", cfg.Schedules)
	}
	ids := make([]uuid.UUID, cfg.Schedules)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				s, err := schedulers[0].Create(ctx, schedule.Spec{Name: fmt.Sprintf("bench-%05d", i), Model: workflow.Model,
					Type: "BenchScheduled", Cron: "* * * * * *", Misfire: driver.MisfireSkip}, commandbus.OperatorAction{Actor: "bench", Reason: "bench schedules"})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				ids[i] = s.ID
			}
		}()
	}
	for i := range cfg.Schedules {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return nil, fmt.Errorf("creating schedules: %w", err)
	default:
	}

	for _, c := range clients {
		if err := c.Start(ctx); err != nil {
			return nil, err
		}
	}
	stopAll := func() {
		for _, c := range clients {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = c.Stop(stopCtx)
			cancel()
		}
	}
	started := time.Now()
	from := started.Add(cfg.Warmup).Truncate(time.Second).Add(time.Second)
	to := from.Add(cfg.Duration) // ticks in [from, to)
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "%d replicas firing; measuring ticks from %s for %s...\n", cfg.Replicas, from.Format("15:04:05"), cfg.Duration)
	}
	select {
	case <-ctx.Done():
		stopAll()
		return nil, ctx.Err()
	case <-time.After(time.Until(to.Add(2 * time.Second))):
	}
	stopAll()

	var lateness, runLateness []time.Duration
	ticks, missing, runEarly := 0, 0, 0
	mu.Lock()
	for _, id := range ids {
		for tick := from; tick.Before(to); tick = tick.Add(time.Second) {
			ticks++
			if at, ok := ran[schedule.TickExecutionID(id, tick.UTC())]; ok {
				if at.Before(tick) {
					runEarly++
				}
				runLateness = append(runLateness, at.Sub(tick))
			}
			at, ok := committed[schedule.TickExecutionID(id, tick.UTC())]
			if !ok {
				missing++
				continue
			}
			lateness = append(lateness, at.Sub(tick))
		}
	}
	inserted := len(committed)
	mu.Unlock()
	sort.Slice(lateness, func(i, j int) bool { return lateness[i] < lateness[j] })
	sort.Slice(runLateness, func(i, j int) bool { return runLateness[i] < runLateness[j] })

	var fires int64
	list, err := drv.Executor().ScheduleList(ctx, &driver.ScheduleListParams{Limit: cfg.Schedules + 10})
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		fires += s.FireCount
	}
	counts, err := drv.Executor().ExecutionCountByStatus(ctx)
	if err != nil {
		return nil, err
	}
	var stored int64
	for _, c := range counts {
		if c.Type == "BenchScheduled" {
			stored += c.Count
		}
	}
	if int64(inserted) != stored && cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "note: %d executions observed, %d stored\n", inserted, stored)
	}
	res := &SchedulesResult{Driver: drv.Name(), Schedules: cfg.Schedules, Ticks: ticks, Started: len(lateness), Missing: missing,
		Duplicates: max(0, fires-stored), StartsPerS: round(float64(len(lateness))/cfg.Duration.Seconds(), 0), Config: cfg,
		GoMaxProcs: runtime.GOMAXPROCS(0)}
	if len(lateness) > 0 {
		res.LatenessP50Ms = round(float64(percentile(lateness, 0.50))/float64(time.Millisecond), 1)
		res.LatenessP99Ms = round(float64(percentile(lateness, 0.99))/float64(time.Millisecond), 1)
		res.LatenessMaxMs = round(float64(lateness[len(lateness)-1])/float64(time.Millisecond), 1)
		res.LatenessMinMs = round(float64(lateness[0])/float64(time.Millisecond), 1)
	}
	if len(runLateness) > 0 {
		res.Ran, res.RunEarly = len(runLateness), runEarly
		res.RunLatenessP50Ms = round(float64(percentile(runLateness, 0.50))/float64(time.Millisecond), 1)
		res.RunLatenessP99Ms = round(float64(percentile(runLateness, 0.99))/float64(time.Millisecond), 1)
		res.RunLatenessMaxMs = round(float64(runLateness[len(runLateness)-1])/float64(time.Millisecond), 1)
	}
	return res, nil
}
