package execution

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// percentile returns the p-th percentile (0..1) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// BenchmarkTimers schedules 10,000 durable timers due within one second and measures how late
// the runners see them due (p50, p99 and max lateness); no timer may be seen due twice once it is
// marked fired. The sub-benchmarks spread the timers over fewer or more executions: with one timer
// per execution every timer costs a run of its own, while an execution with many timers fires
// all those due in one run.
func BenchmarkTimers(b *testing.B) {
	for _, executions := range []int{100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("executions=%d", executions), func(b *testing.B) { benchmarkTimers(b, executions) })
	}
}

func benchmarkTimers(b *testing.B, executions int) {
	const (
		timers = 10_000
		window = time.Second
	)
	timersPerExecution := timers / executions
	drv := dbtest.Postgres(b)
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		var (
			mu       sync.Mutex
			lateness []time.Duration
			seen     = map[string]int{}
			twice    int
			all      = make(chan struct{})
		)
		runner := &funcRunner{typ: "Timers", run: func(ctx context.Context, lease *Lease) error {
			due, err := lease.DueTimers(ctx)
			if err != nil {
				return err
			}
			now := time.Now()
			cp := lease.Base()
			cp.Release = true
			mu.Lock()
			for _, t := range due {
				key := lease.Row.ID.String() + "/" + t.TimerID
				seen[key]++
				if seen[key] > 1 {
					twice++
				}
				lateness = append(lateness, now.Sub(t.FireAt))
				cp.FireTimers = append(cp.FireTimers, t.TimerID)
			}
			if len(lateness) == timers {
				close(all)
			}
			mu.Unlock()
			return lease.Checkpoint(ctx, cp)
		}}
		e := New(Config{Exec: drv.Executor(), WorkerID: "bench", Lease: 30 * time.Second, Concurrency: 1000,
			PendingPollInterval: time.Second, RetryPollInterval: time.Hour, TimeoutCheckInterval: time.Hour,
			DeadlineCheckInterval: time.Hour})
		require.NoError(b, e.Register(runner))

		// Create the executions leased to this engine and schedule their timers.
		params := make([]*driver.ExecutionInsertParams, executions)
		for i := range params {
			params[i] = &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7()), Model: "workflow", Type: "Timers",
				Domain: "bench", State: json.RawMessage(`{}`), Lease: 30 * time.Second, WorkerID: "bench"}
		}
		leases, err := e.Insert(ctx, params)
		require.NoError(b, err)
		start := time.Now().Add(2 * time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, executions)
		for i, lease := range leases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cp := lease.Base()
				cp.Status, cp.Release = driver.ExecutionWaitingForAsync, true
				for j := range timersPerExecution {
					at := start.Add(window * time.Duration(j*executions+i) / timers)
					cp.Timers = append(cp.Timers, &driver.TimerParams{ID: fmt.Sprintf("t%d", j), FireAt: &at})
				}
				if err := lease.Checkpoint(ctx, cp); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(b, err)
		}
		require.True(b, time.Now().Before(start), "scheduling took longer than the lead time")
		b.StartTimer()
		require.NoError(b, e.Start(ctx))
		select {
		case <-all:
		case <-time.After(time.Minute):
			b.Fatalf("only %d of %d timers fired", len(lateness), timers)
		}
		b.StopTimer()
		// Anything still running may only find nothing due.
		require.NoError(b, e.Stop(ctx))
		mu.Lock()
		slices.Sort(lateness)
		require.Zero(b, twice, "timers seen due twice")
		require.Len(b, lateness, timers)
		b.ReportMetric(float64(percentile(lateness, 0.5).Microseconds())/1000, "p50-late-ms")
		b.ReportMetric(float64(percentile(lateness, 0.99).Microseconds())/1000, "p99-late-ms")
		b.ReportMetric(float64(lateness[len(lateness)-1].Microseconds())/1000, "max-late-ms")
		mu.Unlock()
	}
}

// BenchmarkSignalResume measures the time from sending a signal to an execution that waits for
// it to its runner seeing the signal (p50 and p99), one signal at a time.
func BenchmarkSignalResume(b *testing.B) {
	drv := dbtest.Postgres(b)
	ctx := context.Background()
	type seen struct {
		at time.Time
		id string
	}
	resumed, waiting := make(chan seen, 1), make(chan struct{}, 1)
	runner := &funcRunner{typ: "Resume", run: func(ctx context.Context, lease *Lease) error {
		signals, err := lease.Signals(ctx)
		if err != nil {
			return err
		}
		cp := lease.Base()
		cp.Status, cp.Release = driver.ExecutionWaitingForAsync, true
		cp.OpenWaits = []*driver.WaitParams{{ID: "go", Kind: driver.WaitSignal, Name: "go"}}
		for _, s := range signals {
			resumed <- seen{time.Now(), s.SignalID}
			cp.ConsumeSignals = append(cp.ConsumeSignals, s.SignalID)
		}
		if err := lease.Checkpoint(ctx, cp); err != nil {
			return err
		}
		waiting <- struct{}{}
		return nil
	}}
	e := New(Config{Exec: drv.Executor(), WorkerID: "bench", Lease: 30 * time.Second,
		PendingPollInterval: time.Second, RetryPollInterval: time.Hour, TimeoutCheckInterval: time.Hour,
		DeadlineCheckInterval: time.Hour})
	require.NoError(b, e.Register(runner))
	require.NoError(b, e.Start(ctx))
	b.Cleanup(func() { _ = e.Stop(context.Background()) })
	id := uuid.Must(uuid.NewV7())
	_, err := e.Insert(ctx, []*driver.ExecutionInsertParams{{ID: id, Model: "workflow", Type: "Resume", Domain: "bench", State: json.RawMessage(`{}`)}})
	require.NoError(b, err)
	e.wakeups.poke()
	<-waiting

	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		signalID := fmt.Sprintf("s%d", i)
		sent := time.Now()
		_, err := e.SendSignal(ctx, &driver.ExecutionSignalSendParams{ExecutionID: id, SignalID: signalID, Name: "go"})
		require.NoError(b, err)
		got := <-resumed
		require.Equal(b, signalID, got.id)
		latencies = append(latencies, got.at.Sub(sent))
		<-waiting
	}
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(percentile(latencies, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(latencies, 0.99).Microseconds())/1000, "p99-ms")
}
