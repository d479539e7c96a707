// Package maintenance runs a client's periodic upkeep: the watchdog that times out commands no
// worker will finish, the dead-letter depth gauge, and the retention of the outbox and inbox. Each
// task runs on its own interval, one run at a time, and stops with the runner.
package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Task is one periodic job.
type Task struct {
	// Name appears in logs.
	Name     string
	Interval time.Duration
	// Run does one pass; an error is logged and the task runs again at its next interval.
	Run func(ctx context.Context) error
}

// Runner runs tasks until Stop.
type Runner struct {
	tasks  []Task
	logger *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a runner of tasks.
func New(logger *slog.Logger, tasks ...Task) *Runner {
	return &Runner{tasks: tasks, logger: logger}
}

// Start runs every task once at once, then on its interval, until ctx ends or Stop.
func (r *Runner) Start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	for _, task := range r.tasks {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			ticker := time.NewTicker(task.Interval)
			defer ticker.Stop()
			for {
				runCtx, cancel := context.WithTimeout(ctx, max(task.Interval, 30*time.Second))
				if err := task.Run(runCtx); err != nil && ctx.Err() == nil {
					r.logger.Warn("maintenance task failed; it runs again at its next interval", "task", task.Name, "error", err)
				}
				cancel()
				select {
				case <-ctx.Done():
					return
				case <-ticker.C:
				}
			}
		}()
	}
}

// Stop ends every task and waits for runs in progress.
func (r *Runner) Stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.wg.Wait()
}
