package pgdriver

import (
	"context"
	"sync"
	"time"
)

// notifyTimeout bounds one coalesced NOTIFY statement.
const notifyTimeout = 5 * time.Second

// notifier coalesces the driver's notifications: topics queued while a NOTIFY statement is in
// flight go out together in the next one, each topic once. A notification is a wake-up that
// listeners also cover by polling, so queueing returns at once and a failed statement is dropped.
type notifier struct {
	mu       sync.Mutex
	pending  []string
	queued   map[string]struct{}
	flushing bool
}

// queue adds topics to the next statement, starting a flush when none is running.
func (n *notifier) queue(d *Driver, topics []string) {
	if len(topics) == 0 {
		return
	}
	n.mu.Lock()
	if n.queued == nil {
		n.queued = map[string]struct{}{}
	}
	for _, t := range topics {
		if _, ok := n.queued[t]; !ok {
			n.queued[t] = struct{}{}
			n.pending = append(n.pending, t)
		}
	}
	start := !n.flushing
	n.flushing = true
	n.mu.Unlock()
	if start {
		go n.flush(d)
	}
}

// flush sends the queued topics until none are left.
func (n *notifier) flush(d *Driver) {
	for {
		n.mu.Lock()
		topics := n.pending
		n.pending, n.queued = nil, nil
		if len(topics) == 0 {
			n.flushing = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		_ = d.notify(ctx, d.pool, topics)
		cancel()
	}
}
