package payments

import (
	"context"
	"fmt"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/process"
)

// The process types (persisted).
const (
	TypePaymentStep    = "PaymentStep"
	TypePaymentManager = "PaymentManager"
)

// ProcessTypes lists the ways to run a payment: the step process, the process manager and the
// saga (TypePaymentSaga).
var ProcessTypes = []string{TypePaymentStep, TypePaymentManager, TypePaymentSaga}

// The step process's steps and waits.
const (
	stepUpdateStatusProcessing = "updateStatusProcessing"
	stepUpdateStatusComplete   = "updateStatusComplete"
)

// levelTimeouts are the L1 to L4 wait timeouts; zero uses the process type's default wait
// timeout, which New sets to DefaultPaymentWaitTimeout unless the configuration gives one (L4).
var levelTimeouts = [4]time.Duration{5 * time.Minute, 5 * time.Minute, 3 * time.Hour, 0}

// stepProcess is the payment step process: sequential code with deterministic replay.
// Risk and FX are command steps to their bounded contexts with compensations; the submission
// is a command step to payments; L1 to L4 are waits the network answers.
type stepProcess struct {
	p *Platform
}

func (stepProcess) Type() string   { return TypePaymentStep }
func (stepProcess) Domain() string { return DomainPayments }

// DeadlineAction compensates a payment that misses its cutoff.
func (stepProcess) DeadlineAction() process.DeadlineAction { return process.DeadlineCompensate }

func (sp stepProcess) Execute(x *process.Execution[StepState]) error {
	s := x.State
	if _, err := process.Step(x, stepUpdateStatusProcessing, func(ctx context.Context) (bool, error) {
		return true, sp.p.setPaymentStatus(ctx, s.PaymentID.String(), "PROCESSING")
	}, process.Compensate(func(x *process.Execution[StepState]) error {
		// Registered first, so it runs last: the stored status becomes the unwinding's outcome.
		return sp.p.storeUnwoundStatus(x.Context(), x.ID, x.State.PaymentID)
	})); err != nil {
		return err
	}

	riskStep := sp.p.commandStep(StepBookRisk, DomainRisk, BookRisk{}.Kind())
	risk, err := process.CommandStep[StepState, BookRisk, BookRiskResult](x, StepBookRisk, riskStep.Domain, riskStep.CommandType,
		BookRisk{PaymentID: s.PaymentID, Account: s.DebitAccount, Amount: s.Amount, Currency: s.Currency, Simulation: s.simulation(StepBookRisk)},
		process.MaxAttempts(3), process.RetryDelay(5*time.Second), process.Timeout(riskStep.Timeout.Std()),
		process.Compensate(func(x *process.Execution[StepState]) error {
			return sendCompensation(x, "unwindRisk", DomainRisk, UnwindRisk{PaymentID: x.State.PaymentID, Reference: x.State.RiskReference})
		}))
	if err != nil {
		return err
	}
	s.RiskReference, s.RiskStatus = risk.Reference, risk.Status

	if risk.RequiresManualApproval {
		s.PendingApproval, s.ApprovalID = true, risk.ApprovalID
		if err := x.Wait(StepAwaitRiskApproval, func() bool { return s.RiskApproved || s.RiskDeclined }, 2*time.Hour); err != nil {
			return err
		}
		if s.RiskDeclined {
			return &commandbus.BusinessRuleError{Code: "RISK_DECLINED", Message: s.ErrorMessage}
		}
	}

	s.CreditAmount = s.Amount
	if s.FxRequired() {
		fxStep := sp.p.commandStep(StepBookFx, DomainFx, BookFx{}.Kind())
		fx, err := process.CommandStep[StepState, BookFx, FxResult](x, StepBookFx, fxStep.Domain, fxStep.CommandType,
			BookFx{PaymentID: s.PaymentID, SellCurrency: s.Currency, BuyCurrency: s.CreditCurrency, SellAmount: s.Amount,
				ValueDate: s.ValueDate, Simulation: s.simulation(StepBookFx)},
			process.MaxAttempts(2), process.RetryDelay(3*time.Second), process.Timeout(fxStep.Timeout.Std()),
			process.Compensate(func(x *process.Execution[StepState]) error {
				// Voids the booking's step key: it also runs when the booking's reply was a
				// failure or never came (process.CommandStep), and a late booking is refused.
				return sendCompensation(x, "cancelFx", DomainFx, CancelFx{PaymentID: x.State.PaymentID, ContractID: x.State.FxContractID,
					BookingKey: x.StepKey(StepBookFx)})
			}))
		if err != nil {
			return err
		}
		s.FxContractID, s.FxRate, s.CreditAmount = fx.ContractID, fx.Rate, fx.BuyAmount
	}

	submitStep := sp.p.commandStep(StepSubmitPayment, DomainPayments, SubmitPayment{}.Kind())
	sub, err := process.CommandStep[StepState, SubmitPayment, SubmitResult](x, StepSubmitPayment, submitStep.Domain, submitStep.CommandType,
		SubmitPayment{PaymentID: s.PaymentID, DebitAccount: s.DebitAccount, CreditAccount: s.CreditAccount,
			DebitAmount: s.Amount, DebitCurrency: s.Currency, CreditAmount: s.CreditAmount, CreditCurrency: s.CreditCurrency,
			FxContractID: s.FxContractID, ValueDate: s.ValueDate, Simulation: s.simulation(StepSubmitPayment)},
		process.MaxAttempts(1), process.Timeout(submitStep.Timeout.Std()),
		process.Compensate(func(x *process.Execution[StepState]) error {
			return sendCompensation(x, "recallPayment", DomainPayments, RecallPayment{PaymentID: x.State.PaymentID, SubmissionID: x.State.SubmissionID})
		}))
	if err != nil {
		return err
	}
	s.SubmissionID, s.SubmissionRef = sub.SubmissionID, sub.Reference

	for n := 1; n <= 4; n++ {
		c := s.level(n)
		if err := x.Wait(fmt.Sprintf("awaitL%d", n), func() bool { return c.Received }, levelTimeouts[n-1]); err != nil {
			return err
		}
		switch c.ErrorCode {
		case "":
		case NetworkBusinessError:
			return &commandbus.BusinessRuleError{Code: "NETWORK_REJECTED", Message: fmt.Sprintf("L%d: %s", n, c.ErrorMessage)}
		default:
			return commandbus.Permanent("NETWORK_ERROR", fmt.Errorf("L%d %s: %s", n, c.ErrorCode, c.ErrorMessage))
		}
	}

	_, err = process.Step(x, stepUpdateStatusComplete, func(ctx context.Context) (bool, error) {
		return true, sp.p.setPaymentStatus(ctx, s.PaymentID.String(), "COMPLETE")
	})
	return err
}

// commandStep is the command a step sends and how long the process waits for its reply: the
// configuration's command-steps.<name> entry where it sets them, the given domain
// and command type otherwise, and a reply timeout that outlasts the domain's redeliveries
// (commandbus.Config.CommandStepOr), so that a killed worker costs latency, not a WAIT_TIMEOUT.
func (p *Platform) commandStep(name, domain, commandType string) commandbus.CommandStepConfig {
	return p.client.Config().CommandStepOr(name, domain, commandType)
}

// sendCompensation queues a compensating command, sent atomically with the execution's next
// checkpoint; its handler deduplicates on the compensation's own step key.
func sendCompensation[S any](x *process.Execution[S], name, domain string, args commandbus.CommandArgs) error {
	key := x.StepKey(name)
	return x.Send(domain, args, &commandbus.SendOpts{IdempotencyKey: key, Headers: map[string]string{process.HeaderStepKey: key}})
}

// The network's answers to the step process (L1 to L4 responses and errors, and the risk
// approval decisions). Each is an async response routed by its name.
type (
	// RiskApproved approves a payment pending manual risk approval.
	RiskApproved struct {
		ApprovalID string `json:"approvalId"`
		Actor      string `json:"actor"`
		Reason     string `json:"reason,omitempty"`
	}
	// RiskDeclined declines it: a business failure, the process compensates.
	RiskDeclined struct {
		ApprovalID string `json:"approvalId"`
		Actor      string `json:"actor"`
		Reason     string `json:"reason,omitempty"`
	}
	// L1Response confirms level 1; L1Error reports its failure. Likewise for L2 to L4.
	L1Response struct{ NetworkAnswer }
	// L1Error reports an L1 failure.
	L1Error struct{ NetworkAnswer }
	// L2Response confirms level 2.
	L2Response struct{ NetworkAnswer }
	// L2Error reports an L2 failure.
	L2Error struct{ NetworkAnswer }
	// L3Response confirms level 3.
	L3Response struct{ NetworkAnswer }
	// L3Error reports an L3 failure.
	L3Error struct{ NetworkAnswer }
	// L4Response confirms level 4.
	L4Response struct{ NetworkAnswer }
	// L4Error reports an L4 failure.
	L4Error struct{ NetworkAnswer }
)

// NetworkAnswer is the body of a network confirmation or error.
type NetworkAnswer struct {
	Reference    string `json:"reference,omitempty"`
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	Actor        string `json:"actor,omitempty"`
}

// Network error codes, as the network and its simulator send them: a business rejection compensates, a
// transient error keeps the wait open for another answer, anything else is permanent (TSQ).
const (
	NetworkBusinessError  = "BIZ_ERROR"
	NetworkTransientError = "TRANS_ERROR"
	NetworkPermanentError = "PERM_ERROR"
)

// ResponseName routes the response.
func (RiskApproved) ResponseName() string { return "RiskApproved" }

// ResponseName routes the response.
func (RiskDeclined) ResponseName() string { return "RiskDeclined" }

// ResponseName routes the response.
func (L1Response) ResponseName() string { return "L1Response" }

// ResponseName routes the response.
func (L1Error) ResponseName() string { return "L1Error" }

// ResponseName routes the response.
func (L2Response) ResponseName() string { return "L2Response" }

// ResponseName routes the response.
func (L2Error) ResponseName() string { return "L2Error" }

// ResponseName routes the response.
func (L3Response) ResponseName() string { return "L3Response" }

// ResponseName routes the response.
func (L3Error) ResponseName() string { return "L3Error" }

// ResponseName routes the response.
func (L4Response) ResponseName() string { return "L4Response" }

// ResponseName routes the response.
func (L4Error) ResponseName() string { return "L4Error" }

// registerStepResponses installs the async handlers: risk approved or declined, and each level's
// response or error (L1 to L4).
func registerStepResponses(m *process.Manager[StepState]) {
	process.OnResponse(m, func(s *StepState, r RiskApproved) error {
		s.RiskApproved, s.RiskStatus = true, "APPROVED"
		return nil
	})
	process.OnResponse(m, func(s *StepState, r RiskDeclined) error {
		s.RiskDeclined, s.RiskStatus = true, "DECLINED"
		s.ErrorCode, s.ErrorMessage = "RISK_DECLINED", "declined by "+r.Actor+": "+r.Reason
		return nil
	})
	onLevel[L1Response](m, 1, false)
	onLevel[L1Error](m, 1, true)
	onLevel[L2Response](m, 2, false)
	onLevel[L2Error](m, 2, true)
	onLevel[L3Response](m, 3, false)
	onLevel[L3Error](m, 3, true)
	onLevel[L4Response](m, 4, false)
	onLevel[L4Error](m, 4, true)
}

type levelAnswer interface {
	process.AsyncResponse
	answer() NetworkAnswer
}

func (a NetworkAnswer) answer() NetworkAnswer { return a }

func onLevel[R levelAnswer](m *process.Manager[StepState], n int, isError bool) {
	process.OnResponse(m, func(s *StepState, r R) error {
		a := r.answer()
		c := s.level(n)
		if isError && a.ErrorCode == NetworkTransientError {
			c.TransientErrors++ // the network will answer again; keep waiting
			return nil
		}
		c.Received = true
		c.Reference = a.Reference
		if isError {
			c.ErrorCode, c.ErrorMessage = a.ErrorCode, a.ErrorMessage
			if c.ErrorCode == "" {
				c.ErrorCode = NetworkPermanentError
			}
		}
		return nil
	})
}
