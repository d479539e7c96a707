package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/input"
	"github.com/commandbus/commandbus/money"
)

// PaymentView is a payment as the API shows it: its facts, where its process is, what risk, FX
// and the network said, and its error if any.
type PaymentView struct {
	ID              uuid.UUID    `json:"id"`
	IdempotencyKey  string       `json:"idempotencyKey"`
	ProcessType     string       `json:"processType,omitempty"`
	ExecutionID     uuid.UUID    `json:"executionId,omitzero"`
	BatchID         uuid.UUID    `json:"batchId,omitzero"`
	DebitAccount    string       `json:"debitAccount"`
	CreditAccount   string       `json:"creditAccount"`
	Amount          money.Amount `json:"amount"`
	Currency        string       `json:"currency"`
	CreditAmount    money.Amount `json:"creditAmount,omitzero"`
	CreditCurrency  string       `json:"creditCurrency"`
	ValueDate       string       `json:"valueDate"`
	Cutoff          time.Time    `json:"cutoff"`
	Status          string       `json:"status"`
	BusinessStatus  string       `json:"businessStatus"`
	ExecutionStatus string       `json:"executionStatus,omitempty"`
	Step            string       `json:"step,omitempty"`
	CurrentWait     string       `json:"currentWait,omitempty"`
	Risk            *RiskView    `json:"risk,omitempty"`
	Fx              *FxView      `json:"fx,omitempty"`
	HoldID          string       `json:"holdId,omitempty"`
	ReservationID   string       `json:"reservationId,omitempty"`
	SubmissionID    string       `json:"submissionId,omitempty"`
	SubmissionRef   string       `json:"submissionReference,omitempty"`
	Network         []LevelView  `json:"network,omitempty"`
	ErrorCode       string       `json:"errorCode,omitempty"`
	ErrorMessage    string       `json:"errorMessage,omitempty"`
	Evidence        string       `json:"evidence,omitempty"`
	Behavior        string       `json:"behavior,omitempty"`
	Retries         int          `json:"retries,omitempty"`
	NextRetryAt     *time.Time   `json:"nextRetryAt,omitempty"`
	WaitTimeoutAt   *time.Time   `json:"waitTimeoutAt,omitempty"`
	CreatedAt       time.Time    `json:"createdAt"`
	UpdatedAt       time.Time    `json:"updatedAt"`
	CompletedAt     *time.Time   `json:"completedAt,omitempty"`
}

// RiskView is the risk booking of a step-process payment.
type RiskView struct {
	Reference        string `json:"reference,omitempty"`
	Status           string `json:"status,omitempty"`
	ApprovalRequired bool   `json:"approvalRequired"`
	ApprovalID       string `json:"approvalId,omitempty"`
	Approved         bool   `json:"approved"`
	Declined         bool   `json:"declined"`
}

// FxView is the FX side of a payment.
type FxView struct {
	Required     bool            `json:"required"`
	ContractID   string          `json:"contractId,omitempty"`
	Rate         decimal.Decimal `json:"rate,omitzero"`
	CreditAmount money.Amount    `json:"creditAmount,omitzero"`
}

// LevelView is one network confirmation level.
type LevelView struct {
	Level int `json:"level"`
	Confirmation
}

// view builds a payment's view from its row and its execution (nil before it starts).
func view(pay *paymentRow, row *driver.ExecutionRow) (*PaymentView, error) {
	d := pay.details
	v := &PaymentView{
		ID: d.PaymentID, IdempotencyKey: pay.idempotencyKey, ProcessType: pay.processType, BatchID: pay.batchID,
		DebitAccount: d.DebitAccount, CreditAccount: d.CreditAccount, Amount: money.New(d.Amount, d.Currency), Currency: d.Currency,
		CreditCurrency: d.CreditCurrency, ValueDate: d.ValueDate, Cutoff: d.Cutoff, BusinessStatus: pay.status,
		Status: pay.status, CreatedAt: pay.createdAt, UpdatedAt: pay.updatedAt,
	}
	if d.Behavior != nil {
		v.Behavior = d.Behavior.Name
	}
	if pay.started || row != nil {
		v.ExecutionID = pay.executionID
	}
	if row == nil {
		return v, nil
	}
	v.ExecutionStatus, v.Status = string(row.Status), overallStatus(row.Status, pay.status)
	v.Step, v.CurrentWait, v.Retries = row.Step, row.CurrentWait, row.Retries
	v.ErrorCode, v.ErrorMessage = row.ErrorCode, row.ErrorMessage
	v.NextRetryAt, v.WaitTimeoutAt, v.CompletedAt = row.NextRetryAt, row.NextWaitTimeoutAt, row.CompletedAt
	if row.UpdatedAt.After(v.UpdatedAt) {
		v.UpdatedAt = row.UpdatedAt
	}
	switch row.Type {
	case TypePaymentStep:
		var s StepState
		if err := json.Unmarshal(row.State, &s); err != nil {
			return nil, fmt.Errorf("payment %s: decoding state: %w", d.PaymentID, err)
		}
		v.Risk = &RiskView{Reference: s.RiskReference, Status: s.RiskStatus, ApprovalRequired: s.PendingApproval,
			ApprovalID: s.ApprovalID, Approved: s.RiskApproved, Declined: s.RiskDeclined}
		credit := money.New(s.CreditAmount, d.CreditCurrency)
		v.Fx = &FxView{Required: s.FxRequired(), ContractID: s.FxContractID, Rate: s.FxRate, CreditAmount: credit}
		v.CreditAmount, v.SubmissionID, v.SubmissionRef, v.Evidence = credit, s.SubmissionID, s.SubmissionRef, s.Evidence
		for n := 1; n <= 4; n++ {
			v.Network = append(v.Network, LevelView{Level: n, Confirmation: *s.level(n)})
		}
		if v.ErrorCode == "" {
			v.ErrorCode, v.ErrorMessage = s.ErrorCode, s.ErrorMessage
		}
	case TypePaymentManager, TypePaymentSaga:
		// A saga's state is its input (the details, and an operator's evidence); its steps'
		// results are in its log (see sagaState).
		var s ManagerState
		if err := json.Unmarshal(row.State, &s); err != nil {
			return nil, fmt.Errorf("payment %s: decoding state: %w", d.PaymentID, err)
		}
		credit := money.New(s.CreditAmount, d.CreditCurrency)
		v.Fx = &FxView{Required: s.PaymentDetails.FxRequired(), ContractID: s.FxContractID, Rate: s.FxRate, CreditAmount: credit}
		v.CreditAmount, v.HoldID, v.ReservationID = credit, s.HoldID, s.ReservationID
		v.SubmissionID, v.SubmissionRef, v.Evidence = s.SubmissionID, s.SubmissionRef, s.Evidence
	}
	return v, nil
}

// GetPayment returns a payment with its process's status, risk, FX, L1–L4, error, execution id
// and timestamps, or commandbus.ErrNotFound.
func (p *Platform) GetPayment(ctx context.Context, id uuid.UUID) (*PaymentView, error) {
	pay, err := p.payment(ctx, id)
	if err != nil {
		return nil, err
	}
	var row *driver.ExecutionRow
	if pay.executionID != uuid.Nil {
		row, err = p.exec.ExecutionGet(ctx, pay.executionID)
		if errors.Is(err, driver.ErrNotFound) {
			row, err = nil, nil // accepted, not started yet
		}
		if err != nil {
			return nil, err
		}
	}
	v, err := view(pay, row)
	if err != nil || row == nil || row.Type != TypePaymentSaga {
		return v, err
	}
	// A saga's hold, reservation, contract and submission are its steps' results.
	log, err := p.exec.ExecutionLogList(ctx, row.ID)
	if err != nil {
		return nil, err
	}
	s, err := sagaState(row, log)
	if err != nil {
		return nil, fmt.Errorf("payment %s: decoding state: %w", id, err)
	}
	credit := money.New(s.CreditAmount, s.CreditCurrency)
	v.Fx = &FxView{Required: s.FxRequired, ContractID: s.FxContractID, Rate: s.FxRate, CreditAmount: credit}
	v.CreditAmount, v.HoldID, v.ReservationID = credit, s.HoldID, s.ReservationID
	v.SubmissionID, v.SubmissionRef, v.Evidence = s.SubmissionID, s.SubmissionRef, s.Evidence
	return v, nil
}

func (p *Platform) payment(ctx context.Context, id uuid.UUID) (*paymentRow, error) {
	list, err := p.queryPayments(ctx, `WHERE id = $1`, id.String())
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: payment %s", commandbus.ErrNotFound, id)
	}
	return list[0], nil
}

// PaymentFilter narrows ListPayments; zero fields do not filter.
type PaymentFilter struct {
	// Status is an API status (COMPLETED, WAITING, IN_TSQ, SCHEDULED, …) or an execution status.
	Status      string    `json:"status,omitempty"`
	BatchID     uuid.UUID `json:"batchId,omitzero"`
	ProcessType string    `json:"processType,omitempty"`
	// Limit bounds the list; default 50, at most MaxListRows.
	Limit int `json:"limit,omitempty"`
	// After resumes the list after this payment, the last of the previous page (nil: from the
	// newest). A list filtered by a process status needs the cursor's ExecutionID.
	After *PaymentCursor `json:"-"`
}

// PaymentStatuses lists the statuses ListPayments filters on: where a payment's process is, as
// GetPayment reports it (COMPLETED, WAITING, IN_TSQ, …), the execution's own status
// (WAITING_FOR_ASYNC, …), or, before a process runs, SCHEDULED or ACCEPTED.
func PaymentStatuses() []string {
	out := []string{paymentScheduled, paymentAccepted}
	for _, s := range paymentExecutionStatuses {
		for _, name := range []string{overallStatus(s, ""), string(s)} {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// ListPayments returns payments newest first (by creation, then id; filtered by a process status,
// by process, newest first), from f.After on. An unknown status or process type, or a cursor the
// list cannot resume from, is a validation error naming the field.
func (p *Platform) ListPayments(ctx context.Context, f PaymentFilter) ([]*PaymentView, error) {
	var errs []error
	if f.Status != "" && !slices.Contains(PaymentStatuses(), f.Status) {
		errs = append(errs, &commandbus.ValidationError{Field: "status", Message: fmt.Sprintf("must be one of %s, got %s",
			strings.Join(PaymentStatuses(), ", "), input.Quote(f.Status))})
	}
	if f.ProcessType != "" {
		errs = append(errs, validProcessType(f.ProcessType))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	limit := listLimit(f.Limit, 50)
	if statuses, ok := executionStatuses(f.Status); ok {
		if f.After != nil && f.After.ExecutionID == uuid.Nil {
			return nil, &commandbus.ValidationError{Field: "cursor", Message: "does not come from a list of this status: it names no process"}
		}
		return p.listByExecution(ctx, f, statuses, limit)
	}
	var where []string
	var args []any
	if f.Status != "" {
		args = append(args, f.Status)
		where = append(where, fmt.Sprintf("status = $%d AND started = 0", len(args)))
	}
	if f.BatchID != uuid.Nil {
		args = append(args, f.BatchID.String())
		where = append(where, fmt.Sprintf("batch_id = $%d", len(args)))
	}
	if f.ProcessType != "" {
		args = append(args, f.ProcessType)
		where = append(where, fmt.Sprintf("process_type = $%d", len(args)))
	}
	if f.After != nil {
		cond, more := keysetAfter(&PageCursor{At: f.After.CreatedAt, ID: f.After.ID}, "created_at", true, len(args)+1)
		where, args = append(where, cond), append(args, more...)
	}
	clause := ""
	if len(where) > 0 {
		clause = "WHERE " + strings.Join(where, " AND ")
	}
	payments, err := p.queryPayments(ctx, clause+fmt.Sprintf(" ORDER BY created_at DESC, id DESC LIMIT %d", limit), args...)
	if err != nil {
		return nil, err
	}
	return p.views(ctx, payments)
}

// views builds the views of stored payments with their executions' progress.
func (p *Platform) views(ctx context.Context, payments []*paymentRow) ([]*PaymentView, error) {
	out := make([]*PaymentView, 0, len(payments))
	for _, pay := range payments {
		var row *driver.ExecutionRow
		if pay.executionID != uuid.Nil {
			var err error
			row, err = p.exec.ExecutionGet(ctx, pay.executionID)
			if errors.Is(err, driver.ErrNotFound) {
				row, err = nil, nil
			}
			if err != nil {
				return nil, err
			}
		}
		v, err := view(pay, row)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// SearchPayments returns the payments whose id, execution id, idempotency key, debit account or
// credit account is text exactly (surrounding spaces ignored), newest first, with their
// processes' progress as ListPayments shows it. limit defaults to 50 and is at most 1000. Empty
// text finds nothing.
func (p *Platform) SearchPayments(ctx context.Context, text string, limit int) ([]*PaymentView, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return []*PaymentView{}, nil
	}
	if limit <= 0 {
		limit = 50
	}
	payments, err := p.queryPayments(ctx, fmt.Sprintf(`WHERE id = $1 OR execution_id = $1 OR idempotency_key = $1
		OR debit_account = $1 OR credit_account = $1 ORDER BY created_at DESC, id DESC LIMIT %d`, min(limit, 1000)), text)
	if err != nil {
		return nil, err
	}
	return p.views(ctx, payments)
}

// PaymentFacts returns the stored facts of the payments with these ids, keyed by payment id:
// reference (idempotency key), parties, amounts, batch, execution id and creation time. It does
// not read their processes, so Status is the payment's stored status and the process fields are
// empty: it is what a queue row says about the payment an item belongs to. Ids that name no
// payment are absent.
func (p *Platform) PaymentFacts(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*PaymentView, error) {
	out := make(map[uuid.UUID]*PaymentView, len(ids))
	keys := make([]string, 0, len(ids))
	for _, id := range ids {
		if !slices.Contains(keys, id.String()) {
			keys = append(keys, id.String())
		}
	}
	rows, err := p.paymentsWhereIn(ctx, "id", keys)
	if err != nil {
		return nil, err
	}
	for _, pay := range rows {
		v, err := view(pay, nil)
		if err != nil {
			return nil, err
		}
		v.ExecutionID = pay.executionID
		out[v.ID] = v
	}
	return out, nil
}

// listByExecution lists payments whose process is in one of statuses, newest process first,
// after f.After's process. It reads on past processes that are no payment's (the daily run
// shares the domain), so it returns limit payments whenever that many remain.
func (p *Platform) listByExecution(ctx context.Context, f PaymentFilter, statuses []driver.ExecutionStatus, limit int) ([]*PaymentView, error) {
	before := uuid.Nil
	if f.After != nil {
		before = f.After.ExecutionID
	}
	out := make([]*PaymentView, 0, limit)
	for len(out) < limit {
		want := limit - len(out)
		rows, err := p.exec.ExecutionList(ctx, &driver.ExecutionListParams{Statuses: statuses, Domain: DomainPayments,
			Type: f.ProcessType, BatchID: f.BatchID, BeforeID: before, Limit: want})
		if err != nil {
			return nil, err
		}
		byExecution := map[uuid.UUID]*driver.ExecutionRow{}
		ids := make([]string, 0, len(rows))
		for _, r := range rows {
			if !IsPaymentProcess(r.Type) {
				continue
			}
			byExecution[r.ID] = r
			ids = append(ids, r.ID.String())
		}
		payments, err := p.paymentsByExecution(ctx, ids)
		if err != nil {
			return nil, err
		}
		found := make([]*PaymentView, 0, len(payments))
		for _, pay := range payments {
			v, err := view(pay, byExecution[pay.executionID])
			if err != nil {
				return nil, err
			}
			found = append(found, v)
		}
		// The driver's order: execution ids descending, as their text compares.
		sort.Slice(found, func(i, j int) bool { return found[i].ExecutionID.String() > found[j].ExecutionID.String() })
		out = append(out, found...)
		if len(rows) < want {
			break
		}
		before = rows[len(rows)-1].ID
	}
	return out, nil
}

func (p *Platform) paymentsByExecution(ctx context.Context, ids []string) ([]*paymentRow, error) {
	return p.paymentsWhereIn(ctx, "execution_id", ids)
}

// paymentsWhereIn reads the payments whose column (id or execution_id) is one of values.
func (p *Platform) paymentsWhereIn(ctx context.Context, column string, ids []string) ([]*paymentRow, error) {
	var out []*paymentRow
	for from := 0; from < len(ids); from += 500 {
		chunk := ids[from:min(from+500, len(ids))]
		placeholders := make([]string, len(chunk))
		args := make([]any, len(chunk))
		for i, id := range chunk {
			placeholders[i], args[i] = fmt.Sprintf("$%d", i+1), id
		}
		list, err := p.queryPayments(ctx, `WHERE `+column+` IN (`+strings.Join(placeholders, ", ")+`)`, args...)
		if err != nil {
			return nil, err
		}
		out = append(out, list...)
	}
	return out, nil
}
