package payments_test

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/clock"
)

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

var testStart = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

const today = "2026-11-23"

var operator = struct{ actor, reason string }{"alice@ops", "checked with the bank"}

type fixture struct {
	t      *testing.T
	fake   *clock.Fake
	client *commandbus.Client
	p      *payments.Platform
}

// setup starts a platform on drv with a fake clock, fast pollers and, unless opts disables it,
// the network simulator polling every 20ms.
func setup(t *testing.T, drv driver.Driver, opts payments.Options) *fixture {
	t.Helper()
	return setupWith(t, drv, opts, nil)
}

// setupWith is setup with a function that sees the platform before the client starts (to set
// test hooks).
func setupWith(t *testing.T, drv driver.Driver, opts payments.Options, beforeStart func(p *payments.Platform)) *fixture {
	t.Helper()
	fake := clock.NewFake(testStart)
	noJitter := 0.0
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	domains := payments.DefaultDomainConfigs(8)
	for _, d := range domains {
		d.MaxAttempts = 3
		d.Retry = commandbus.RetryPolicy{InitialDelay: ms(100), MaxDelay: ms(500), Jitter: &noJitter}
	}
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Clock:             fake,
		FetchPollInterval: ms(20),
		Domains:           domains,
		Process: commandbus.ProcessConfig{
			PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20),
			DeadlineCheckInterval: ms(20), ExecutionLease: commandbus.Duration(30 * time.Second),
		},
	})
	require.NoError(t, err)
	if opts.SimulatorPollInterval == 0 {
		opts.SimulatorPollInterval = 20 * time.Millisecond
	}
	if opts.CustomersPerCurrency == 0 {
		opts.CustomersPerCurrency, opts.BeneficiariesPerCurrency = 3, 3
	}
	// The FX client keeps its 2s default: on SQLite the simulated provider's writes queue behind
	// the bus's for the one writer, and under load a shorter timeout failed bookings often enough
	// to park them (TestBatchRun).
	p, err := payments.New(client, opts)
	require.NoError(t, err)
	if beforeStart != nil {
		beforeStart(p)
	}
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	return &fixture{t: t, fake: fake, client: client, p: p}
}

func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStatus polls a payment until its API status is want.
func (f *fixture) waitStatus(id uuid.UUID, want string) *payments.PaymentView {
	f.t.Helper()
	var v *payments.PaymentView
	eventually(f.t, 20*time.Second, "payment to be "+want, func() bool {
		var err error
		v, err = f.p.GetPayment(context.Background(), id)
		require.NoError(f.t, err)
		return v.Status == want
	})
	return v
}

// waitWaiting polls a payment until it waits on wait.
func (f *fixture) waitWaiting(id uuid.UUID, wait string) *payments.PaymentView {
	f.t.Helper()
	var v *payments.PaymentView
	seen := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		v, err = f.p.GetPayment(context.Background(), id)
		require.NoError(f.t, err)
		if v.Status == "WAITING" && v.CurrentWait == wait {
			return v
		}
		seen[v.Status+"/"+v.CurrentWait] = true
		if time.Now().After(deadline) {
			// What the payment went through says whether it passed the wait or never got there.
			f.t.Fatalf("timed out after 20s waiting for payment %s to wait on %s; it was (status/wait) %v, last %s/%s %s %s",
				id, wait, slices.Sorted(maps.Keys(seen)), v.Status, v.CurrentWait, v.ErrorCode, v.ErrorMessage)
		}
		time.Sleep(5 * time.Millisecond) // polling the stored status with a deadline
	}
}

// checkInvariants asserts the platform's three invariants once the platform settled.
func (f *fixture) checkInvariants() {
	f.t.Helper()
	var err error
	eventually(f.t, 20*time.Second, "invariants to hold", func() bool {
		err = f.p.CheckInvariants(context.Background())
		return err == nil
	})
	require.NoError(f.t, err)
}

// submit submits a payment and returns its id.
func (f *fixture) submit(req payments.PaymentRequest) *payments.PaymentResult {
	f.t.Helper()
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = uuid.NewString()
	}
	res, err := f.p.SubmitPayment(context.Background(), req)
	require.NoError(f.t, err)
	return res
}

func (f *fixture) account(id string) *payments.Account {
	f.t.Helper()
	a, err := f.p.GetAccount(context.Background(), id)
	require.NoError(f.t, err)
	return a
}

// eachProcess runs fn for both process types on both drivers.
func eachProcess(t *testing.T, fn func(t *testing.T, drv driver.Driver, processType string)) {
	for _, typ := range payments.ProcessTypes {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			eachDriver(t, func(t *testing.T, drv driver.Driver) { fn(t, drv, typ) })
		})
	}
}

// crossCurrency is a EUR payment to a USD beneficiary below the approval threshold.
func crossCurrency(typ string) payments.PaymentRequest {
	return payments.PaymentRequest{DebitAccount: "CUST-EUR-001", CreditAccount: "BENE-USD-001", Amount: "1000.00",
		Currency: "EUR", CreditCurrency: "USD", ProcessType: typ}
}

func domestic(typ string) payments.PaymentRequest {
	return payments.PaymentRequest{DebitAccount: "CUST-GBP-001", CreditAccount: "BENE-GBP-002", Amount: "250.50",
		Currency: "GBP", ProcessType: typ}
}

// retryUntil waits for cond, moving the fake clock past the bus's backoff whenever a command of
// domain waits for its retry, and never further (so no wait or lease times out on the way).
func (f *fixture) retryUntil(domain, what string, cond func() bool) {
	f.t.Helper()
	eventually(f.t, 20*time.Second, what, func() bool {
		if cond() {
			return true
		}
		list, err := f.client.ListCommands(context.Background(), &commandbus.ListParams{Domain: domain,
			Statuses: []commandbus.Status{commandbus.StatusPending}})
		require.NoError(f.t, err)
		for _, c := range list {
			if c.Attempt > 0 && c.ErrorCode != "" {
				f.fake.Advance(600 * time.Millisecond) // the test config's largest backoff is 500ms
				break
			}
		}
		return false
	})
}

// advancePastReplyTimeout moves the fake clock past a command step's reply timeout (the default
// one, which outlasts the domain's redeliveries).
func (f *fixture) advancePastReplyTimeout() {
	f.t.Helper()
	f.fake.Advance(f.client.Config().CommandStepOr("", payments.DomainAccounts, "").Timeout.Std() + time.Second)
}
