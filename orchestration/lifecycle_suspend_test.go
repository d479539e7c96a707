package orchestration_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

// An operator's suspend and resume, and a delivered signal, are lifecycle events too.
func TestLifecycleSuspendResumeAndSignal(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := fastClient(t, drv)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		rec := newRecorder()
		require.NoError(t, rt.OnLifecycle(rec.listen))
		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		m, err := workflow.Register(rt, workflow.New("gated", 1).Step("prepare", noop).
			WaitSignal("approve", "approved", workflow.DependsOn("prepare")).Step("done", noop, workflow.DependsOn("approve")))
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })

		id, err := m.Start(ctx, nil, workflow.Immediate())
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionWaitingForAsync)
		op := commandbus.OperatorAction{Actor: "ops:ada", Reason: "audit hold"}
		require.NoError(t, m.Suspend(ctx, id, op))
		require.NoError(t, m.Resume(ctx, id, op))
		_, err = m.Signal(ctx, id, "approved", map[string]string{"by": "ops:ada"}, "")
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionCompleted)
		waitFor(t, "the completion event", func() bool {
			evs := rec.of(id)
			return len(evs) > 0 && evs[len(evs)-1].Type == "EXECUTION_COMPLETED"
		})
		got := types(rec.of(id))
		for _, want := range []string{"SUSPENDED", "RESUMED", "EXECUTION_COMPLETED"} {
			require.Contains(t, got, want, "events: %v", got)
		}
		require.Less(t, slices.Index(got, "SUSPENDED"), slices.Index(got, "RESUMED"), "events: %v", got)
		signalled := false
		for _, ev := range rec.of(id) {
			if ev.Type == "SIGNAL_DELIVERED" || ev.Type == "STEP_SUCCEEDED" && ev.StepID == "approve" {
				signalled = true
			}
			if ev.Type == "SUSPENDED" {
				require.Equal(t, "ops:ada", ev.Actor)
			}
		}
		require.True(t, signalled, "the signal shows in the events: %v", got)
		t.Logf("events: %v", got)
	})
}
