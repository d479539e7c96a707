// Package maintenance runs a client's periodic upkeep: the watchdog that times out commands no
// worker will finish, the dead-letter depth gauge, and the retention of the outbox and inbox. Each
// task runs on its own interval, one run at a time, and stops with the runner.
package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/commandbus/commandbus/internal/startstop"
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
	base   startstop.Base
}

// New returns a runner of tasks.
func New(logger *slog.Logger, tasks ...Task) *Runner {
	return &Runner{tasks: tasks, logger: logger}
}

// Start runs every task once at once, then on its interval, until ctx ends or Stop. Starting a
// running runner does nothing; a stopped one can start again.
func (r *Runner) Start(ctx context.Context) {
	stop, ok := r.base.StartInit()
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	r.base.Go(func() { // a run's tasks end when Stop begins
		<-stop
		cancel()
	})
	for _, task := range r.tasks {
		r.base.Go(func() {
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
		})
	}
}

// Stop ends every task and waits for runs in progress.
func (r *Runner) Stop() {
	if !r.base.StopInit() {
		return
	}
	<-r.base.Done()
	r.base.Stopped()
}
