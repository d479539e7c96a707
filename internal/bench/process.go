package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
)

// ProcessConfig configures the process throughput benchmark.
type ProcessConfig struct {
	// Processes to run. Default: 5000.
	Processes int `json:"processes"`
	// Steps per process, each a checkpointed no-op step. Default: 5.
	Steps int `json:"steps"`
	// Concurrency is how many executions run at once (process.concurrent-executions).
	// Default: 400.
	Concurrency int `json:"concurrency"`
	// StartBatch is how many executions one StartBatch call creates. Default: 1000.
	StartBatch int `json:"start_batch"`
	// Tracing records every span with the OpenTelemetry SDK (see benchTracing). Default: off.
	Tracing   bool          `json:"tracing"`
	Logger    *slog.Logger  `json:"-"`
	Progress  io.Writer     `json:"-"`
	PollEvery time.Duration `json:"-"`
}

// ProcessResult is what the process benchmark prints.
type ProcessResult struct {
	Driver        string        `json:"driver"`
	Processes     int           `json:"processes"`
	Steps         int           `json:"steps"`
	ElapsedS      float64       `json:"elapsed_s"`
	ProcessesPerS float64       `json:"processes_per_s"`
	CheckpointsS  float64       `json:"checkpoints_per_s"`
	P50Ms         float64       `json:"p50_ms"` // checkpoint latency
	P99Ms         float64       `json:"p99_ms"`
	Config        ProcessConfig `json:"config"`
	GoMaxProcs    int           `json:"gomaxprocs"`
	// Spans is how many spans were recorded when tracing was on.
	Spans int64 `json:"spans,omitempty"`
}

// WithDefaults fills unset fields.
func (c ProcessConfig) WithDefaults() ProcessConfig {
	if c.Processes == 0 {
		c.Processes = 5000
	}
	if c.Steps == 0 {
		c.Steps = 5
	}
	runDefaults(&c.Concurrency, &c.StartBatch, &c.PollEvery)
	return c
}

type benchState struct {
	N int `json:"n"`
}

// benchProcess runs Steps no-op steps and measures each step's checkpoint: the time from a step
// returning to the next step starting is its checkpoint's group commit.
type benchProcess struct {
	steps    int
	mu       sync.Mutex
	lastEnd  map[uuid.UUID]time.Time
	samples  []time.Duration
	finished atomic.Int64
}

func (p *benchProcess) Type() string   { return "BenchProcess" }
func (p *benchProcess) Domain() string { return "bench" }

func (p *benchProcess) Execute(x *process.Execution[benchState]) error {
	for i := 0; i < p.steps; i++ {
		step := i
		if _, err := process.Step(x, stepNames[step], func(ctx context.Context) (int, error) {
			now := time.Now()
			p.mu.Lock()
			if end, ok := p.lastEnd[x.ID]; ok {
				p.samples = append(p.samples, now.Sub(end))
			}
			p.mu.Unlock()
			if step == p.steps-1 {
				p.finished.Add(1)
			}
			defer func() {
				p.mu.Lock()
				p.lastEnd[x.ID] = time.Now()
				p.mu.Unlock()
			}()
			return step, nil
		}); err != nil {
			return err
		}
	}
	p.mu.Lock()
	delete(p.lastEnd, x.ID)
	p.mu.Unlock()
	return nil
}

var stepNames = func() []string {
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("step%d", i+1)
	}
	return names
}()

// RunProcess starts cfg.Processes executions of a process with cfg.Steps checkpointed no-op
// steps (StartBatch, deferred) and measures until every one is COMPLETED. A five-step process
// commits at least six times: its creation and one checkpoint per step (the last one completes
// it); checkpoints of concurrent executions share commits.
func RunProcess(ctx context.Context, drv driver.Driver, cfg ProcessConfig) (*ProcessResult, error) {
	cfg = cfg.WithDefaults()
	if cfg.Steps > len(stepNames) {
		return nil, fmt.Errorf("at most %d steps", len(stepNames))
	}
	proc := &benchProcess{steps: cfg.Steps, lastEnd: map[uuid.UUID]time.Time{}}
	tracing := newBenchTracing(cfg.Tracing)
	defer tracing.shutdown()
	client, rt, err := newTracedRuntime(drv, cfg.Logger, cfg.Concurrency, cfg.PollEvery, orchestration.Config{}, tracing.provider())
	if err != nil {
		return nil, err
	}
	m, err := process.NewManager(rt, process.Process[benchState](proc))
	if err != nil {
		return nil, err
	}
	stop, err := startClient(ctx, client)
	if err != nil {
		return nil, err
	}
	defer stop()
	start := time.Now()
	if err := startInBatches(cfg.Processes, cfg.StartBatch, func(i int) benchState { return benchState{N: i} }, func(states []benchState) error {
		_, err := m.StartBatch(ctx, states)
		return err
	}); err != nil {
		return nil, err
	}
	elapsed, err := waitCompleted(ctx, drv.Executor(), proc.Type(), cfg.Processes, start, cfg.Progress)
	if err != nil {
		return nil, err
	}
	proc.mu.Lock()
	samples := append([]time.Duration(nil), proc.samples...)
	proc.mu.Unlock()
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	return &ProcessResult{
		Driver:        drv.Name(),
		Processes:     cfg.Processes,
		Steps:         cfg.Steps,
		ElapsedS:      round(elapsed.Seconds(), 3),
		ProcessesPerS: round(float64(cfg.Processes)/elapsed.Seconds(), 0),
		CheckpointsS:  round(float64(cfg.Processes*cfg.Steps)/elapsed.Seconds(), 0),
		P50Ms:         round(percentile(samples, 0.50).Seconds()*1000, 2),
		P99Ms:         round(percentile(samples, 0.99).Seconds()*1000, 2),
		Config:        cfg,
		GoMaxProcs:    runtime.GOMAXPROCS(0),
		Spans:         tracing.spans(ctx),
	}, nil
}

// ResumeConfig configures the resume latency benchmark.
type ResumeConfig struct {
	// Processes is how many waiting executions get a response. Default: 1000.
	Processes int `json:"processes"`
	// Deliverers is how many goroutines deliver responses concurrently. Default: 4.
	Deliverers int          `json:"deliverers"`
	Logger     *slog.Logger `json:"-"`
}

// ResumeResult is what the resume benchmark prints.
type ResumeResult struct {
	Driver    string       `json:"driver"`
	Processes int          `json:"processes"`
	P50Ms     float64      `json:"p50_ms"`
	P99Ms     float64      `json:"p99_ms"`
	Config    ResumeConfig `json:"config"`
}

type resumeState struct {
	Approved bool `json:"approved"`
}

type approval struct{}

func (approval) ResponseName() string { return "Approval" }

type resumeProcess struct{}

func (resumeProcess) Type() string   { return "BenchResume" }
func (resumeProcess) Domain() string { return "bench" }

func (resumeProcess) Execute(x *process.Execution[resumeState]) error {
	if err := x.Wait("approval", func() bool { return x.State.Approved }, time.Hour); err != nil {
		return err
	}
	_, err := process.Step(x, "book", func(ctx context.Context) (bool, error) { return true, nil })
	return err
}

// RunResume measures resume latency: executions wait for one response; the benchmark delivers
// it and times ProcessAsyncResponse from the call to the execution having resumed, run its next
// step and completed (in the caller's goroutine).
func RunResume(ctx context.Context, drv driver.Driver, cfg ResumeConfig) (*ResumeResult, error) {
	if cfg.Processes == 0 {
		cfg.Processes = 1000
	}
	if cfg.Deliverers == 0 {
		cfg.Deliverers = 4
	}
	client, rt, err := newRuntime(drv, cfg.Logger, 0, 0, orchestration.Config{})
	if err != nil {
		return nil, err
	}
	m, err := process.NewManager(rt, process.Process[resumeState](resumeProcess{}))
	if err != nil {
		return nil, err
	}
	process.OnResponse(m, func(s *resumeState, _ approval) error { s.Approved = true; return nil })
	stop, err := startClient(ctx, client)
	if err != nil {
		return nil, err
	}
	defer stop()
	ids := make([]uuid.UUID, cfg.Processes)
	for i := range ids {
		if ids[i], err = m.Start(ctx, resumeState{}); err != nil {
			return nil, err
		}
	}
	latencies := make([]time.Duration, cfg.Processes)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range cfg.Deliverers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return
				}
				t0 := time.Now()
				if err := m.ProcessAsyncResponse(ctx, ids[i], approval{}); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				latencies[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	completed, err := m.List(ctx, process.ListParams{Statuses: []driver.ExecutionStatus{driver.ExecutionCompleted}, Limit: cfg.Processes})
	if err != nil {
		return nil, err
	}
	if len(completed) != cfg.Processes {
		return nil, fmt.Errorf("%d of %d executions completed inside ProcessAsyncResponse", len(completed), cfg.Processes)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return &ResumeResult{
		Driver: drv.Name(), Processes: cfg.Processes, Config: cfg,
		P50Ms: round(percentile(latencies, 0.50).Seconds()*1000, 2),
		P99Ms: round(percentile(latencies, 0.99).Seconds()*1000, 2),
	}, nil
}

// waitCompleted waits until n executions of typ are COMPLETED, printing progress every second,
// and returns the time from start to the last completion. It fails if one went to the
// troubleshooting queue.
func waitCompleted(ctx context.Context, exec driver.Executor, typ string, n int, start time.Time, progress io.Writer) (time.Duration, error) {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	last := int64(0)
	for {
		counts, err := exec.ExecutionCountByStatus(ctx)
		if err != nil {
			return 0, err
		}
		done := int64(0)
		for _, c := range counts {
			if c.Type == typ && c.Status == driver.ExecutionCompleted {
				done = c.Count
			}
			if c.Type == typ && c.Status == driver.ExecutionWaitingForTSQ && c.Count > 0 {
				return 0, fmt.Errorf("%d benchmark executions went to the troubleshooting queue", c.Count)
			}
		}
		if done >= int64(n) {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-ticker.C:
			if progress != nil {
				fmt.Fprintf(progress, "  %6.1fs  %8d/%d completed  %6d/s\n", time.Since(start).Seconds(), done, n, done-last)
			}
			last = done
		case <-time.After(completionPoll):
		}
	}
	elapsed := time.Since(start)
	if last, err := lastCompletedAt(ctx, exec, typ); err != nil {
		return 0, err
	} else if last.After(start) {
		elapsed = last.Sub(start)
	}
	return elapsed, nil
}

// completionPoll is how often a benchmark counts finished executions. The count scans the
// execution table, so it stays infrequent: the elapsed time comes from the last completion's
// timestamp, not from when the poll noticed it.
const completionPoll = 250 * time.Millisecond

// lastCompletedAt is when the most recent completed execution of type typ completed.
func lastCompletedAt(ctx context.Context, exec driver.Executor, typ string) (time.Time, error) {
	var last time.Time
	before := uuid.Nil
	for {
		rows, err := exec.ExecutionList(ctx, &driver.ExecutionListParams{
			Statuses: []driver.ExecutionStatus{driver.ExecutionCompleted}, Type: typ, BeforeID: before, Limit: driver.MaxListLimit})
		if err != nil {
			return time.Time{}, err
		}
		for _, row := range rows {
			if row.CompletedAt != nil && row.CompletedAt.After(last) {
				last = *row.CompletedAt
			}
		}
		if len(rows) < driver.MaxListLimit {
			return last, nil
		}
		before = rows[len(rows)-1].ID
	}
}
