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

// A risk officer the simulator rolls as "transient" is busy, then approves: the roll is
// deterministic per approval, so retrying it drew the same answer forever, and the payment
// (and the demo, waiting for it to settle) never moved again.
func TestTransientApprovalIsDecided(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		req := payments.PaymentRequest{DebitAccount: "CUST-USD-001", CreditAccount: "BENE-USD-001", Amount: "75000", Currency: "USD",
			ProcessType: payments.TypePaymentStep,
			Behavior:    &payments.Behavior{Name: "busy officer", Steps: map[string]payments.StepBehavior{payments.StepAwaitRiskApproval: {FailTransientPct: 100}}}}
		id := f.submit(req).PaymentID
		v := f.waitStatus(id, "COMPLETED")
		require.True(t, v.Risk.Approved, "the officer approved after being busy")
		// The process can end a moment before the completion of its last command is written (the
		// outcomes are written in batches): the batch settles once that is done too.
		var progress *payments.Progress
		require.Eventually(t, func() bool {
			var err error
			progress, err = f.p.BatchProgress(ctx, uuid.Nil)
			require.NoError(t, err)
			return progress.Settled()
		}, 10*time.Second, 10*time.Millisecond, "the batch settles: %+v", progress)
		require.Equal(t, 1, progress.Terminal)
	})
}

// A compensated payment has settled only once the compensations it sent have run: the demo read
// the leftover effects of a batch whose CancelFx was still to run, and reported a booked contract
// under a COMPENSATED payment.
func TestBatchProgressWaitsForCompensations(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		release := make(chan struct{})
		f := setupWith(t, drv, payments.Options{}, func(p *payments.Platform) {
			payments.SetBeforeFxCancel(p, func(ctx context.Context) {
				select {
				case <-release:
				case <-ctx.Done():
				}
			})
		})
		ctx := context.Background()
		require.NoError(t, f.p.InjectFault(payments.Fault{Step: payments.StepSubmitPayment, Class: payments.FaultBusiness, Times: 1}))
		id := f.submit(crossCurrency(payments.TypePaymentStep)).PaymentID
		f.waitStatus(id, "COMPENSATED")
		progress, err := f.p.BatchProgress(ctx, uuid.Nil)
		require.NoError(t, err)
		require.False(t, progress.Settled(), "settled with its FX contract still to cancel: %+v", progress)
		require.Equal(t, 1, progress.Unwinding)
		leftovers, err := f.p.LeftoverEffects(ctx)
		require.NoError(t, err)
		require.Positive(t, leftovers, "the contract is booked until CancelFx runs")

		close(release)
		eventually(t, 20*time.Second, "the batch to settle", func() bool {
			progress, err = f.p.BatchProgress(ctx, uuid.Nil)
			require.NoError(t, err)
			return progress.Settled()
		})
		require.Zero(t, progress.Unwinding)
		leftovers, err = f.p.LeftoverEffects(ctx)
		require.NoError(t, err)
		require.Zero(t, leftovers, "settled: nothing left booked")
	})
}
