package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/rabbittest"
)

// BenchmarkPayments reports end-to-end payments per second and acceptance-to-completion latency
// of the reference platform, for both processes.
// Run: go test -run '^$' -bench Payments ./internal/bench
func BenchmarkPayments(b *testing.B) {
	for _, tc := range []struct {
		name     string
		driver   func(testing.TB) driver.Driver
		payments int
	}{
		{"postgres", func(tb testing.TB) driver.Driver { return dbtest.Postgres(tb) }, 5000},
		{"sqlite", func(tb testing.TB) driver.Driver { return dbtest.SQLite(tb) }, 1000},
	} {
		for _, typ := range payments.ProcessTypes {
			b.Run(tc.name+"/"+typ, func(b *testing.B) {
				var perS, p50, p99 float64
				for range b.N {
					b.StopTimer()
					drv := tc.driver(b)
					b.StartTimer()
					res, err := RunPayments(context.Background(), drv, PaymentsConfig{Payments: tc.payments, ProcessType: typ})
					if err != nil {
						b.Fatal(err)
					}
					perS, p50, p99 = perS+res.PaymentsPerS, p50+res.P50Ms, p99+res.P99Ms
				}
				n := float64(b.N)
				b.ReportMetric(perS/n, "payments/s")
				b.ReportMetric(p50/n, "p50_ms")
				b.ReportMetric(p99/n, "p99_ms")
			})
		}
	}
}

func TestRunPaymentsSmoke(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		for _, typ := range payments.ProcessTypes {
			res, err := RunPayments(context.Background(), drv, PaymentsConfig{Payments: 60, ProcessType: typ, Concurrency: 4, Executions: 20})
			if err != nil {
				t.Fatal(err)
			}
			if res.Completed != 60 || res.PaymentsPerS <= 0 || res.P99Ms < res.P50Ms || res.Duplicates != 0 {
				t.Fatalf("implausible result: %+v", res)
			}
		}
		res, err := RunPayments(context.Background(), drv, PaymentsConfig{Rate: 40, Duration: 1e9, Instances: 2, Concurrency: 4, Executions: 20})
		if err != nil {
			t.Fatal(err)
		}
		// A loaded machine submits a little less than the rate asks; what must hold is that every
		// submitted payment completed, none twice.
		if res.Payments < 20 || res.Payments > 45 || res.Duplicates != 0 || res.PaymentsPerS <= 0 {
			t.Fatalf("implausible rate-mode result: %+v", res)
		}
	})
}

// The payments benchmark over RabbitMQ: every payment completes through the outbox relay and
// the broker, no submission twice, and the relays' claims are counted.
func TestRunPaymentsOverRabbitMQ(t *testing.T) {
	t.Parallel()
	url := rabbittest.URL(t)
	res, err := RunPayments(context.Background(), dbtest.Postgres(t), PaymentsConfig{Rate: 20, Duration: time.Second, Instances: 2,
		Concurrency: 4, Executions: 20, AMQPURL: url})
	require.NoError(t, err)
	require.Equal(t, 20, res.Completed)
	require.Zero(t, res.Duplicates)
	require.Positive(t, res.RelayClaims, "the relays claimed the brokered commands")
	require.LessOrEqual(t, res.EmptyRelayClaims, res.RelayClaims)
	for _, s := range res.Backlog {
		require.GreaterOrEqual(t, s.BrokerDepth, int64(0), "the broker's depth was read at %.1fs", s.AtS)
	}
}

// Rate mode spreads its payments over cfg.Accounts debtors and beneficiaries per currency, in
// turn: a soak measures the platform, not the row locks of a handful of accounts (every payment
// of one debtor waits for the previous one's commit). Out of the chart's range is refused.
func TestRatePaymentsSpreadOverTheAccounts(t *testing.T) {
	t.Parallel()
	cfg := PaymentsConfig{Accounts: 3}.WithDefaults()
	debtors := map[string]int{}
	for i := range 7 * 3 * 2 {
		req := rateRequest(cfg, "2026-11-26", i)
		debtors[req.DebitAccount]++
		require.Equal(t, req.DebitAccount[len(req.DebitAccount)-3:], req.CreditAccount[len(req.CreditAccount)-3:])
	}
	require.Len(t, debtors, 5*3, "3 debtors in each of the 5 debit currencies")
	require.Equal(t, 2, debtors["CUST-GBP-003"])
	require.Equal(t, 4, debtors["CUST-USD-001"], "USD→USD and USD→GBP share USD's debtors")
	require.Equal(t, ChartAccounts, PaymentsConfig{}.WithDefaults().Accounts, "by default the whole chart")

	for _, accounts := range []int{-1, ChartAccounts + 1} {
		_, err := RunPayments(context.Background(), dbtest.SQLite(t), PaymentsConfig{Rate: 1, Accounts: accounts})
		require.ErrorContains(t, err, "accounts")
	}
}
