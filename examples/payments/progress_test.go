package payments_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
)

// A batch has settled only when no payment can move without an operator or a wait timeout: a
// payment whose network answer the simulator has scheduled (a slow network) keeps it unsettled
// however long nothing changes (the demo once ended after 3 quiet seconds with answers still to
// come); a payment whose answer was left to an operator, or that the network never answers,
// does not.
func TestBatchProgressWaitsForScheduledAnswers(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		submit := func(step payments.StepBehavior) uuid.UUID {
			req := domestic(payments.TypePaymentStep)
			req.Behavior = &payments.Behavior{Name: "test", Steps: map[string]payments.StepBehavior{payments.StepAwaitL1: step}}
			return f.submit(req).PaymentID
		}
		slow := submit(payments.StepBehavior{MinDurationMs: 4000, MaxDurationMs: 4000})
		f.waitWaiting(slow, "awaitL1")
		// Nothing changes for longer than the old 3-second quiet period; the batch is unsettled
		// the whole time, because the simulator has the answer scheduled.
		quietUntil := time.Now().Add(3500 * time.Millisecond)
		for time.Now().Before(quietUntil) {
			progress, err := f.p.BatchProgress(ctx, uuid.Nil)
			require.NoError(t, err)
			v, err := f.p.GetPayment(ctx, slow)
			require.NoError(t, err)
			if v.CurrentWait != "awaitL1" {
				break // the answer came a little early on a slow machine: nothing more to check
			}
			require.False(t, progress.Settled(), "settled with an answer to come: %+v", progress)
			require.Positive(t, progress.Scheduled+progress.Moving)
			time.Sleep(100 * time.Millisecond)
		}
		f.waitStatus(slow, "COMPLETED")

		operator := submit(payments.StepBehavior{PendingPct: 100})
		silent := submit(payments.StepBehavior{TimeoutPct: 100})
		f.waitWaiting(operator, "awaitL1")
		f.waitWaiting(silent, "awaitL1")
		var progress *payments.Progress
		eventually(t, 20*time.Second, "the batch to settle", func() bool {
			var err error
			progress, err = f.p.BatchProgress(ctx, uuid.Nil)
			require.NoError(t, err)
			return progress.Settled()
		})
		require.Equal(t, payments.Progress{Total: 3, Terminal: 1, AwaitingOperator: 1, AwaitingTimeout: 1}, *progress)
	})
}
