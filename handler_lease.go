package commandbus

import (
	"context"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// handlerLeaseKey carries the lease of the command a handler is running.
type handlerLeaseKey struct{}

// withHandlerLease gives a handler's context its command's lease: the value HandlerLease and
// HandlerTxTimeouts read, and a deadline when the lease ends (the handler cannot complete the
// command after that: another worker may already hold it).
func withHandlerLease(ctx context.Context, lease time.Duration) (context.Context, context.CancelFunc) {
	ctx = context.WithValue(ctx, handlerLeaseKey{}, lease)
	return context.WithTimeout(ctx, lease)
}

// HandlerLease returns the lease (the domain's visibility timeout) of the command whose handler
// received ctx, and false outside a handler. The handler's context ends when the lease does.
func HandlerLease(ctx context.Context) (time.Duration, bool) {
	lease, ok := ctx.Value(handlerLeaseKey{}).(time.Duration)
	return lease, ok && lease > 0
}

// TxTimeoutsForLease returns the bounds of a handler transaction under a command lease of the
// given length:
//
//   - IdleInTransaction: a third of the lease. A holder that stops between statements (a frozen
//     or partitioned worker) has its session ended by the server, which frees its row locks well
//     before its own lease expires, so its redelivery does not wait on itself.
//   - Lock: half of the lease. A handler queued behind a frozen holder gets the row when the
//     server ends the holder, within this one attempt; a handler behind a lock held for longer
//     gives up inside its own lease, with a transient error that is retried with backoff,
//     rather than letting the lease expire.
//   - Statement: two thirds of the lease (it counts lock waits too, so it is longer than Lock),
//     so that no statement outlives the lease.
//
// With the default visibility timeout of 30s these are 10s, 15s and 20s.
func TxTimeoutsForLease(lease time.Duration) driver.TxTimeouts {
	if lease <= 0 {
		return driver.TxTimeouts{}
	}
	return driver.TxTimeouts{Lock: lease / 2, Statement: lease * 2 / 3, IdleInTransaction: lease / 3}
}

// HandlerTxTimeouts returns TxTimeoutsForLease of the lease of the handler that received ctx,
// and false outside a handler. Handlers that open their own database transactions apply them
// (on PostgreSQL with pgdriver.GuardTx) so that a stuck holder cannot stall other commands on
// the same rows for longer than its lease.
func HandlerTxTimeouts(ctx context.Context) (driver.TxTimeouts, bool) {
	lease, ok := HandlerLease(ctx)
	if !ok {
		return driver.TxTimeouts{}, false
	}
	return TxTimeoutsForLease(lease), true
}
