package execution

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/batching"
)

// checkpointer group-commits checkpoints: each runner waits for its own checkpoint to be durable
// before its next step (so a step re-runs only if a crash fell between its effect and its
// checkpoint), yet many runners share one statement and one commit. Batches form on their own:
// while a flush is in flight the next requests queue up; there is no artificial delay.
type checkpointer struct {
	exec   driver.Executor
	now    func() *time.Time
	logger *slog.Logger
	notify func(ctx context.Context, topics []string)
	// signal, when set, wakes this instance's subscribers before notify's round trip.
	signal func(topics ...string)
	group  *batching.Group[*checkpointRequest]
	// observers, when set, get the observations of applied checkpoints.
	observers *observers
	// pace, when set, is called before a batch that writes outbox messages (Engine.SetPace).
	pace atomic.Pointer[func(context.Context)]
	// handoff, when set, is given the outbox messages a batch wrote, after its commit
	// (Engine.SetHandoff).
	handoff atomic.Pointer[driver.OutboxHandoff]
}

type checkpointRequest struct {
	cp *driver.ExecutionCheckpoint
	// wake asks for the pending pollers to be notified once the checkpoint applied: it inserted
	// executions or woke a parent.
	wake     bool
	observed *observation // delivered if cp applies; nil without an observer
	done     chan error
}

// OutboxTopic is the notification that wakes the outbox relays (outbox.NotifyTopic): sent after
// a checkpoint that wrote outbox messages (lifecycle events) committed.
const OutboxTopic = "outbox"

const (
	maxCheckpointBatch      = 500
	maxConcurrentCheckpoint = 3
)

func newCheckpointer(exec driver.Executor, now func() *time.Time, logger *slog.Logger, notify func(context.Context, []string), obs *observers) *checkpointer {
	c := &checkpointer{exec: exec, now: now, logger: logger, notify: notify, observers: obs}
	c.group = batching.New(maxCheckpointBatch, maxConcurrentCheckpoint, c.flush)
	return c
}

// write queues a checkpoint and waits until it is committed (nil), fenced (ErrFenced) or failed.
// With wake, the pending pollers are notified after the commit; observed is handed to the
// observers if the checkpoint applies.
func (c *checkpointer) write(ctx context.Context, cp *driver.ExecutionCheckpoint, wake bool, observed *Committed) error {
	req := &checkpointRequest{cp: cp, wake: wake, done: make(chan error, 1)}
	if observed != nil && c.observers != nil {
		req.observed = c.observers.reserve(observed)
	}
	c.group.Submit(req)
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		// The write may still commit; the caller treats its lease as lost either way.
		return ctx.Err()
	}
}

func (c *checkpointer) flush(batch []*checkpointRequest) {
	cps := make([]*driver.ExecutionCheckpoint, len(batch))
	messages := false
	for i, req := range batch {
		cps[i] = req.cp
		messages = messages || writesMessages(req.cp)
	}
	if pace := c.pace.Load(); pace != nil && messages {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		(*pace)(ctx)
		cancel()
	}
	applied, err := c.writeBatch(cps)
	if err != nil && len(batch) > 1 {
		// One bad checkpoint must not fail the others: write them one by one.
		for _, req := range batch {
			c.flush([]*checkpointRequest{req})
		}
		return
	}
	for _, req := range batch {
		req.observed.resolve(err == nil && applied[req.cp.ID])
	}
	// Messages handed to this instance's relay need no wake-up: it is told what it leaves to the
	// claims, and its claims, woken then, take the others' too.
	handoff := c.handoff.Load()
	topics := map[string]struct{}{}
	for _, req := range batch {
		switch {
		case err != nil:
			req.done <- err
		case applied[req.cp.ID]:
			for _, cmd := range req.cp.Commands {
				topics["queue:"+cmd.Queue] = struct{}{}
			}
			if req.wake {
				topics[WakeTopic] = struct{}{}
			}
			if writesMessages(req.cp) && handoff == nil {
				topics[OutboxTopic] = struct{}{}
			}
			req.done <- nil
		default:
			req.done <- ErrFenced
		}
	}
	if len(topics) > 0 && c.notify != nil {
		list := make([]string, 0, len(topics))
		for t := range topics {
			list = append(list, t)
		}
		if _, events := topics[OutboxTopic]; events && c.signal != nil {
			// This instance's relay first, without the round trip. (Only the relay: it polls
			// briefly while messages flow, so the notification arriving later costs it
			// little, where the pollers would claim twice.)
			c.signal(OutboxTopic)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.notify(ctx, list)
		cancel()
	}
}

// writesMessages reports whether cp writes outbox messages (its own, or its suspension's).
func writesMessages(cp *driver.ExecutionCheckpoint) bool {
	return len(cp.Outbox) > 0 || cp.SuspendRequested && len(cp.SuspendOutbox) > 0
}

func (c *checkpointer) writeBatch(cps []*driver.ExecutionCheckpoint) (map[uuid.UUID]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := &driver.ExecutionCheckpointManyParams{Checkpoints: cps, Now: c.now()}
	params.OutboxHandoff = c.handoff.Load()
	ids, err := c.exec.ExecutionCheckpointMany(ctx, params)
	if err != nil {
		if len(cps) == 1 {
			c.logger.Error("writing an execution checkpoint failed", "execution_id", cps[0].ID, "error", err)
		}
		return nil, err
	}
	applied := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		applied[id] = true
	}
	return applied, nil
}
