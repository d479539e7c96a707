package bench

import (
	"context"
	"testing"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// benchmarkPerDriver runs a benchmark on a fresh database of each driver, n executions each (pg
// on PostgreSQL, lite on SQLite), and reports the mean of the rates run returns as unit.
func benchmarkPerDriver(b *testing.B, pg, lite int, unit string, run func(ctx context.Context, drv driver.Driver, n int) (float64, error)) {
	for _, tc := range []struct {
		name   string
		driver func(testing.TB) driver.Driver
		n      int
	}{
		{"postgres", func(tb testing.TB) driver.Driver { return dbtest.Postgres(tb) }, pg},
		{"sqlite", func(tb testing.TB) driver.Driver { return dbtest.SQLite(tb) }, lite},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var perS float64
			for range b.N {
				b.StopTimer()
				drv := tc.driver(b)
				b.StartTimer()
				rate, err := run(context.Background(), drv, tc.n)
				if err != nil {
					b.Fatal(err)
				}
				perS += rate
			}
			b.ReportMetric(perS/float64(b.N), unit)
		})
	}
}

// smokePerDriver runs a small benchmark on each driver and fails unless its result is
// plausible; with typ set, it also fails if an execution of that type (what, in the message)
// did not complete.
func smokePerDriver[R any](t *testing.T, typ, what string, run func(ctx context.Context, drv driver.Driver) (*R, error), plausible func(*R) bool) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		res, err := run(context.Background(), drv)
		if err != nil {
			t.Fatal(err)
		}
		if !plausible(res) {
			t.Fatalf("implausible result: %+v", res)
		}
		if typ == "" {
			return
		}
		counts, err := drv.Executor().ExecutionCountByStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range counts {
			if c.Type == typ && c.Status != driver.ExecutionCompleted {
				t.Fatalf("%d benchmark %s are %s", c.Count, what, c.Status)
			}
		}
	})
}
