package commandbus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/maintenance"
)

// newMaintenance builds the client's upkeep: the watchdog, the dead-letter depth gauge, outbox
// and inbox retention when a broker is configured, execution retention when process.retention
// is set, and the stale-work report. The dead-letter gauge is this replica's own metric and runs
// on every replica; the other jobs would only repeat each other's work on several replicas, so
// each takes its leased row in job_lease first and runs once per interval across the deployment.
func (c *Client) newMaintenance() *maintenance.Runner {
	once := maintenance.JobLease{Exec: c.exec, Holder: c.config.WorkerID, Now: c.Now, Logger: c.logger}
	tasks := []maintenance.Task{{Name: "dlq-depth", Interval: 10 * time.Second, Run: c.refreshDLQDepth}}
	if len(c.brokeredDomains()) > 0 || len(c.workers) > 0 {
		tasks = append(tasks, once.Wrap(maintenance.Task{Name: "watchdog", Interval: c.config.WatchdogInterval.Std(), Run: func(ctx context.Context) error {
			_, err := c.RunWatchdog(ctx)
			return err
		}}))
	}
	if c.routing.any {
		tasks = append(tasks, once.Wrap(maintenance.Task{Name: "retention", Interval: time.Minute, Run: c.purgeMessaging}))
	}
	if retention := c.config.Process.Retention.Std(); retention > 0 {
		tasks = append(tasks, once.Wrap(maintenance.ExecutionRetention{
			Exec: c.exec, Retention: retention, Interval: c.config.Process.RetentionInterval.Std(),
			Now: c.Now, Logger: c.logger,
		}.Task()))
	}
	queues := func() []string { // read when the task runs: Start holds the client's lock here
		queues := c.workedQueues()
		for _, domain := range c.brokeredDomains() {
			queues = append(queues, CommandQueue(domain))
		}
		return queues
	}
	tasks = append(tasks, once.Wrap(maintenance.StaleWorkReport{Exec: c.exec, Queues: queues, Interval: time.Minute,
		Now: c.now, Logger: c.logger}.Task()))
	return maintenance.New(c.logger, tasks...)
}

// RunWatchdog does one pass of the command watchdog. Over the queues of amqp domains, which no
// worker claims: a RUNNING command whose lease expired on its last attempt, or any command whose
// deadline passed, ends TIMED_OUT with its reply and event; a RUNNING command whose lease expired
// with attempts left is delivered again. Over the queues this client's workers claim: a RUNNING
// command whose lease expired on its last attempt ends TIMED_OUT, since the claim does not take
// it again (its handler had its attempts; a further claim would count one more than allowed).
// Every change goes through the fenced completion (or a status-guarded operator action), so a
// handler that finishes late cannot overwrite it. It returns how many commands it moved on. The
// client runs it every watchdog-interval once started.
func (c *Client) RunWatchdog(ctx context.Context) (int, error) {
	var queues []string
	for _, domain := range c.brokeredDomains() {
		queues = append(queues, CommandQueue(domain))
	}
	rows, err := c.exec.CommandListExpired(ctx, &driver.CommandListExpiredParams{Queues: queues, Max: 500, Now: c.now()})
	if err != nil {
		return 0, fmt.Errorf("watchdog: listing expired commands: %w", err)
	}
	worked, err := c.exec.CommandListExpired(ctx, &driver.CommandListExpiredParams{Queues: c.workedQueues(), Max: 500, Now: c.now(), LastAttempts: true})
	if err != nil {
		return 0, fmt.Errorf("watchdog: listing commands whose last lease expired: %w", err)
	}
	rows = append(rows, worked...)
	now := c.Now()
	moved := 0
	var errs []error
	for _, row := range rows {
		logger := commandLogger{c.logger, row, ctx}
		deadlinePassed := row.DeadlineAt != nil && !now.Before(*row.DeadlineAt)
		if row.Status == driver.CommandStatusPending {
			if !deadlinePassed {
				continue
			}
			params := &driver.CommandOperatorParams{
				ID: row.ID, FromStatuses: []driver.CommandStatus{driver.CommandStatusPending}, ToStatus: driver.CommandStatusTimedOut,
				Event: "TIMED_OUT", Actor: "watchdog", Reason: "deadline passed before the command ran",
				ErrorCode: CodeDeadlineExceeded, ErrorMessage: "deadline " + row.DeadlineAt.UTC().Format(time.RFC3339) + " passed",
				Now: c.now(),
			}
			params.Reply = c.replyFor(row, OutcomeTimedOut, nil, params.ErrorCode, params.ErrorMessage)
			if err := c.routeOperatorAction(row, params); err != nil {
				errs = append(errs, err)
				continue
			}
			if _, err := c.exec.CommandOperatorAction(ctx, params); err != nil {
				if !errors.Is(err, driver.ErrConflict) {
					errs = append(errs, err)
				}
				continue
			}
			logger.Warn("watchdog: command timed out: deadline passed before it ran")
			moved++
			continue
		}
		var comp *driver.CommandCompletion
		leaseExpired := false
		switch {
		case deadlinePassed:
			logger.Warn("watchdog: command timed out: deadline passed while it ran")
			comp = c.timedOut(row, CodeDeadlineExceeded, "deadline "+row.DeadlineAt.UTC().Format(time.RFC3339)+" passed")
		case row.Attempt >= row.MaxAttempts:
			leaseExpired = true
			logger.Warn("watchdog: command timed out: lease expired on its last attempt")
			comp = c.timedOut(row, CodeLeaseExpired, fmt.Sprintf("lease expired on attempt %d of %d", row.Attempt, row.MaxAttempts))
		default:
			leaseExpired = true
			logger.Warn("watchdog: lease expired; delivering the command again")
			comp = &driver.CommandCompletion{ID: row.ID, Fence: row.Fence, Status: driver.CommandStatusPending,
				ErrorCode: CodeLeaseExpired, ErrorMessage: "lease expired", Event: "LEASE_EXPIRED"}
		}
		c.routeCompletion(row, comp)
		applied, err := c.exec.CommandCompleteMany(ctx, &driver.CommandCompleteManyParams{Completions: []*driver.CommandCompletion{comp}, Now: c.now()})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(applied) == 1 {
			moved++
			if leaseExpired {
				c.metrics.leaseExpired(row.Domain)
			}
			if comp.Reply != nil {
				_ = c.exec.Notify(ctx, []string{queueTopic(comp.Reply.Queue)})
			}
			c.notifyOutbox(ctx, len(comp.Outbox) > 0)
		}
	}
	return moved, errors.Join(errs...)
}

// reportedQueues lists the queues the metrics report even when they hold nothing: those this
// client's workers claim and the command queues of its brokered domains.
func (c *Client) reportedQueues() []string {
	queues := c.workedQueues()
	for _, domain := range c.brokeredDomains() {
		queues = append(queues, CommandQueue(domain))
	}
	return queues
}

// workedQueues lists the queues this client's workers claim.
func (c *Client) workedQueues() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	queues := make([]string, len(c.workers))
	for i, w := range c.workers {
		queues[i] = w.Queue()
	}
	return queues
}

func (c *Client) refreshDLQDepth(ctx context.Context) error {
	depths, err := c.exec.DLQDepths(ctx)
	if err != nil {
		return err
	}
	c.metrics.dlqDepth.Reset()
	for _, d := range depths {
		c.metrics.dlqDepth.WithLabelValues(d.Domain).Set(float64(d.Count))
	}
	return nil
}

// purgeMessaging deletes published outbox rows and inbox entries older than the retention.
func (c *Client) purgeMessaging(ctx context.Context) error {
	before := c.Now().Add(-c.config.Outbox.Retention.Std())
	for {
		n, err := c.exec.OutboxDeletePublished(ctx, before, 5000)
		if err != nil || n < 5000 {
			if err != nil {
				return err
			}
			break
		}
	}
	for {
		n, err := c.exec.InboxDeleteBefore(ctx, before, 5000)
		if err != nil || n < 5000 {
			return err
		}
	}
}
