package bench

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"time"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/workflow"
)

// WorkflowConfig configures the workflow throughput benchmark.
type WorkflowConfig struct {
	// Workflows to run. Default: 5000.
	Workflows int `json:"workflows"`
	// Concurrency is how many executions run at once (process.concurrent-executions).
	// Default: 400.
	Concurrency int `json:"concurrency"`
	// StartBatch is how many executions one StartMany call creates. Default: 1000.
	StartBatch int `json:"start_batch"`
	// Events publishes every lifecycle event to Kafka (an in-process kfake cluster) through the
	// outbox and a relay, as orchestration.Config.Events does; off, no event is derived.
	Events bool `json:"events"`
	// Rate, when positive, starts that many workflows per second (every 10 ms, those due by
	// then) instead of all at once: a steady load rather than a burst.
	Rate int `json:"rate,omitempty"`
	// MaxLag, with Events, paces the workflows by the relay (orchestration.Runtime.PaceEvents):
	// checkpoints that write events wait while the relay lags more than this. 0: no pacing.
	MaxLag time.Duration `json:"max_lag,omitempty"`
	// Handoff, with Events, hands each checkpoint's events to the relay right after the commit
	// (orchestration.Runtime.HandOffOutbox) instead of leaving them to its claims.
	Handoff   bool          `json:"handoff,omitempty"`
	Logger    *slog.Logger  `json:"-"`
	Progress  io.Writer     `json:"-"`
	PollEvery time.Duration `json:"-"`
}

// WorkflowResult is what the workflow benchmark prints.
type WorkflowResult struct {
	Driver    string `json:"driver"`
	Workflows int    `json:"workflows"`
	// Events is how many lifecycle events were published (with Config.Events).
	Events int `json:"events,omitempty"`
	// RelayClaims and EmptyRelayClaims count the event relay's claims and those that found
	// nothing (with Config.Events).
	RelayClaims int64 `json:"relay_claims,omitempty"`
	// HandedOff and HandedOffLeft count the event rows handed to the relay after their commit and
	// those it left to its claims (with Config.Events).
	HandedOff        int64          `json:"handed_off,omitempty"`
	HandedOffLeft    int64          `json:"handed_off_left,omitempty"`
	EmptyRelayClaims int64          `json:"empty_relay_claims,omitempty"`
	Shape            string         `json:"shape"`
	ElapsedS         float64        `json:"elapsed_s"`
	WorkflowsPerS    float64        `json:"workflows_per_s"`
	StepsPerS        float64        `json:"steps_per_s"`
	Config           WorkflowConfig `json:"config"`
	GoMaxProcs       int            `json:"gomaxprocs"`
}

// WithDefaults fills unset fields.
func (c WorkflowConfig) WithDefaults() WorkflowConfig {
	if c.Workflows == 0 {
		c.Workflows = 5000
	}
	runDefaults(&c.Concurrency, &c.StartBatch, &c.PollEvery)
	return c
}

// WorkflowShape is the benchmark's DAG: one step, three in parallel, then one; all local no-ops.
const WorkflowShape = "a → {b, c, d} → e (5 local no-op steps)"

// RunWorkflow starts cfg.Workflows executions of a five-step DAG (StartMany, run by the
// pollers) and measures until every one is COMPLETED. Each workflow commits its creation and the
// checkpoints of its steps (the three parallel ones often share one); checkpoints of concurrent
// executions share commits.
func RunWorkflow(ctx context.Context, drv driver.Driver, cfg WorkflowConfig) (*WorkflowResult, error) {
	res, _, err := runWorkflow(ctx, drv, cfg)
	return res, err
}

// runWorkflow runs the workflow benchmark; with cfg.Events it also returns the publication
// latencies of the events (see eventLatencies).
func runWorkflow(ctx context.Context, drv driver.Driver, cfg WorkflowConfig) (*WorkflowResult, *eventLatencies, error) {
	cfg = cfg.WithDefaults()
	logger := orDiscard(cfg.Logger)
	rtCfg := orchestration.Config{}
	if cfg.Events {
		rtCfg.Events = &orchestration.EventSink{Transport: outbox.TransportKafka}
	}
	var commits *commitClock
	if cfg.Events {
		commits = newCommitClock()
		drv = commits.wrap(drv)
	}
	client, rt, err := newRuntime(drv, logger, cfg.Concurrency, cfg.PollEvery, rtCfg)
	if err != nil {
		return nil, nil, err
	}
	var sink *eventSink
	if cfg.Events {
		if sink, err = startEventSink(ctx, client, logger, commits); err != nil {
			return nil, nil, err
		}
		defer sink.close()
		rt.PaceEvents(sink.relay, cfg.MaxLag)
		if cfg.Handoff {
			rt.HandOffOutbox(sink.relay)
		}
	}
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	def := workflow.New("BenchWorkflow", 1).
		Step("a", noop).
		Step("b", noop, workflow.DependsOn("a")).
		Step("c", noop, workflow.DependsOn("a")).
		Step("d", noop, workflow.DependsOn("a")).
		Step("e", noop, workflow.DependsOn("b", "c", "d"))
	m, err := workflow.Register(rt, def)
	if err != nil {
		return nil, nil, err
	}
	stop, err := startClient(ctx, client)
	if err != nil {
		return nil, nil, err
	}
	defer stop()
	start := time.Now()
	if err := startPaced(ctx, cfg, start, func(from, n int) error {
		inputs := make([]any, n)
		for i := range inputs {
			inputs[i] = map[string]int{"n": from + i}
		}
		_, err := m.StartMany(ctx, inputs)
		return err
	}); err != nil {
		return nil, nil, err
	}
	elapsed, err := waitCompleted(ctx, drv.Executor(), def.ID(), cfg.Workflows, start, cfg.Progress)
	if err != nil {
		return nil, nil, err
	}
	var latencies *eventLatencies
	events := 0
	var claims, emptyClaims, handed, left int64
	if sink != nil {
		if latencies, err = sink.drain(ctx, drv.Executor()); err != nil {
			return nil, nil, err
		}
		events = len(latencies.fromWrite)
		claims, emptyClaims = sink.claims()
		handed, left = handedOff(sink.metrics)
	}
	return &WorkflowResult{
		Events:           events,
		RelayClaims:      claims,
		EmptyRelayClaims: emptyClaims,
		HandedOff:        handed,
		HandedOffLeft:    left,
		Driver:           drv.Name(),
		Workflows:        cfg.Workflows,
		Shape:            WorkflowShape,
		ElapsedS:         round(elapsed.Seconds(), 3),
		WorkflowsPerS:    round(float64(cfg.Workflows)/elapsed.Seconds(), 0),
		StepsPerS:        round(float64(cfg.Workflows*5)/elapsed.Seconds(), 0),
		Config:           cfg,
		GoMaxProcs:       runtime.GOMAXPROCS(0),
	}, latencies, nil
}

// startPaced calls start(from, n) until cfg.Workflows are started: all at once in batches of
// cfg.StartBatch, or with cfg.Rate as many as are due since begin, looking every 10 ms. A start
// that takes longer than a tick does not lower the rate: the next tick starts what fell due
// meanwhile (a ticker alone would drop the missed ticks and offer less than asked).
func startPaced(ctx context.Context, cfg WorkflowConfig, begin time.Time, start func(from, n int) error) error {
	var tick *time.Ticker
	if cfg.Rate > 0 {
		tick = time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
	}
	for from := 0; from < cfg.Workflows; {
		n := cfg.Workflows - from
		if tick != nil {
			due := int(float64(cfg.Rate) * time.Since(begin).Seconds())
			if due <= from {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-tick.C:
				}
				continue
			}
			n = min(n, due-from)
		}
		n = min(n, cfg.StartBatch)
		if err := start(from, n); err != nil {
			return err
		}
		from += n
	}
	return nil
}
