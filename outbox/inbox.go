package outbox

import (
	"context"

	"github.com/commandbus/commandbus/driver"
)

// Inbox is the idempotent receiver: a consumer records each message it handles, keyed by
// (message id, handler), in the transaction of the handler's effects. The first write wins; a
// redelivery finds the message recorded, changes nothing, and is counted.
type Inbox struct {
	metrics *Metrics
}

// NewInbox returns an inbox counting duplicates in metrics (nil: uncounted).
func NewInbox(metrics *Metrics) *Inbox {
	if metrics == nil {
		metrics = newDefaultMetrics()
	}
	return &Inbox{metrics: metrics}
}

// Record records messageID for handler through tx, the transaction that also writes the
// handler's effects. It returns false for a duplicate: the caller must then not apply its effects
// (and should commit nothing, or roll back).
func (i *Inbox) Record(ctx context.Context, tx driver.Executor, messageID, handler string) (bool, error) {
	first, err := tx.InboxInsert(ctx, &driver.InboxInsertParams{MessageID: messageID, Handler: handler})
	if err != nil {
		return false, err
	}
	if !first {
		i.Duplicate(handler)
	}
	return first, nil
}

// Seen reports whether handler already processed messageID, counting a duplicate when it did. It
// is a cheap check before work whose effects are then recorded with Record.
func (i *Inbox) Seen(ctx context.Context, exec driver.Executor, messageID, handler string) (bool, error) {
	seen, err := exec.InboxExists(ctx, messageID, handler)
	if err != nil {
		return false, err
	}
	if seen {
		i.Duplicate(handler)
	}
	return seen, nil
}

// Duplicate counts a duplicate delivery to handler found another way (for example a command
// that is already finished).
func (i *Inbox) Duplicate(handler string) {
	i.metrics.InboxDedupeHits.WithLabelValues(handler).Inc()
}
