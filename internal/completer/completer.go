// Package completer writes command outcomes in batches: handlers hand their outcome over and free
// their slot at once, and one statement per batch records many outcomes (with their replies and
// audit entries). Batching is what lets the bus run tens of thousands of commands per second on a
// database that commits far fewer transactions.
package completer

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/startstop"
)

// Config configures a Completer.
type Config struct {
	Exec driver.Executor
	// Now returns the time to pass to the driver (nil: the database clock).
	Now func() *time.Time
	// MaxBatch is the most outcomes written by one statement. Default: 500.
	MaxBatch int
	// MaxWait is how long the first outcome of a batch waits for company. Default: 1ms.
	MaxWait time.Duration
	// MaxConcurrentFlushes bounds statements in flight. Default: 2.
	MaxConcurrentFlushes int
	// OnFlushed is called after each batch with the outcomes whose fence matched.
	OnFlushed func(applied map[uuid.UUID]bool, batch []*driver.CommandCompletion)
	Logger    *slog.Logger
}

// Completer batches outcomes.
type Completer struct {
	cfg  Config
	in   chan *driver.CommandCompletion // the current run's queue; Start makes it, Stop closes it
	sem  chan struct{}
	base startstop.Base
}

// New returns a completer; call Start before Add.
func New(cfg Config) *Completer {
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 500
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = time.Millisecond
	}
	if cfg.MaxConcurrentFlushes == 0 {
		cfg.MaxConcurrentFlushes = 2
	}
	if cfg.Now == nil {
		cfg.Now = func() *time.Time { return nil }
	}
	return &Completer{
		cfg: cfg,
		sem: make(chan struct{}, cfg.MaxConcurrentFlushes),
	}
}

// Start runs the collecting loop until Stop. Starting a running completer does nothing; a stopped
// one can start again.
func (c *Completer) Start() {
	if _, ok := c.base.StartInit(); !ok {
		return
	}
	in := make(chan *driver.CommandCompletion, c.cfg.MaxBatch*4)
	c.in = in
	c.base.Go(func() { c.loop(in) })
}

// Add queues an outcome; it blocks while the queue is full (back-pressure on handlers).
func (c *Completer) Add(completion *driver.CommandCompletion) {
	c.in <- completion
}

// Stop writes every queued outcome and returns when they are flushed. Add must not be called
// between Stop and the next Start.
func (c *Completer) Stop() {
	if !c.base.StopInit() {
		return
	}
	close(c.in)
	<-c.base.Done()
	c.base.Stopped()
}

func (c *Completer) loop(in <-chan *driver.CommandCompletion) {
	for {
		first, ok := <-in
		if !ok {
			return
		}
		batch := []*driver.CommandCompletion{first}
		timer := time.NewTimer(c.cfg.MaxWait)
	collect:
		for len(batch) < c.cfg.MaxBatch {
			select {
			case next, ok := <-in:
				if !ok {
					break collect
				}
				batch = append(batch, next)
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
		c.sem <- struct{}{}
		c.base.Go(func() {
			defer func() { <-c.sem }()
			c.flush(batch)
		})
	}
}

// flush writes one batch, retrying with backoff. If the database stays unreachable the batch is
// dropped with an error log: the commands stay RUNNING, their leases expire and they are
// delivered again, so nothing is lost.
func (c *Completer) flush(batch []*driver.CommandCompletion) {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ids, err := c.cfg.Exec.CommandCompleteMany(ctx, &driver.CommandCompleteManyParams{Completions: batch, Now: c.cfg.Now()})
		cancel()
		if err == nil {
			applied := make(map[uuid.UUID]bool, len(ids))
			for _, id := range ids {
				applied[id] = true
			}
			if len(applied) < len(batch) {
				for _, comp := range batch {
					if !applied[comp.ID] {
						c.cfg.Logger.Warn("outcome discarded: the command's lease was lost to another claim (fence moved)", "command_id", comp.ID, "fence", comp.Fence, "status", comp.Status)
					}
				}
			}
			if c.cfg.OnFlushed != nil {
				c.cfg.OnFlushed(applied, batch)
			}
			return
		}
		if attempt >= 6 {
			c.cfg.Logger.Error("writing command outcomes failed; commands will be redelivered after their lease", "error", err, "count", len(batch))
			return
		}
		c.cfg.Logger.Warn("writing command outcomes failed; retrying", "error", err, "count", len(batch), "attempt", attempt)
		time.Sleep(backoff)
		backoff *= 2
	}
}
