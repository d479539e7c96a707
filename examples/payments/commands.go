package payments

import (
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/process"
)

// The domains of the bounded contexts. The processes live in DomainPayments; command-step
// replies come back to its reply queue.
const (
	DomainAccounts = "accounts"
	DomainLimits   = "limits"
	DomainRisk     = "risk"
	DomainFx       = "fx"
	DomainPayments = "payments"
)

// Domains lists the platform's domains, for configuring their concurrency.
var Domains = []string{DomainAccounts, DomainLimits, DomainRisk, DomainFx, DomainPayments}

// Simulation is the part of a command that tells a simulated external how to behave: the step's
// behavior and the seed of its rolls. Real externals ignore it.
type Simulation struct {
	Behavior *StepBehavior `json:"behavior,omitempty"`
	Seed     uint64        `json:"seed,omitempty"`
}

// CheckBalance asks accounts to check the available balance and place a hold for the payment
// (idempotent on the step key). A shortfall is a business failure (INSUFFICIENT_FUNDS).
type CheckBalance struct {
	PaymentID uuid.UUID       `json:"paymentId"`
	Account   string          `json:"account"`
	Amount    decimal.Decimal `json:"amount"`
	Currency  string          `json:"currency"`
	Simulation
}

// Kind is the stable command type.
func (CheckBalance) Kind() string { return "CheckBalance" }

// CheckBalanceResult is the hold placed.
type CheckBalanceResult struct {
	HoldID    string          `json:"holdId"`
	Available decimal.Decimal `json:"available"`
}

// ReleaseHold releases the payment's active hold (compensation; idempotent).
type ReleaseHold struct {
	PaymentID uuid.UUID `json:"paymentId"`
	HoldID    string    `json:"holdId,omitempty"`
}

// Kind is the stable command type.
func (ReleaseHold) Kind() string { return "ReleaseHold" }

// CheckDailyLimit asks limits to record the payment against the account's daily limit
// (idempotent on the step key). Exceeding it is a business failure (DAILY_LIMIT_EXCEEDED).
type CheckDailyLimit struct {
	PaymentID uuid.UUID       `json:"paymentId"`
	Account   string          `json:"account"`
	Amount    decimal.Decimal `json:"amount"`
	Currency  string          `json:"currency"`
	Day       string          `json:"day"`
	Simulation
}

// Kind is the stable command type.
func (CheckDailyLimit) Kind() string { return "CheckDailyLimit" }

// CheckDailyLimitResult is the usage recorded.
type CheckDailyLimitResult struct {
	ReservationID string          `json:"reservationId"`
	Used          decimal.Decimal `json:"used"`
	Limit         decimal.Decimal `json:"limit"`
}

// ReleaseDailyLimit gives the payment's usage back (compensation; idempotent).
type ReleaseDailyLimit struct {
	PaymentID     uuid.UUID `json:"paymentId"`
	ReservationID string    `json:"reservationId,omitempty"`
}

// Kind is the stable command type.
func (ReleaseDailyLimit) Kind() string { return "ReleaseDailyLimit" }

// BookRisk asks risk to book the payment's exposure; above the approval threshold (or when the
// risk engine pends it) the booking needs a manual approval.
type BookRisk struct {
	PaymentID uuid.UUID       `json:"paymentId"`
	Account   string          `json:"account"`
	Amount    decimal.Decimal `json:"amount"`
	Currency  string          `json:"currency"`
	Simulation
}

// Kind is the stable command type.
func (BookRisk) Kind() string { return "BookRisk" }

// BookRiskResult is the booking.
type BookRiskResult struct {
	Reference              string `json:"reference"`
	Status                 string `json:"status"`
	RequiresManualApproval bool   `json:"requiresManualApproval"`
	ApprovalID             string `json:"approvalId,omitempty"`
}

// UnwindRisk reverses a risk booking (compensation; idempotent).
type UnwindRisk struct {
	PaymentID uuid.UUID `json:"paymentId"`
	Reference string    `json:"reference"`
}

// Kind is the stable command type.
func (UnwindRisk) Kind() string { return "UnwindRisk" }

// BookFx asks fx to book a contract selling SellAmount of SellCurrency for BuyCurrency, through
// the anti-corruption layer to the external FX API (the step process's name for it).
type BookFx struct {
	PaymentID    uuid.UUID       `json:"paymentId"`
	SellCurrency string          `json:"sellCurrency"`
	BuyCurrency  string          `json:"buyCurrency"`
	SellAmount   decimal.Decimal `json:"sellAmount"`
	ValueDate    string          `json:"valueDate"`
	Simulation
}

// Kind is the stable command type.
func (BookFx) Kind() string { return "BookFx" }

// BookFxContract is BookFx under the name the process manager sends it by.
type BookFxContract BookFx

// Kind is the stable command type.
func (BookFxContract) Kind() string { return "BookFxContract" }

// FxResult is a booked contract.
type FxResult struct {
	ContractID  string          `json:"contractId"`
	Rate        decimal.Decimal `json:"rate"`
	BuyAmount   decimal.Decimal `json:"buyAmount"`
	BuyCurrency string          `json:"buyCurrency"`

	status string // the local record's status, when read back from it
}

// CancelFx cancels a contract (compensation; idempotent). With BookingKey, the step key the
// booking was made under, it voids that key (the contract booked under it is cancelled, a
// booking still in flight is refused), so it also undoes a booking whose outcome the process
// does not know; ContractID, when known, is informative then.
type CancelFx struct {
	PaymentID  uuid.UUID `json:"paymentId"`
	ContractID string    `json:"contractId"`
	BookingKey string    `json:"bookingKey,omitempty"`
}

// Kind is the stable command type.
func (CancelFx) Kind() string { return "CancelFx" }

// CancelFxContract is CancelFx under the process manager's name.
type CancelFxContract CancelFx

// Kind is the stable command type.
func (CancelFxContract) Kind() string { return "CancelFxContract" }

// SubmitPayment asks payments to submit the payment to the network and post its ledger
// movement, once: payment_submission's UNIQUE idempotency key makes a redelivery return the
// first submission.
type SubmitPayment struct {
	PaymentID      uuid.UUID       `json:"paymentId"`
	DebitAccount   string          `json:"debitAccount"`
	CreditAccount  string          `json:"creditAccount"`
	DebitAmount    decimal.Decimal `json:"debitAmount"`
	DebitCurrency  string          `json:"debitCurrency"`
	CreditAmount   decimal.Decimal `json:"creditAmount"`
	CreditCurrency string          `json:"creditCurrency"`
	FxContractID   string          `json:"fxContractId,omitempty"`
	ValueDate      string          `json:"valueDate"`
	Simulation
}

// Kind is the stable command type.
func (SubmitPayment) Kind() string { return "SubmitPayment" }

// SubmitResult is the submission.
type SubmitResult struct {
	SubmissionID string    `json:"submissionId"`
	Reference    string    `json:"reference"`
	SubmittedAt  time.Time `json:"submittedAt"`
}

// RecallPayment reverses a submission's ledger movement (compensation of a submitted payment the
// network rejected or that missed its cutoff; idempotent).
type RecallPayment struct {
	PaymentID    uuid.UUID `json:"paymentId"`
	SubmissionID string    `json:"submissionId"`
}

// Kind is the stable command type.
func (RecallPayment) Kind() string { return "RecallPayment" }

// stepKey is the key a handler guards its side effect with: the process step key (the same on
// every attempt and resubmission of the step), else the command's own idempotency key.
func stepKey[T commandbus.CommandArgs](cmd *commandbus.Command[T]) string {
	if key := cmd.Headers[process.HeaderStepKey]; key != "" {
		return key
	}
	return cmd.IdempotencyKey()
}

// rollKey names one attempt of one send of a step, so transient failures can clear on retry.
func rollKey[T commandbus.CommandArgs](cmd *commandbus.Command[T]) string {
	return cmd.IdempotencyKey() + "#" + strconv.Itoa(cmd.Attempt)
}
