package payments_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/schedule"
)

// The platform declares a daily schedule of RunScheduledPaymentsForDay; a scheduler creates it,
// fires it at 06:00, and the run takes the day's scheduled payments into one batch. Paused, it
// fires nothing the next day.
func TestDailyRunOnItsSchedule(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		fake := clock.NewFake(testStart) // 2026-11-23 09:00 UTC
		ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
		client, err := commandbus.NewClient(drv, &commandbus.Config{
			Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
			Clock:  fake, FetchPollInterval: ms(20), Domains: payments.DefaultDomainConfigs(4),
			Process: commandbus.ProcessConfig{PendingPollInterval: ms(20), RetryPollInterval: ms(20),
				ExecutionLease: commandbus.Duration(30 * time.Second)},
		})
		require.NoError(t, err)
		p, err := payments.New(client, payments.Options{DisableSimulator: true, CustomersPerCurrency: 3, BeneficiariesPerCurrency: 3,
			DailyRunZone: "UTC"})
		require.NoError(t, err)
		sched, err := schedule.New(p.Runtime(), schedule.Config{PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, client.Stop(stopCtx))
		})

		s, err := sched.GetByName(ctx, payments.DailyRunSchedule)
		require.NoError(t, err, "the declared schedule exists once the scheduler started")
		require.Equal(t, cbtype.ScheduleDeclared, s.Source)
		require.Equal(t, payments.TypeDailyRun, s.Type)
		require.Equal(t, time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC), *s.NextFireAt)

		_, err = p.SchedulePayments(ctx, []payments.PaymentRequest{
			{IdempotencyKey: "d1", DebitAccount: "CUST-USD-001", CreditAccount: "BENE-USD-002", Amount: "10", Currency: "USD", ValueDate: "2026-11-24"},
			{IdempotencyKey: "d2", DebitAccount: "CUST-GBP-001", CreditAccount: "BENE-GBP-002", Amount: "20", Currency: "GBP", ValueDate: "2026-11-24"},
		})
		require.NoError(t, err)

		fake.Set(time.Date(2026, 11, 24, 6, 0, 0, 200_000_000, time.UTC))
		eventually(t, 30*time.Second, "the daily run's batch", func() bool {
			batches, err := p.ListBatches(ctx, payments.ListParams{})
			require.NoError(t, err)
			return len(batches) == 1 && batches[0].Total == 2 && batches[0].ScheduledFor == "2026-11-24"
		})
		// The run may finish before its schedule records the fire: wait for the record too.
		eventually(t, 30*time.Second, "the schedule to record the fire", func() bool {
			s, err = sched.GetByName(ctx, payments.DailyRunSchedule)
			require.NoError(t, err)
			return s.LastExecutionID != nil
		})
		require.Equal(t, time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC), *s.NextFireAt)
		require.Equal(t, schedule.TickExecutionID(s.ID, time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)), *s.LastExecutionID)

		_, err = sched.Pause(ctx, s.ID, commandbus.OperatorAction{Actor: "ops:test", Reason: "bank holiday"})
		require.NoError(t, err)
		fake.Set(time.Date(2026, 11, 25, 6, 0, 1, 0, time.UTC))
		n, err := sched.RunDue(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "a paused daily run starts nothing")
	})
}
