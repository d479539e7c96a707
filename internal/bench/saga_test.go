package bench

import (
	"context"
	"testing"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// BenchmarkSaga reports three-step sagas per second, one in ten compensating. Target on
// PostgreSQL on the reference machine: 3,000/s.
// Run: go test -run '^$' -bench Saga ./internal/bench
func BenchmarkSaga(b *testing.B) {
	for _, tc := range []struct {
		name   string
		driver func(testing.TB) driver.Driver
		sagas  int
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
				res, err := RunSaga(context.Background(), drv, SagaConfig{Sagas: tc.sagas})
				if err != nil {
					b.Fatal(err)
				}
				perS += res.SagasPerS
			}
			b.ReportMetric(perS/float64(b.N), "sagas/s")
		})
	}
}

func TestRunSagaSmoke(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		res, err := RunSaga(context.Background(), drv, SagaConfig{Sagas: 100, StartBatch: 40})
		if err != nil {
			t.Fatal(err)
		}
		if res.Sagas != 100 || res.Compensated != 10 || res.Completed != 90 || res.SagasPerS <= 0 {
			t.Fatalf("implausible result: %+v", res)
		}
	})
}
