package moneytransfer_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/moneytransfer"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/saga"
)

func waitStatus(t *testing.T, m *saga.Manager, id uuid.UUID, want driver.ExecutionStatus) *saga.Result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := m.Result(context.Background(), id)
		require.NoError(t, err)
		if r.Status == string(want) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("transfer %s is %s (%s %s), want %s", id, r.Status, r.ErrorCode, r.Error, want)
		}
		time.Sleep(20 * time.Millisecond) // polling the stored status with a deadline
	}
}

func TestMoneyTransfer(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		ledger := moneytransfer.NewLedger(map[string]int64{"alice": 1000, "bob": 0, "carol": 0})
		ledger.Close("carol")
		handlers := commandbus.NewHandlers()
		ledger.AddHandlers(handlers)
		ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
		client, err := commandbus.NewClient(drv, &commandbus.Config{
			Logger: slog.New(slog.DiscardHandler), Handlers: handlers, FetchPollInterval: ms(20),
			Process: commandbus.ProcessConfig{PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20)},
			Domains: map[string]*commandbus.DomainConfig{moneytransfer.LedgerDomain: {ConcurrentMessages: 4, MaxAttempts: 1}, "transfers": {ConcurrentMessages: 4}},
		})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		transfers, err := ledger.Register(rt)
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { _ = client.Stop(context.Background()) })

		ok, err := transfers.Start(ctx, moneytransfer.Transfer{From: "alice", To: "bob", Amount: 300})
		require.NoError(t, err)
		r := waitStatus(t, transfers, ok, driver.ExecutionCompleted)
		require.True(t, r.Success)
		require.JSONEq(t, `{"account":"bob","credited":300}`, string(r.Steps["credit"].Result))
		require.EqualValues(t, 700, ledger.Balance("alice"))
		require.EqualValues(t, 300, ledger.Balance("bob"))
		require.Contains(t, ledger.Notified, ok.String())

		refused, err := transfers.Start(ctx, moneytransfer.Transfer{From: "alice", To: "carol", Amount: 200})
		require.NoError(t, err)
		r = waitStatus(t, transfers, refused, driver.ExecutionCompensated)
		require.Equal(t, "credit", r.FirstErrorStep)
		require.Equal(t, "ACCOUNT_CLOSED", r.ErrorCode)
		require.Equal(t, []string{"debit"}, r.CompensatedSteps, "the debit is refunded")
		require.Equal(t, saga.StepPending, r.Steps["notify"].Status)
		require.EqualValues(t, 700, ledger.Balance("alice"), "alice got her 200 back")
		require.NotContains(t, ledger.Notified, refused.String())

		uncovered, err := transfers.Start(ctx, moneytransfer.Transfer{From: "bob", To: "alice", Amount: 5000})
		require.NoError(t, err)
		r = waitStatus(t, transfers, uncovered, driver.ExecutionCompensated)
		require.Equal(t, "INSUFFICIENT_FUNDS", r.ErrorCode)
		require.Empty(t, r.CompensatedSteps, "nothing completed, nothing to undo")

		require.EqualValues(t, 1000, ledger.Total(), "money is conserved")
	})
}
