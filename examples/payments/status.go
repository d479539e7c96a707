package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
)

// PaymentStatus is the short status of a payment's process: where the execution is, whether
// risk approved it, which network confirmations (L1 to L4) arrived, and its error if any. A
// payment run by the process manager has no risk approval or network levels; they read false.
type PaymentStatus struct {
	ProcessID   uuid.UUID `json:"processId"`
	PaymentID   uuid.UUID `json:"paymentId"`
	ProcessType string    `json:"processType"`
	// Status is the execution's status (PENDING, EXECUTING, WAITING_FOR_ASYNC, WAITING_FOR_RETRY,
	// WAITING_FOR_TSQ, COMPENSATING, COMPLETED, COMPENSATED, FAILED or CANCELLED).
	Status       string `json:"status"`
	RiskApproved bool   `json:"riskApproved"`
	L1Received   bool   `json:"l1Received"`
	L2Received   bool   `json:"l2Received"`
	L3Received   bool   `json:"l3Received"`
	L4Received   bool   `json:"l4Received"`
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// GetPaymentStatus returns the status of the payment process with execution id processID, or
// commandbus.ErrNotFound when no payment process has that id.
func (p *Platform) GetPaymentStatus(ctx context.Context, processID uuid.UUID) (*PaymentStatus, error) {
	row, err := p.exec.ExecutionGet(ctx, processID)
	if err == nil && !IsPaymentProcess(row.Type) {
		err = commandbus.ErrNotFound
	}
	if err != nil {
		if errors.Is(err, commandbus.ErrNotFound) {
			return nil, fmt.Errorf("%w: no payment process has id %s", commandbus.ErrNotFound, processID)
		}
		return nil, err
	}
	out := &PaymentStatus{ProcessID: row.ID, ProcessType: row.Type, Status: string(row.Status),
		ErrorCode: row.ErrorCode, ErrorMessage: row.ErrorMessage}
	switch row.Type {
	case TypePaymentStep:
		var s StepState
		if err := json.Unmarshal(row.State, &s); err != nil {
			return nil, fmt.Errorf("payment process %s: decoding state: %w", processID, err)
		}
		out.PaymentID, out.RiskApproved = s.PaymentID, s.RiskApproved
		out.L1Received, out.L2Received, out.L3Received, out.L4Received = s.L1.Received, s.L2.Received, s.L3.Received, s.L4.Received
		if s.ErrorCode != "" {
			out.ErrorCode, out.ErrorMessage = s.ErrorCode, s.ErrorMessage
		}
	case TypePaymentManager, TypePaymentSaga:
		var s ManagerState
		if err := json.Unmarshal(row.State, &s); err != nil {
			return nil, fmt.Errorf("payment process %s: decoding state: %w", processID, err)
		}
		out.PaymentID = s.PaymentID
	}
	return out, nil
}
