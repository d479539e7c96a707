package orchestration_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
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

// sinkEvents reads the lifecycle events the sink's outbox holds for execution id, in the order
// they were written.
func sinkEvents(t *testing.T, drv driver.Driver, id uuid.UUID) []orchestration.LifecycleEvent {
	t.Helper()
	rows, err := drv.Executor().OutboxList(context.Background(), &driver.OutboxListParams{Transport: outbox.TransportKafka, Limit: 1000})
	require.NoError(t, err)
	slices.Reverse(rows) // newest first
	msgs, err := outbox.Unpack(rows)
	require.NoError(t, err)
	var out []orchestration.LifecycleEvent
	for _, m := range msgs {
		if m.Key != id.String() {
			continue
		}
		var ev orchestration.LifecycleEvent
		require.NoError(t, json.Unmarshal(m.Payload, &ev))
		require.Equal(t, ev.ID.String(), m.MessageID)
		out = append(out, ev)
	}
	return out
}

// An execution that never runs still has its EXECUTION_STARTED, written with its insert (an
// idempotent insert of the same id writes none), and an operator's suspend and resume of it are
// events written with the change, in order after it.
func TestLifecycleEventsOfAnExecutionThatNeverRan(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		_, rt := kafkaEventsRuntime(t, drv) // its client is never started: nothing runs the execution
		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		m, err := workflow.Register(rt, workflow.New("idle", 1).Step("a", noop))
		require.NoError(t, err)

		id := uuid.Must(uuid.NewV7())
		got, err := m.Start(ctx, nil, workflow.WithID(id), workflow.WithBusinessKey("order-1"))
		require.NoError(t, err)
		require.Equal(t, id, got)
		again, err := m.Start(ctx, nil, workflow.WithID(id), workflow.WithBusinessKey("order-1"))
		require.NoError(t, err)
		require.Equal(t, id, again)
		evs := sinkEvents(t, drv, id)
		require.Equal(t, []string{"EXECUTION_STARTED"}, types(evs), "one start, none for the idempotent insert")
		require.Equal(t, "order-1", evs[0].BusinessKey)
		require.Equal(t, "workflow", evs[0].Model)
		require.Equal(t, "idle", evs[0].ExecutionType)
		require.Equal(t, driver.ExecutionPending, evs[0].Status)

		op := commandbus.OperatorAction{Actor: "ops:ada", Reason: "audit hold"}
		require.NoError(t, m.Suspend(ctx, id, op))
		require.NoError(t, m.Resume(ctx, id, op))
		evs = sinkEvents(t, drv, id)
		require.Equal(t, []string{"EXECUTION_STARTED", "SUSPENDED", "RESUMED"}, types(evs))
		require.Equal(t, "ops:ada", evs[1].Actor)
		require.Equal(t, driver.ExecutionSuspended, evs[1].Status)
		require.Equal(t, driver.ExecutionPending, evs[2].Status)
		require.Less(t, evs[0].Position, evs[1].Position)
		require.Less(t, evs[1].Position, evs[2].Position)
		require.NotEqual(t, evs[1].ID, evs[2].ID)
	})
}

// A suspend requested while a step runs is honoured when the runner lets go: the release stores
// SUSPENDED and writes its event, naming the operator, in the same transaction.
func TestLifecycleSuspendHonouredOnRelease(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client, rt := kafkaEventsRuntime(t, drv)
		running, release := make(chan struct{}), make(chan struct{})
		slow := func(context.Context, *workflow.StepContext) (any, error) {
			close(running)
			<-release
			return "ok", nil
		}
		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		m, err := workflow.Register(rt, workflow.New("held", 1).Step("slow", slow).Step("after", noop, workflow.DependsOn("slow")))
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })

		id, err := m.Start(ctx, nil)
		require.NoError(t, err)
		<-running
		require.NoError(t, m.Suspend(ctx, id, commandbus.OperatorAction{Actor: "ops:ada", Reason: "hold the batch"}))
		close(release)
		waitStatus(t, m, id, driver.ExecutionSuspended)
		evs := sinkEvents(t, drv, id)
		got := types(evs)
		require.Contains(t, got, "SUSPENDED", "events: %v", got)
		require.NotContains(t, got, "EXECUTION_COMPLETED")
		last := evs[len(evs)-1]
		require.Equal(t, "SUSPENDED", string(last.Type), "the suspension comes last: %v", got)
		require.Equal(t, "ops:ada", last.Actor)
		require.Equal(t, "hold the batch", last.Reason)
		require.Equal(t, driver.ExecutionSuspended, last.Status)
		for i := 1; i < len(evs); i++ {
			require.Greater(t, evs[i].Position, evs[i-1].Position, "in order: %v", got)
		}
	})
}
