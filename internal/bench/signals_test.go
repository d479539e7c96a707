package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// BenchmarkTimers schedules 10,000 durable timers due within one second and reports how late
// the runners see them due (p50, p99 and max lateness); no timer may be seen due twice or never.
// The sub-benchmarks spread the timers over fewer or more executions: with one timer per
// execution every timer costs a run of its own, while an execution with many timers fires all
// those due in one run. Target on PostgreSQL: p99 lateness under 250 ms.
// Run: go test -run '^$' -bench Timers ./internal/bench
func BenchmarkTimers(b *testing.B) {
	for _, executions := range []int{100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("executions=%d", executions), func(b *testing.B) {
			var p50, p99, worst float64
			for range b.N {
				b.StopTimer()
				drv := dbtest.Postgres(b)
				b.StartTimer()
				res, err := RunTimers(context.Background(), drv, TimersConfig{Timers: 10_000, Executions: executions})
				if err != nil {
					b.Fatal(err)
				}
				p50, p99, worst = p50+res.P50LateMs, p99+res.P99LateMs, max(worst, res.MaxLateMs)
			}
			b.ReportMetric(p50/float64(b.N), "p50-late-ms")
			b.ReportMetric(p99/float64(b.N), "p99-late-ms")
			b.ReportMetric(worst, "max-late-ms")
		})
	}
}

// BenchmarkSignalResume reports the time from sending a signal to an execution that waits for
// it to its runner seeing the signal (p50 and p99), one signal at a time. Target on PostgreSQL:
// p50 under 5 ms.
// Run: go test -run '^$' -bench SignalResume ./internal/bench
func BenchmarkSignalResume(b *testing.B) {
	var p50, p99 float64
	for range b.N {
		b.StopTimer()
		drv := dbtest.Postgres(b)
		b.StartTimer()
		res, err := RunSignal(context.Background(), drv, SignalConfig{Executions: 500})
		if err != nil {
			b.Fatal(err)
		}
		p50, p99 = p50+res.P50Ms, p99+res.P99Ms
	}
	b.ReportMetric(p50/float64(b.N), "p50-ms")
	b.ReportMetric(p99/float64(b.N), "p99-ms")
}

func TestRunTimersSmoke(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		res, err := RunTimers(context.Background(), drv, TimersConfig{Timers: 300, Executions: 30, Window: 300 * time.Millisecond, Lead: 1500 * time.Millisecond, Settle: 200 * time.Millisecond, Concurrency: 50})
		if err != nil {
			t.Fatalf("%v (result %+v)", err, res)
		}
		if res.Fired != 300 || res.FiredTwice != 0 || res.Lost != 0 || res.Unfired != 0 || res.Executions != 30 {
			t.Fatalf("implausible result: %+v", res)
		}
		// Lateness is measured against the database's clock deciding what is due, on this machine.
		if res.P50LateMs < -50 || res.P50LateMs > res.P99LateMs || res.P99LateMs > res.MaxLateMs || res.MaxLateMs > 5000 {
			t.Fatalf("implausible lateness: %+v", res)
		}
		pending, err := drv.Executor().ExecutionCountByStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pending {
			if c.Type == "BenchTimers" && c.Status != driver.ExecutionWaitingForAsync {
				t.Fatalf("%d timer executions are %s", c.Count, c.Status)
			}
		}
	})
}

func TestRunTimersValidates(t *testing.T) {
	t.Parallel()
	_, err := RunTimers(context.Background(), nil, TimersConfig{Timers: 10, Executions: 20})
	if err == nil {
		t.Fatal("more executions than timers accepted")
	}
}

func TestRunSignalSmoke(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		res, err := RunSignal(context.Background(), drv, SignalConfig{Executions: 50, Senders: 2})
		if err != nil {
			t.Fatal(err)
		}
		if res.Executions != 50 || res.P50Ms <= 0 || res.P50Ms > res.P99Ms || res.P99Ms > res.MaxMs || res.MaxMs > 5000 {
			t.Fatalf("implausible result: %+v", res)
		}
		counts, err := drv.Executor().ExecutionCountByStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range counts {
			if c.Type == "BenchSignal" && c.Status != driver.ExecutionCompleted {
				t.Fatalf("%d signal executions are %s", c.Count, c.Status)
			}
		}
	})
}
