package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// ExecutionRetention configures the task that deletes ended executions.
type ExecutionRetention struct {
	Exec driver.Executor
	// Retention is how long an ended execution (COMPLETED, COMPENSATED, CANCELLED, FAILED) is
	// kept after it ended; it must be positive.
	Retention time.Duration
	// Interval is how often the task runs.
	Interval time.Duration
	// BatchSize is how many executions one transaction deletes. Default:
	// driver.DefaultDeleteExpiredLimit.
	BatchSize int
	// Now is the clock the retention counts from. Default: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Task returns the periodic task. Each run deletes, batch by batch (one short transaction each),
// every execution that ended more than Retention ago, with its log, responses and attributes, and
// logs how many it deleted.
func (r ExecutionRetention) Task() Task {
	return Task{Name: "execution-retention", Interval: r.Interval, Run: func(ctx context.Context) error {
		_, err := r.Run(ctx)
		return err
	}}
}

// Run does one pass and returns how many executions it deleted.
func (r ExecutionRetention) Run(ctx context.Context) (int, error) {
	now, logger, batch := r.Now, r.Logger, r.BatchSize
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if batch <= 0 {
		batch = driver.DefaultDeleteExpiredLimit
	}
	if r.Retention <= 0 {
		return 0, fmt.Errorf("execution retention: the retention must be positive, got %s", r.Retention)
	}
	before := now().Add(-r.Retention)
	total := 0
	for {
		n, err := r.Exec.ExecutionDeleteExpired(ctx, &driver.ExecutionDeleteExpiredParams{Before: before, Limit: batch})
		total += n
		if err != nil {
			if total > 0 {
				logger.Info("deleted expired executions before an error", "deleted", total, "ended_before", before)
			}
			return total, fmt.Errorf("execution retention: %w", err)
		}
		if n < batch || ctx.Err() != nil {
			break
		}
	}
	if total > 0 {
		logger.Info("deleted expired executions", "deleted", total, "ended_before", before)
	}
	return total, nil
}
