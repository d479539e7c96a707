package bench

import (
	"context"
	"testing"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// BenchmarkBus runs the bus benchmark once per iteration on a fresh database and reports
// commands/s and latency percentiles. Run: go test -run '^$' -bench Bus ./internal/bench
func BenchmarkBus(b *testing.B) {
	for _, tc := range []struct {
		name     string
		driver   func(testing.TB) driver.Driver
		commands int
	}{
		{"postgres", func(tb testing.TB) driver.Driver { return dbtest.Postgres(tb) }, 20000},
		{"sqlite", func(tb testing.TB) driver.Driver { return dbtest.SQLite(tb) }, 5000},
	} {
		for _, replies := range []string{RepliesWritten, RepliesHandled} {
			b.Run(tc.name+"/replies="+replies, func(b *testing.B) {
				var perS, p50, p99 float64
				for range b.N {
					b.StopTimer()
					drv := tc.driver(b)
					b.StartTimer()
					res, err := RunBus(context.Background(), drv, BusConfig{Commands: tc.commands, Replies: replies})
					if err != nil {
						b.Fatal(err)
					}
					perS += res.CommandsPerS
					p50 += res.P50Ms
					p99 += res.P99Ms
				}
				n := float64(b.N)
				b.ReportMetric(perS/n, "commands/s")
				b.ReportMetric(p50/n, "p50_ms")
				b.ReportMetric(p99/n, "p99_ms")
			})
		}
	}
}

// TestRunBusSmoke keeps the benchmark harness working: a small run on each driver must account
// for every command.
func TestRunBusSmoke(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		for _, replies := range []string{RepliesWritten, RepliesHandled, RepliesNone} {
			res, err := RunBus(context.Background(), drv, BusConfig{Commands: 300, SendBatch: 100, Replies: replies})
			if err != nil {
				t.Fatal(err)
			}
			if res.Commands != 300 || res.CommandsPerS <= 0 || res.P99Ms < res.P50Ms {
				t.Fatalf("implausible result: %+v", res)
			}
		}
	})
}
