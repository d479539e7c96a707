package payments_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
)

// GetPaymentStatus reports a payment process's status, risk approval and network levels as
// stored, addressed by the process id.
func TestGetPaymentStatus(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		req := domestic(payments.TypePaymentStep)
		req.Behavior = &payments.Behavior{Name: "pending L3", Steps: map[string]payments.StepBehavior{payments.StepAwaitL3: {PendingPct: 100}}}
		step := f.submit(req)
		var got *payments.PaymentStatus
		// L2 is recorded by a step; the execution then opens its wait for L3 and lets go.
		eventually(t, 20*time.Second, "L2 to arrive and the process to wait for L3", func() bool {
			var err error
			got, err = f.p.GetPaymentStatus(ctx, step.ExecutionID)
			require.NoError(t, err)
			return got.L2Received && got.Status == string(driver.ExecutionWaitingForAsync)
		})
		require.Equal(t, step.PaymentID, got.PaymentID)
		require.Equal(t, payments.TypePaymentStep, got.ProcessType)
		require.True(t, got.L1Received)
		require.False(t, got.L3Received, "L3 waits for an operator")
		require.False(t, got.L4Received)
		require.Equal(t, string(driver.ExecutionWaitingForAsync), got.Status)

		manager := f.submit(domestic(payments.TypePaymentManager))
		f.waitStatus(manager.PaymentID, "COMPLETED")
		got, err := f.p.GetPaymentStatus(ctx, manager.ExecutionID)
		require.NoError(t, err)
		require.Equal(t, string(driver.ExecutionCompleted), got.Status)
		require.False(t, got.L1Received, "the process manager has no network levels")

		for _, id := range []uuid.UUID{uuid.New(), manager.PaymentID} {
			_, err = f.p.GetPaymentStatus(ctx, id)
			require.ErrorIs(t, err, commandbus.ErrNotFound)
			require.ErrorContains(t, err, id.String())
		}
	})
}
