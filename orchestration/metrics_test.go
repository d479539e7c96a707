package orchestration_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
)

// gathered returns the value of the series of name whose labels are exactly labels (a
// histogram's sample count), or 0 when there is none.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// The engine counts what its commits did: an execution run normally and one taken over from a
// runner whose lease expired both start, run their step and complete; only the second counts
// as a lease expiry.
func TestExecutionMetrics(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		reg := prometheus.NewRegistry()
		client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler), MetricsRegisterer: reg,
			Process: commandbus.ProcessConfig{PendingPollInterval: commandbus.Duration(20 * time.Millisecond)}})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		greetings, err := process.NewManager(rt, process.Process[greeting](greeter{typ: "greeting"}))
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })

		normal, err := greetings.Start(ctx, greeting{Name: "Ada"})
		require.NoError(t, err)
		// A runner that died: the execution is leased to it, and its lease is already over.
		dead := uuid.New()
		_, err = drv.Executor().ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{Executions: []*driver.ExecutionInsertParams{{
			ID: dead, Model: process.Model, Type: "greeting", Domain: "greetings", State: json.RawMessage(`{"Name":"Bob"}`),
			Lease: time.Millisecond, WorkerID: "a-dead-runner",
		}}})
		require.NoError(t, err)
		for _, id := range []uuid.UUID{normal, dead} {
			deadline := time.Now().Add(20 * time.Second)
			for {
				row, err := drv.Executor().ExecutionGet(ctx, id)
				require.NoError(t, err)
				if row.Status == driver.ExecutionCompleted {
					break
				}
				require.False(t, time.Now().After(deadline), "execution %s is %s", id, row.Status)
				time.Sleep(10 * time.Millisecond)
			}
		}

		typ := map[string]string{"model": process.Model, "type": "greeting"}
		with := func(k, v string, more ...string) map[string]string {
			out := map[string]string{k: v}
			for key, value := range typ {
				out[key] = value
			}
			for i := 0; i+1 < len(more); i += 2 {
				out[more[i]] = more[i+1]
			}
			return out
		}
		// The engine counts right after each commit returns, so the completion may be visible a
		// moment before it is counted: wait for the count, then check the rest.
		deadline := time.Now().Add(10 * time.Second)
		for gathered(t, reg, "commandbus_executions_ended_total", with("status", "COMPLETED")) < 2 {
			require.False(t, time.Now().After(deadline), "the completions were not counted")
			time.Sleep(10 * time.Millisecond)
		}
		require.Equal(t, 2.0, gathered(t, reg, "commandbus_executions_ended_total", with("status", "COMPLETED")))
		require.Equal(t, 2.0, gathered(t, reg, "commandbus_executions_started_total", typ))
		require.Equal(t, 2.0, gathered(t, reg, "commandbus_execution_duration_seconds", with("status", "COMPLETED")))
		require.Equal(t, 2.0, gathered(t, reg, "commandbus_execution_steps_total", with("step", "greet", "outcome", "succeeded")))
		require.Equal(t, 2.0, gathered(t, reg, "commandbus_execution_step_duration_seconds", with("step", "greet")))
		require.Equal(t, 1.0, gathered(t, reg, "commandbus_execution_lease_expiries_total", typ), "only the dead runner's execution")
		require.Zero(t, gathered(t, reg, "commandbus_executions_parked_total", typ))
	})
}
