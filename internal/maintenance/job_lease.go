package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// JobLease makes a periodic task run once per interval across every replica of a deployment,
// the role a ShedLock table plays: before a run, the replica takes the task's row in job_lease
// (created on first use); only the replica that got it runs the task, and its release sets the
// row's next run one interval on. A replica that dies mid-run loses the row when its lease ends.
// The row shows the holder, the next run, the last run's end and error.
type JobLease struct {
	Exec driver.Executor
	// Holder names this replica in the row (the client's worker id).
	Holder string
	// Now is the clock. Default: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Wrap returns task run under the job's row: skipped (no error) on a replica that did not get
// the row or when the job is not due.
func (l JobLease) Wrap(task Task) Task {
	now := l.Now
	if now == nil {
		now = time.Now
	}
	lease := max(task.Interval, 30*time.Second) // a run is bounded by max(interval, 30s)
	run := task.Run
	task.Run = func(ctx context.Context) error {
		started := now()
		_, got, err := l.Exec.JobLeaseAcquire(ctx, &driver.JobLeaseAcquireParams{Name: task.Name, Holder: l.Holder, Lease: lease, Now: started})
		if err != nil || !got {
			return err
		}
		runErr := run(ctx)
		msg := ""
		if runErr != nil {
			msg = runErr.Error()
		}
		// The next run is due a little before one interval after this one started (not ended:
		// a clock that moved during the run, or a run longer than the interval, must not push
		// the next one further out), so the replica whose own ticker fires next takes it rather
		// than missing it by a hair.
		at := now()
		next := started.Add(task.Interval - min(task.Interval/10, time.Second))
		if _, err := l.Exec.JobLeaseRelease(context.WithoutCancel(ctx), &driver.JobLeaseReleaseParams{
			Name: task.Name, Holder: l.Holder, NextRunAt: next, Error: msg, Now: at}); err != nil && l.Logger != nil {
			l.Logger.Warn("maintenance: releasing the job's row failed; it is free again when its lease ends", "task", task.Name, "error", err)
		}
		return runErr
	}
	return task
}
