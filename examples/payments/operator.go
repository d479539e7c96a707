package payments

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/input"
	"github.com/commandbus/commandbus/money"
	"github.com/commandbus/commandbus/process"
)

// validateActor applies the rule of every operator action: who and why are required, printable
// and the reason has at most commandbus.MaxReasonLength characters.
func validateActor(actor, reason string) error {
	return commandbus.OperatorAction{Actor: actor, Reason: reason}.Validate()
}

// Approval statuses.
const (
	ApprovalPending   = "PENDING"
	ApprovalApproved  = "APPROVED"
	ApprovalRejected  = "REJECTED"
	ApprovalWithdrawn = "WITHDRAWN"
)

// Approval is a manual risk approval request.
type Approval struct {
	ID            uuid.UUID    `json:"id"`
	PaymentID     uuid.UUID    `json:"paymentId"`
	ExecutionID   uuid.UUID    `json:"executionId"`
	RiskReference string       `json:"riskReference"`
	Amount        money.Amount `json:"amount"`
	Currency      string       `json:"currency"`
	Status        string       `json:"status"`
	Actor         string       `json:"actor,omitempty"`
	Reason        string       `json:"reason,omitempty"`
	RequestedAt   time.Time    `json:"requestedAt"`
	DecidedAt     *time.Time   `json:"decidedAt,omitempty"`
}

// ApprovalStatuses lists the statuses an approval can have.
var ApprovalStatuses = []string{ApprovalPending, ApprovalApproved, ApprovalRejected, ApprovalWithdrawn}

// ListApprovals returns approval requests in a status (default PENDING), oldest first (by
// request, then id), after f.After, at most f.Limit (default 100). An unknown status is a validation error on status.
func (p *Platform) ListApprovals(ctx context.Context, f ApprovalFilter) ([]*Approval, error) {
	status := f.Status
	if status == "" {
		status = ApprovalPending
	}
	if !slices.Contains(ApprovalStatuses, status) {
		return nil, &commandbus.ValidationError{Field: "status", Message: fmt.Sprintf("must be one of %s, got %s", strings.Join(ApprovalStatuses, ", "), input.Quote(status))}
	}
	where := "status = $1"
	args := []any{status}
	if cond, more := keysetAfter(f.After, "requested_at", false, 2); cond != "" {
		where, args = where+" AND "+cond, append(args, more...)
	}
	rows, err := p.store.db.QueryContext(ctx, p.store.q(`SELECT id, payment_id, execution_id, risk_reference, amount, currency, status,
		actor, reason, requested_at, decided_at FROM {t}approval WHERE `+where+` ORDER BY requested_at, id LIMIT `+fmt.Sprint(listLimit(f.Limit, 100))), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func scanApproval(row rowScanner) (*Approval, error) {
	var a Approval
	var id, paymentID, execID, amount string
	var actor, reason sql.NullString
	var requested int64
	var decided sql.NullInt64
	if err := row.Scan(&id, &paymentID, &execID, &a.RiskReference, &amount, &a.Currency, &a.Status, &actor, &reason, &requested, &decided); err != nil {
		return nil, err
	}
	a.ID, a.PaymentID = uuid.MustParse(id), uuid.MustParse(paymentID)
	a.ExecutionID, _ = uuid.Parse(execID)
	value, _ := decimal.NewFromString(amount)
	a.Amount = money.New(value, a.Currency)
	a.Actor, a.Reason, a.RequestedAt, a.DecidedAt = actor.String, reason.String, fromMicros(requested), nullMicros(decided)
	return &a, nil
}

// GetApproval returns one approval request, or commandbus.ErrNotFound.
func (p *Platform) GetApproval(ctx context.Context, id uuid.UUID) (*Approval, error) {
	a, err := scanApproval(p.store.db.QueryRowContext(ctx, p.store.q(`SELECT id, payment_id, execution_id, risk_reference, amount, currency,
		status, actor, reason, requested_at, decided_at FROM {t}approval WHERE id = $1`), id.String()))
	if notFound(err) {
		return nil, fmt.Errorf("%w: approval %s", commandbus.ErrNotFound, id)
	}
	return a, err
}

// Approve approves a pending risk approval; the waiting payment continues.
func (p *Platform) Approve(ctx context.Context, id uuid.UUID, actor, reason string) error {
	return p.decide(ctx, id, ApprovalApproved, actor, reason)
}

// Reject declines a pending risk approval; the payment fails on a business rule and compensates.
func (p *Platform) Reject(ctx context.Context, id uuid.UUID, actor, reason string) error {
	return p.decide(ctx, id, ApprovalRejected, actor, reason)
}

func (p *Platform) decide(ctx context.Context, id uuid.UUID, decision, actor, reason string) error {
	if err := validateActor(actor, reason); err != nil {
		return err
	}
	a, err := p.GetApproval(ctx, id)
	if err != nil {
		return err
	}
	res, err := p.store.db.ExecContext(ctx, p.store.q(`UPDATE {t}approval SET status = $2, actor = $3, reason = $4, decided_at = $5
		WHERE id = $1 AND status = 'PENDING'`), id.String(), decision, actor, reason, micros(p.now()))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: approval %s is %s, not PENDING", commandbus.ErrInvalidState, id, a.Status)
	}
	p.audit(ctx, "approval", id.String(), "RISK_"+decision, actor, reason, map[string]string{"paymentId": a.PaymentID.String()})
	if decision == ApprovalApproved {
		return p.step.ProcessAsyncResponse(ctx, a.ExecutionID, RiskApproved{ApprovalID: id.String(), Actor: actor, Reason: reason})
	}
	return p.step.ProcessAsyncResponse(ctx, a.ExecutionID, RiskDeclined{ApprovalID: id.String(), Actor: actor, Reason: reason})
}

// Network outcomes a network callback reports.
const (
	NetworkAccepted  = "ACCEPTED"
	NetworkRejected  = "REJECTED"
	NetworkError     = "ERROR"
	NetworkTransient = "TRANSIENT"
	NetworkPending   = "PENDING"
)

// NetworkResponse is a callback from the payment network about one confirmation level of a
// step-process payment.
type NetworkResponse struct {
	PaymentID uuid.UUID `json:"paymentId"`
	// Level is 1 to 4.
	Level int `json:"level"`
	// Outcome is ACCEPTED, REJECTED (business: the payment compensates), ERROR (permanent: the
	// troubleshooting queue), TRANSIENT (answer again later) or PENDING (held for an operator).
	Outcome      string `json:"outcome"`
	Reference    string `json:"reference,omitempty"`
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// ReceiveNetworkResponse takes a network callback (the endpoint the network calls): it resumes
// the payment's process with the confirmation or error, or, for PENDING, lists it for an
// operator to answer with RespondNetwork.
func (p *Platform) ReceiveNetworkResponse(ctx context.Context, r NetworkResponse) error {
	var errs []error
	if r.Level < 1 || r.Level > 4 {
		errs = append(errs, &commandbus.ValidationError{Field: "level", Message: fmt.Sprintf("must be 1 to 4, got %d", r.Level)})
	}
	switch r.Outcome {
	case NetworkAccepted, NetworkRejected, NetworkError, NetworkTransient, NetworkPending:
	default:
		errs = append(errs, &commandbus.ValidationError{Field: "outcome", Message: fmt.Sprintf("must be ACCEPTED, REJECTED, ERROR, TRANSIENT or PENDING, got %s", input.Quote(r.Outcome))})
	}
	for _, f := range []struct {
		field, value string
		rule         input.Text
	}{
		{"reference", r.Reference, input.Identifier},
		{"errorCode", r.ErrorCode, input.Identifier},
		{"errorMessage", r.ErrorMessage, input.Text{Max: 1000, Multiline: true}},
	} {
		if msg := f.rule.Check(f.value); msg != "" {
			errs = append(errs, &commandbus.ValidationError{Field: f.field, Message: msg})
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	pay, err := p.payment(ctx, r.PaymentID)
	if err != nil {
		return err
	}
	if pay.processType != TypePaymentStep || pay.executionID == uuid.Nil {
		return &commandbus.ValidationError{Field: "paymentId", Message: fmt.Sprintf("payment %s has no network confirmations (process %s)", r.PaymentID, pay.processType)}
	}
	if r.Outcome == NetworkPending {
		_, err := p.store.db.ExecContext(ctx, p.store.q(`INSERT INTO {t}network_pending (id, payment_id, execution_id, level, status, created_at)
			VALUES ($1, $2, $3, $4, 'PENDING', $5) ON CONFLICT (payment_id, level) DO NOTHING`),
			uuid.NewString(), r.PaymentID.String(), pay.executionID.String(), r.Level, micros(p.now()))
		return err
	}
	return p.deliverLevel(ctx, pay.executionID, r)
}

// deliverLevel sends a confirmation level's answer to the step process.
func (p *Platform) deliverLevel(ctx context.Context, execID uuid.UUID, r NetworkResponse) error {
	a := NetworkAnswer{Reference: r.Reference, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage}
	var resp process.AsyncResponse
	switch r.Outcome {
	case NetworkAccepted:
		if a.Reference == "" {
			a.Reference = fmt.Sprintf("L%d-REF-%s", r.Level, uuid.NewString()[:8])
		}
		resp = [...]process.AsyncResponse{L1Response{a}, L2Response{a}, L3Response{a}, L4Response{a}}[r.Level-1]
	default:
		switch r.Outcome {
		case NetworkRejected:
			a.ErrorCode = NetworkBusinessError
		case NetworkTransient:
			a.ErrorCode = NetworkTransientError
		case NetworkError:
			if a.ErrorCode == "" || a.ErrorCode == NetworkBusinessError || a.ErrorCode == NetworkTransientError {
				a.ErrorCode = NetworkPermanentError
			}
		}
		if a.ErrorMessage == "" {
			a.ErrorMessage = "network " + strings.ToLower(r.Outcome)
		}
		resp = [...]process.AsyncResponse{L1Error{a}, L2Error{a}, L3Error{a}, L4Error{a}}[r.Level-1]
	}
	return p.step.ProcessAsyncResponse(ctx, execID, resp)
}

// PendingNetworkResponse is a confirmation the network left pending for an operator.
type PendingNetworkResponse struct {
	ID          uuid.UUID  `json:"id"`
	PaymentID   uuid.UUID  `json:"paymentId"`
	ExecutionID uuid.UUID  `json:"executionId"`
	Level       int        `json:"level"`
	Status      string     `json:"status"`
	Answer      string     `json:"answer,omitempty"`
	Actor       string     `json:"actor,omitempty"`
	Reason      string     `json:"reason,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	AnsweredAt  *time.Time `json:"answeredAt,omitempty"`
}

// ListPendingNetworkResponses returns the confirmations waiting for an operator, oldest first (by
// creation, then id), after params.After.
func (p *Platform) ListPendingNetworkResponses(ctx context.Context, params ListParams) ([]*PendingNetworkResponse, error) {
	where := "status = 'PENDING'"
	cond, args := keysetAfter(params.After, "created_at", false, 1)
	if cond != "" {
		where += " AND " + cond
	}
	rows, err := p.store.db.QueryContext(ctx, p.store.q(`SELECT id, payment_id, execution_id, level, status, answer, actor, reason, created_at, answered_at
		FROM {t}network_pending WHERE `+where+` ORDER BY created_at, id LIMIT `+fmt.Sprint(listLimit(params.Limit, 100))), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*PendingNetworkResponse
	for rows.Next() {
		r, err := scanPending(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func scanPending(row rowScanner) (*PendingNetworkResponse, error) {
	var r PendingNetworkResponse
	var id, paymentID, execID string
	var answer, actor, reason sql.NullString
	var created int64
	var answered sql.NullInt64
	if err := row.Scan(&id, &paymentID, &execID, &r.Level, &r.Status, &answer, &actor, &reason, &created, &answered); err != nil {
		return nil, err
	}
	r.ID, r.PaymentID, r.ExecutionID = uuid.MustParse(id), uuid.MustParse(paymentID), uuid.MustParse(execID)
	r.Answer, r.Actor, r.Reason, r.CreatedAt, r.AnsweredAt = answer.String, actor.String, reason.String, fromMicros(created), nullMicros(answered)
	return &r, nil
}

// GetPendingNetworkResponse returns one confirmation the network left for an operator, answered
// or not, or commandbus.ErrNotFound.
func (p *Platform) GetPendingNetworkResponse(ctx context.Context, id uuid.UUID) (*PendingNetworkResponse, error) {
	r, err := scanPending(p.store.db.QueryRowContext(ctx, p.store.q(`SELECT id, payment_id, execution_id, level, status, answer, actor, reason,
		created_at, answered_at FROM {t}network_pending WHERE id = $1`), id.String()))
	if notFound(err) {
		return nil, fmt.Errorf("%w: pending network response %s", commandbus.ErrNotFound, id)
	}
	return r, err
}

// Operator answers to a pending network confirmation.
const (
	AnswerAccept = "ACCEPT"
	AnswerReject = "REJECT"
)

// RespondNetwork answers a pending confirmation: ACCEPT confirms the level, REJECT fails the
// payment on a business rule (it compensates). The answer is audited.
func (p *Platform) RespondNetwork(ctx context.Context, id uuid.UUID, answer, actor, reason string) error {
	errs := []error{validateActor(actor, reason)}
	if answer != AnswerAccept && answer != AnswerReject {
		errs = append(errs, &commandbus.ValidationError{Field: "answer", Message: fmt.Sprintf("must be ACCEPT or REJECT, got %s", input.Quote(answer))})
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r, err := p.GetPendingNetworkResponse(ctx, id)
	if err != nil {
		return err
	}
	res, err := p.store.db.ExecContext(ctx, p.store.q(`UPDATE {t}network_pending SET status = 'ANSWERED', answer = $2, actor = $3, reason = $4,
		answered_at = $5 WHERE id = $1 AND status = 'PENDING'`), id.String(), answer, actor, reason, micros(p.now()))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: pending network response %s was answered already", commandbus.ErrInvalidState, id)
	}
	p.audit(ctx, "network-response", id.String(), "NETWORK_"+answer, actor, reason,
		map[string]any{"paymentId": r.PaymentID.String(), "level": r.Level})
	outcome := NetworkResponse{PaymentID: r.PaymentID, Level: r.Level, Outcome: NetworkAccepted, Reference: fmt.Sprintf("L%d-MANUAL-%s", r.Level, id.String()[:8])}
	if answer == AnswerReject {
		outcome = NetworkResponse{PaymentID: r.PaymentID, Level: r.Level, Outcome: NetworkRejected, ErrorMessage: "rejected by " + actor + ": " + reason}
	}
	return p.deliverLevel(ctx, r.ExecutionID, outcome)
}

// operations returns the process operations of a payment.
func (p *Platform) operations(ctx context.Context, paymentID uuid.UUID) (process.Operations, uuid.UUID, error) {
	pay, err := p.payment(ctx, paymentID)
	if err != nil {
		return nil, uuid.Nil, err
	}
	if pay.executionID == uuid.Nil || !pay.started {
		return nil, uuid.Nil, fmt.Errorf("%w: payment %s has not started", commandbus.ErrInvalidState, paymentID)
	}
	switch pay.processType {
	case TypePaymentManager:
		return p.manager, pay.executionID, nil
	case TypePaymentSaga:
		return p.saga, pay.executionID, nil
	}
	return p.step, pay.executionID, nil
}

// whenFree runs an operator action, retrying for a few seconds while a runner holds the
// execution (process.ErrBusy): a response or poller may be working on it for a moment.
func whenFree(ctx context.Context, action func() error) error {
	deadline := time.Now().Add(5 * time.Second)
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		err := action()
		if !errors.Is(err, process.ErrBusy) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}

// Resubmit retries a payment waiting in the troubleshooting queue:
// the step it stopped at is sent again with the same step idempotency key, so a bounded context
// that did the work already answers with its first result.
func (p *Platform) Resubmit(ctx context.Context, paymentID uuid.UUID, actor, reason string) error {
	ops, execID, err := p.operations(ctx, paymentID)
	if err != nil {
		return err
	}
	return whenFree(ctx, func() error { return ops.Retry(ctx, execID, commandbus.OperatorAction{Actor: actor, Reason: reason}) })
}

// SkipStep completes the step a payment is stuck on with an operator-supplied result (JSON
// shaped as the step's result) and continues the payment.
func (p *Platform) SkipStep(ctx context.Context, paymentID uuid.UUID, step string, result json.RawMessage, actor, reason string) error {
	ops, execID, err := p.operations(ctx, paymentID)
	if err != nil {
		return err
	}
	return whenFree(ctx, func() error {
		return ops.Skip(ctx, execID, step, result, commandbus.OperatorAction{Actor: actor, Reason: reason})
	})
}

// CompensateAndAbort runs the compensations of the payment's completed steps and ends it
// CANCELLED.
func (p *Platform) CompensateAndAbort(ctx context.Context, paymentID uuid.UUID, actor, reason string) error {
	ops, execID, err := p.operations(ctx, paymentID)
	if err != nil {
		return err
	}
	return whenFree(ctx, func() error {
		return ops.CancelOverride(ctx, execID, true, commandbus.OperatorAction{Actor: actor, Reason: reason})
	})
}

// MaxEvidenceLength is the most characters of the evidence a payment is force-completed on.
const MaxEvidenceLength = 1000

// IsPaymentProcess reports whether a process type runs payments.
func IsPaymentProcess(processType string) bool {
	return processType == TypePaymentStep || processType == TypePaymentManager || processType == TypePaymentSaga
}

// CheckCompletion applies the rule for completing an execution by hand to the state fields an
// operator sets: a payment is completed only on external evidence, so its overrides must carry
// "evidence", a printable text of at most MaxEvidenceLength characters. Executions of other
// process types need none. The error's field is stateOverrides.evidence.
func CheckCompletion(processType string, stateOverrides map[string]any) error {
	if !IsPaymentProcess(processType) {
		return nil
	}
	evidence, _ := stateOverrides["evidence"].(string)
	if strings.TrimSpace(evidence) == "" {
		return &commandbus.ValidationError{Field: "stateOverrides.evidence", Message: "Say what shows the payment was made: {\"evidence\": \"…\"}."}
	}
	if msg := (input.Text{Max: MaxEvidenceLength, Multiline: true}).Check(evidence); msg != "" {
		return &commandbus.ValidationError{Field: "stateOverrides.evidence", Message: msg}
	}
	return nil
}

// ForceComplete completes a payment on external evidence: the
// evidence is stored in the payment's state and the execution log.
func (p *Platform) ForceComplete(ctx context.Context, paymentID uuid.UUID, evidence, actor, reason string) error {
	if strings.TrimSpace(evidence) == "" {
		return &commandbus.ValidationError{Field: "evidence", Message: "required: what shows the payment was made"}
	}
	if msg := (input.Text{Max: MaxEvidenceLength, Multiline: true}).Check(evidence); msg != "" {
		return &commandbus.ValidationError{Field: "evidence", Message: msg}
	}
	ops, execID, err := p.operations(ctx, paymentID)
	if err != nil {
		return err
	}
	return whenFree(ctx, func() error {
		return ops.CompleteOverride(ctx, execID, map[string]any{"evidence": evidence}, commandbus.OperatorAction{Actor: actor, Reason: reason})
	})
}
