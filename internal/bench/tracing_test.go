package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/internal/dbtest"
)

// A traced bus run records a handler span per command, and a traced process run a run span and
// its step spans per process; the results say so.
func TestTracedBenchSmoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus, err := RunBus(ctx, dbtest.SQLite(t), BusConfig{Commands: 200, SendBatch: 100, Concurrency: 50, Tracing: true})
	require.NoError(t, err)
	require.True(t, bus.Config.Tracing)
	require.GreaterOrEqual(t, bus.Spans, int64(200), "a handler span per command at least")

	proc, err := RunProcess(ctx, dbtest.SQLite(t), ProcessConfig{Processes: 20, Steps: 2, Concurrency: 10, Tracing: true})
	require.NoError(t, err)
	require.GreaterOrEqual(t, proc.Spans, int64(20*3), "a run span and two step spans per process at least")

	off, err := RunProcess(ctx, dbtest.SQLite(t), ProcessConfig{Processes: 20, Steps: 2, Concurrency: 10})
	require.NoError(t, err)
	require.Zero(t, off.Spans)
}

// BenchmarkTracingOverhead runs the bus and process benchmarks on PostgreSQL with tracing off
// and on (the SDK recording every span into a batch processor that discards them). Run:
// go test -run '^$' -bench TracingOverhead -benchtime 1x ./internal/bench
func BenchmarkTracingOverhead(b *testing.B) {
	for _, tracing := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[tracing]
		b.Run("bus/tracing="+name, func(b *testing.B) {
			var perS, p50 float64
			for range b.N {
				b.StopTimer()
				drv := dbtest.Postgres(b)
				b.StartTimer()
				res, err := RunBus(context.Background(), drv, BusConfig{Commands: 20000, Tracing: tracing})
				if err != nil {
					b.Fatal(err)
				}
				perS += res.CommandsPerS
				p50 += res.P50Ms
			}
			b.ReportMetric(perS/float64(b.N), "commands/s")
			b.ReportMetric(p50/float64(b.N), "p50_ms")
		})
		b.Run("process/tracing="+name, func(b *testing.B) {
			var perS float64
			for range b.N {
				b.StopTimer()
				drv := dbtest.Postgres(b)
				b.StartTimer()
				res, err := RunProcess(context.Background(), drv, ProcessConfig{Processes: 2000, Tracing: tracing})
				if err != nil {
					b.Fatal(err)
				}
				perS += res.ProcessesPerS
			}
			b.ReportMetric(perS/float64(b.N), "processes/s")
		})
	}
}
