package payments

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus/driver"
)

// Summary is how a batch (or all payments) ended: counts by final status, the duplicate
// submissions (which must be zero), and end-to-end latency from acceptance to completion.
type Summary struct {
	BatchID              uuid.UUID `json:"batchId,omitzero"`
	Total                int       `json:"total"`
	Completed            int       `json:"completed"`
	Compensated          int       `json:"compensated"`
	Failed               int       `json:"failed"`
	Cancelled            int       `json:"cancelled"`
	InTSQ                int       `json:"inTsq"`
	Waiting              int       `json:"waiting"`
	InProgress           int       `json:"inProgress"`
	NotStarted           int       `json:"notStarted"`
	DuplicateSubmissions int       `json:"duplicateSubmissions"`
	LatencyP50Ms         float64   `json:"latencyP50Ms"`
	LatencyP99Ms         float64   `json:"latencyP99Ms"`
	// LastCompletedAt is when the most recent payment of the summary completed.
	LastCompletedAt time.Time `json:"lastCompletedAt,omitzero"`
}

// Summary summarises one batch, or every payment when batchID is uuid.Nil.
func (p *Platform) Summary(ctx context.Context, batchID uuid.UUID) (*Summary, error) {
	s := &Summary{BatchID: batchID}
	var latencies []time.Duration
	var counts BatchCounts
	err := p.eachExecution(ctx, batchID, func(row *driver.ExecutionRow) error {
		counts.add(row.Status)
		s.Total++
		if row.Status == driver.ExecutionCompleted && row.CompletedAt != nil {
			latencies = append(latencies, row.CompletedAt.Sub(row.CreatedAt))
			if row.CompletedAt.After(s.LastCompletedAt) {
				s.LastCompletedAt = *row.CompletedAt
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.Completed, s.Compensated, s.Failed, s.Cancelled, s.InTSQ = counts.Completed, counts.Compensated, counts.Failed, counts.Cancelled, counts.InTSQ
	s.Waiting = counts.Waiting + counts.Retrying
	s.InProgress = counts.Pending + counts.Running + counts.Compensating
	where, args := "", []any{}
	if batchID != uuid.Nil {
		where, args = `WHERE batch_id = $1`, []any{batchID.String()}
	}
	var payments int
	if err := p.store.db.QueryRowContext(ctx, p.store.q(`SELECT count(*) FROM {t}payment `+where), args...).Scan(&payments); err != nil {
		return nil, err
	}
	s.NotStarted = max(payments-s.Total, 0)
	s.Total = max(s.Total, payments)
	dupWhere := ""
	if batchID != uuid.Nil {
		dupWhere = `WHERE payment_id IN (SELECT id FROM {t}payment WHERE batch_id = $1)`
	}
	if err := p.store.db.QueryRowContext(ctx, p.store.q(`SELECT count(*) FROM (SELECT payment_id FROM {t}payment_submission `+dupWhere+`
		GROUP BY payment_id HAVING count(*) > 1) d`), args...).Scan(&s.DuplicateSubmissions); err != nil {
		return nil, err
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	s.LatencyP50Ms = percentileMs(latencies, 0.50)
	s.LatencyP99Ms = percentileMs(latencies, 0.99)
	return s, nil
}

func percentileMs(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

// CheckInvariants verifies the platform's promises and describes every violation:
//
//   - at most one submission per payment;
//   - money is conserved: per currency, the balances sum to the opening balances; every
//     account's balance is its opening balance plus its ledger entries; holds are never negative
//     and equal the account's active holds;
//   - every payment is terminal or visibly waiting: its process exists and is finished, waiting
//     for a response (with a wait named), for a retry (with a time), in the troubleshooting
//     queue (with an error), or held by a live runner; a payment not started is SCHEDULED.
func (p *Platform) CheckInvariants(ctx context.Context) error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	rows, err := p.store.db.QueryContext(ctx, p.store.q(`SELECT payment_id, count(*) FROM {t}payment_submission GROUP BY payment_id HAVING count(*) > 1`))
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return err
		}
		add("payment %s has %d submissions", id, n)
	}
	rows.Close()

	// Balances, ledger and holds are read in one snapshot, so payments in flight cannot tear them.
	var accounts []*Account
	var ledger, holds map[string]decimal.Decimal
	var opts *sql.TxOptions
	if p.store.postgres {
		opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	tx, err := p.store.db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	accounts, err = p.listAccounts(ctx, tx)
	if err == nil {
		ledger, err = p.sumBy(ctx, tx, `SELECT account_id, amount FROM {t}ledger_entry`)
	}
	if err == nil {
		holds, err = p.sumBy(ctx, tx, `SELECT account_id, amount FROM {t}hold WHERE status = 'ACTIVE'`)
	}
	_ = tx.Rollback()
	if err != nil {
		return err
	}
	opening, balance := map[string]decimal.Decimal{}, map[string]decimal.Decimal{}
	for _, a := range accounts {
		opening[a.Currency] = opening[a.Currency].Add(a.OpeningBalance)
		balance[a.Currency] = balance[a.Currency].Add(a.Balance)
		if want := a.OpeningBalance.Add(ledger[a.ID]); !want.Equal(a.Balance) {
			add("account %s: balance %s, but opening %s plus ledger entries %s is %s", a.ID, a.Balance, a.OpeningBalance, ledger[a.ID], want)
		}
		if a.Held.IsNegative() || !a.Held.Equal(holds[a.ID]) {
			add("account %s: held %s, active holds %s", a.ID, a.Held, holds[a.ID])
		}
	}
	for cur, o := range opening {
		if !o.Equal(balance[cur]) {
			add("%s is not conserved: balances sum to %s, opening balances to %s", cur, balance[cur], o)
		}
	}

	executions := map[uuid.UUID]*driver.ExecutionRow{}
	if err := p.eachExecution(ctx, uuid.Nil, func(row *driver.ExecutionRow) error {
		executions[row.ID] = row
		return nil
	}); err != nil {
		return err
	}
	payments, err := p.queryPayments(ctx, `ORDER BY created_at`)
	if err != nil {
		return err
	}
	leftovers, err := p.leftoverEffects(ctx, executions, payments)
	if err != nil {
		return err
	}
	problems = append(problems, leftovers...)
	now := p.now()
	for _, pay := range payments {
		id := pay.details.PaymentID
		if pay.executionID == uuid.Nil {
			if pay.status != paymentScheduled {
				add("payment %s has no process and is %s, not SCHEDULED", id, pay.status)
			}
			continue
		}
		row := executions[pay.executionID]
		if row == nil {
			if pay.started {
				add("payment %s: its process %s does not exist", id, pay.executionID)
			} else {
				add("payment %s was accepted but its process %s never started", id, pay.executionID)
			}
			continue
		}
		switch {
		case row.Status.Terminal():
		case row.Status == driver.ExecutionWaitingForAsync && row.CurrentWait == "":
			add("payment %s waits for a response without naming the wait", id)
		case row.Status == driver.ExecutionWaitingForRetry && row.NextRetryAt == nil:
			add("payment %s waits for a retry without a retry time", id)
		case row.Status == driver.ExecutionWaitingForTSQ && row.ErrorCode == "":
			add("payment %s is in the troubleshooting queue without an error", id)
		case row.Status == driver.ExecutionPending && row.WakeAt == nil,
			(row.Status == driver.ExecutionExecuting || row.Status == driver.ExecutionCompensating) &&
				(row.LeaseUntil == nil || !row.LeaseUntil.After(now)) && row.WakeAt == nil:
			add("payment %s is %s but no runner holds it or will take it", id, row.Status)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return errors.New("payments: invariants violated:\n  - " + strings.Join(problems, "\n  - "))
}

// LeftoverEffects counts the effects left live under payments whose process ended COMPENSATED or
// CANCELLED: an active hold or limit reservation, a booked FX contract (in the platform or at the
// simulated provider) or a risk booking not unwound. It must be zero; CheckInvariants lists them.
func (p *Platform) LeftoverEffects(ctx context.Context) (int, error) {
	executions := map[uuid.UUID]*driver.ExecutionRow{}
	if err := p.eachExecution(ctx, uuid.Nil, func(row *driver.ExecutionRow) error {
		executions[row.ID] = row
		return nil
	}); err != nil {
		return 0, err
	}
	payments, err := p.queryPayments(ctx, `ORDER BY created_at`)
	if err != nil {
		return 0, err
	}
	leftovers, err := p.leftoverEffects(ctx, executions, payments)
	return len(leftovers), err
}

// leftoverEffects describes every effect still live under a compensated or cancelled payment.
func (p *Platform) leftoverEffects(ctx context.Context, executions map[uuid.UUID]*driver.ExecutionRow, payments []*paymentRow) ([]string, error) {
	unwound := map[string]driver.ExecutionStatus{}
	for _, pay := range payments {
		if row := executions[pay.executionID]; row != nil && (row.Status == driver.ExecutionCompensated || row.Status == driver.ExecutionCancelled) {
			unwound[pay.details.PaymentID.String()] = row.Status
		}
	}
	if len(unwound) == 0 {
		return nil, nil
	}
	rows, err := p.store.db.QueryContext(ctx, p.store.q(`
		SELECT payment_id, 'an active hold ' || id FROM {t}hold WHERE status = 'ACTIVE'
		UNION ALL SELECT payment_id, 'an active limit reservation ' || id FROM {t}limit_reservation WHERE status = 'ACTIVE'
		UNION ALL SELECT payment_id, 'a booked FX contract ' || id FROM {t}fx_contract WHERE status = 'BOOKED'
		UNION ALL SELECT payment_id, 'a risk booking ' || reference || ' not unwound' FROM {t}risk_booking WHERE status <> 'UNWOUND'
		UNION ALL SELECT reference, 'FX contract ' || id || ' booked at the simulated provider' FROM {t}fxsim_contract WHERE status = 'BOOKED'`))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var paymentID, effect string
		if err := rows.Scan(&paymentID, &effect); err != nil {
			return nil, err
		}
		if status, ok := unwound[paymentID]; ok {
			out = append(out, fmt.Sprintf("payment %s is %s but has %s", paymentID, status, effect))
		}
	}
	return out, rows.Err()
}

func (p *Platform) sumBy(ctx context.Context, tx rowsQueryer, query string) (map[string]decimal.Decimal, error) {
	rows, err := tx.QueryContext(ctx, p.store.q(query))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]decimal.Decimal{}
	for rows.Next() {
		var key, amount string
		if err := rows.Scan(&key, &amount); err != nil {
			return nil, err
		}
		d, err := decimal.NewFromString(amount)
		if err != nil {
			return nil, err
		}
		out[key] = out[key].Add(d)
	}
	return out, rows.Err()
}
