package payments

import (
	"bytes"
	"context"
	"database/sql"
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
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/workflow"
)

// PaymentRequest asks the platform to pay: the API's input. Amount is decimal text in the debit
// currency.
type PaymentRequest struct {
	// IdempotencyKey is the client's key: submitting it again returns a DuplicatePaymentError
	// with the first payment, and nothing new happens. Required.
	IdempotencyKey string `json:"idempotencyKey"`
	DebitAccount   string `json:"debitAccount"`
	CreditAccount  string `json:"creditAccount"`
	Amount         string `json:"amount"`
	// Currency is the debit currency (ISO 4217).
	Currency string `json:"currency"`
	// CreditCurrency is the beneficiary's currency; default Currency. A different one needs FX.
	CreditCurrency string `json:"creditCurrency,omitempty"`
	// ValueDate is YYYY-MM-DD; default today.
	ValueDate string `json:"valueDate,omitempty"`
	// Cutoff is when the payment must be done; default now plus Options.DefaultCutoff. Past it
	// the step process compensates.
	Cutoff *time.Time `json:"cutoff,omitempty"`
	// ProcessType is PaymentStep (default) or PaymentManager.
	ProcessType string `json:"processType,omitempty"`
	// Behavior, or the name of a preset, shapes the simulators for this payment; default happy.
	Behavior       *Behavior `json:"behavior,omitempty"`
	BehaviorPreset string    `json:"behaviorPreset,omitempty"`
}

// PaymentResult is what SubmitPayment reports: the payment ran in
// the caller's goroutine until it completed or had to wait.
type PaymentResult struct {
	PaymentID   uuid.UUID `json:"paymentId"`
	ExecutionID uuid.UUID `json:"executionId"`
	ProcessType string    `json:"processType"`
	Status      string    `json:"status"`
	// Completed is true when the payment finished within the call (HTTP 200 rather than 202).
	Completed bool   `json:"completed"`
	Message   string `json:"message"`
}

// ErrDuplicatePayment matches every DuplicatePaymentError with errors.Is.
var ErrDuplicatePayment = errors.New("payments: duplicate idempotency key")

// DuplicatePaymentError is returned for a payment request whose idempotency key was used
// before; nothing was created. When the first payment was submitted with its request recorded
// (SubmitPayment records it), SameRequest says whether this request asks for the same payment
// and Differences names the fields that differ; Response is the answer the API gave the first
// request, once it gave one (RecordSubmitResponse).
type DuplicatePaymentError struct {
	IdempotencyKey string    `json:"idempotencyKey"`
	ExistingID     uuid.UUID `json:"existingId"`
	ExecutionID    uuid.UUID `json:"executionId,omitzero"`
	Status         string    `json:"status"`
	// Compared is true when the first payment's request is known, so SameRequest and
	// Differences say something (false for payments of batches and of older versions).
	Compared    bool     `json:"-"`
	SameRequest bool     `json:"-"`
	Differences []string `json:"-"`
	// Response is the first request's recorded answer, nil until it is recorded.
	Response *SubmitResponse `json:"-"`
}

// SubmitResponse is an answer the API gave a payment submission: replayed for a repeat of it.
type SubmitResponse struct {
	Status int
	Body   []byte
}

// requestFingerprint is the request as its payment records it: every field as the client gave
// it (no defaults applied), without the idempotency key.
func requestFingerprint(req PaymentRequest) string {
	req.IdempotencyKey = ""
	data, _ := json.Marshal(req) // a PaymentRequest always encodes
	return string(data)
}

// requestDifferences names the top-level fields (as JSON names) in which two recorded requests
// differ, in a stable order.
func requestDifferences(first, again string) []string {
	var a, b map[string]json.RawMessage
	if json.Unmarshal([]byte(first), &a) != nil || json.Unmarshal([]byte(again), &b) != nil {
		return []string{"body"}
	}
	var out []string
	for name, value := range a {
		if other, ok := b[name]; !ok || !bytes.Equal(value, other) {
			out = append(out, name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// RecordSubmitResponse records the answer the API gave the submission of payment id, so that a
// repeat of the request with the same idempotency key replays it. The first answer recorded
// stays.
func (p *Platform) RecordSubmitResponse(ctx context.Context, id uuid.UUID, status int, body []byte) error {
	if _, err := p.store.db.ExecContext(ctx, p.store.q(`UPDATE {t}payment SET response_status = $1, response_body = $2
		WHERE id = $3 AND response_status IS NULL`), status, string(body), id.String()); err != nil {
		return fmt.Errorf("payments: recording the answer to payment %s: %w", id, err)
	}
	return nil
}

// Error names the key and the existing payment.
func (e *DuplicatePaymentError) Error() string {
	return fmt.Sprintf("payment with idempotency key %q already exists as %s (%s)", e.IdempotencyKey, e.ExistingID, e.Status)
}

// Is matches ErrDuplicatePayment.
func (e *DuplicatePaymentError) Is(target error) bool { return target == ErrDuplicatePayment }

// payment statuses kept by the payments context itself (the process's status is the execution's).
const (
	paymentScheduled = "SCHEDULED"
	paymentAccepted  = "ACCEPTED"
)

// validate checks a request and returns the payment's details, or every problem at once. Text
// is checked before anything reads the database, and no message repeats a whole oversized
// value.
func (p *Platform) validate(ctx context.Context, req PaymentRequest) (*PaymentDetails, string, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &commandbus.ValidationError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	// text reports whether a text field is printable and short enough, reporting it if not.
	text := func(field, value string) bool {
		if msg := input.Identifier.Check(value); msg != "" {
			bad(field, "%s", msg)
			return false
		}
		return true
	}
	if strings.TrimSpace(req.IdempotencyKey) == "" {
		bad("idempotencyKey", "required: it is how a retried request is recognised")
	} else {
		text("idempotencyKey", req.IdempotencyKey)
	}
	d := &PaymentDetails{PaymentID: uuid.Must(uuid.NewV7()), DebitAccount: req.DebitAccount, CreditAccount: req.CreditAccount}
	var err error
	if d.Currency, err = ParseCurrency(req.Currency); err != nil {
		bad("currency", "%s", err.Error())
	}
	d.CreditCurrency = d.Currency
	if req.CreditCurrency != "" {
		if d.CreditCurrency, err = ParseCurrency(req.CreditCurrency); err != nil {
			bad("creditCurrency", "%s", err.Error())
		}
	}
	if d.Amount, err = ParseAmount(req.Amount, d.Currency); err != nil {
		bad("amount", "%s", err.Error())
	} else if limit, ok := p.opts.maxAmount(d.Currency); ok && d.Amount.GreaterThan(limit) {
		bad("amount", "%s %s is above the largest payment allowed, %s %s", d.Amount, d.Currency, limit, d.Currency)
	}
	check := func(field, id, currency string, kinds ...string) {
		if strings.TrimSpace(id) == "" {
			bad(field, "required")
			return
		}
		if !text(field, id) {
			return
		}
		a, err := p.GetAccount(ctx, id)
		if errors.Is(err, commandbus.ErrNotFound) {
			bad(field, "account %s does not exist", input.Quote(id))
			return
		}
		if err != nil {
			errs = append(errs, err)
			return
		}
		ok := false
		for _, k := range kinds {
			ok = ok || a.Kind == k
		}
		if !ok {
			bad(field, "account %s is a %s account; use a %s account", id, a.Kind, strings.Join(kinds, " or "))
		}
		if currency != "" && a.Currency != currency {
			bad(field, "account %s is in %s, not %s", id, a.Currency, currency)
		}
	}
	check("debitAccount", req.DebitAccount, d.Currency, AccountCustomer)
	check("creditAccount", req.CreditAccount, d.CreditCurrency, AccountBeneficiary, AccountCustomer)
	if req.DebitAccount != "" && req.DebitAccount == req.CreditAccount {
		bad("creditAccount", "must differ from the debit account")
	}
	now := p.now().UTC()
	d.ValueDate = req.ValueDate
	if d.ValueDate == "" {
		d.ValueDate = now.Format(time.DateOnly)
	} else if err := p.checkValueDate(req.ValueDate); err != nil {
		bad("valueDate", "%s", err.Error())
	}
	d.Cutoff = now.Add(p.opts.DefaultCutoff).Truncate(time.Microsecond)
	if req.Cutoff != nil {
		switch {
		case !req.Cutoff.After(now):
			bad("cutoff", "%s has passed", req.Cutoff.UTC().Format(time.RFC3339))
		case req.Cutoff.After(now.AddDate(1, 0, 7)):
			bad("cutoff", "%s is more than a year ahead", req.Cutoff.UTC().Format(time.RFC3339))
		}
		d.Cutoff = req.Cutoff.UTC().Truncate(time.Microsecond)
	}
	typ := req.ProcessType
	if typ == "" {
		typ = TypePaymentStep
	} else if err := validProcessType(typ); err != nil {
		errs = append(errs, err)
	}
	d.Behavior = req.Behavior
	if req.BehaviorPreset != "" {
		if req.Behavior != nil {
			bad("behaviorPreset", "give a behavior or a preset, not both")
		} else if d.Behavior, err = Preset(req.BehaviorPreset); err != nil {
			bad("behaviorPreset", "unknown preset %s (happy, realistic, chaos)", input.Quote(req.BehaviorPreset))
		}
	}
	if err := d.Behavior.Validate(); err != nil {
		errs = append(errs, err)
	}
	if d.Behavior != nil && d.Behavior.Seed != 0 {
		d.Seed = d.Behavior.Seed
	}
	if len(errs) > 0 {
		return nil, "", errors.Join(errs...)
	}
	return d, typ, nil
}

// checkValueDate applies the value-date rule of payments and batches: a date as YYYY-MM-DD, not
// in the past and at most a year ahead.
func (p *Platform) checkValueDate(day string) error {
	now := p.now().UTC()
	vd, err := time.Parse(time.DateOnly, day)
	switch {
	case err != nil:
		return fmt.Errorf("must be a date as YYYY-MM-DD, got %s", input.Quote(day))
	case vd.Format(time.DateOnly) < now.Format(time.DateOnly):
		return fmt.Errorf("%s is in the past", day)
	case vd.After(now.AddDate(1, 0, 0)):
		return fmt.Errorf("%s is more than a year ahead", day)
	}
	return nil
}

// SubmitPayment validates a payment request, records the payment (its idempotency key is
// UNIQUE) and creates its process's execution in the same transaction, so a payment never exists
// without the execution that works on it. After the commit it runs the process at once in the
// caller's goroutine, until it completes, waits for a reply or a confirmation, or schedules a
// retry. Bad input returns *commandbus.ValidationError values joined
// with errors.Join and changes nothing; a reused idempotency key returns *DuplicatePaymentError.
func (p *Platform) SubmitPayment(ctx context.Context, req PaymentRequest) (*PaymentResult, error) {
	d, typ, err := p.validate(ctx, req)
	if err != nil {
		return nil, err
	}
	execID := uuid.Must(uuid.NewV7())
	created, err := p.recordPayment(ctx, req.IdempotencyKey, typ, d, execID, requestFingerprint(req))
	if err != nil {
		return nil, err
	}
	if !created {
		return nil, p.duplicate(ctx, req)
	}
	// A runner may have taken the execution already; then RunNow leaves it to that runner. An
	// error of the first run leaves the execution to the runners too: it exists whatever happens.
	if err := p.resumer(typ).RunNow(ctx, execID); err != nil {
		p.logger.Warn("the payment's first run stopped with an error; runners continue it", "payment_id", d.PaymentID, "execution_id", execID, "error", err)
	}
	result := &PaymentResult{PaymentID: d.PaymentID, ExecutionID: execID, ProcessType: typ}
	row, err := p.exec.ExecutionGet(ctx, execID)
	if err != nil {
		return nil, err
	}
	result.Status = overallStatus(row.Status, "")
	result.Completed = row.Status == driver.ExecutionCompleted
	switch row.Status {
	case driver.ExecutionCompleted:
		result.Message = "Completed"
	case driver.ExecutionWaitingForAsync:
		result.Message = "Awaiting " + row.CurrentWait
	case driver.ExecutionWaitingForRetry:
		result.Message = "Processing (will retry)"
	default:
		result.Message = "Processing"
	}
	return result, nil
}

// resumer returns the manager of a payment process type, to run an execution now.
func (p *Platform) resumer(typ string) interface {
	RunNow(ctx context.Context, id uuid.UUID) error
} {
	switch typ {
	case TypePaymentManager:
		return p.manager
	case TypePaymentSaga:
		return p.saga
	}
	return p.step
}

// insertPayment records an accepted payment with its request; $16 is the started flag.
const insertPayment = `INSERT INTO {t}payment
	(id, idempotency_key, process_type, execution_id, started, batch_id, debit_account, credit_account, amount, currency,
	 credit_currency, value_date, cutoff, status, behavior, created_at, updated_at, request)
	VALUES ($1, $2, $3, $4, $16, NULL, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, $15) ON CONFLICT (idempotency_key) DO NOTHING`

// recordPayment writes an accepted payment and its PENDING execution in one transaction; created
// is false when the idempotency key exists already (then nothing was written). When Options.DB
// is another database than the bus's no transaction can span both: the payment is written
// unstarted first and deleted again if its execution cannot be created (a crash in between
// leaves it for startUnstarted, which creates the execution on the next start).
func (p *Platform) recordPayment(ctx context.Context, key, typ string, d *PaymentDetails, execID uuid.UUID, request string) (created bool, err error) {
	behavior, _ := json.Marshal(d.Behavior)
	args := []any{d.PaymentID.String(), key, typ, execID.String(), d.DebitAccount, d.CreditAccount, d.Amount.String(),
		d.Currency, d.CreditCurrency, d.ValueDate, micros(d.Cutoff), paymentAccepted, string(behavior), micros(p.now()), request}
	start := func(tx any) error {
		if typ == TypePaymentSaga {
			sagaOpts := []workflow.StartOption{workflow.WithIDs(execID), workflow.WithBusinessKeys(d.PaymentID.String()), workflow.WithDeadline(d.Cutoff)}
			if tx != nil {
				sagaOpts = append(sagaOpts, workflow.InTx(tx))
			}
			_, err := p.saga.StartMany(ctx, []any{ManagerState{PaymentDetails: *d}}, sagaOpts...)
			return err
		}
		opts := []process.StartOption{process.WithIDs(execID), process.WithBusinessKeys(d.PaymentID.String()), process.WithDeadline(d.Cutoff)}
		if tx != nil {
			opts = append(opts, process.InTx(tx))
		}
		var err error
		if typ == TypePaymentManager {
			_, err = p.manager.StartBatch(ctx, []ManagerState{{PaymentDetails: *d}}, opts...)
		} else {
			_, err = p.step.StartBatch(ctx, []StepState{{PaymentDetails: *d}}, opts...)
		}
		return err
	}
	err = p.store.busTx(ctx, func(exec execFunc, tx any) error {
		n, err := exec(ctx, insertPayment, append(args, 1)...)
		if err != nil {
			return fmt.Errorf("payments: recording the payment: %w", err)
		}
		if n == 0 {
			return nil
		}
		created = true
		return start(tx)
	})
	if !errors.Is(err, errNotShared) {
		if err != nil {
			return false, err
		}
		return created, nil
	}
	res, err := p.store.db.ExecContext(ctx, p.store.q(insertPayment), append(args, 0)...)
	if err != nil {
		return false, fmt.Errorf("payments: recording the payment: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if err := start(nil); err != nil {
		if _, delErr := p.store.db.ExecContext(ctx, p.store.q(`DELETE FROM {t}payment WHERE id = $1 AND started = 0`), d.PaymentID.String()); delErr != nil {
			p.logger.Error("removing a payment whose execution could not be created failed; startUnstarted retries it",
				"payment_id", d.PaymentID, "error", delErr)
		}
		return false, err
	}
	return true, p.markStarted(ctx, []uuid.UUID{execID})
}

// duplicate describes the payment that already has req's idempotency key: whether it was asked
// for with the same request, and the answer the first request got.
func (p *Platform) duplicate(ctx context.Context, req PaymentRequest) error {
	key := req.IdempotencyKey
	var id, status string
	var execID, request, body sql.NullString
	var answered sql.NullInt64
	if err := p.store.db.QueryRowContext(ctx, p.store.q(`SELECT id, execution_id, status, request, response_status, response_body
		FROM {t}payment WHERE idempotency_key = $1`), key).
		Scan(&id, &execID, &status, &request, &answered, &body); err != nil {
		return fmt.Errorf("payments: reading the payment with key %q: %w", key, err)
	}
	dup := &DuplicatePaymentError{IdempotencyKey: key, ExistingID: uuid.MustParse(id), Status: status}
	if request.Valid {
		dup.Compared = true
		dup.Differences = requestDifferences(request.String, requestFingerprint(req))
		dup.SameRequest = len(dup.Differences) == 0
	}
	if answered.Valid {
		dup.Response = &SubmitResponse{Status: int(answered.Int64), Body: []byte(body.String)}
	}
	if execID.Valid {
		dup.ExecutionID = uuid.MustParse(execID.String)
		if row, err := p.exec.ExecutionGet(ctx, dup.ExecutionID); err == nil {
			dup.Status = overallStatus(row.Status, status)
		}
	}
	return dup
}

// startExecutions creates the PENDING executions of payments whose rows carry their execution
// ids (batches, and payments a crash kept from starting), then marks them started; runners pick
// them up. Payments are grouped by cutoff, the deadline.
func (p *Platform) startExecutions(ctx context.Context, typ string, details []PaymentDetails, ids []uuid.UUID, batchID uuid.UUID) error {
	groups := map[time.Time][]int{}
	var cutoffs []time.Time
	for i, d := range details {
		if _, ok := groups[d.Cutoff]; !ok {
			cutoffs = append(cutoffs, d.Cutoff)
		}
		groups[d.Cutoff] = append(groups[d.Cutoff], i)
	}
	sort.Slice(cutoffs, func(i, j int) bool { return cutoffs[i].Before(cutoffs[j]) })
	for _, cutoff := range cutoffs {
		idx := groups[cutoff]
		groupIDs := make([]uuid.UUID, len(idx))
		keys := make([]string, len(idx))
		for j, i := range idx {
			groupIDs[j], keys[j] = ids[i], details[i].PaymentID.String()
		}
		opts := []process.StartOption{process.WithIDs(groupIDs...), process.WithBusinessKeys(keys...), process.WithDeadline(cutoff)}
		if batchID != uuid.Nil {
			opts = append(opts, process.WithBatch(batchID))
		}
		var err error
		switch typ {
		case TypePaymentStep:
			states := make([]StepState, len(idx))
			for j, i := range idx {
				states[j] = StepState{PaymentDetails: details[i]}
			}
			_, err = p.step.StartBatch(ctx, states, opts...)
		case TypePaymentManager:
			states := make([]ManagerState, len(idx))
			for j, i := range idx {
				states[j] = ManagerState{PaymentDetails: details[i]}
			}
			_, err = p.manager.StartBatch(ctx, states, opts...)
		case TypePaymentSaga:
			inputs := make([]any, len(idx))
			for j, i := range idx {
				inputs[j] = ManagerState{PaymentDetails: details[i]}
			}
			sagaOpts := []workflow.StartOption{workflow.WithIDs(groupIDs...), workflow.WithBusinessKeys(keys...), workflow.WithDeadline(cutoff)}
			if batchID != uuid.Nil {
				sagaOpts = append(sagaOpts, workflow.WithBatch(batchID))
			}
			_, err = p.saga.StartMany(ctx, inputs, sagaOpts...)
		default:
			return validProcessType(typ)
		}
		if err != nil {
			return fmt.Errorf("payments: starting %d executions: %w", len(idx), err)
		}
		if err := p.markStarted(ctx, groupIDs); err != nil {
			return err
		}
	}
	return nil
}

func (p *Platform) markStarted(ctx context.Context, ids []uuid.UUID) error {
	for from := 0; from < len(ids); from += 500 {
		chunk := ids[from:min(from+500, len(ids))]
		placeholders := make([]string, len(chunk))
		args := make([]any, len(chunk)+1)
		args[0] = micros(p.now())
		for i, id := range chunk {
			placeholders[i] = fmt.Sprintf("$%d", i+2)
			args[i+1] = id.String()
		}
		if _, err := p.store.db.ExecContext(ctx, p.store.q(`UPDATE {t}payment SET started = 1, updated_at = $1 WHERE execution_id IN (`+
			strings.Join(placeholders, ", ")+`)`), args...); err != nil {
			return fmt.Errorf("payments: marking payments started: %w", err)
		}
	}
	return nil
}

// startUnstarted starts the executions of payments recorded with an execution id that a crash
// kept from starting (the payment row commits first; its execution id is fixed, so a second
// start cannot create a second execution).
func (p *Platform) startUnstarted(ctx context.Context) error {
	payments, err := p.queryPayments(ctx, `WHERE started = 0 AND execution_id IS NOT NULL ORDER BY created_at LIMIT 1000`)
	if err != nil {
		return err
	}
	byType := map[string][]int{}
	for i, pay := range payments {
		if _, err := p.exec.ExecutionGet(ctx, pay.executionID); err == nil {
			if err := p.markStarted(ctx, []uuid.UUID{pay.executionID}); err != nil {
				return err
			}
			continue
		} else if !errors.Is(err, driver.ErrNotFound) {
			return err
		}
		byType[pay.processType] = append(byType[pay.processType], i)
	}
	for typ, idx := range byType {
		details := make([]PaymentDetails, len(idx))
		ids := make([]uuid.UUID, len(idx))
		for j, i := range idx {
			details[j], ids[j] = payments[i].details, payments[i].executionID
		}
		p.logger.Warn("starting payments accepted before a crash", "count", len(idx), "process_type", typ)
		if err := p.startExecutions(ctx, typ, details, ids, payments[idx[0]].batchID); err != nil {
			return err
		}
	}
	return nil
}

// paymentRow is a payment as the payments context stores it.
type paymentRow struct {
	details        PaymentDetails
	idempotencyKey string
	processType    string
	executionID    uuid.UUID
	started        bool
	batchID        uuid.UUID
	status         string
	createdAt      time.Time
	updatedAt      time.Time
}

const paymentCols = `id, idempotency_key, process_type, execution_id, started, batch_id, debit_account, credit_account, amount,
	currency, credit_currency, value_date, cutoff, status, behavior, created_at, updated_at`

func (p *Platform) queryPayments(ctx context.Context, where string, args ...any) ([]*paymentRow, error) {
	rows, err := p.store.db.QueryContext(ctx, p.store.q(`SELECT `+paymentCols+` FROM {t}payment `+where), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*paymentRow
	for rows.Next() {
		var r paymentRow
		var id, amount string
		var typ, execID, batchID, behavior sql.NullString
		var started int
		var cutoff, created, updated int64
		if err := rows.Scan(&id, &r.idempotencyKey, &typ, &execID, &started, &batchID, &r.details.DebitAccount, &r.details.CreditAccount,
			&amount, &r.details.Currency, &r.details.CreditCurrency, &r.details.ValueDate, &cutoff, &r.status, &behavior, &created, &updated); err != nil {
			return nil, err
		}
		r.details.PaymentID = uuid.MustParse(id)
		if r.details.Amount, err = decimal.NewFromString(amount); err != nil {
			return nil, err
		}
		r.processType, r.started = typ.String, started == 1
		if execID.Valid {
			r.executionID = uuid.MustParse(execID.String)
		}
		if batchID.Valid {
			r.batchID = uuid.MustParse(batchID.String)
		}
		if behavior.Valid && behavior.String != "" && behavior.String != "null" {
			r.details.Behavior = &Behavior{}
			if err := json.Unmarshal([]byte(behavior.String), r.details.Behavior); err != nil {
				return nil, fmt.Errorf("payment %s: behavior: %w", id, err)
			}
			r.details.Seed = r.details.Behavior.Seed
		}
		r.details.Cutoff, r.createdAt, r.updatedAt = fromMicros(cutoff), fromMicros(created), fromMicros(updated)
		out = append(out, &r)
	}
	return out, rows.Err()
}

// overallStatus is the payment's status as the API shows it: the execution's, in a payment's
// words, or the payments context's own before a process runs.
func overallStatus(s driver.ExecutionStatus, paymentStatus string) string {
	switch s {
	case "":
		return paymentStatus
	case driver.ExecutionPending:
		return "PENDING"
	case driver.ExecutionExecuting:
		return "PROCESSING"
	case driver.ExecutionWaitingForAsync:
		return "WAITING"
	case driver.ExecutionWaitingForRetry:
		return "RETRYING"
	case driver.ExecutionWaitingForTSQ:
		return "IN_TSQ"
	}
	return string(s)
}

// paymentExecutionStatuses are the execution statuses a payment's process can have.
var paymentExecutionStatuses = []driver.ExecutionStatus{driver.ExecutionPending, driver.ExecutionExecuting, driver.ExecutionWaitingForAsync,
	driver.ExecutionWaitingForRetry, driver.ExecutionWaitingForTSQ, driver.ExecutionCompensating, driver.ExecutionCompensated,
	driver.ExecutionCompleted, driver.ExecutionCancelled, driver.ExecutionFailed}

// executionStatuses maps an API status back to execution statuses.
func executionStatuses(status string) ([]driver.ExecutionStatus, bool) {
	for _, s := range paymentExecutionStatuses {
		if overallStatus(s, "") == status || string(s) == status {
			return []driver.ExecutionStatus{s}, true
		}
	}
	return nil, false
}
