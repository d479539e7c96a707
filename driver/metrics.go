package driver

import (
	"context"
	"errors"
	"time"
)

// ErrNoHorizon is returned by MetricsOutboxHorizon on a driver whose outbox has no transaction
// horizon (SQLite: one writer, rows are publishable once committed).
var ErrNoHorizon = errors.New("driver: the outbox has no transaction horizon")

// QueueMetrics is one queue's unfinished commands of one domain, as a metrics scrape sees them.
type QueueMetrics struct {
	Queue     string
	Domain    string
	Ready     int64 // PENDING and visible now
	Scheduled int64 // PENDING, visible later (retry backoff)
	Running   int64
	// ExpiredLeases counts RUNNING commands whose lease has passed: their handler died or
	// stalled, and no worker (or watchdog) has taken them back yet.
	ExpiredLeases int64
	// OldestReady is when the oldest ready command became visible; nil when none is ready.
	OldestReady *time.Time
}

// ExecutionMetrics counts the unfinished executions of one model, type and status.
type ExecutionMetrics struct {
	Model  string
	Type   string
	Status ExecutionStatus
	Count  int64
	// ExpiredLeases counts those whose runner's lease has passed (EXECUTING or COMPENSATING):
	// their runner died or stalled, and the pending poller has not rescued them yet.
	ExpiredLeases int64
}

// HorizonMetrics tells whether a long transaction holds the outbox relay back: the relay
// publishes only rows written below the oldest transaction still running.
type HorizonMetrics struct {
	// OldestTransaction is the age of the oldest open transaction that holds a transaction id
	// (a writer) on the server, 0 when none.
	OldestTransaction time.Duration
	// HeldMessages counts NEW outbox messages at or above the horizon: committed, but not
	// publishable until the transactions older than them end.
	HeldMessages int64
}

// MetricsExecutor holds the aggregate queries a metrics scrape runs. They count unfinished work
// only (unfinished commands, non-terminal executions, unpublished messages). The queue and outbox
// queries read through the partial indexes of unfinished rows, so their cost follows the backlog;
// the execution query scans the execution table, so its cost follows the retained history
// (process.retention bounds it).
type MetricsExecutor interface {
	// MetricsQueues counts unfinished commands (neither completed nor parked) by queue and
	// domain, as of now (nil: the database's clock).
	MetricsQueues(ctx context.Context, now *time.Time) ([]*QueueMetrics, error)
	// MetricsExecutions counts non-terminal executions by model, type and status, as of now
	// (nil: the database's clock).
	MetricsExecutions(ctx context.Context, now *time.Time) ([]*ExecutionMetrics, error)
	// MetricsOutboxHorizon reports the transaction horizon the outbox relay waits behind, or
	// ErrNoHorizon.
	MetricsOutboxHorizon(ctx context.Context) (*HorizonMetrics, error)
}
