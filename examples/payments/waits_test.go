package payments_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// L4 waits 24 hours by default (DefaultPaymentWaitTimeout), not the engine's one hour.
func TestL4WaitsADayByDefault(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{DisableSimulator: true})
		ctx := context.Background()
		res := f.submit(domestic(payments.TypePaymentStep))
		for level := 1; level <= 3; level++ {
			f.waitWaiting(res.PaymentID, "awaitL"+string(rune('0'+level)))
			require.NoError(t, f.p.ReceiveNetworkResponse(ctx, payments.NetworkResponse{PaymentID: res.PaymentID, Level: level, Outcome: payments.NetworkAccepted}))
		}
		v := f.waitWaiting(res.PaymentID, "awaitL4")
		require.NotNil(t, v.WaitTimeoutAt)
		require.WithinDuration(t, f.fake.Now().Add(24*time.Hour), *v.WaitTimeoutAt, time.Minute)
	})
}

// A default wait timeout in the configuration wins over the platform's.
func TestConfiguredPaymentWaitTimeoutWins(t *testing.T) {
	t.Parallel()
	drv := dbtest.SQLite(t)
	client, err := commandbus.NewClient(drv, &commandbus.Config{Process: commandbus.ProcessConfig{Types: map[string]*commandbus.ProcessTypeConfig{
		payments.TypePaymentStep: {DefaultWaitTimeout: commandbus.Duration(2 * time.Hour)},
	}}})
	require.NoError(t, err)
	_, err = payments.New(client, payments.Options{DisableSimulator: true, CustomersPerCurrency: 1, BeneficiariesPerCurrency: 1})
	require.NoError(t, err)
	types := client.Config().Process.Types
	require.Equal(t, 2*time.Hour, types[payments.TypePaymentStep].DefaultWaitTimeout.Std())
	require.Equal(t, payments.DefaultPaymentWaitTimeout, types[payments.TypePaymentManager].DefaultWaitTimeout.Std())
}

// The stored payment status is the process's outcome: COMPLETE for a completed payment,
// COMPENSATED for a compensated one, whichever step failed (it stayed PROCESSING or ACCEPTED).
func TestStoredStatusMatchesOutcome(t *testing.T) {
	t.Parallel()
	eachProcess(t, func(t *testing.T, drv driver.Driver, typ string) {
		f := setup(t, drv, payments.Options{})
		done := f.submit(domestic(typ))
		f.waitStatus(done.PaymentID, "COMPLETED")
		// The view reads the payment row before the execution: read again now that the execution
		// has completed (its last step wrote the status before the execution ended).
		v, err := f.p.GetPayment(context.Background(), done.PaymentID)
		require.NoError(t, err)
		require.Equal(t, "COMPLETE", v.BusinessStatus)

		// A business failure of the first command step: nothing to unwind but the status.
		first := payments.StepBookRisk
		if typ != payments.TypePaymentStep {
			first = payments.StepCheckBalance
		}
		require.NoError(t, f.p.InjectFault(payments.Fault{Step: first, Class: payments.FaultBusiness, Times: 1}))
		early := f.submit(domestic(typ))
		f.waitStatus(early.PaymentID, "COMPENSATED")
		eventually(t, 20*time.Second, "the stored status to be COMPENSATED", func() bool {
			v, err := f.p.GetPayment(context.Background(), early.PaymentID)
			require.NoError(t, err)
			return v.BusinessStatus == "COMPENSATED"
		})
		f.checkInvariants()
	})
}

// An execution an operator ends without running the process — cancelled without compensations,
// or force-completed — stores the matching payment status too (it kept PROCESSING or ACCEPTED).
func TestStoredStatusMatchesOperatorEnds(t *testing.T) {
	t.Parallel()
	eachProcess(t, func(t *testing.T, drv driver.Driver, typ string) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		first := payments.StepBookRisk
		if typ != payments.TypePaymentStep {
			first = payments.StepCheckBalance
		}
		park := func() *payments.PaymentView {
			require.NoError(t, f.p.InjectFault(payments.Fault{Step: first, Class: payments.FaultPermanent, Times: 1}))
			id := f.submit(domestic(typ)).PaymentID
			f.waitStatus(id, "IN_TSQ")
			v, err := f.p.GetPayment(ctx, id)
			require.NoError(t, err)
			return v
		}
		ops := f.p.Runtime().Operations(modelOf(typ), typ)
		action := commandbus.OperatorAction{Actor: "ops:eve", Reason: "customer withdrew"}

		cancelled := park()
		require.NoError(t, ops.CancelOverride(ctx, cancelled.ExecutionID, false, action))
		v, err := f.p.GetPayment(ctx, cancelled.ID)
		require.NoError(t, err)
		require.Equal(t, "CANCELLED", v.Status)
		require.Equal(t, "CANCELLED", v.BusinessStatus)

		completed := park()
		require.NoError(t, ops.CompleteOverride(ctx, completed.ExecutionID, map[string]any{}, action))
		v, err = f.p.GetPayment(ctx, completed.ID)
		require.NoError(t, err)
		require.Equal(t, "COMPLETED", v.Status)
		require.Equal(t, "COMPLETE", v.BusinessStatus)
	})
}
