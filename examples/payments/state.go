package payments

import (
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// PaymentDetails are the payment's immutable facts, copied into the process state when the
// process starts so that no step needs to read them back.
type PaymentDetails struct {
	PaymentID      uuid.UUID       `json:"paymentId"`
	DebitAccount   string          `json:"debitAccount"`
	CreditAccount  string          `json:"creditAccount"`
	Amount         decimal.Decimal `json:"amount"`
	Currency       string          `json:"currency"`
	CreditCurrency string          `json:"creditCurrency"`
	ValueDate      string          `json:"valueDate"`
	Cutoff         time.Time       `json:"cutoff"`
	// Behavior shapes the simulated externals and the network simulator for this payment.
	Behavior *Behavior `json:"behavior,omitempty"`
	Seed     uint64    `json:"seed,omitempty"`
}

// FxRequired reports whether the payment crosses currencies.
func (d *PaymentDetails) FxRequired() bool { return d.Currency != d.CreditCurrency }

// simulation is what a command to the step's external carries.
func (d *PaymentDetails) simulation(step string) Simulation {
	if d.Behavior == nil {
		return Simulation{Seed: d.Seed}
	}
	if _, ok := d.Behavior.Steps[step]; !ok {
		return Simulation{Seed: d.Seed}
	}
	b := d.Behavior.Steps[step]
	return Simulation{Behavior: &b, Seed: d.Seed}
}

// Confirmation is one network confirmation level (L1 to L4) as the step process sees it.
type Confirmation struct {
	Received     bool   `json:"received"`
	Reference    string `json:"reference,omitempty"`
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	// TransientErrors counts "try again" answers; the wait stays open for the next answer.
	TransientErrors int `json:"transientErrors,omitempty"`
}

// StepState is the state of the step process.
type StepState struct {
	PaymentDetails
	Status          string          `json:"status,omitempty"`
	RiskReference   string          `json:"riskReference,omitempty"`
	RiskStatus      string          `json:"riskStatus,omitempty"`
	PendingApproval bool            `json:"pendingApproval,omitempty"`
	ApprovalID      string          `json:"approvalId,omitempty"`
	RiskApproved    bool            `json:"riskApproved,omitempty"`
	RiskDeclined    bool            `json:"riskDeclined,omitempty"`
	FxContractID    string          `json:"fxContractId,omitempty"`
	FxRate          decimal.Decimal `json:"fxRate,omitzero"`
	CreditAmount    decimal.Decimal `json:"creditAmount,omitzero"`
	SubmissionID    string          `json:"submissionId,omitempty"`
	SubmissionRef   string          `json:"submissionReference,omitempty"`
	L1              Confirmation    `json:"l1"`
	L2              Confirmation    `json:"l2"`
	L3              Confirmation    `json:"l3"`
	L4              Confirmation    `json:"l4"`
	ErrorCode       string          `json:"errorCode,omitempty"`
	ErrorMessage    string          `json:"errorMessage,omitempty"`
	// Evidence is what an operator who force-completed the payment knew from outside.
	Evidence string `json:"evidence,omitempty"`
}

// level returns confirmation n (1 to 4).
func (s *StepState) level(n int) *Confirmation {
	switch n {
	case 1:
		return &s.L1
	case 2:
		return &s.L2
	case 3:
		return &s.L3
	}
	return &s.L4
}

// ManagerState is the state of the process manager.
type ManagerState struct {
	PaymentDetails
	FxRequired    bool            `json:"fxRequired"`
	HoldID        string          `json:"holdId,omitempty"`
	ReservationID string          `json:"reservationId,omitempty"`
	FxContractID  string          `json:"fxContractId,omitempty"`
	FxRate        decimal.Decimal `json:"fxRate,omitzero"`
	CreditAmount  decimal.Decimal `json:"creditAmount,omitzero"`
	SubmissionID  string          `json:"submissionId,omitempty"`
	SubmissionRef string          `json:"submissionReference,omitempty"`
	// Evidence is what an operator who force-completed the payment knew from outside.
	Evidence string `json:"evidence,omitempty"`
}
