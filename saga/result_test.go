package saga_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/saga"
	"github.com/commandbus/commandbus/server"
)

// The saga's result reaches the REST API through the runtime's generic execution JSON.
func TestResultOverREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client, rt := newRuntime(t, drv, testConfig(t, clock.NewFake(testStart)))
		j := &journal{}
		m, err := saga.Register(rt, chain("rest", j, nil))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, map[string]int{"amount": 100})
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionCompensated)

		ops := rt.Operations(saga.Model, "rest")
		require.NotNil(t, ops, "registered under model saga")
		require.Equal(t, saga.Model, orchestration.Describe(ops).Model)

		srv, err := server.New(server.Config{Client: client, Runtime: rt,
			Tokens: []server.Token{{Subject: "viewer", Token: "viewer-token-for-saga-tests", Role: "viewer"}}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Close() })
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		req, err := http.NewRequest("GET", hs.URL+"/api/executions/"+id.String(), nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer viewer-token-for-saga-tests")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var got struct {
			Model  string      `json:"model"`
			Status string      `json:"status"`
			Result saga.Result `json:"result"`
		}
		require.NoError(t, json.Unmarshal(body, &got), string(body))
		require.Equal(t, "saga", got.Model)
		require.Equal(t, "COMPENSATED", got.Status)
		require.Equal(t, []string{"c", "b", "a"}, got.Result.CompensatedSteps)
		require.Equal(t, "d", got.Result.FirstErrorStep)
		require.Equal(t, saga.StepFailed, got.Result.Steps["d"].Status)
		require.True(t, got.Result.Steps["a"].Compensated)
	})
}

// The compensation phase is told to the client's execution observer: COMPENSATION_STARTED, then
// each step's compensation, then the end.
func TestLifecycleEntriesReachTheObserver(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		var mu sync.Mutex
		var seen []string
		var final []driver.ExecutionStatus
		cfg := testConfig(t, clock.NewFake(testStart))
		cfg.ExecutionObserver = func(c commandbus.ExecutionCommit) {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range c.Log {
				seen = append(seen, e.EntryType+" "+e.Name+" "+e.StepStatus)
			}
			if c.Execution.Status.Terminal() {
				final = append(final, c.Execution.Status)
			}
		}
		client, rt := newRuntime(t, drv, cfg)
		j := &journal{}
		m, err := saga.Register(rt, chain("observed", j, nil))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, nil)
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionCompensated)
		eventually(t, "the end observed", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(final) == 1
		})
		mu.Lock()
		defer mu.Unlock()
		var phase []string
		for _, s := range seen {
			if s == "LIFECYCLE COMPENSATION_STARTED COMPENSATING" || len(s) > 12 && s[:12] == "COMPENSATION" {
				phase = append(phase, s)
			}
		}
		require.Equal(t, []string{
			"LIFECYCLE COMPENSATION_STARTED COMPENSATING",
			"COMPENSATION c COMPLETED", "COMPENSATION b COMPLETED", "COMPENSATION a COMPLETED",
		}, phase)
		require.Contains(t, seen, "STEP d FAILED")
		require.Equal(t, []driver.ExecutionStatus{driver.ExecutionCompensated}, final)
	})
}

// A runner stops (its instance dies) while a compensation runs: another instance takes the saga
// over once the lease runs out and finishes the compensation phase. The compensations recorded
// before are not run again; the one in flight runs again (its attempt was never recorded).
func TestRunnerKilledDuringCompensation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		j := &journal{}
		frozen, entered := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(frozen) })
		var once sync.Once
		undoFreezing := func(ctx context.Context, sc *saga.StepContext) error {
			if j.add("undo:"+sc.Step) == 1 && sc.Step == "b" {
				once.Do(func() { close(entered) })
				<-frozen // the first runner's compensation of b never returns: its instance is gone
			}
			return nil
		}
		newInstance := func() (*commandbus.Client, *saga.Manager) {
			client, err := commandbus.NewClient(drv, &commandbus.Config{
				Logger: slog.New(slog.DiscardHandler),
				Process: commandbus.ProcessConfig{PendingPollInterval: commandbus.Duration(20 * time.Millisecond),
					RetryPollInterval: commandbus.Duration(20 * time.Millisecond), ExecutionLease: commandbus.Duration(time.Second)},
			})
			require.NoError(t, err)
			rt, err := orchestration.New(client, orchestration.Config{})
			require.NoError(t, err)
			m, err := saga.Register(rt, chain("killed", j, map[string][]saga.StepOption{
				"a": {saga.Compensate(undoFreezing)}, "b": {saga.Compensate(undoFreezing)}, "c": {saga.Compensate(undoFreezing)},
			}))
			require.NoError(t, err)
			return client, m
		}
		first, m1 := newInstance()
		require.NoError(t, first.Start(ctx))
		id, err := m1.Start(ctx, nil)
		require.NoError(t, err)
		<-entered
		eventually(t, "c's compensation recorded", func() bool {
			r, err := m1.Result(ctx, id)
			require.NoError(t, err)
			return r.Steps["c"].Compensated
		})
		stopCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_ = first.Stop(stopCtx) // its run is cut off mid-compensation; its lease is left to run out
		cancel()

		second, m2 := newInstance()
		start(t, second)
		r := waitStatus(t, m2, id, driver.ExecutionCompensated)
		require.Equal(t, 1, j.n("undo:c"), "c's compensation was recorded before the kill and is not run again")
		require.Equal(t, 2, j.n("undo:b"), "the compensation in flight at the kill runs again")
		require.Equal(t, 1, j.n("undo:a"))
		require.Equal(t, []string{"c", "b", "a"}, r.CompensatedSteps)
		inst, err := m2.Get(ctx, id)
		require.NoError(t, err)
		recorded := map[string]int{}
		for _, e := range inst.Log {
			if e.EntryType == "COMPENSATION" {
				recorded[e.Name]++
			}
		}
		require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1}, recorded, "each compensation recorded once")
	})
}

// The runtime's lifecycle listeners get the compensation phase as events: COMPENSATION_STARTED,
// one STEP_COMPENSATED per step in the order they ran (one STEP_COMPENSATION_FAILED for a failed
// one), and the end.
func TestCompensationLifecycleEvents(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client, rt := newRuntime(t, drv, testConfig(t, clock.NewFake(testStart)))
		var mu sync.Mutex
		var got []string
		require.NoError(t, rt.OnLifecycle(func(_ context.Context, ev orchestration.LifecycleEvent) error {
			mu.Lock()
			defer mu.Unlock()
			switch ev.Type {
			case orchestration.LifecycleEventType("COMPENSATION_STARTED"), "STEP_COMPENSATED", "STEP_COMPENSATION_FAILED", "EXECUTION_COMPLETED":
				got = append(got, string(ev.Type)+" "+ev.StepID)
			}
			return nil
		}))
		j := &journal{}
		m, err := saga.Register(rt, chain("evented", j, nil))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, nil)
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionCompensated)
		want := []string{"COMPENSATION_STARTED COMPENSATION_STARTED", "STEP_COMPENSATED c", "STEP_COMPENSATED b", "STEP_COMPENSATED a", "EXECUTION_COMPLETED "}
		eventually(t, "the compensation's events", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= len(want)
		})
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, want, got)
	})
}
