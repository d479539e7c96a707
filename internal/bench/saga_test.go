package bench

import (
	"context"
	"testing"

	"github.com/commandbus/commandbus/driver"
)

// BenchmarkSaga reports three-step sagas per second, one in ten compensating. Target on
// PostgreSQL on the reference machine: 3,000/s.
// Run: go test -run '^$' -bench Saga ./internal/bench
func BenchmarkSaga(b *testing.B) {
	benchmarkPerDriver(b, 5000, 1000, "sagas/s", func(ctx context.Context, drv driver.Driver, n int) (float64, error) {
		res, err := RunSaga(ctx, drv, SagaConfig{Sagas: n})
		if err != nil {
			return 0, err
		}
		return res.SagasPerS, nil
	})
}

func TestRunSagaSmoke(t *testing.T) {
	smokePerDriver(t, "", "", func(ctx context.Context, drv driver.Driver) (*SagaResult, error) {
		return RunSaga(ctx, drv, SagaConfig{Sagas: 100, StartBatch: 40})
	}, func(res *SagaResult) bool {
		return !(res.Sagas != 100 || res.Compensated != 10 || res.Completed != 90 || res.SagasPerS <= 0)
	})
}
