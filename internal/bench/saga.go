package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/saga"
)

// SagaConfig configures the saga throughput benchmark.
type SagaConfig struct {
	// Sagas to run. Default: 5000.
	Sagas int `json:"sagas"`
	// FailEvery makes every FailEvery-th saga fail at its last step and compensate. Default: 10
	// (10% compensate).
	FailEvery int `json:"fail_every"`
	// Concurrency is how many executions run at once (process.concurrent-executions).
	// Default: 400.
	Concurrency int `json:"concurrency"`
	// StartBatch is how many executions one StartMany call creates. Default: 1000.
	StartBatch int           `json:"start_batch"`
	Logger     *slog.Logger  `json:"-"`
	Progress   io.Writer     `json:"-"`
	PollEvery  time.Duration `json:"-"`
}

// SagaResult is what the saga benchmark prints.
type SagaResult struct {
	Driver      string     `json:"driver"`
	Sagas       int        `json:"sagas"`
	Completed   int        `json:"completed"`
	Compensated int        `json:"compensated"`
	Shape       string     `json:"shape"`
	ElapsedS    float64    `json:"elapsed_s"`
	SagasPerS   float64    `json:"sagas_per_s"`
	Config      SagaConfig `json:"config"`
	GoMaxProcs  int        `json:"gomaxprocs"`
}

// WithDefaults fills unset fields.
func (c SagaConfig) WithDefaults() SagaConfig {
	if c.Sagas == 0 {
		c.Sagas = 5000
	}
	if c.FailEvery == 0 {
		c.FailEvery = 10
	}
	runDefaults(&c.Concurrency, &c.StartBatch, &c.PollEvery)
	return c
}

// SagaShape is the benchmark's saga.
const SagaShape = "debit → credit → notify (local no-ops; debit and credit compensated, notify fails with a business error in 1 of fail_every sagas)"

// RunSaga starts cfg.Sagas executions of a three-step saga (StartMany, run by the pollers), one
// in cfg.FailEvery failing at its last step and compensating its two completed steps (strict
// sequential), and measures until every one has ended, COMPLETED or COMPENSATED.
func RunSaga(ctx context.Context, drv driver.Driver, cfg SagaConfig) (*SagaResult, error) {
	cfg = cfg.WithDefaults()
	client, rt, err := newRuntime(drv, cfg.Logger, cfg.Concurrency, cfg.PollEvery, orchestration.Config{})
	if err != nil {
		return nil, err
	}
	type input struct {
		N int `json:"n"`
	}
	noop := func(context.Context, *saga.StepContext) (any, error) { return nil, nil }
	undo := func(context.Context, *saga.StepContext) error { return nil }
	notify := func(ctx context.Context, sc *saga.StepContext) (any, error) {
		var in input
		if err := sc.DecodeInput(&in); err != nil {
			return nil, err
		}
		if in.N%cfg.FailEvery == 0 {
			return nil, commandbus.BusinessRule("NOTIFY_REFUSED", "the notification was refused")
		}
		return nil, nil
	}
	def := saga.New("BenchSaga", 1).
		Step("debit", noop, saga.Compensate(undo)).
		Step("credit", noop, saga.DependsOn("debit"), saga.Compensate(undo)).
		Step("notify", notify, saga.DependsOn("credit"))
	m, err := saga.Register(rt, def)
	if err != nil {
		return nil, err
	}
	stop, err := startClient(ctx, client)
	if err != nil {
		return nil, err
	}
	defer stop()
	start := time.Now()
	if err := startInBatches(cfg.Sagas, cfg.StartBatch, func(i int) any { return input{N: i} }, func(inputs []any) error {
		_, err := m.StartMany(ctx, inputs)
		return err
	}); err != nil {
		return nil, err
	}
	ended := []driver.ExecutionStatus{driver.ExecutionCompleted, driver.ExecutionCompensated}
	elapsed, counts, err := waitEnded(ctx, drv.Executor(), def.ID(), cfg.Sagas, ended, start, cfg.Progress)
	if err != nil {
		return nil, err
	}
	wantCompensated := (cfg.Sagas + cfg.FailEvery - 1) / cfg.FailEvery
	res := &SagaResult{
		Driver:      drv.Name(),
		Sagas:       cfg.Sagas,
		Completed:   int(counts[driver.ExecutionCompleted]),
		Compensated: int(counts[driver.ExecutionCompensated]),
		Shape:       SagaShape,
		ElapsedS:    round(elapsed.Seconds(), 3),
		SagasPerS:   round(float64(cfg.Sagas)/elapsed.Seconds(), 0),
		Config:      cfg,
		GoMaxProcs:  runtime.GOMAXPROCS(0),
	}
	if res.Compensated != wantCompensated {
		return res, fmt.Errorf("%d sagas compensated, want %d", res.Compensated, wantCompensated)
	}
	return res, nil
}

// waitEnded waits until n executions of typ have one of the statuses ended, printing progress
// every second, and returns the time from start to the last end with the count per status. It
// fails if one went to the troubleshooting queue.
func waitEnded(ctx context.Context, exec driver.Executor, typ string, n int, ended []driver.ExecutionStatus, start time.Time, progress io.Writer) (time.Duration, map[driver.ExecutionStatus]int64, error) {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	last := int64(0)
	for {
		counts, err := exec.ExecutionCountByStatus(ctx)
		if err != nil {
			return 0, nil, err
		}
		byStatus := map[driver.ExecutionStatus]int64{}
		done := int64(0)
		for _, c := range counts {
			if c.Type != typ {
				continue
			}
			byStatus[c.Status] += c.Count
			for _, s := range ended {
				if c.Status == s {
					done += c.Count
				}
			}
			if c.Status == driver.ExecutionWaitingForTSQ && c.Count > 0 {
				return 0, nil, fmt.Errorf("%d benchmark executions went to the troubleshooting queue", c.Count)
			}
		}
		if done >= int64(n) {
			elapsed := time.Since(start)
			if last, err := lastEndedAt(ctx, exec, typ, ended); err != nil {
				return 0, nil, err
			} else if last.After(start) {
				elapsed = last.Sub(start)
			}
			return elapsed, byStatus, nil
		}
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-ticker.C:
			if progress != nil {
				fmt.Fprintf(progress, "  %6.1fs  %8d/%d ended  %6d/s\n", time.Since(start).Seconds(), done, n, done-last)
			}
			last = done
		case <-time.After(completionPoll):
		}
	}
}

// lastEndedAt is when the most recent execution of type typ that ended in one of statuses
// ended.
func lastEndedAt(ctx context.Context, exec driver.Executor, typ string, statuses []driver.ExecutionStatus) (time.Time, error) {
	var last time.Time
	before := uuid.Nil
	for {
		rows, err := exec.ExecutionList(ctx, &driver.ExecutionListParams{Statuses: statuses, Type: typ, BeforeID: before, Limit: driver.MaxListLimit})
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
