package payments

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/input"
)

// Batch statuses, derived from the executions whenever a batch is read.
const (
	BatchNew       = "NEW"
	BatchRunning   = "RUNNING"
	BatchPartial   = "PARTIAL"
	BatchSucceeded = "SUCCEEDED"
	BatchFailed    = "FAILED"
)

// BatchCounts counts a batch's payments by where their processes are.
type BatchCounts struct {
	NotStarted   int `json:"notStarted"`
	Pending      int `json:"pending"`
	Running      int `json:"running"`
	Waiting      int `json:"waiting"`
	Retrying     int `json:"retrying"`
	InTSQ        int `json:"inTsq"`
	Compensating int `json:"compensating"`
	Completed    int `json:"completed"`
	Compensated  int `json:"compensated"`
	Failed       int `json:"failed"`
	Cancelled    int `json:"cancelled"`
}

// Terminal is how many payments have ended.
func (c BatchCounts) Terminal() int { return c.Completed + c.Compensated + c.Failed + c.Cancelled }

func (c *BatchCounts) add(s driver.ExecutionStatus) {
	switch s {
	case driver.ExecutionPending:
		c.Pending++
	case driver.ExecutionExecuting:
		c.Running++
	case driver.ExecutionWaitingForAsync:
		c.Waiting++
	case driver.ExecutionWaitingForRetry:
		c.Retrying++
	case driver.ExecutionWaitingForTSQ:
		c.InTSQ++
	case driver.ExecutionCompensating:
		c.Compensating++
	case driver.ExecutionCompleted:
		c.Completed++
	case driver.ExecutionCompensated:
		c.Compensated++
	case driver.ExecutionFailed:
		c.Failed++
	case driver.ExecutionCancelled:
		c.Cancelled++
	}
}

// BatchView is a batch run (a batch_run row) with counts and status computed from its
// payments' executions at the time of reading, so they are always current.
type BatchView struct {
	ID           uuid.UUID   `json:"id"`
	ScheduledFor string      `json:"scheduledFor"`
	ProcessType  string      `json:"processType"`
	Behavior     string      `json:"behavior,omitempty"`
	Total        int         `json:"total"`
	Status       string      `json:"status"`
	Counts       BatchCounts `json:"counts"`
	CreatedAt    time.Time   `json:"createdAt"`
}

func batchStatus(total int, c BatchCounts) string {
	switch {
	case total == 0 || c.NotStarted+c.Pending == total:
		return BatchNew
	case c.Terminal() < total:
		return BatchRunning
	case c.Completed == total:
		return BatchSucceeded
	case c.Completed == 0:
		return BatchFailed
	}
	return BatchPartial
}

func validDay(day string) error {
	if _, err := time.Parse(time.DateOnly, day); err != nil {
		return &commandbus.ValidationError{Field: "day", Message: fmt.Sprintf("must be a date as YYYY-MM-DD, got %s", input.Quote(day))}
	}
	return nil
}

func validProcessType(typ string) error {
	if !IsPaymentProcess(typ) {
		return &commandbus.ValidationError{Field: "processType", Message: fmt.Sprintf("must be %s, %s or %s, got %s", TypePaymentStep, TypePaymentManager, TypePaymentSaga, input.Quote(typ))}
	}
	return nil
}

// RunScheduledPaymentsForDay starts a day's scheduled work: it takes the payments scheduled for
// day that no run has taken yet, creates one batch_run, one batch_item and one execution of
// processType per payment (deferred: the runners work them), and returns the batch. behavior,
// when not nil, replaces the payments' own behavior.
func (p *Platform) RunScheduledPaymentsForDay(ctx context.Context, day, processType string, behavior *Behavior) (*BatchView, error) {
	if err := errors.Join(validDay(day), validProcessType(processType), behavior.Validate()); err != nil {
		return nil, err
	}
	batchID := uuid.Must(uuid.NewV7())
	var payments []*paymentRow
	var behaviorJSON []byte
	if behavior != nil {
		behaviorJSON, _ = json.Marshal(behavior)
	}
	err := p.store.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, p.store.q(`SELECT id FROM {t}payment WHERE value_date = $1 AND status = 'SCHEDULED'
			AND execution_id IS NULL ORDER BY created_at, id`+p.store.forUpdate), day)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return &commandbus.ValidationError{Field: "day", Message: "no payments are scheduled for " + day}
		}
		now := micros(p.now())
		name := ""
		if behavior != nil {
			name = behavior.Name
		}
		if _, err := tx.ExecContext(ctx, p.store.q(`INSERT INTO {t}batch_run (id, scheduled_for, process_type, behavior, total, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`), batchID.String(), day, processType, name, len(ids), now); err != nil {
			return err
		}
		for from := 0; from < len(ids); from += 500 {
			chunk := ids[from:min(from+500, len(ids))]
			values := make([]string, len(chunk))
			args := []any{batchID.String()}
			for i, id := range chunk {
				args = append(args, id, uuid.Must(uuid.NewV7()).String())
				values[i] = fmt.Sprintf("($1, $%d, $%d)", len(args)-1, len(args))
			}
			if _, err := tx.ExecContext(ctx, p.store.q(`INSERT INTO {t}batch_item (batch_id, payment_id, execution_id) VALUES `+
				strings.Join(values, ", ")), args...); err != nil {
				return err
			}
		}
		set := `execution_id = (SELECT bi.execution_id FROM {t}batch_item bi WHERE bi.batch_id = $1 AND bi.payment_id = pay.id),
			batch_id = $1, process_type = $2, status = 'ACCEPTED', updated_at = $3`
		args := []any{batchID.String(), processType, now}
		if behavior != nil {
			set += `, behavior = $4`
			args = append(args, string(behaviorJSON))
		}
		if _, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}payment AS pay SET `+set+`
			WHERE pay.id IN (SELECT payment_id FROM {t}batch_item WHERE batch_id = $1)`), args...); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if payments, err = p.queryPayments(ctx, `WHERE batch_id = $1 ORDER BY id`, batchID.String()); err != nil {
		return nil, err
	}
	for from := 0; from < len(payments); from += 1000 {
		chunk := payments[from:min(from+1000, len(payments))]
		details := make([]PaymentDetails, len(chunk))
		ids := make([]uuid.UUID, len(chunk))
		for i, pay := range chunk {
			details[i], ids[i] = pay.details, pay.executionID
		}
		if err := p.startExecutions(ctx, processType, details, ids, batchID); err != nil {
			return nil, err
		}
	}
	return p.GetBatch(ctx, batchID)
}

// SchedulePayments records payments for their value date without starting them; a later
// RunScheduledPaymentsForDay runs them. Requests are validated as SubmitPayment's; their
// ProcessType is ignored (the run chooses).
func (p *Platform) SchedulePayments(ctx context.Context, requests []PaymentRequest) ([]uuid.UUID, error) {
	details := make([]*PaymentDetails, len(requests))
	var errs []error
	for i, req := range requests {
		req.ProcessType = ""
		d, _, err := p.validate(ctx, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("payment %d: %w", i, err))
			continue
		}
		details[i] = d
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p.insertScheduled(ctx, requests, details)
}

func (p *Platform) insertScheduled(ctx context.Context, requests []PaymentRequest, details []*PaymentDetails) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, len(details))
	now := micros(p.now())
	err := p.store.tx(ctx, func(tx *sql.Tx) error {
		for from := 0; from < len(details); from += 500 {
			chunk := details[from:min(from+500, len(details))]
			values := make([]string, len(chunk))
			args := []any{now}
			for i, d := range chunk {
				behavior, _ := json.Marshal(d.Behavior)
				args = append(args, d.PaymentID.String(), requests[from+i].IdempotencyKey, d.DebitAccount, d.CreditAccount, d.Amount.String(),
					d.Currency, d.CreditCurrency, d.ValueDate, micros(d.Cutoff), string(behavior))
				n := len(args)
				values[i] = fmt.Sprintf("($%d, $%d, NULL, NULL, 0, NULL, $%d, $%d, $%d, $%d, $%d, $%d, $%d, 'SCHEDULED', $%d, $1, $1)",
					n-9, n-8, n-7, n-6, n-5, n-4, n-3, n-2, n-1, n)
				ids[from+i] = d.PaymentID
			}
			if _, err := tx.ExecContext(ctx, p.store.q(`INSERT INTO {t}payment (`+paymentCols+`) VALUES `+strings.Join(values, ", ")), args...); err != nil {
				if isUniqueViolation(err) {
					return &commandbus.ValidationError{Field: "idempotencyKey", Message: "a scheduled payment reuses an idempotency key: " + err.Error()}
				}
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// MaxBatchCount is the most payments CreateBatch generates in one batch.
const MaxBatchCount = 1_000_000

// CreateBatch schedules count generated payments for day (random valid accounts, amounts and
// currencies drawn from the platform's seeded source: about 30% cross-currency, about 5% above
// the approval threshold) and runs them as RunScheduledPaymentsForDay does. day follows the
// payments' value-date rule: not in the past, at most a year ahead; "" is today. processType ""
// is PaymentStep.
func (p *Platform) CreateBatch(ctx context.Context, count int, day, processType string, behavior *Behavior) (*BatchView, error) {
	if day == "" {
		day = p.now().UTC().Format(time.DateOnly)
	}
	if processType == "" {
		processType = TypePaymentStep
	}
	var errs []error
	if count < 1 || count > MaxBatchCount {
		errs = append(errs, &commandbus.ValidationError{Field: "count", Message: fmt.Sprintf("must be between 1 and %d, got %d", MaxBatchCount, count)})
	}
	if err := p.checkValueDate(day); err != nil {
		errs = append(errs, &commandbus.ValidationError{Field: "day", Message: err.Error()})
	}
	if err := errors.Join(append(errs, validProcessType(processType), behavior.Validate())...); err != nil {
		return nil, err
	}
	requests, details := p.generate(count, day, behavior)
	if _, err := p.insertScheduled(ctx, requests, details); err != nil {
		return nil, err
	}
	return p.RunScheduledPaymentsForDay(ctx, day, processType, behavior)
}

// generate draws payments from the seeded source.
func (p *Platform) generate(count int, day string, behavior *Behavior) ([]PaymentRequest, []*PaymentDetails) {
	p.randMu.Lock()
	defer p.randMu.Unlock()
	r := p.rand
	cutoff := p.now().UTC().Add(p.opts.DefaultCutoff).Truncate(time.Microsecond)
	runID := uuid.Must(uuid.NewV7()).String()
	requests := make([]PaymentRequest, count)
	details := make([]*PaymentDetails, count)
	for i := range count {
		debitCur := Currencies[r.IntN(len(Currencies))]
		creditCur := debitCur
		if r.Float64() < 0.3 {
			for creditCur == debitCur {
				creditCur = Currencies[r.IntN(len(Currencies))]
			}
		}
		usd := decimal.NewFromFloat(10 + r.Float64()*19_990)
		if r.Float64() < 0.05 {
			usd = p.opts.ApprovalThresholdUSD.Mul(decimal.NewFromFloat(1 + r.Float64()))
		}
		amount := fromUSD(usd, debitCur)
		if !amount.IsPositive() {
			amount = decimal.New(1, -MinorUnits(debitCur))
		}
		d := &PaymentDetails{
			PaymentID:      uuid.Must(uuid.NewV7()),
			DebitAccount:   CustomerAccountID(debitCur, 1+r.IntN(p.opts.CustomersPerCurrency)),
			CreditAccount:  BeneficiaryAccountID(creditCur, 1+r.IntN(p.opts.BeneficiariesPerCurrency)),
			Amount:         amount,
			Currency:       debitCur,
			CreditCurrency: creditCur,
			ValueDate:      day,
			Cutoff:         cutoff,
			Behavior:       behavior,
		}
		if behavior != nil {
			d.Seed = behavior.Seed
		}
		details[i] = d
		requests[i] = PaymentRequest{IdempotencyKey: fmt.Sprintf("generated:%s:%d", runID, i)}
	}
	return requests, details
}

// GetBatch returns a batch run with current counts and status, or commandbus.ErrNotFound.
func (p *Platform) GetBatch(ctx context.Context, id uuid.UUID) (*BatchView, error) {
	b, err := p.scanBatch(p.store.db.QueryRowContext(ctx, p.store.q(`SELECT id, scheduled_for, process_type, behavior, total, created_at
		FROM {t}batch_run WHERE id = $1`), id.String()))
	if notFound(err) {
		return nil, fmt.Errorf("%w: batch %s", commandbus.ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return b, p.countBatch(ctx, b)
}

// ListBatches returns batch runs newest first (by creation, then id), after params.After, with
// current counts. Counting reads every execution of a batch, so keep pages short (default 50).
func (p *Platform) ListBatches(ctx context.Context, params ListParams) ([]*BatchView, error) {
	cond, args := keysetAfter(params.After, "created_at", true, 1)
	if cond != "" {
		cond = "WHERE " + cond
	}
	rows, err := p.store.db.QueryContext(ctx, p.store.q(`SELECT id, scheduled_for, process_type, behavior, total, created_at
		FROM {t}batch_run `+cond+` ORDER BY created_at DESC, id DESC LIMIT `+fmt.Sprint(listLimit(params.Limit, 50))), args...)
	if err != nil {
		return nil, err
	}
	var out []*BatchView
	for rows.Next() {
		b, err := p.scanBatch(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, b := range out {
		if err := p.countBatch(ctx, b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (p *Platform) scanBatch(row rowScanner) (*BatchView, error) {
	var b BatchView
	var id string
	var behavior sql.NullString
	var created int64
	if err := row.Scan(&id, &b.ScheduledFor, &b.ProcessType, &behavior, &b.Total, &created); err != nil {
		return nil, err
	}
	b.ID, b.Behavior, b.CreatedAt = uuid.MustParse(id), behavior.String, fromMicros(created)
	return &b, nil
}

// countBatch derives counts and status from the batch's executions.
func (p *Platform) countBatch(ctx context.Context, b *BatchView) error {
	b.Counts = BatchCounts{}
	seen := 0
	err := p.eachExecution(ctx, b.ID, func(row *driver.ExecutionRow) error {
		b.Counts.add(row.Status)
		seen++
		return nil
	})
	if err != nil {
		return err
	}
	b.Counts.NotStarted = max(b.Total-seen, 0)
	b.Status = batchStatus(b.Total, b.Counts)
	return nil
}

// eachExecution pages through the payment executions, of one batch or all.
func (p *Platform) eachExecution(ctx context.Context, batchID uuid.UUID, fn func(row *driver.ExecutionRow) error) error {
	before := uuid.Nil
	for {
		rows, err := p.exec.ExecutionList(ctx, &driver.ExecutionListParams{Domain: DomainPayments, BatchID: batchID, BeforeID: before, Limit: driver.MaxListLimit})
		if err != nil {
			return err
		}
		for _, row := range rows {
			if !IsPaymentProcess(row.Type) {
				continue
			}
			if err := fn(row); err != nil {
				return err
			}
		}
		if len(rows) < driver.MaxListLimit {
			return nil
		}
		before = rows[len(rows)-1].ID
	}
}
