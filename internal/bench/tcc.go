package bench

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tcc"
)

// TccConfig configures the TCC throughput benchmark.
type TccConfig struct {
	// Transactions to run. Default: 5000.
	Transactions int `json:"transactions"`
	// Concurrency is how many transactions run at once (process.concurrent-executions).
	// Default: 400.
	Concurrency int `json:"concurrency"`
	// StartBatch is how many transactions one StartMany call creates. Default: 1000.
	StartBatch int           `json:"start_batch"`
	Logger     *slog.Logger  `json:"-"`
	Progress   io.Writer     `json:"-"`
	PollEvery  time.Duration `json:"-"`
}

// WithDefaults fills unset fields.
func (c TccConfig) WithDefaults() TccConfig {
	if c.Transactions == 0 {
		c.Transactions = 5000
	}
	runDefaults(&c.Concurrency, &c.StartBatch, &c.PollEvery)
	return c
}

// TccShape is the benchmark's transaction.
const TccShape = "3 local participants (3 tries in order, then 3 confirms at once; each outcome checkpointed)"

// TccResult is what the TCC benchmark prints.
type TccResult struct {
	Driver           string    `json:"driver"`
	Transactions     int       `json:"transactions"`
	Shape            string    `json:"shape"`
	ElapsedS         float64   `json:"elapsed_s"`
	TransactionsPerS float64   `json:"transactions_per_s"`
	PhasesPerS       float64   `json:"phases_per_s"`
	Config           TccConfig `json:"config"`
	GoMaxProcs       int       `json:"gomaxprocs"`
}

// RunTcc starts cfg.Transactions TCC transactions of three local no-op participants (StartMany,
// run by the pollers) and measures until every one is CONFIRMED (its execution COMPLETED). Each
// transaction commits its creation and one checkpoint per phase outcome (six); checkpoints of
// concurrent transactions share commits.
func RunTcc(ctx context.Context, drv driver.Driver, cfg TccConfig) (*TccResult, error) {
	cfg = cfg.WithDefaults()
	client, rt, err := newRuntime(drv, cfg.Logger, cfg.Concurrency, cfg.PollEvery, orchestration.Config{})
	if err != nil {
		return nil, err
	}
	var phases atomic.Int64
	try := func(context.Context, *tcc.Context) (any, error) { phases.Add(1); return "hold", nil }
	phase := func(context.Context, *tcc.Context) error { phases.Add(1); return nil }
	def := tcc.New("BenchTcc", 1).
		Participant("a", try, phase, phase).
		Participant("b", try, phase, phase).
		Participant("c", try, phase, phase)
	if _, err := tcc.Register(rt, def); err != nil {
		return nil, err
	}
	m := rt.Operations(tcc.Model, def.ID()).(*tcc.Manager)
	stop, err := startClient(ctx, client)
	if err != nil {
		return nil, err
	}
	defer stop()
	start := time.Now()
	if err := startInBatches(cfg.Transactions, cfg.StartBatch, func(i int) any { return map[string]int{"n": i} }, func(inputs []any) error {
		_, err := m.StartMany(ctx, inputs)
		return err
	}); err != nil {
		return nil, err
	}
	elapsed, err := waitCompleted(ctx, drv.Executor(), def.ID(), cfg.Transactions, start, cfg.Progress)
	if err != nil {
		return nil, err
	}
	return &TccResult{
		Driver:           drv.Name(),
		Transactions:     cfg.Transactions,
		Shape:            TccShape,
		ElapsedS:         round(elapsed.Seconds(), 3),
		TransactionsPerS: round(float64(cfg.Transactions)/elapsed.Seconds(), 0),
		PhasesPerS:       round(float64(phases.Load())/elapsed.Seconds(), 0),
		Config:           cfg,
		GoMaxProcs:       runtime.GOMAXPROCS(0),
	}, nil
}
