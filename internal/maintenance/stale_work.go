package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// StaleWorkReport configures the task that reports work nobody is moving on: executions parked
// in the troubleshooting queue and commands whose lease expired (their worker died or hangs).
// It changes nothing; the claims and the watchdog move that work on, and the report tells an
// operator what waits.
type StaleWorkReport struct {
	Exec driver.Executor
	// Queues returns the command queues to look at (none: only executions are reported).
	Queues   func() []string
	Interval time.Duration
	// Now is the clock. Default: the database clock.
	Now    func() *time.Time
	Logger *slog.Logger
}

// Task returns the periodic task.
func (r StaleWorkReport) Task() Task {
	return Task{Name: "stale-work-report", Interval: r.Interval, Run: func(ctx context.Context) error {
		_, _, err := r.Run(ctx)
		return err
	}}
}

// Run does one pass: it returns the number of executions waiting in the troubleshooting queue
// and of commands (up to 100) whose lease expired, and logs them when there are any.
func (r StaleWorkReport) Run(ctx context.Context) (parked int64, expired int, err error) {
	counts, err := r.Exec.ExecutionCountByStatus(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("stale-work report: counting executions: %w", err)
	}
	byType := map[string]int64{}
	for _, c := range counts {
		if c.Status == driver.ExecutionWaitingForTSQ {
			parked += c.Count
			byType[c.Type] += c.Count
		}
	}
	var now *time.Time
	if r.Now != nil {
		now = r.Now()
	}
	var queues []string
	if r.Queues != nil {
		queues = r.Queues()
	}
	cmds, err := r.Exec.CommandListExpired(ctx, &driver.CommandListExpiredParams{Queues: queues, Max: 100, Now: now})
	if err != nil {
		return parked, 0, fmt.Errorf("stale-work report: listing expired commands: %w", err)
	}
	if (parked > 0 || len(cmds) > 0) && r.Logger != nil {
		ids := make([]string, 0, min(len(cmds), 10))
		for _, c := range cmds[:min(len(cmds), 10)] {
			ids = append(ids, c.ID.String())
		}
		r.Logger.Warn("stale work: executions parked in the troubleshooting queue, commands whose lease expired",
			"parked_executions", parked, "parked_by_type", byType, "expired_commands", len(cmds), "expired_command_ids", ids)
	}
	return parked, len(cmds), nil
}
