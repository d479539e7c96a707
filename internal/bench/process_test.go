package bench

import (
	"context"
	"testing"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// BenchmarkProcess reports five-step processes per second and checkpoint latency.
// Run: go test -run '^$' -bench Process ./internal/bench
func BenchmarkProcess(b *testing.B) {
	for _, tc := range []struct {
		name      string
		driver    func(testing.TB) driver.Driver
		processes int
	}{
		{"postgres", func(tb testing.TB) driver.Driver { return dbtest.Postgres(tb) }, 5000},
		{"sqlite", func(tb testing.TB) driver.Driver { return dbtest.SQLite(tb) }, 1000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var perS, p50, p99 float64
			for range b.N {
				b.StopTimer()
				drv := tc.driver(b)
				b.StartTimer()
				res, err := RunProcess(context.Background(), drv, ProcessConfig{Processes: tc.processes, Steps: 5})
				if err != nil {
					b.Fatal(err)
				}
				perS, p50, p99 = perS+res.ProcessesPerS, p50+res.P50Ms, p99+res.P99Ms
			}
			n := float64(b.N)
			b.ReportMetric(perS/n, "processes/s")
			b.ReportMetric(p50/n, "checkpoint_p50_ms")
			b.ReportMetric(p99/n, "checkpoint_p99_ms")
		})
	}
}

// BenchmarkResume reports the latency of resuming a waiting process with its response.
func BenchmarkResume(b *testing.B) {
	for _, tc := range []struct {
		name   string
		driver func(testing.TB) driver.Driver
	}{
		{"postgres", func(tb testing.TB) driver.Driver { return dbtest.Postgres(tb) }},
		{"sqlite", func(tb testing.TB) driver.Driver { return dbtest.SQLite(tb) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var p50, p99 float64
			for range b.N {
				b.StopTimer()
				drv := tc.driver(b)
				b.StartTimer()
				res, err := RunResume(context.Background(), drv, ResumeConfig{Processes: 500})
				if err != nil {
					b.Fatal(err)
				}
				p50, p99 = p50+res.P50Ms, p99+res.P99Ms
			}
			b.ReportMetric(p50/float64(b.N), "resume_p50_ms")
			b.ReportMetric(p99/float64(b.N), "resume_p99_ms")
		})
	}
}

func TestRunProcessAndResumeSmoke(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		res, err := RunProcess(context.Background(), drv, ProcessConfig{Processes: 100, Steps: 5, StartBatch: 40})
		if err != nil {
			t.Fatal(err)
		}
		if res.ProcessesPerS <= 0 || res.P99Ms < res.P50Ms || res.P50Ms <= 0 {
			t.Fatalf("implausible result: %+v", res)
		}
		resume, err := RunResume(context.Background(), drv, ResumeConfig{Processes: 20})
		if err != nil {
			t.Fatal(err)
		}
		if resume.P50Ms <= 0 || resume.P99Ms < resume.P50Ms {
			t.Fatalf("implausible result: %+v", resume)
		}
	})
}
