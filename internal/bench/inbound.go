package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

// InboundConfig configures the inbound event benchmark.
type InboundConfig struct {
	// Events is how many distinct events are sent. Default: 5000.
	Events int `json:"events"`
	// Duplicates is how many extra deliveries of already listed events are mixed in, as a
	// fraction of Events (0.2: one in six deliveries is a redelivery). Default: 0.2; a negative
	// value sends none.
	Duplicates float64 `json:"duplicates"`
	// Senders deliver events concurrently. Default: 8.
	Senders int `json:"senders"`
	// Seed orders the deliveries (redeliveries land anywhere, even before the first delivery
	// finished). Default: 1.
	Seed     uint64       `json:"seed"`
	Logger   *slog.Logger `json:"-"`
	Progress io.Writer    `json:"-"`
}

// WithDefaults fills unset fields.
func (c InboundConfig) WithDefaults() InboundConfig {
	if c.Events == 0 {
		c.Events = 5000
	}
	if c.Duplicates == 0 {
		c.Duplicates = 0.2
	}
	if c.Duplicates < 0 {
		c.Duplicates = 0
	}
	if c.Senders == 0 {
		c.Senders = 8
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

func (c InboundConfig) validate() error {
	var errs []error
	if c.Events < 1 {
		errs = append(errs, fmt.Errorf("events must be positive, got %d", c.Events))
	}
	if c.Duplicates > 10 {
		errs = append(errs, fmt.Errorf("duplicates is a fraction of events, at most 10, got %g", c.Duplicates))
	}
	if c.Senders < 1 {
		errs = append(errs, fmt.Errorf("senders must be positive, got %d", c.Senders))
	}
	return errors.Join(errs...)
}

// InboundResult is what the inbound event benchmark prints.
type InboundResult struct {
	Driver         string        `json:"driver"`
	Events         int           `json:"events"`
	Deliveries     int           `json:"deliveries"`
	ElapsedS       float64       `json:"elapsed_s"`
	DeliveriesPerS float64       `json:"deliveries_per_s"`
	P50Ms          float64       `json:"p50_ms"`
	P99Ms          float64       `json:"p99_ms"`
	MaxMs          float64       `json:"max_ms"`
	Started        int           `json:"started"`
	Duplicates     int           `json:"duplicates"`
	Executions     int64         `json:"executions"`
	Config         InboundConfig `json:"config"`
	GoMaxProcs     int           `json:"gomaxprocs"`
}

// RunInbound delivers cfg.Events distinct inbound events, with cfg.Duplicates redeliveries mixed
// in, through Runtime.ReceiveEvent (the path of POST /api/events and the broker consumers) from
// cfg.Senders goroutines, and measures deliveries per second and the latency of one delivery
// (parse, inbox check, idempotent start, inbox record). The runtime's pollers do not run: the
// benchmark measures starting, not running. It fails when an event started twice or not at all.
func RunInbound(ctx context.Context, drv driver.Driver, cfg InboundConfig) (*InboundResult, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: logger})
	if err != nil {
		return nil, err
	}
	rt, err := orchestration.New(client, orchestration.Config{})
	if err != nil {
		return nil, err
	}
	const flowType = "BenchEventFlow"
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	if _, err := workflow.Register(rt, workflow.New(flowType, 1).TriggeredBy("BenchEventArrived").Step("a", noop)); err != nil {
		return nil, err
	}
	order := make([]int, cfg.Events, cfg.Events+int(float64(cfg.Events)*cfg.Duplicates))
	for i := range order {
		order[i] = i
	}
	rnd := rand.New(rand.NewPCG(cfg.Seed, 0xe7))
	for range cap(order) - cfg.Events {
		order = append(order, rnd.IntN(cfg.Events))
	}
	rnd.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })

	work := make(chan int)
	latencies := make([]time.Duration, len(order))
	var (
		mu                  sync.Mutex
		started, duplicates int
		firstErr            error
		wg                  sync.WaitGroup
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for range cfg.Senders {
		wg.Go(func() {
			for i := range work {
				body := fmt.Appendf(nil, `{"id":"bench-%d","type":"BenchEventArrived","source":"bench","data":{"n":%d}}`, order[i], order[i])
				t0 := time.Now()
				receipt, err := rt.ReceiveEvent(runCtx, "bench", body)
				latencies[i] = time.Since(t0)
				mu.Lock()
				switch {
				case err != nil:
					if firstErr == nil {
						firstErr = err
						cancel()
					}
				case receipt.Outcome == orchestration.EventStarted:
					started++
				case receipt.Outcome == orchestration.EventDuplicate:
					duplicates++
				}
				mu.Unlock()
			}
		})
	}
	lastReport := time.Now()
	for i := range order {
		select {
		case work <- i:
		case <-runCtx.Done():
		}
		if cfg.Progress != nil && time.Since(lastReport) > time.Second {
			fmt.Fprintf(cfg.Progress, "delivered %d/%d events\n", i, len(order))
			lastReport = time.Now()
		}
		if runCtx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return nil, firstErr
	}
	counts, err := drv.Executor().ExecutionCountByStatus(ctx)
	if err != nil {
		return nil, err
	}
	var executions int64
	for _, c := range counts {
		if c.Type == flowType {
			executions += c.Count
		}
	}
	slices.Sort(latencies)
	res := &InboundResult{
		Driver: drv.Name(), Events: cfg.Events, Deliveries: len(order),
		ElapsedS:       round(elapsed.Seconds(), 3),
		DeliveriesPerS: round(float64(len(order))/elapsed.Seconds(), 0),
		P50Ms:          ms(percentile(latencies, 0.50)),
		P99Ms:          ms(percentile(latencies, 0.99)),
		MaxMs:          ms(latencies[len(latencies)-1]),
		Started:        started, Duplicates: duplicates, Executions: executions,
		Config: cfg, GoMaxProcs: runtime.GOMAXPROCS(0),
	}
	if started != cfg.Events || executions != int64(cfg.Events) || started+duplicates != len(order) {
		return res, fmt.Errorf("%d distinct events started %d executions (%d reported started, %d duplicates of %d deliveries); want one each",
			cfg.Events, executions, started, duplicates, len(order))
	}
	return res, nil
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 2) }
