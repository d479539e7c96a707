package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
)

// TimersConfig configures the timer benchmark.
type TimersConfig struct {
	// Timers to schedule. Default: 10000.
	Timers int `json:"timers"`
	// Executions the timers are spread over, round robin. Default: 1000; at most Timers.
	Executions int `json:"executions"`
	// Window is the span the timers fall due in, evenly spaced. Default: 1s.
	Window time.Duration `json:"window_ns"`
	// Lead is the time between the start of scheduling and the first timer's due time; scheduling
	// must end within it. Default: 2s plus 300µs per execution (5s for 10,000).
	Lead time.Duration `json:"lead_ns"`
	// Concurrency is how many executions the engine runs at once. Default: 1000.
	Concurrency int `json:"concurrency"`
	// Settle is how long the engine keeps running after the last timer was seen due, so that a
	// timer seen due again counts as fired twice. Default: 1s.
	Settle time.Duration `json:"settle_ns"`
	// Timeout bounds the wait for the last timer after it fell due. Default: 1 minute.
	Timeout  time.Duration `json:"-"`
	Logger   *slog.Logger  `json:"-"`
	Progress io.Writer     `json:"-"`
}

// WithDefaults fills unset fields.
func (c TimersConfig) WithDefaults() TimersConfig {
	if c.Timers == 0 {
		c.Timers = 10_000
	}
	if c.Executions == 0 {
		c.Executions = min(1000, c.Timers)
	}
	if c.Window == 0 {
		c.Window = time.Second
	}
	if c.Lead == 0 {
		c.Lead = 2*time.Second + time.Duration(max(c.Executions, 0))*300*time.Microsecond
	}
	if c.Concurrency == 0 {
		c.Concurrency = 1000
	}
	if c.Settle == 0 {
		c.Settle = time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = time.Minute
	}
	return c
}

func (c TimersConfig) validate() error {
	var errs []error
	if c.Timers < 0 {
		errs = append(errs, fmt.Errorf("timers must be positive, got %d", c.Timers))
	}
	if c.Executions < 0 || c.Executions > c.Timers {
		errs = append(errs, fmt.Errorf("executions must be between 1 and the number of timers (%d), got %d", c.Timers, c.Executions))
	}
	if c.Window < 0 {
		errs = append(errs, fmt.Errorf("window must not be negative, got %s", c.Window))
	}
	if c.Lead < 0 {
		errs = append(errs, fmt.Errorf("lead must be positive, got %s", c.Lead))
	}
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("concurrency must be positive, got %d", c.Concurrency))
	}
	if c.Settle < 0 {
		errs = append(errs, fmt.Errorf("settle must not be negative, got %s", c.Settle))
	}
	return errors.Join(errs...)
}

// TimersResult is what the timer benchmark prints. Lateness is the time from a timer's due time
// to its execution's runner seeing it due. Fired counts the timers seen due, FiredTwice those
// seen due again after a committed checkpoint marked them fired, and Lost those never seen due.
type TimersResult struct {
	Driver     string `json:"driver"`
	Timers     int    `json:"timers"`
	Executions int    `json:"executions"`
	Fired      int    `json:"fired"`
	FiredTwice int    `json:"fired_twice"`
	Lost       int    `json:"lost"`
	// Unfired counts the timers still pending in the database once the engine stopped.
	Unfired    int          `json:"unfired"`
	ScheduleS  float64      `json:"schedule_s"`
	P50LateMs  float64      `json:"p50_late_ms"`
	P99LateMs  float64      `json:"p99_late_ms"`
	MaxLateMs  float64      `json:"max_late_ms"`
	Config     TimersConfig `json:"config"`
	GoMaxProcs int          `json:"gomaxprocs"`
}

// ErrTimersFiredTwice and ErrTimersLost are what RunTimers returns (wrapped, with its result)
// when a timer was seen due again after it was marked fired, or was never seen due or left
// pending.
var (
	ErrTimersFiredTwice = errors.New("timers fired twice")
	ErrTimersLost       = errors.New("timers lost")
)

// funcRunner is an engine runner of one execution type whose runs call run.
type funcRunner struct {
	typ string
	run func(ctx context.Context, lease *execution.Lease) error
}

func (r funcRunner) Type() string { return r.typ }
func (r funcRunner) Run(ctx context.Context, lease *execution.Lease) error {
	return r.run(ctx, lease)
}
func (r funcRunner) Deadline(ctx context.Context, lease *execution.Lease) error {
	return lease.Release(ctx)
}

// benchEngine returns an engine of the benchmark worker that polls rarely: wake-ups (signals,
// the in-memory timer wake-ups) must do the work.
func benchEngine(drv driver.Driver, logger *slog.Logger, concurrency int) *execution.Engine {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return execution.New(execution.Config{Exec: drv.Executor(), WorkerID: "bench", Logger: logger,
		Lease: 30 * time.Second, Concurrency: concurrency,
		PendingPollInterval: time.Second, RetryPollInterval: time.Hour, TimeoutCheckInterval: time.Hour,
		DeadlineCheckInterval: time.Hour})
}

// insertLeased creates n executions of typ leased to e, in batches.
func insertLeased(ctx context.Context, e *execution.Engine, typ string, n int) ([]*execution.Lease, error) {
	const batch = 1000
	leases := make([]*execution.Lease, 0, n)
	for from := 0; from < n; from += batch {
		params := make([]*driver.ExecutionInsertParams, min(batch, n-from))
		for i := range params {
			params[i] = &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7()), Model: "workflow", Type: typ,
				Domain: "bench", State: json.RawMessage(`{}`), Lease: 30 * time.Second, WorkerID: "bench"}
		}
		got, err := e.Insert(ctx, params)
		if err != nil {
			return nil, err
		}
		leases = append(leases, got...)
	}
	return leases, nil
}

// checkpointAll commits one checkpoint per lease, concurrently (the engine groups them into
// shared commits).
func checkpointAll(ctx context.Context, leases []*execution.Lease, cp func(i int, lease *execution.Lease) *driver.ExecutionCheckpoint) error {
	var wg sync.WaitGroup
	errs := make([]error, len(leases))
	for i, lease := range leases {
		wg.Go(func() { errs[i] = lease.Checkpoint(ctx, cp(i, lease)) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// RunTimers schedules cfg.Timers durable timers on cfg.Executions waiting executions, due evenly
// within cfg.Window after cfg.Lead, starts an engine whose runner marks the due timers fired, and
// measures how late the runner sees each timer due. It returns the result together with an error
// wrapping ErrTimersFiredTwice when a timer was seen due after a committed checkpoint marked it
// fired, or ErrTimersLost when timers were not seen due within cfg.Timeout after the window or
// are still pending in the database afterwards.
func RunTimers(ctx context.Context, drv driver.Driver, cfg TimersConfig) (*TimersResult, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var (
		mu       sync.Mutex
		lateness = make([]time.Duration, 0, cfg.Timers)
		seen     = make(map[string]bool, cfg.Timers) // seen due once
		fired    = make(map[string]bool, cfg.Timers) // marked fired by a committed checkpoint
		twice    int
		all      = make(chan struct{})
	)
	runner := funcRunner{typ: "BenchTimers", run: func(ctx context.Context, lease *execution.Lease) error {
		due, err := lease.DueTimers(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		cp := lease.Base()
		cp.Status, cp.Release = driver.ExecutionWaitingForAsync, true
		keys := make([]string, len(due))
		mu.Lock()
		for i, t := range due {
			keys[i] = lease.Row.ID.String() + "/" + t.TimerID
			switch {
			case fired[keys[i]]:
				twice++
			case !seen[keys[i]]:
				seen[keys[i]] = true
				lateness = append(lateness, now.Sub(t.FireAt))
				if len(lateness) == cfg.Timers {
					close(all)
				}
			}
			cp.FireTimers = append(cp.FireTimers, t.TimerID)
		}
		mu.Unlock()
		if err := lease.Checkpoint(ctx, cp); err != nil {
			return err // the timers stay pending, due again
		}
		mu.Lock()
		for _, key := range keys {
			fired[key] = true
		}
		mu.Unlock()
		return nil
	}}
	e := benchEngine(drv, cfg.Logger, cfg.Concurrency)
	if err := e.Register(runner); err != nil {
		return nil, err
	}

	scheduling := time.Now()
	start := scheduling.Add(cfg.Lead)
	progress(cfg.Progress, "bench timers: scheduling %d timers on %d executions, due within %s from %s\n",
		cfg.Timers, cfg.Executions, cfg.Window, start.UTC().Format("15:04:05.000"))
	leases, err := insertLeased(ctx, e, runner.typ, cfg.Executions)
	if err != nil {
		return nil, err
	}
	err = checkpointAll(ctx, leases, func(i int, lease *execution.Lease) *driver.ExecutionCheckpoint {
		cp := lease.Base()
		cp.Status, cp.Release = driver.ExecutionWaitingForAsync, true
		// Timer k belongs to execution k mod executions and falls due at start + window·k/timers.
		for k := i; k < cfg.Timers; k += cfg.Executions {
			at := start.Add(time.Duration(int64(cfg.Window) * int64(k) / int64(cfg.Timers)))
			cp.Timers = append(cp.Timers, &driver.TimerParams{ID: fmt.Sprintf("t%d", k), FireAt: &at})
		}
		return cp
	})
	if err != nil {
		return nil, err
	}
	scheduled := time.Since(scheduling)
	if time.Now().After(start) {
		return nil, fmt.Errorf("scheduling took %s, longer than the lead time %s: raise the lead", scheduled.Round(time.Millisecond), cfg.Lead)
	}
	progress(cfg.Progress, "bench timers: scheduled in %.2fs\n", scheduled.Seconds())
	if err := e.Start(ctx); err != nil {
		return nil, err
	}
	seenCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(lateness)
	}
	deadline := time.NewTimer(time.Until(start.Add(cfg.Window + cfg.Timeout)))
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-all:
			break wait
		case <-deadline.C:
			break wait
		case <-ctx.Done():
			_ = e.Stop(context.Background())
			return nil, ctx.Err()
		case <-tick.C:
			if wait := time.Until(start); wait > 0 {
				progress(cfg.Progress, "bench timers: the first timer is due in %.1fs\n", wait.Seconds())
			} else {
				progress(cfg.Progress, "bench timers: %d of %d fired\n", seenCount(), cfg.Timers)
			}
		}
	}
	// The engine keeps running a while, woken once more: runs may only find nothing due, and a
	// timer seen due again counts as fired twice.
	e.Wake(ctx)
	settle := time.NewTimer(cfg.Settle)
	select {
	case <-settle.C:
	case <-ctx.Done():
		settle.Stop()
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	unfired, err := countDueTimers(ctx, drv.Executor(), leases)
	if err != nil {
		return nil, fmt.Errorf("counting the timers left pending: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lateness)
	res := &TimersResult{
		Driver:     drv.Name(),
		Timers:     cfg.Timers,
		Executions: cfg.Executions,
		Fired:      len(lateness),
		FiredTwice: twice,
		Lost:       cfg.Timers - len(lateness),
		Unfired:    unfired,
		ScheduleS:  round(scheduled.Seconds(), 3),
		P50LateMs:  round(percentile(lateness, 0.50).Seconds()*1000, 2),
		P99LateMs:  round(percentile(lateness, 0.99).Seconds()*1000, 2),
		Config:     cfg,
		GoMaxProcs: runtime.GOMAXPROCS(0),
	}
	if len(lateness) > 0 {
		res.MaxLateMs = round(lateness[len(lateness)-1].Seconds()*1000, 2)
	}
	var errs []error
	if res.FiredTwice > 0 {
		errs = append(errs, fmt.Errorf("%w: %d", ErrTimersFiredTwice, res.FiredTwice))
	}
	if res.Lost > 0 {
		errs = append(errs, fmt.Errorf("%w: %d of %d not seen due within %s after the window", ErrTimersLost, res.Lost, cfg.Timers, cfg.Timeout))
	}
	if res.Unfired > 0 {
		errs = append(errs, fmt.Errorf("%w: %d of %d still pending in the database", ErrTimersLost, res.Unfired, cfg.Timers))
	}
	return res, errors.Join(errs...)
}

// countDueTimers counts the due pending timers of the leases' executions.
func countDueTimers(ctx context.Context, exec driver.Executor, leases []*execution.Lease) (int, error) {
	const batch = 1000
	n := 0
	for from := 0; from < len(leases); from += batch {
		ids := make([]uuid.UUID, 0, batch)
		for _, l := range leases[from:min(from+batch, len(leases))] {
			ids = append(ids, l.Row.ID)
		}
		rows, err := exec.ExecutionTimerListDueMany(ctx, &driver.ExecutionTimerListDueManyParams{ExecutionIDs: ids})
		if err != nil {
			return 0, err
		}
		n += len(rows)
	}
	return n, nil
}

// SignalConfig configures the signal benchmark.
type SignalConfig struct {
	// Executions waiting for a signal; each is sent one. Default: 1000.
	Executions int `json:"executions"`
	// Senders send signals concurrently, each to its next execution once the previous one it
	// signalled resumed. Default: 1 (one signal at a time).
	Senders int `json:"senders"`
	// Timeout bounds the wait for one execution to resume. Default: 30s.
	Timeout  time.Duration `json:"-"`
	Logger   *slog.Logger  `json:"-"`
	Progress io.Writer     `json:"-"`
}

// WithDefaults fills unset fields.
func (c SignalConfig) WithDefaults() SignalConfig {
	if c.Executions == 0 {
		c.Executions = 1000
	}
	if c.Senders == 0 {
		c.Senders = 1
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	return c
}

// SignalResult is what the signal benchmark prints. Latency is the time from sending a signal
// (before SendSignal) to the waiting execution's runner seeing it.
type SignalResult struct {
	Driver     string       `json:"driver"`
	Executions int          `json:"executions"`
	ElapsedS   float64      `json:"elapsed_s"`
	P50Ms      float64      `json:"p50_ms"`
	P99Ms      float64      `json:"p99_ms"`
	MaxMs      float64      `json:"max_ms"`
	Config     SignalConfig `json:"config"`
	GoMaxProcs int          `json:"gomaxprocs"`
}

// RunSignal creates cfg.Executions executions waiting for a signal, starts an engine whose runner
// consumes the signal and completes the execution, then sends each execution one signal
// (cfg.Senders at a time) and measures until its runner sees it.
func RunSignal(ctx context.Context, drv driver.Driver, cfg SignalConfig) (*SignalResult, error) {
	cfg = cfg.WithDefaults()
	if cfg.Executions < 0 || cfg.Senders < 0 {
		return nil, fmt.Errorf("executions and senders must be positive, got %d and %d", cfg.Executions, cfg.Senders)
	}
	var resumed sync.Map // execution id → chan time.Time, told when its runner saw the signal
	runner := funcRunner{typ: "BenchSignal", run: func(ctx context.Context, lease *execution.Lease) error {
		signals, err := lease.Signals(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		cp := lease.Base()
		cp.Release = true
		if len(signals) == 0 { // woken without its signal: keep waiting
			cp.Status = driver.ExecutionWaitingForAsync
			return lease.Checkpoint(ctx, cp)
		}
		for _, s := range signals {
			cp.ConsumeSignals = append(cp.ConsumeSignals, s.SignalID)
		}
		cp.Status, cp.CloseWaits = driver.ExecutionCompleted, []string{"go"}
		if ch, ok := resumed.Load(lease.Row.ID); ok {
			select {
			case ch.(chan time.Time) <- now:
			default:
			}
		}
		return lease.Checkpoint(ctx, cp)
	}}
	e := benchEngine(drv, cfg.Logger, max(50, 2*cfg.Senders))
	if err := e.Register(runner); err != nil {
		return nil, err
	}
	progress(cfg.Progress, "bench signal: %d executions waiting for a signal, %d sender(s)\n", cfg.Executions, cfg.Senders)
	leases, err := insertLeased(ctx, e, runner.typ, cfg.Executions)
	if err != nil {
		return nil, err
	}
	err = checkpointAll(ctx, leases, func(_ int, lease *execution.Lease) *driver.ExecutionCheckpoint {
		cp := lease.Base()
		cp.Status, cp.Release = driver.ExecutionWaitingForAsync, true
		cp.OpenWaits = []*driver.WaitParams{{ID: "go", Kind: driver.WaitSignal, Name: "go"}}
		return cp
	})
	if err != nil {
		return nil, err
	}
	for _, l := range leases {
		resumed.Store(l.Row.ID, make(chan time.Time, 1))
	}
	if err := e.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.Stop(stopCtx)
	}()

	latencies := make([]time.Duration, len(leases))
	next := make(chan int, len(leases))
	for i := range leases {
		next <- i
	}
	close(next)
	errs := make([]error, cfg.Senders)
	var wg sync.WaitGroup
	start := time.Now()
	done := make(chan struct{})
	go func() {
		if cfg.Progress == nil {
			return
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				progress(cfg.Progress, "bench signal: %.0fs\n", time.Since(start).Seconds())
			}
		}
	}()
	for s := range cfg.Senders {
		wg.Go(func() {
			for i := range next {
				id := leases[i].Row.ID
				ch, _ := resumed.Load(id)
				at := time.Now()
				res, err := e.SendSignal(ctx, &driver.ExecutionSignalSendParams{ExecutionID: id, SignalID: "s", Name: "go"})
				if err != nil {
					errs[s] = err
					return
				}
				if res.Duplicate {
					errs[s] = fmt.Errorf("the signal to execution %s was taken for a duplicate", id)
					return
				}
				select {
				case seen := <-ch.(chan time.Time):
					latencies[i] = seen.Sub(at)
				case <-time.After(cfg.Timeout):
					errs[s] = fmt.Errorf("execution %s did not resume within %s of its signal", id, cfg.Timeout)
					return
				case <-ctx.Done():
					errs[s] = ctx.Err()
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.Sort(latencies)
	return &SignalResult{
		Driver:     drv.Name(),
		Executions: cfg.Executions,
		ElapsedS:   round(elapsed.Seconds(), 3),
		P50Ms:      round(percentile(latencies, 0.50).Seconds()*1000, 2),
		P99Ms:      round(percentile(latencies, 0.99).Seconds()*1000, 2),
		MaxMs:      round(latencies[len(latencies)-1].Seconds()*1000, 2),
		Config:     cfg,
		GoMaxProcs: runtime.GOMAXPROCS(0),
	}, nil
}

// progress writes a progress line when w is set.
func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}
