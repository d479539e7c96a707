package commandbus

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// A handler's context carries its command's lease and ends when the lease does, so a handler
// waiting on a lock or a connection (SQLite's single writer) gives up when it could no longer
// complete the command anyway; its transaction bounds derive from the lease.
func TestHandlerContextCarriesTheLease(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		type seen struct {
			lease     time.Duration
			ok        bool
			remaining time.Duration
			timeouts  driver.TxTimeouts
		}
		got := make(chan seen, 1)
		handlers := NewHandlers()
		AddHandler(handlers, "risk", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			lease, ok := HandlerLease(ctx)
			deadline, _ := ctx.Deadline()
			timeouts, _ := HandlerTxTimeouts(ctx)
			got <- seen{lease, ok, time.Until(deadline), timeouts}
			return nil, nil
		}))
		dc := fastDomain(1, 3)
		dc.VisibilityTimeout = Duration(9 * time.Second)
		client := newTestClient(t, drv, &Config{Handlers: handlers, Domains: map[string]*DomainConfig{"risk": dc}})
		startClient(t, client)
		_, err := client.Send(context.Background(), "risk", testArgs{}, nil)
		require.NoError(t, err)
		s := <-got
		require.True(t, s.ok)
		require.Equal(t, 9*time.Second, s.lease)
		require.InDelta(t, float64(9*time.Second), float64(s.remaining), float64(time.Second), "the context ends with the lease")
		require.Equal(t, driver.TxTimeouts{Lock: 4500 * time.Millisecond, Statement: 6 * time.Second, IdleInTransaction: 3 * time.Second}, s.timeouts)
	})
	_, ok := HandlerLease(context.Background())
	require.False(t, ok, "no lease outside a handler")
}

// The default bounds: a frozen holder is ended before a waiter gives up on its lock, a waiter
// gives up inside its own lease, and the lock wait fires before the statement timeout.
func TestTxTimeoutsForTheDefaultLease(t *testing.T) {
	t.Parallel()
	got := TxTimeoutsForLease(DefaultVisibilityTimeout)
	require.Equal(t, driver.TxTimeouts{Lock: 15 * time.Second, Statement: 20 * time.Second, IdleInTransaction: 10 * time.Second}, got)
	require.Less(t, got.IdleInTransaction, got.Lock, "a waiter outlasts a frozen holder within one attempt")
	require.Less(t, got.Lock, got.Statement, "lock_timeout, not statement_timeout, ends a lock wait")
	require.Less(t, got.Statement, DefaultVisibilityTimeout, "no statement outlives the lease")
	require.Equal(t, driver.TxTimeouts{}, TxTimeoutsForLease(0))
}
