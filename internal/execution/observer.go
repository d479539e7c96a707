package execution

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
)

// Committed is what one commit did to one execution: a checkpoint that applied, or the insert that
// created it.
type Committed struct {
	// Row is the execution as this instance knows it after the commit (a copy): its id, model,
	// type, status, step, error and the rest of the row. Timestamps come from the engine's clock.
	Row driver.ExecutionRow
	// Log holds the log entries the commit wrote, in order, with their sequence numbers (copies).
	Log []*driver.ExecutionLogEntry
	// Inserted is set for the commit that created the execution.
	Inserted bool
	// Events are the lifecycle events the commit caused, when the engine derives them
	// (SetLifecycle), in order.
	Events []*cbtype.LifecycleEvent
}

// Observer is told about commits of this instance after they committed. It is called on one
// goroutine of its own, never on the commit path. Each commit is reported once; an observation is
// queued before its write is sent and delivered once the write committed, so the commits of one
// execution arrive in the order they committed. A checkpoint that was fenced out is never
// reported, nor is anything another instance commits. A slow observer
// delays only later observations; when DefaultObserverQueue (or Config.ObserverQueue)
// observations wait, further ones are dropped and counted, with a warning. A panic in the
// observer is logged and the next observation is delivered. Executions created in a caller's own
// transaction (a start inside a transaction) are not reported, since the engine does not see that
// transaction commit.
type Observer func(c *Committed)

// DefaultObserverQueue is how many observations wait for a slow observer before further ones are
// dropped.
const DefaultObserverQueue = 10_000

// observers delivers observations to an Observer on one goroutine, started when observations
// arrive and ended when none wait, so an engine that is never started or stopped leaks nothing.
// A write takes its place in the queue before it is sent to the database and is delivered, in
// that place, once it is known to have committed: whatever follows a commit causally (a later
// checkpoint of the same execution) queues behind it.
type observers struct {
	fn     Observer
	max    int
	logger *slog.Logger

	mu       sync.Mutex
	queue    []*observation
	running  bool
	idle     chan struct{} // closed when the goroutine ends; replaced when it starts again
	dropping bool          // a warning was logged for the drops since the queue last emptied

	dropped atomic.Int64
}

func newObservers(fn Observer, max int, logger *slog.Logger) *observers {
	if max <= 0 {
		max = DefaultObserverQueue
	}
	idle := make(chan struct{})
	close(idle)
	return &observers{fn: fn, max: max, logger: logger, idle: idle}
}

// observation is a place in the queue, delivered if its write commits.
type observation struct {
	c         *Committed
	committed chan bool // receives once whether the write committed
}

// resolve tells the queue whether the write committed; a nil (dropped) observation ignores it.
func (ob *observation) resolve(committed bool) {
	if ob != nil {
		ob.committed <- committed
	}
}

// reserve queues c without blocking, to be delivered once resolved as committed. It returns nil
// (dropped, counted) when the queue is full.
func (o *observers) reserve(c *Committed) *observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.queue) >= o.max {
		total := o.dropped.Add(1)
		if !o.dropping {
			o.dropping = true
			o.logger.Warn("the execution observer is too slow; dropping observations",
				"queued", len(o.queue), "dropped_total", total)
		}
		return nil
	}
	ob := &observation{c: c, committed: make(chan bool, 1)}
	o.queue = append(o.queue, ob)
	if !o.running {
		o.running = true
		o.idle = make(chan struct{})
		go o.deliver(o.idle)
	}
	return ob
}

func (o *observers) deliver(idle chan struct{}) {
	for {
		o.mu.Lock()
		batch := o.queue
		o.queue = nil
		if len(batch) == 0 {
			if o.dropping {
				o.logger.Warn("the execution observer caught up", "dropped_total", o.dropped.Load())
				o.dropping = false
			}
			o.running = false
			close(idle)
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
		for _, ob := range batch {
			if <-ob.committed {
				o.call(ob.c)
			}
		}
	}
}

// call runs the observer, containing a panic.
func (o *observers) call(c *Committed) {
	defer func() {
		if r := recover(); r != nil {
			o.logger.Error("the execution observer panicked; it gets the next observation",
				"execution_id", c.Row.ID, "panic", fmt.Sprint(r))
		}
	}()
	o.fn(c)
}

// wait returns when every queued observation was delivered, or when ctx ends.
func (o *observers) wait(ctx context.Context) {
	for {
		o.mu.Lock()
		idle, running := o.idle, o.running
		o.mu.Unlock()
		if !running {
			return
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return
		}
	}
}

// observation is what the observer is told if cp commits: Row as cp leaves it.
func (l *Lease) observation(cp *driver.ExecutionCheckpoint, now time.Time) *Committed {
	c := &Committed{Row: *l.Row}
	applyCheckpoint(&c.Row, cp, now)
	c.Log = copyLog(&c.Row, cp.Log, now)
	return c
}

// copyLog copies entries written for row at now, filling in what the database stamped.
func copyLog(row *driver.ExecutionRow, entries []*driver.ExecutionLogEntry, now time.Time) []*driver.ExecutionLogEntry {
	if len(entries) == 0 {
		return nil
	}
	out := make([]*driver.ExecutionLogEntry, len(entries))
	for i, entry := range entries {
		c := *entry
		c.ExecutionID = row.ID
		if c.At.IsZero() {
			c.At = now
		}
		out[i] = &c
	}
	return out
}

// ObserverDropped returns how many observations were dropped because the observer fell behind.
func (e *Engine) ObserverDropped() int64 {
	if e.observers == nil {
		return 0
	}
	return e.observers.dropped.Load()
}

// insertedObservation is the observation of an execution created by x at now.
func insertedObservation(x *driver.ExecutionInsertParams, now time.Time) *Committed {
	row := driver.ExecutionRow{
		ID: x.ID, Model: x.Model, Type: x.Type, Domain: x.Domain, TenantID: x.TenantID,
		BusinessKey: x.BusinessKey, BatchID: x.BatchID, Status: driver.ExecutionPending,
		State: x.State, DeadlineAt: x.DeadlineAt, WakeAt: &now, CreatedAt: now, UpdatedAt: now,
	}
	if x.NotBefore != nil && x.NotBefore.After(now) {
		wake := *x.NotBefore
		row.WakeAt = &wake
	}
	if x.Lease > 0 {
		until := now.Add(x.Lease)
		row.Status, row.Fence, row.WorkerID, row.LeaseUntil, row.WakeAt = driver.ExecutionExecuting, 1, x.WorkerID, &until, &until
	}
	return &Committed{Row: row, Log: copyLog(&row, x.Log, now), Inserted: true}
}
