package bench

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
)

// orDiscard is logger, or a logger that discards everything when it is nil.
func orDiscard(logger *slog.Logger) *slog.Logger {
	if logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return logger
}

// newRuntime builds a benchmark's client on drv (logger or none, concurrency executions at once,
// the pending poller every pollEvery; zero values keep the client's defaults) and its
// orchestration runtime with rtCfg.
func newRuntime(drv driver.Driver, logger *slog.Logger, concurrency int, pollEvery time.Duration, rtCfg orchestration.Config) (*commandbus.Client, *orchestration.Runtime, error) {
	return newTracedRuntime(drv, logger, concurrency, pollEvery, rtCfg, nil)
}

// newTracedRuntime is newRuntime with tp as the client's tracer provider (nil: the no-op).
func newTracedRuntime(drv driver.Driver, logger *slog.Logger, concurrency int, pollEvery time.Duration, rtCfg orchestration.Config, tp trace.TracerProvider) (*commandbus.Client, *orchestration.Runtime, error) {
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		TracerProvider: tp,
		Logger:         orDiscard(logger),
		Process: commandbus.ProcessConfig{
			ConcurrentExecutions: concurrency,
			PendingPollInterval:  commandbus.Duration(pollEvery),
		},
	})
	if err != nil {
		return nil, nil, err
	}
	rt, err := orchestration.New(client, rtCfg)
	if err != nil {
		return nil, nil, err
	}
	return client, rt, nil
}

// startClient starts client and returns the function that stops it, waiting up to 30 seconds.
func startClient(ctx context.Context, client *commandbus.Client) (stop func(), err error) {
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	return func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}, nil
}

// startInBatches starts n executions, batch at a time: start gets the inputs of
// input(from) … input(from+len-1).
func startInBatches[T any](n, batch int, input func(i int) T, start func([]T) error) error {
	for from := 0; from < n; from += batch {
		inputs := make([]T, min(batch, n-from))
		for i := range inputs {
			inputs[i] = input(from + i)
		}
		if err := start(inputs); err != nil {
			return err
		}
	}
	return nil
}

// runDefaults fills the unset settings the run benchmarks share: 400 executions at once, 1000
// starts per batch, the pending poller every 50 ms.
func runDefaults(concurrency, startBatch *int, pollEvery *time.Duration) {
	if *concurrency == 0 {
		*concurrency = 400
	}
	if *startBatch == 0 {
		*startBatch = 1000
	}
	if *pollEvery == 0 {
		*pollEvery = 50 * time.Millisecond
	}
}
