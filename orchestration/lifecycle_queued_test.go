package orchestration_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tenant"
	"github.com/commandbus/commandbus/workflow"
)

// An operator's cancel of a QUEUED execution is an EXECUTION_COMPLETED event (status CANCELLED,
// with the operator), written with the cancellation.
func TestLifecycleQueuedCancel(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := fastClient(t, drv)
		rt, err := orchestration.New(client, orchestration.Config{Admission: orchestration.AdmissionConfig{CapacityLimited: []string{"job"}}})
		require.NoError(t, err)
		rec := newRecorder()
		require.NoError(t, rt.OnLifecycle(rec.listen))
		m, err := workflow.Register(rt, workflow.New("job", 1).WaitSignal("wait", "go"))
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })
		_, err = tenant.New(client).Create(ctx, tenant.CreateRequest{ID: "acme", Tier: tenant.TierFree, Actor: "test"})
		require.NoError(t, err)

		first, err := m.Start(ctx, nil, workflow.WithTenant("acme"))
		require.NoError(t, err)
		queued, err := m.Start(ctx, nil, workflow.WithTenant("acme"))
		require.NoError(t, err)
		waitStatus(t, m, first, driver.ExecutionWaitingForAsync)
		require.NoError(t, m.CancelOverride(ctx, queued, false, commandbus.OperatorAction{Actor: "ops:ada", Reason: "withdrawn"}))
		waitFor(t, "the cancel's event", func() bool {
			for _, ev := range rec.of(queued) {
				if ev.Type == "EXECUTION_COMPLETED" {
					return true
				}
			}
			return false
		})
		for _, ev := range rec.of(queued) {
			if ev.Type == "EXECUTION_COMPLETED" {
				require.Equal(t, driver.ExecutionCancelled, ev.Status)
				require.Equal(t, "ops:ada", ev.Actor)
				require.Equal(t, "withdrawn", ev.Reason)
				require.False(t, ev.Success)
			}
		}
	})
}
