package saga_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/orchestrate"
	"github.com/commandbus/commandbus/saga"
)

// A response that reaches a saga parked in the troubleshooting queue (a late reply, say) is
// kept, and the saga stays parked: it is not claimed over and over.
func TestResponseToAParkedSagaIsNotALoop(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client, rt := newRuntime(t, drv, testConfig(t, nil))
		j := &journal{}
		m, err := saga.Register(rt, saga.New("parked-response", 1).
			Step("debit", okStep(j), saga.Compensate(undo(j))).
			Step("credit", func(context.Context, *saga.StepContext) (any, error) {
				return nil, commandbus.Permanent("LEDGER_DOWN", errors.New("down"))
			}, saga.DependsOn("debit")))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, nil)
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
		require.NoError(t, orchestrate.Deliver(rt, ctx, id, "late", json.RawMessage(`{}`)))
		// Applied, the response no longer wakes it; before, every poll claimed it again.
		eventually(t, "the response to be applied", func() bool {
			inst, err := m.Get(ctx, id)
			require.NoError(t, err)
			return inst.ResponsesReceived == 1 && inst.ResponsesApplied == inst.ResponsesReceived
		})
		inst, err := m.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionWaitingForTSQ, inst.Status)

		// Likewise for an execution that ended.
		require.NoError(t, m.CompleteOverride(ctx, id, nil, operator))
		require.NoError(t, orchestrate.Deliver(rt, ctx, id, "later", json.RawMessage(`{}`)))
		eventually(t, "the late response to be applied", func() bool {
			inst, err := m.Get(ctx, id)
			require.NoError(t, err)
			return inst.ResponsesReceived == 2 && inst.ResponsesApplied == inst.ResponsesReceived
		})
		inst, err = m.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCompleted, inst.Status)
	})
}
