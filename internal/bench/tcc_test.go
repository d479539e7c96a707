package bench

import (
	"context"
	"testing"

	"github.com/commandbus/commandbus/driver"
)

// BenchmarkTcc reports TCC transactions of three local participants per second. Target on
// PostgreSQL on the reference machine: 2,000/s.
// Run: go test -run '^$' -bench Tcc ./internal/bench
func BenchmarkTcc(b *testing.B) {
	benchmarkPerDriver(b, 5000, 1000, "transactions/s", func(ctx context.Context, drv driver.Driver, n int) (float64, error) {
		res, err := RunTcc(ctx, drv, TccConfig{Transactions: n})
		if err != nil {
			return 0, err
		}
		return res.TransactionsPerS, nil
	})
}

func TestRunTccSmoke(t *testing.T) {
	smokePerDriver(t, "BenchTcc", "transactions", func(ctx context.Context, drv driver.Driver) (*TccResult, error) {
		return RunTcc(ctx, drv, TccConfig{Transactions: 100, StartBatch: 40})
	}, func(res *TccResult) bool {
		return !(res.Transactions != 100 || res.TransactionsPerS <= 0 || res.PhasesPerS < res.TransactionsPerS*6*0.98)
	})
}
