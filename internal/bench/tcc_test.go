package bench

import (
	"context"
	"testing"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// BenchmarkTcc reports TCC transactions of three local participants per second. Target on
// PostgreSQL on the reference machine: 2,000/s.
// Run: go test -run '^$' -bench Tcc ./internal/bench
func BenchmarkTcc(b *testing.B) {
	for _, tc := range []struct {
		name         string
		driver       func(testing.TB) driver.Driver
		transactions int
	}{
		{"postgres", func(tb testing.TB) driver.Driver { return dbtest.Postgres(tb) }, 5000},
		{"sqlite", func(tb testing.TB) driver.Driver { return dbtest.SQLite(tb) }, 1000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var perS float64
			for range b.N {
				b.StopTimer()
				drv := tc.driver(b)
				b.StartTimer()
				res, err := RunTcc(context.Background(), drv, TccConfig{Transactions: tc.transactions})
				if err != nil {
					b.Fatal(err)
				}
				perS += res.TransactionsPerS
			}
			b.ReportMetric(perS/float64(b.N), "transactions/s")
		})
	}
}

func TestRunTccSmoke(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		res, err := RunTcc(context.Background(), drv, TccConfig{Transactions: 100, StartBatch: 40})
		if err != nil {
			t.Fatal(err)
		}
		if res.Transactions != 100 || res.TransactionsPerS <= 0 || res.PhasesPerS < res.TransactionsPerS*6*0.98 {
			t.Fatalf("implausible result: %+v", res)
		}
		counts, err := drv.Executor().ExecutionCountByStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range counts {
			if c.Type == "BenchTcc" && c.Status != driver.ExecutionCompleted {
				t.Fatalf("%d benchmark transactions are %s", c.Count, c.Status)
			}
		}
	})
}
