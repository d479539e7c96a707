package payments

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"

	"github.com/commandbus/commandbus/process"
)

// The process manager's steps: each is a command to a bounded context, and its name
// is the step in the step idempotency key "<execution id>:<step>".
const (
	StepNameCheckBalance  = "STEP_CHECK_BALANCE"
	StepNameCheckLimit    = "STEP_CHECK_LIMIT"
	StepNameBookFx        = "STEP_BOOK_FX"
	StepNameSubmitPayment = "STEP_SUBMIT_PAYMENT"
)

// managerProcess is the payment process manager: CheckBalance → CheckDailyLimit →
// BookFxContract (international only) → SubmitPayment, each a command to its bounded context
// whose reply advances the process; compensations release the hold and the limit and cancel
// the FX contract, in reverse order.
type managerProcess struct {
	p *Platform
}

func (managerProcess) Type() string   { return TypePaymentManager }
func (managerProcess) Domain() string { return DomainPayments }

// route is the routing decision, recorded in the execution log.
type route struct {
	FxRequired bool   `json:"fxRequired"`
	Reason     string `json:"reason"`
}

func (mp managerProcess) Execute(x *process.Execution[ManagerState]) error {
	err := mp.execute(x)
	if isBusinessFailure(err) {
		// The process ends COMPENSATED: say so in the stored status too (the compensation of
		// the first step, when there is one, writes it again once everything is unwound).
		if serr := mp.p.setPaymentStatus(x.Context(), x.State.PaymentID.String(), "COMPENSATED"); serr != nil {
			return serr
		}
	}
	return err
}

func (mp managerProcess) execute(x *process.Execution[ManagerState]) error {
	s := x.State
	decision, err := process.SideEffect(x, "route", func() (route, error) {
		if s.PaymentDetails.FxRequired() {
			return route{FxRequired: true, Reason: "international: " + s.Currency + " to " + s.CreditCurrency + " needs an FX contract"}, nil
		}
		return route{Reason: "domestic: " + s.Currency + " to " + s.CreditCurrency + ", no FX"}, nil
	})
	if err != nil {
		return err
	}
	s.FxRequired = decision.FxRequired
	opts := func(step commandbus.CommandStepConfig, compensate func(x *process.Execution[ManagerState]) error) []process.StepOption {
		o := []process.StepOption{process.MaxAttempts(3), process.RetryDelay(2 * time.Second), process.Timeout(step.Timeout.Std())}
		if compensate != nil {
			o = append(o, process.Compensate(compensate))
		}
		return o
	}

	holdStep := mp.p.commandStep(StepNameCheckBalance, DomainAccounts, CheckBalance{}.Kind())
	hold, err := process.CommandStep[ManagerState, CheckBalance, CheckBalanceResult](x, StepNameCheckBalance, holdStep.Domain, holdStep.CommandType,
		CheckBalance{PaymentID: s.PaymentID, Account: s.DebitAccount, Amount: s.Amount, Currency: s.Currency, Simulation: s.simulation(StepCheckBalance)},
		opts(holdStep, func(x *process.Execution[ManagerState]) error {
			if err := sendCompensation(x, "releaseHold", DomainAccounts, ReleaseHold{PaymentID: x.State.PaymentID, HoldID: x.State.HoldID}); err != nil {
				return err
			}
			// The first compensation registered runs last: the stored status becomes the
			// unwinding's outcome.
			return mp.p.storeUnwoundStatus(x.Context(), x.ID, x.State.PaymentID)
		})...)
	if err != nil {
		return err
	}
	s.HoldID = hold.HoldID

	limitStep := mp.p.commandStep(StepNameCheckLimit, DomainLimits, CheckDailyLimit{}.Kind())
	limit, err := process.CommandStep[ManagerState, CheckDailyLimit, CheckDailyLimitResult](x, StepNameCheckLimit, limitStep.Domain, limitStep.CommandType,
		CheckDailyLimit{PaymentID: s.PaymentID, Account: s.DebitAccount, Amount: s.Amount, Currency: s.Currency, Day: s.ValueDate,
			Simulation: s.simulation(StepCheckDailyLimit)},
		opts(limitStep, func(x *process.Execution[ManagerState]) error {
			return sendCompensation(x, "releaseDailyLimit", DomainLimits, ReleaseDailyLimit{PaymentID: x.State.PaymentID, ReservationID: x.State.ReservationID})
		})...)
	if err != nil {
		return err
	}
	s.ReservationID = limit.ReservationID

	s.CreditAmount = s.Amount
	if decision.FxRequired {
		fxStep := mp.p.commandStep(StepNameBookFx, DomainFx, BookFxContract{}.Kind())
		fx, err := process.CommandStep[ManagerState, BookFxContract, FxResult](x, StepNameBookFx, fxStep.Domain, fxStep.CommandType,
			BookFxContract{PaymentID: s.PaymentID, SellCurrency: s.Currency, BuyCurrency: s.CreditCurrency, SellAmount: s.Amount,
				ValueDate: s.ValueDate, Simulation: s.simulation(StepBookFx)},
			opts(fxStep, func(x *process.Execution[ManagerState]) error {
				return sendCompensation(x, "cancelFxContract", DomainFx, CancelFxContract{PaymentID: x.State.PaymentID, ContractID: x.State.FxContractID,
					BookingKey: x.StepKey(StepNameBookFx)})
			})...)
		if err != nil {
			return err
		}
		s.FxContractID, s.FxRate, s.CreditAmount = fx.ContractID, fx.Rate, fx.BuyAmount
	}

	submitStep := mp.p.commandStep(StepNameSubmitPayment, DomainPayments, SubmitPayment{}.Kind())
	sub, err := process.CommandStep[ManagerState, SubmitPayment, SubmitResult](x, StepNameSubmitPayment, submitStep.Domain, submitStep.CommandType,
		SubmitPayment{PaymentID: s.PaymentID, DebitAccount: s.DebitAccount, CreditAccount: s.CreditAccount,
			DebitAmount: s.Amount, DebitCurrency: s.Currency, CreditAmount: s.CreditAmount, CreditCurrency: s.CreditCurrency,
			FxContractID: s.FxContractID, ValueDate: s.ValueDate, Simulation: s.simulation(StepSubmitPayment)},
		opts(submitStep, nil)...)
	if err != nil {
		return err
	}
	s.SubmissionID, s.SubmissionRef = sub.SubmissionID, sub.Reference
	_, err = process.Step(x, stepUpdateStatusComplete, func(ctx context.Context) (bool, error) {
		return true, mp.p.setPaymentStatus(ctx, s.PaymentID.String(), "COMPLETE")
	})
	return err
}

// isBusinessFailure reports an error the process ends COMPENSATED on.
func isBusinessFailure(err error) bool {
	var business *commandbus.BusinessRuleError
	var failure *process.BusinessFailureError
	return errors.As(err, &business) || errors.As(err, &failure)
}

// storedOutcome is the payment status stored for an execution that an operator or a deadline
// ended without running the process (process.Ender).
func storedOutcome(status driver.ExecutionStatus) string {
	if status == driver.ExecutionCompleted {
		return "COMPLETE"
	}
	return string(status) // CANCELLED, FAILED
}

// End stores the outcome of a payment an operator cancelled without compensations, force-completed,
// or a FAIL deadline ended, so the stored status matches the execution (process.Ender).
func (mp managerProcess) End(x *process.Execution[ManagerState], status driver.ExecutionStatus) error {
	return mp.p.setPaymentStatus(x.Context(), x.State.PaymentID.String(), storedOutcome(status))
}

// End stores the outcome of a payment an operator cancelled without compensations, force-completed,
// or a FAIL deadline ended, so the stored status matches the execution (process.Ender).
func (sp stepProcess) End(x *process.Execution[StepState], status driver.ExecutionStatus) error {
	return sp.p.setPaymentStatus(x.Context(), x.State.PaymentID.String(), storedOutcome(status))
}

// storeUnwoundStatus sets a payment's stored status to the outcome its process's unwinding heads
// for (COMPENSATED, or CANCELLED when an operator cancelled it with compensations), as the
// execution log's last COMPENSATING entry records it.
func (p *Platform) storeUnwoundStatus(ctx context.Context, execID, paymentID uuid.UUID) error {
	final := string(driver.ExecutionCompensated)
	entries, err := p.exec.ExecutionLogList(ctx, execID)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.EntryType != "LIFECYCLE" || e.StepStatus != string(driver.ExecutionCompensating) {
			continue
		}
		var r struct {
			FinalStatus driver.ExecutionStatus `json:"finalStatus"`
		}
		if json.Unmarshal(e.Response, &r) == nil && r.FinalStatus.Terminal() {
			final = string(r.FinalStatus)
		}
	}
	return p.setPaymentStatus(ctx, paymentID.String(), final)
}
