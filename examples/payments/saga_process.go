package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/saga"
)

// TypePaymentSaga is the payment saga's type (persisted).
const TypePaymentSaga = "PaymentSaga"

// The payment saga's steps beyond the process manager's command steps (whose names it shares,
// so the command-steps configuration applies to both).
const (
	sagaStepProcessing = "updateStatusProcessing"
	sagaStepComplete   = "updateStatusComplete"
)

// sagaDefinition is the payment as a saga on the saga engine: the process manager's steps
// (balance hold, daily limit, FX contract for an international payment, submission) as a DAG of
// command steps, each compensated by its releasing command, strict sequential. The first step
// marks the payment PROCESSING; its compensation, which runs last, stores the unwinding's
// outcome. The saga's input is the payment's ManagerState (its details); the steps' results
// carry the hold, reservation, contract and submission.
func (p *Platform) sagaDefinition() *saga.Definition {
	retry := saga.Retry(saga.RetryPolicy{MaxAttempts: 3, InitialDelay: 2 * time.Second})
	input := func(sc *saga.StepContext) (ManagerState, error) {
		var s ManagerState
		if err := sc.DecodeInput(&s); err != nil {
			return s, commandbus.Permanent(commandbus.CodeInvalidData, fmt.Errorf("decoding the payment: %w", err))
		}
		return s, nil
	}
	compensation := func(domain string, args func(s ManagerState, sc *saga.StepContext) (commandbus.CommandArgs, error)) saga.StepOption {
		return saga.Compensate(func(ctx context.Context, sc *saga.StepContext) error {
			s, err := input(sc)
			if err != nil {
				return err
			}
			a, err := args(s, sc)
			if err != nil {
				return err
			}
			// The releasing command is idempotent on its key: a compensation run again after a
			// crash sends nothing new.
			key := sc.Key() + ":compensate"
			_, err = p.client.Send(ctx, domain, a, &commandbus.SendOpts{IdempotencyKey: key, CorrelationID: sc.ExecutionID,
				Headers: map[string]string{process.HeaderStepKey: key}, Actor: "saga:" + TypePaymentSaga})
			return err
		})
	}
	return saga.New(TypePaymentSaga, 1).
		OnOperatorEnd(func(ctx context.Context, row *driver.ExecutionRow, status driver.ExecutionStatus) error {
			var s ManagerState
			if err := json.Unmarshal(row.State, &s); err != nil {
				return err
			}
			return p.setPaymentStatus(ctx, s.PaymentID.String(), storedOutcome(status))
		}).
		Describe("Payment as a saga: hold the balance, reserve the daily limit, book FX when international, submit; each step released by its compensation").
		Domain(DomainPayments).
		Step(sagaStepProcessing, func(ctx context.Context, sc *saga.StepContext) (any, error) {
			s, err := input(sc)
			if err != nil {
				return nil, err
			}
			return nil, p.setPaymentStatus(ctx, s.PaymentID.String(), "PROCESSING")
		}, saga.Compensate(func(ctx context.Context, sc *saga.StepContext) error {
			s, err := input(sc)
			if err != nil {
				return err
			}
			return p.storeSagaUnwoundStatus(ctx, sc, s)
		})).
		Command(StepNameCheckBalance, DomainAccounts, CheckBalance{}.Kind(), func(sc *saga.StepContext) (any, error) {
			s, err := input(sc)
			return CheckBalance{PaymentID: s.PaymentID, Account: s.DebitAccount, Amount: s.Amount, Currency: s.Currency,
				Simulation: s.simulation(StepCheckBalance)}, err
		}, saga.DependsOn(sagaStepProcessing), retry,
			compensation(DomainAccounts, func(s ManagerState, sc *saga.StepContext) (commandbus.CommandArgs, error) {
				// Without a result (the step's reply was a failure) every active hold of the
				// payment is released.
				var hold CheckBalanceResult
				_ = sc.Result(StepNameCheckBalance, &hold)
				return ReleaseHold{PaymentID: s.PaymentID, HoldID: hold.HoldID}, nil
			})).
		Command(StepNameCheckLimit, DomainLimits, CheckDailyLimit{}.Kind(), func(sc *saga.StepContext) (any, error) {
			s, err := input(sc)
			return CheckDailyLimit{PaymentID: s.PaymentID, Account: s.DebitAccount, Amount: s.Amount, Currency: s.Currency,
				Day: s.ValueDate, Simulation: s.simulation(StepCheckDailyLimit)}, err
		}, saga.DependsOn(StepNameCheckBalance), retry,
			compensation(DomainLimits, func(s ManagerState, sc *saga.StepContext) (commandbus.CommandArgs, error) {
				var limit CheckDailyLimitResult
				_ = sc.Result(StepNameCheckLimit, &limit) // without one, every active reservation
				return ReleaseDailyLimit{PaymentID: s.PaymentID, ReservationID: limit.ReservationID}, nil
			})).
		Command(StepNameBookFx, DomainFx, BookFxContract{}.Kind(), func(sc *saga.StepContext) (any, error) {
			s, err := input(sc)
			return BookFxContract{PaymentID: s.PaymentID, SellCurrency: s.Currency, BuyCurrency: s.CreditCurrency, SellAmount: s.Amount,
				ValueDate: s.ValueDate, Simulation: s.simulation(StepBookFx)}, err
		}, saga.DependsOn(StepNameCheckLimit), retry, saga.When(func(sc *saga.StepContext) bool {
			s, err := input(sc)
			return err == nil && s.PaymentDetails.FxRequired()
		}), compensation(DomainFx, func(s ManagerState, sc *saga.StepContext) (commandbus.CommandArgs, error) {
			// Voids the booking's step key, so a booking whose reply was a failure, or one
			// still in flight, is undone too.
			var fx FxResult
			_ = sc.Result(StepNameBookFx, &fx)
			return CancelFxContract{PaymentID: s.PaymentID, ContractID: fx.ContractID, BookingKey: sc.Key()}, nil
		})).
		Command(StepNameSubmitPayment, DomainPayments, SubmitPayment{}.Kind(), func(sc *saga.StepContext) (any, error) {
			s, err := input(sc)
			if err != nil {
				return nil, err
			}
			credit, contract := s.Amount, ""
			var fx FxResult
			if sc.Result(StepNameBookFx, &fx) == nil && fx.ContractID != "" {
				credit, contract = fx.BuyAmount, fx.ContractID
			}
			return SubmitPayment{PaymentID: s.PaymentID, DebitAccount: s.DebitAccount, CreditAccount: s.CreditAccount,
				DebitAmount: s.Amount, DebitCurrency: s.Currency, CreditAmount: credit, CreditCurrency: s.CreditCurrency,
				FxContractID: contract, ValueDate: s.ValueDate, Simulation: s.simulation(StepSubmitPayment)}, nil
		}, saga.DependsOn(StepNameBookFx), retry).
		Step(sagaStepComplete, func(ctx context.Context, sc *saga.StepContext) (any, error) {
			s, err := input(sc)
			if err != nil {
				return nil, err
			}
			return nil, p.setPaymentStatus(ctx, s.PaymentID.String(), "COMPLETE")
		}, saga.DependsOn(StepNameSubmitPayment))
}

// storeSagaUnwoundStatus stores the outcome a payment saga's unwinding heads for: CANCELLED when
// an operator cancelled it with compensations, else COMPENSATED.
func (p *Platform) storeSagaUnwoundStatus(ctx context.Context, sc *saga.StepContext, s ManagerState) error {
	final := string(driver.ExecutionCompensated)
	entries, err := p.exec.ExecutionLogList(ctx, sc.ExecutionID)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.EntryType == "TSQ_CANCEL" {
			final = string(driver.ExecutionCancelled)
		}
	}
	return p.setPaymentStatus(ctx, s.PaymentID.String(), final)
}

// sagaState is a payment saga's view in the process manager's terms: its details and what its
// steps' results say (hold, reservation, contract, submission), and the operator's evidence.
func sagaState(row *driver.ExecutionRow, log []*driver.ExecutionLogEntry) (ManagerState, error) {
	var s ManagerState
	if err := json.Unmarshal(row.State, &s); err != nil {
		return s, err
	}
	s.FxRequired = s.PaymentDetails.FxRequired()
	s.CreditAmount = s.Amount
	for _, e := range log {
		if e.EntryType != "STEP" || e.StepStatus != "COMPLETED" || len(e.Response) == 0 {
			continue
		}
		switch e.Name {
		case StepNameCheckBalance:
			var r CheckBalanceResult
			if json.Unmarshal(e.Response, &r) == nil {
				s.HoldID = r.HoldID
			}
		case StepNameCheckLimit:
			var r CheckDailyLimitResult
			if json.Unmarshal(e.Response, &r) == nil {
				s.ReservationID = r.ReservationID
			}
		case StepNameBookFx:
			var r FxResult
			if json.Unmarshal(e.Response, &r) == nil {
				s.FxContractID, s.FxRate, s.CreditAmount = r.ContractID, r.Rate, r.BuyAmount
			}
		case StepNameSubmitPayment:
			var r SubmitResult
			if json.Unmarshal(e.Response, &r) == nil {
				s.SubmissionID, s.SubmissionRef = r.SubmissionID, r.Reference
			}
		}
	}
	return s, nil
}
