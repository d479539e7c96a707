package payments_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
)

// A SubmitPayment handler blocked inside its transaction (a goroutine stuck in a call without a
// deadline), after it locked the debit account's row, must not stall the other payments on that
// account past its lease: the handler's context ends with the lease, which rolls its transaction
// back (on SQLite, where the handler holds the single writer, this is what frees the others),
// and on PostgreSQL the server ends its session after a third of the lease. Every other payment
// is submitted while the handler is still blocked, and none goes to the troubleshooting queue.
func TestBlockedSubmitHandlerDoesNotStallOtherPayments(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		testBlockedSubmitHandler(t, drv)
	})
}

func testBlockedSubmitHandler(t *testing.T, drv driver.Driver) {
	const lease = 3 * time.Second
	f := startWithFrozenSubmit(t, drv, lease)

	first := f.submit(domestic(payments.TypePaymentStep))
	<-f.frozen
	var others []uuid.UUID
	for range 4 {
		others = append(others, f.submit(domestic(payments.TypePaymentStep)).PaymentID)
	}
	for _, id := range others {
		v := f.waitWaiting(id, "awaitL1") // submitted: the network's first answer is due
		require.Equal(t, 0, v.Retries)
	}
	require.False(t, f.released(), "every other payment was submitted while the holder was frozen")
	f.release()

	// The frozen attempt's session was ended; its command came back after its lease and the
	// payment is submitted by the next attempt, once.
	f.waitWaiting(first.PaymentID, "awaitL1")
	list, err := f.client.ListCommands(context.Background(), &commandbus.ListParams{Domain: payments.DomainPayments,
		Statuses: []commandbus.Status{commandbus.StatusInTSQ}})
	require.NoError(t, err)
	require.Empty(t, list, "no command may be parked by the frozen holder")
	f.checkInvariants()
}

// frozenFixture is a platform on the real clock whose first SubmitPayment freezes inside its
// transaction until release.
type frozenFixture struct {
	*fixture
	frozen      chan struct{}
	releaseOnce sync.Once
	releaseCh   chan struct{}
}

func (f *frozenFixture) release() { f.releaseOnce.Do(func() { close(f.releaseCh) }) }

func (f *frozenFixture) released() bool {
	select {
	case <-f.releaseCh:
		return true
	default:
		return false
	}
}

func startWithFrozenSubmit(t *testing.T, drv driver.Driver, lease time.Duration) *frozenFixture {
	t.Helper()
	noJitter := 0.0
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	domains := payments.DefaultDomainConfigs(4)
	for _, d := range domains {
		d.MaxAttempts = 3
		d.VisibilityTimeout = commandbus.Duration(lease)
		d.Retry = commandbus.RetryPolicy{InitialDelay: ms(100), MaxDelay: ms(500), Jitter: &noJitter}
	}
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		FetchPollInterval: ms(20),
		Domains:           domains,
		Process: commandbus.ProcessConfig{
			PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20),
			DeadlineCheckInterval: ms(20),
		},
	})
	require.NoError(t, err)
	p, err := payments.New(client, payments.Options{DisableSimulator: true, CustomersPerCurrency: 3, BeneficiariesPerCurrency: 3})
	require.NoError(t, err)
	ff := &frozenFixture{frozen: make(chan struct{}), releaseCh: make(chan struct{})}
	var once sync.Once
	payments.SetAfterAccountsLocked(p, func(ctx context.Context) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(ff.frozen)
			<-ff.releaseCh // ignores ctx, as a stopped process would
		}
	})
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ff.release()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	ff.fixture = &fixture{t: t, client: client, p: p}
	return ff
}
