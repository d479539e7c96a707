package payments_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/process"
)

// The happy path, FX included.
func TestHappyPathWithFX(t *testing.T) {
	t.Parallel()
	eachProcess(t, func(t *testing.T, drv driver.Driver, typ string) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		before := map[string]decimal.Decimal{}
		for _, id := range []string{"CUST-EUR-001", "BENE-USD-001", "FXDESK-EUR", "FXDESK-USD"} {
			before[id] = f.account(id).Balance
		}
		res := f.submit(crossCurrency(typ))
		require.False(t, res.Completed, "the first command step suspends the process")
		require.Equal(t, typ, res.ProcessType)
		v := f.waitStatus(res.PaymentID, "COMPLETED")
		require.Equal(t, res.ExecutionID, v.ExecutionID)
		require.True(t, v.Fx.Required)
		require.NotEmpty(t, v.Fx.ContractID)
		require.True(t, v.Fx.Rate.IsPositive())
		require.NotEmpty(t, v.SubmissionRef)
		require.NotNil(t, v.CompletedAt)
		credit := v.CreditAmount.Decimal()
		require.True(t, credit.Equal(decimal.RequireFromString("1000.00").Mul(v.Fx.Rate).Round(2)), "credit %s at rate %s", credit, v.Fx.Rate)
		if typ == payments.TypePaymentStep {
			require.Len(t, v.Network, 4)
			for _, l := range v.Network {
				require.True(t, l.Received)
				require.NotEmpty(t, l.Reference)
			}
			require.Equal(t, payments.RiskBooked, v.Risk.Status)
		} else {
			require.NotEmpty(t, v.HoldID)
			require.NotEmpty(t, v.ReservationID)
		}
		thousand := decimal.RequireFromString("1000")
		require.True(t, f.account("CUST-EUR-001").Balance.Equal(before["CUST-EUR-001"].Sub(thousand)))
		require.True(t, f.account("FXDESK-EUR").Balance.Equal(before["FXDESK-EUR"].Add(thousand)))
		require.True(t, f.account("FXDESK-USD").Balance.Equal(before["FXDESK-USD"].Sub(credit)))
		require.True(t, f.account("BENE-USD-001").Balance.Equal(before["BENE-USD-001"].Add(credit)))
		require.True(t, f.account("CUST-EUR-001").Held.IsZero(), "the hold settled with the submission")
		require.Equal(t, int64(1), f.p.FXAPI().Bookings())

		// Domestic: no FX.
		res = f.submit(domestic(typ))
		v = f.waitStatus(res.PaymentID, "COMPLETED")
		require.False(t, v.Fx.Required)
		require.Empty(t, v.Fx.ContractID)
		require.Equal(t, int64(1), f.p.FXAPI().Bookings())

		inst, err := f.p.Runtime().Operations(modelOf(typ), typ).GetJSON(ctx, res.ExecutionID)
		require.NoError(t, err)
		require.NotEmpty(t, inst.Log)
		f.checkInvariants()
	})
}

// A retryable failure: the submission commits but its reply is lost (the
// worker "crashes"); the redelivery finds the submission by its idempotency key and returns it:
// the money moves once and the payment still succeeds.
func TestRetryableFailureIsDeduplicated(t *testing.T) {
	t.Parallel()
	eachProcess(t, func(t *testing.T, drv driver.Driver, typ string) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		require.NoError(t, f.p.InjectFault(payments.Fault{Step: payments.StepSubmitPayment, Class: payments.FaultLostReply, Times: 1}))
		before := f.account("CUST-GBP-001").Balance
		res := f.submit(domestic(typ))
		var submit *commandbus.CommandRow
		f.retryUntil(payments.DomainPayments, "the submit command to be redelivered and complete", func() bool {
			list, err := f.client.ListCommands(ctx, &commandbus.ListParams{Domain: payments.DomainPayments, Type: "SubmitPayment", CorrelationID: res.ExecutionID})
			require.NoError(t, err)
			for _, c := range list {
				if c.Kind == driver.CommandKindCommand && c.Status == commandbus.StatusCompleted {
					submit = c
					return true
				}
			}
			return false
		})
		require.Equal(t, 2, submit.Attempt, "the first attempt's reply was lost; the redelivery answered")
		f.waitStatus(res.PaymentID, "COMPLETED")
		require.True(t, f.account("CUST-GBP-001").Balance.Equal(before.Sub(decimal.RequireFromString("250.50"))), "debited once")
		f.checkInvariants()
	})
}

// A permanent failure parks the command in the troubleshooting queue; its
// PARKED reply puts the payment in the process TSQ at once (COMMAND_PARKED, before any reply
// timeout); an operator's resubmit retries that same command (same step key, no second command)
// and the payment succeeds.
func TestPermanentFailureThenResubmit(t *testing.T) {
	t.Parallel()
	eachProcess(t, func(t *testing.T, drv driver.Driver, typ string) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		step, stepName, domain := payments.StepBookRisk, payments.StepBookRisk, payments.DomainRisk
		if typ != payments.TypePaymentStep {
			step, stepName, domain = payments.StepCheckBalance, payments.StepNameCheckBalance, payments.DomainAccounts
		}
		require.NoError(t, f.p.InjectFault(payments.Fault{Step: step, Class: payments.FaultPermanent, Times: 1}))
		res := f.submit(domestic(typ))
		eventually(t, 20*time.Second, "the command to park in the bus TSQ", func() bool {
			parked, err := f.client.TSQ().List(ctx, commandbus.TSQFilter{Domain: domain})
			require.NoError(t, err)
			return len(parked) == 1
		})
		// The clock does not move: the payment parks at once, not at its reply timeout.
		v := f.waitStatus(res.PaymentID, "IN_TSQ")
		require.Equal(t, process.CodeCommandParked, v.ErrorCode)
		require.Contains(t, v.ErrorMessage, "waiting on parked command ")
		require.Equal(t, stepName, v.Step)

		err := f.p.Resubmit(ctx, res.PaymentID, "", "")
		var verr *commandbus.ValidationError
		require.ErrorAs(t, err, &verr, "an operator action needs an actor and a reason")
		require.NoError(t, f.p.Resubmit(ctx, res.PaymentID, operator.actor, operator.reason))
		f.waitStatus(res.PaymentID, "COMPLETED")
		commands, err := f.client.ListCommands(ctx, &commandbus.ListParams{Domain: domain, CorrelationID: res.ExecutionID})
		require.NoError(t, err)
		var keys []string
		for _, c := range commands {
			if c.Headers[process.HeaderStep] == stepName {
				keys = append(keys, c.Headers[process.HeaderStepKey])
			}
		}
		require.Equal(t, []string{res.ExecutionID.String() + ":" + stepName}, keys,
			"the resubmission retries the parked command: no second command")
		audit, err := f.client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: res.ExecutionID.String()})
		require.NoError(t, err)
		require.Len(t, audit, 1)
		require.Equal(t, "TSQ_RETRY", audit[0].Action)
		require.Equal(t, operator.actor, audit[0].Actor)
		f.checkInvariants()
	})
}

// A timeout, step process: the network never sends L1; the wait-timeout policy parks
// the payment in the TSQ; an operator force-completes it with evidence.
func TestTimeoutPolicyStepProcess(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		req := domestic(payments.TypePaymentStep)
		req.Behavior = &payments.Behavior{Name: "silent network", Steps: map[string]payments.StepBehavior{payments.StepAwaitL1: {TimeoutPct: 100}}}
		res := f.submit(req)
		f.waitWaiting(res.PaymentID, "awaitL1")
		f.fake.Advance(4 * time.Minute)
		v, err := f.p.GetPayment(ctx, res.PaymentID)
		require.NoError(t, err)
		require.Equal(t, "WAITING", v.Status, "not timed out yet")
		f.fake.Advance(2 * time.Minute)
		v = f.waitStatus(res.PaymentID, "IN_TSQ")
		require.Equal(t, process.CodeWaitTimeout, v.ErrorCode)
		require.Equal(t, "awaitL1", v.CurrentWait)

		require.Error(t, f.p.ForceComplete(ctx, res.PaymentID, "", operator.actor, operator.reason), "evidence is required")
		require.NoError(t, f.p.ForceComplete(ctx, res.PaymentID, "SWIFT gpi tracker shows ACSC", operator.actor, operator.reason))
		v = f.waitStatus(res.PaymentID, "COMPLETED")
		require.Equal(t, "SWIFT gpi tracker shows ACSC", v.Evidence)
		f.checkInvariants()
	})
}

// A timeout, process manager: the limits context keeps timing out; the bus gives up and
// parks the command, the payment parks with it at once (COMMAND_PARKED), and an operator
// compensates and aborts: the hold is released.
func TestTimeoutPolicyProcessManager(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		require.NoError(t, f.p.InjectFault(payments.Fault{Step: payments.StepCheckDailyLimit, Class: payments.FaultTimeout, Times: 3}))
		res := f.submit(domestic(payments.TypePaymentManager))
		f.retryUntil(payments.DomainLimits, "the limit command to run out of attempts", func() bool {
			parked, err := f.client.TSQ().List(ctx, commandbus.TSQFilter{Domain: payments.DomainLimits})
			require.NoError(t, err)
			return len(parked) == 1 && parked[0].ErrorCode == commandbus.CodeRetriesExhausted
		})
		require.True(t, f.account("CUST-GBP-001").Held.Equal(decimal.RequireFromString("250.50")), "the hold is in place")
		v := f.waitStatus(res.PaymentID, "IN_TSQ")
		require.Equal(t, process.CodeCommandParked, v.ErrorCode, "parked at once with its command, not at the reply timeout")
		require.Equal(t, payments.StepNameCheckLimit, v.Step)

		require.NoError(t, f.p.CompensateAndAbort(ctx, res.PaymentID, operator.actor, operator.reason))
		f.waitStatus(res.PaymentID, "CANCELLED")
		eventually(t, 20*time.Second, "the hold to be released", func() bool { return f.account("CUST-GBP-001").Held.IsZero() })
		f.checkInvariants()
	})
}

// A duplicate submission is blocked by the idempotency key, at the API and at
// the payments context.
func TestDuplicateSubmissionBlocked(t *testing.T) {
	t.Parallel()
	eachProcess(t, func(t *testing.T, drv driver.Driver, typ string) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		req := domestic(typ)
		req.IdempotencyKey = "client-key-1"
		res := f.submit(req)
		_, err := f.p.SubmitPayment(ctx, req)
		var dup *payments.DuplicatePaymentError
		require.ErrorAs(t, err, &dup)
		require.ErrorIs(t, err, payments.ErrDuplicatePayment)
		require.Equal(t, res.PaymentID, dup.ExistingID)
		require.Equal(t, res.ExecutionID, dup.ExecutionID)
		v := f.waitStatus(res.PaymentID, "COMPLETED")
		list, err := f.p.ListPayments(ctx, payments.PaymentFilter{})
		require.NoError(t, err)
		require.Len(t, list, 1, "the duplicate created nothing")

		// A second SubmitPayment command for the same step (a duplicate delivery under another
		// command id) returns the first submission and moves nothing.
		balance := f.account("CUST-GBP-001").Balance
		stepKey := res.ExecutionID.String() + ":" + map[string]string{payments.TypePaymentStep: payments.StepSubmitPayment, payments.TypePaymentManager: payments.StepNameSubmitPayment,
			payments.TypePaymentSaga: payments.StepNameSubmitPayment}[typ]
		sent, err := f.client.Send(ctx, payments.DomainPayments, payments.SubmitPayment{PaymentID: res.PaymentID, DebitAccount: "CUST-GBP-001",
			CreditAccount: "BENE-GBP-002", DebitAmount: decimal.RequireFromString("250.50"), DebitCurrency: "GBP",
			CreditAmount: decimal.RequireFromString("250.50"), CreditCurrency: "GBP", ValueDate: today},
			&commandbus.SendOpts{Headers: map[string]string{process.HeaderStepKey: stepKey}})
		require.NoError(t, err)
		var cmd *commandbus.CommandRow
		eventually(t, 20*time.Second, "the duplicate command to complete", func() bool {
			cmd, err = f.client.GetCommand(ctx, sent.ID)
			require.NoError(t, err)
			return cmd.Status == commandbus.StatusCompleted
		})
		require.Contains(t, string(cmd.Result), v.SubmissionRef, "the first submission is returned")
		require.True(t, balance.Equal(f.account("CUST-GBP-001").Balance))
		f.checkInvariants()
	})
}

// FX booked, then the submission fails on a business rule: CancelFx runs (and, for the process
// manager, the hold and the limit are released); the payment ends COMPENSATED.
func TestCrossCurrencyCompensation(t *testing.T) {
	t.Parallel()
	eachProcess(t, func(t *testing.T, drv driver.Driver, typ string) {
		f := setup(t, drv, payments.Options{})
		require.NoError(t, f.p.InjectFault(payments.Fault{Step: payments.StepSubmitPayment, Class: payments.FaultBusiness, Times: 1}))
		before := f.account("CUST-EUR-001")
		res := f.submit(crossCurrency(typ))
		v := f.waitStatus(res.PaymentID, "COMPENSATED")
		require.Equal(t, "NETWORK_REJECTED", v.ErrorCode)
		require.NotEmpty(t, v.Fx.ContractID)
		eventually(t, 20*time.Second, "the FX contract to be cancelled", func() bool {
			return fxStatus(t, f, v.Fx.ContractID) == "CANCELLED"
		})
		after := f.account("CUST-EUR-001")
		require.True(t, before.Balance.Equal(after.Balance), "nothing was debited")
		eventually(t, 20*time.Second, "the hold to be released", func() bool { return f.account("CUST-EUR-001").Held.IsZero() })
		inst, err := f.p.Runtime().Operations(modelOf(typ), typ).GetJSON(context.Background(), res.ExecutionID)
		require.NoError(t, err)
		var compensations []string
		for _, e := range inst.Log {
			if e.EntryType == "COMPENSATION" {
				compensations = append(compensations, e.Name)
			}
		}
		switch typ {
		case payments.TypePaymentStep:
			// The rejected submission is recalled too (a failure reply does not prove that
			// nothing was submitted; the recall finds nothing); the first step's compensation
			// stores the outcome as the payment's status.
			require.Equal(t, []string{payments.StepSubmitPayment, payments.StepBookFx, payments.StepBookRisk, "updateStatusProcessing"}, compensations)
		case payments.TypePaymentSaga:
			// As the process manager's, then the first step's, which stores the outcome.
			require.Equal(t, []string{payments.StepNameBookFx, payments.StepNameCheckLimit, payments.StepNameCheckBalance, "updateStatusProcessing"}, compensations)
		default:
			require.Equal(t, []string{payments.StepNameBookFx, payments.StepNameCheckLimit, payments.StepNameCheckBalance}, compensations)
		}
		require.Equal(t, "COMPENSATED", f.waitStatus(res.PaymentID, "COMPENSATED").BusinessStatus, "the stored status is the outcome")
		f.checkInvariants()
		leftovers, err := f.p.LeftoverEffects(context.Background())
		require.NoError(t, err)
		require.Zero(t, leftovers)

		// The invariant sees an effect left live under the compensated payment.
		db, prefix := businessDB(t, drv)
		_, err = db.ExecContext(context.Background(), `UPDATE `+prefix+`fxsim_contract SET status = 'BOOKED' WHERE id = $1`, v.Fx.ContractID)
		require.NoError(t, err)
		leftovers, err = f.p.LeftoverEffects(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, leftovers)
		err = f.p.CheckInvariants(context.Background())
		require.ErrorContains(t, err, "is COMPENSATED but has FX contract "+v.Fx.ContractID+" booked at the simulated provider")
	})
}

func fxStatus(t *testing.T, f *fixture, contractID string) string {
	t.Helper()
	resp, err := httpGet(f.p.FXAPIURL() + "/v1/contracts/" + contractID)
	require.NoError(t, err)
	return resp["status"].(string)
}

// L1 to L4 arrive at once, in reverse order: none is lost, the payment completes.
func TestNetworkLevelsArriveAtOnce(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{DisableSimulator: true})
		ctx := context.Background()
		res := f.submit(domestic(payments.TypePaymentStep))
		f.waitWaiting(res.PaymentID, "awaitL1")
		var wg sync.WaitGroup
		ready := make(chan struct{})
		for level := 4; level >= 1; level-- {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ready
				require.NoError(t, f.p.ReceiveNetworkResponse(ctx, payments.NetworkResponse{PaymentID: res.PaymentID, Level: level, Outcome: payments.NetworkAccepted}))
			}()
		}
		close(ready)
		wg.Wait()
		v := f.waitStatus(res.PaymentID, "COMPLETED")
		for _, l := range v.Network {
			require.True(t, l.Received, "L%d", l.Level)
		}
		f.checkInvariants()
	})
}

// An L4 confirmation that arrives after the payment completed updates its state without
// replaying anything (LATE_ASYNC_RESPONSE).
func TestL4AfterCompletion(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		res := f.submit(domestic(payments.TypePaymentStep))
		f.waitStatus(res.PaymentID, "COMPLETED")
		require.NoError(t, f.p.ReceiveNetworkResponse(ctx, payments.NetworkResponse{PaymentID: res.PaymentID, Level: 4,
			Outcome: payments.NetworkAccepted, Reference: "L4-LATE"}))
		eventually(t, 20*time.Second, "the late L4 to be recorded", func() bool {
			v, err := f.p.GetPayment(ctx, res.PaymentID)
			require.NoError(t, err)
			return v.Network[3].Reference == "L4-LATE"
		})
		v := f.waitStatus(res.PaymentID, "COMPLETED")
		require.Equal(t, "COMPLETED", v.ExecutionStatus)
		inst, err := f.p.StepManager().Get(ctx, res.ExecutionID)
		require.NoError(t, err)
		last := inst.Log[len(inst.Log)-1]
		require.Equal(t, "ASYNC_RESPONSE", last.EntryType)
		require.Equal(t, "LATE_ASYNC_RESPONSE", last.StepStatus)
		f.checkInvariants()
	})
}

// The payment misses its cutoff while waiting for L3: the deadline compensates everything it
// did, in reverse: the submission is recalled, the FX contract cancelled, the risk unwound.
func TestCompensationAtDeadline(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{DisableSimulator: true})
		ctx := context.Background()
		req := crossCurrency(payments.TypePaymentStep)
		cutoff := testStart.Add(time.Hour)
		req.Cutoff = &cutoff
		before := f.account("CUST-EUR-001").Balance
		res := f.submit(req)
		f.waitWaiting(res.PaymentID, "awaitL1")
		for level := 1; level <= 2; level++ {
			require.NoError(t, f.p.ReceiveNetworkResponse(ctx, payments.NetworkResponse{PaymentID: res.PaymentID, Level: level, Outcome: payments.NetworkAccepted}))
		}
		f.waitWaiting(res.PaymentID, "awaitL3")
		require.False(t, f.account("CUST-EUR-001").Balance.Equal(before), "submitted: the money moved")
		f.fake.Advance(61 * time.Minute)
		v := f.waitStatus(res.PaymentID, "COMPENSATED")
		require.Equal(t, process.CodeDeadlineExceeded, v.ErrorCode)
		eventually(t, 20*time.Second, "the recall to restore the balance", func() bool { return f.account("CUST-EUR-001").Balance.Equal(before) })
		eventually(t, 20*time.Second, "the FX contract to be cancelled", func() bool { return fxStatus(t, f, v.Fx.ContractID) == "CANCELLED" })
		f.checkInvariants()
	})
}

// Above the threshold the step process waits for a manual approval; an operator approves one
// payment and rejects another, which compensates.
func TestManualRiskApproval(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{DisableSimulator: true})
		ctx := context.Background()
		big := payments.PaymentRequest{DebitAccount: "CUST-USD-001", CreditAccount: "BENE-USD-001", Amount: "75000", Currency: "USD"}
		approved := f.submit(big)
		rejected := f.submit(big)
		f.waitWaiting(approved.PaymentID, payments.StepAwaitRiskApproval)
		f.waitWaiting(rejected.PaymentID, payments.StepAwaitRiskApproval)
		list, err := f.p.ListApprovals(ctx, payments.ApprovalFilter{})
		require.NoError(t, err)
		require.Len(t, list, 2)
		byPayment := map[uuid.UUID]*payments.Approval{}
		for _, a := range list {
			byPayment[a.PaymentID] = a
		}
		require.Error(t, f.p.Approve(ctx, byPayment[approved.PaymentID].ID, "", "looks fine"))
		require.NoError(t, f.p.Approve(ctx, byPayment[approved.PaymentID].ID, operator.actor, "customer called"))
		require.NoError(t, f.p.Reject(ctx, byPayment[rejected.PaymentID].ID, operator.actor, "sanctions hit"))
		require.ErrorIs(t, f.p.Reject(ctx, byPayment[rejected.PaymentID].ID, operator.actor, "again"), commandbus.ErrInvalidState)
		f.waitWaiting(approved.PaymentID, "awaitL1")
		v := f.waitStatus(rejected.PaymentID, "COMPENSATED")
		require.Equal(t, "RISK_DECLINED", v.ErrorCode)
		require.True(t, v.Risk.Declined)
		audit, err := f.client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "approval"})
		require.NoError(t, err)
		require.Len(t, audit, 2)
		list, err = f.p.ListApprovals(ctx, payments.ApprovalFilter{})
		require.NoError(t, err)
		require.Empty(t, list)
		f.checkInvariants()
	})
}

// A confirmation the network leaves pending waits for an operator, who accepts it.
func TestPendingNetworkResponse(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		req := domestic(payments.TypePaymentStep)
		req.Behavior = &payments.Behavior{Steps: map[string]payments.StepBehavior{payments.StepAwaitL2: {PendingPct: 100}}}
		res := f.submit(req)
		var pending []*payments.PendingNetworkResponse
		eventually(t, 20*time.Second, "L2 to be pending", func() bool {
			var err error
			pending, err = f.p.ListPendingNetworkResponses(ctx, payments.ListParams{})
			require.NoError(t, err)
			return len(pending) == 1
		})
		require.Equal(t, 2, pending[0].Level)
		require.Equal(t, res.PaymentID, pending[0].PaymentID)
		require.Error(t, f.p.RespondNetwork(ctx, pending[0].ID, "MAYBE", operator.actor, operator.reason))
		require.NoError(t, f.p.RespondNetwork(ctx, pending[0].ID, payments.AnswerAccept, operator.actor, operator.reason))
		f.waitStatus(res.PaymentID, "COMPLETED")
		pending, err := f.p.ListPendingNetworkResponses(ctx, payments.ListParams{})
		require.NoError(t, err)
		require.Empty(t, pending)
		f.checkInvariants()
	})
}

// The process manager's "skip": an operator books the FX contract by phone and skips the step.
func TestSkipStep(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		require.NoError(t, f.p.InjectFault(payments.Fault{Step: payments.StepBookFx, Class: payments.FaultPermanent, Times: 1}))
		res := f.submit(crossCurrency(payments.TypePaymentManager))
		eventually(t, 20*time.Second, "BookFxContract to park", func() bool {
			parked, err := f.client.TSQ().List(ctx, commandbus.TSQFilter{Domain: payments.DomainFx})
			require.NoError(t, err)
			return len(parked) == 1
		})
		f.advancePastReplyTimeout()
		f.waitStatus(res.PaymentID, "IN_TSQ")
		require.NoError(t, f.p.SkipStep(ctx, res.PaymentID, payments.StepNameBookFx,
			[]byte(`{"contractId":"PHONE-1","rate":"1.08","buyAmount":"1080.00","buyCurrency":"USD"}`), operator.actor, "booked by phone"))
		v := f.waitStatus(res.PaymentID, "COMPLETED")
		require.Equal(t, "PHONE-1", v.Fx.ContractID)
		require.True(t, v.CreditAmount.Decimal().Equal(decimal.RequireFromString("1080")))
		f.checkInvariants()
	})
}

// Bad input gets every problem at once and changes nothing.
func TestSubmitPaymentValidation(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{DisableSimulator: true})
		ctx := context.Background()
		_, err := f.p.SubmitPayment(ctx, payments.PaymentRequest{DebitAccount: "NOPE", CreditAccount: "BENE-USD-001",
			Amount: "-5", Currency: "XYZ", ValueDate: "2020-01-01", ProcessType: "Other"})
		require.Error(t, err)
		fields := map[string]bool{}
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var verr *commandbus.ValidationError
			if errors.As(e, &verr) {
				fields[verr.Field] = true
			}
		}
		for _, field := range []string{"idempotencyKey", "currency", "amount", "debitAccount", "valueDate", "processType"} {
			require.True(t, fields[field], "missing a problem with %s in %v", field, err)
		}
		_, err = f.p.SubmitPayment(ctx, payments.PaymentRequest{IdempotencyKey: "k", DebitAccount: "CUST-JPY-001", CreditAccount: "BENE-USD-001",
			Amount: "10.5", Currency: "JPY"})
		require.ErrorContains(t, err, "at most 0 decimal places")
		require.ErrorContains(t, err, "is in USD, not JPY")
		list, err := f.p.ListPayments(ctx, payments.PaymentFilter{})
		require.NoError(t, err)
		require.Empty(t, list)
		f.checkInvariants()
	})
}

// A batch: the day's scheduled payments run as one batch; its counts come from the
// executions; both processes.
func TestBatchRun(t *testing.T) {
	t.Parallel()
	eachProcess(t, func(t *testing.T, drv driver.Driver, typ string) {
		f := setup(t, drv, payments.Options{})
		ctx := context.Background()
		_, err := f.p.RunScheduledPaymentsForDay(ctx, today, typ, nil)
		require.Error(t, err, "nothing is scheduled yet")
		ids, err := f.p.SchedulePayments(ctx, []payments.PaymentRequest{
			{IdempotencyKey: "s1", DebitAccount: "CUST-USD-001", CreditAccount: "BENE-USD-002", Amount: "10", Currency: "USD"},
			{IdempotencyKey: "s2", DebitAccount: "CUST-CHF-001", CreditAccount: "BENE-JPY-001", Amount: "99.95", Currency: "CHF", CreditCurrency: "JPY"},
		})
		require.NoError(t, err)
		v, err := f.p.GetPayment(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, "SCHEDULED", v.Status)
		f.checkInvariants()

		batch, err := f.p.RunScheduledPaymentsForDay(ctx, today, typ, nil)
		require.NoError(t, err)
		require.Equal(t, 2, batch.Total)
		generated, err := f.p.CreateBatch(ctx, 25, today, typ, &payments.Behavior{Name: payments.PresetHappy})
		require.NoError(t, err)
		require.Equal(t, 25, generated.Total)
		require.Contains(t, []string{payments.BatchNew, payments.BatchRunning, payments.BatchSucceeded}, generated.Status)
		// Big payments wait for approval in the step process; the simulator approves them.
		for _, id := range []uuid.UUID{batch.ID, generated.ID} {
			eventually(t, 60*time.Second, "the batch to succeed", func() bool {
				b, err := f.p.GetBatch(ctx, id)
				require.NoError(t, err)
				return b.Status == payments.BatchSucceeded
			})
		}
		sum, err := f.p.Summary(ctx, generated.ID)
		require.NoError(t, err)
		require.Equal(t, 25, sum.Total)
		require.Equal(t, 25, sum.Completed)
		require.Zero(t, sum.DuplicateSubmissions)
		require.Positive(t, sum.LatencyP99Ms+1)
		list, err := f.p.ListPayments(ctx, payments.PaymentFilter{BatchID: generated.ID, Limit: 100})
		require.NoError(t, err)
		require.Len(t, list, 25)
		completed, err := f.p.ListPayments(ctx, payments.PaymentFilter{Status: "COMPLETED", Limit: 100})
		require.NoError(t, err)
		require.Len(t, completed, 27)
		batches, err := f.p.ListBatches(ctx, payments.ListParams{})
		require.NoError(t, err)
		require.Len(t, batches, 2)
		f.checkInvariants()
	})
}
