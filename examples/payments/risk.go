package payments

import (
	"context"
	"database/sql"
	"strings"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/process"
)

// Risk booking statuses.
const (
	RiskBooked          = "BOOKED"
	RiskPendingApproval = "PENDING_APPROVAL"
	RiskUnwound         = "UNWOUND"
)

// handleBookRisk books the payment's exposure. Above the approval threshold (in US dollars), or
// when the simulated risk engine pends it, the booking waits for a manual approval: an approval
// request is created for operators (and the network simulator) to answer.
func (p *Platform) handleBookRisk(ctx context.Context, cmd *commandbus.Command[BookRisk]) (any, error) {
	key := stepKey(cmd)
	outcome := OutcomeSuccess
	if p.mayFail(StepBookRisk, cmd.Args.Simulation) {
		if res, err := p.riskByKey(ctx, p.store.db, key); err == nil {
			return res, nil
		} else if !notFound(err) {
			return nil, err
		}
		var err error
		if outcome, err = p.simulate(ctx, StepBookRisk, cmd.Args.Simulation, rollKey(cmd)); err != nil {
			return nil, err
		}
	}
	args := cmd.Args
	usd := toUSD(args.Amount, args.Currency)
	requiresApproval := outcome == OutcomePending || usd.GreaterThanOrEqual(p.opts.ApprovalThresholdUSD)
	result := &BookRiskResult{Reference: "RISK-" + strings.ToUpper(uuid.NewString()[:13]), Status: RiskBooked, RequiresManualApproval: requiresApproval}
	if requiresApproval {
		result.Status = RiskPendingApproval
		result.ApprovalID = uuid.NewString()
	}
	err := p.store.tx(ctx, func(tx *sql.Tx) error {
		now := micros(p.now())
		res, err := tx.ExecContext(ctx, p.store.q(`INSERT INTO {t}risk_booking
			(reference, idempotency_key, payment_id, amount, currency, usd_equivalent, requires_approval, status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) ON CONFLICT (idempotency_key) DO NOTHING`),
			result.Reference, key, args.PaymentID.String(), args.Amount.String(), args.Currency, usd.StringFixed(2),
			boolInt(requiresApproval), result.Status, now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			result, err = p.riskByKey(ctx, tx, key) // booked concurrently by another delivery
			return err
		}
		if !requiresApproval {
			return nil
		}
		_, err = tx.ExecContext(ctx, p.store.q(`INSERT INTO {t}approval
			(id, payment_id, execution_id, risk_reference, amount, currency, status, requested_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'PENDING', $7) ON CONFLICT (payment_id) DO NOTHING`),
			result.ApprovalID, args.PaymentID.String(), cmd.Headers[process.HeaderExecutionID], result.Reference,
			args.Amount.String(), args.Currency, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	if result.RequiresManualApproval {
		p.sim.notify(simEvent{paymentID: args.PaymentID, approvalID: result.ApprovalID}) // the risk officers' inbox
	}
	if err := p.afterEffect(StepBookRisk); err != nil {
		return nil, err
	}
	return result, nil
}

func (p *Platform) riskByKey(ctx context.Context, q queryer, key string) (*BookRiskResult, error) {
	var res BookRiskResult
	var paymentID string
	var requires int
	if err := q.QueryRowContext(ctx, p.store.q(`SELECT reference, payment_id, requires_approval FROM {t}risk_booking WHERE idempotency_key = $1`), key).
		Scan(&res.Reference, &paymentID, &requires); err != nil {
		return nil, err
	}
	res.Status, res.RequiresManualApproval = RiskBooked, requires == 1
	if res.RequiresManualApproval {
		res.Status = RiskPendingApproval
		if err := q.QueryRowContext(ctx, p.store.q(`SELECT id FROM {t}approval WHERE payment_id = $1`), paymentID).Scan(&res.ApprovalID); err != nil {
			return nil, err
		}
	}
	return &res, nil
}

// handleUnwindRisk reverses a booking and withdraws its open approval request (idempotent).
func (p *Platform) handleUnwindRisk(ctx context.Context, cmd *commandbus.Command[UnwindRisk]) (any, error) {
	err := p.store.tx(ctx, func(tx *sql.Tx) error {
		now := micros(p.now())
		if _, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}risk_booking SET status = 'UNWOUND', updated_at = $2
			WHERE payment_id = $1 AND status <> 'UNWOUND'`), cmd.Args.PaymentID.String(), now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}approval SET status = 'WITHDRAWN', decided_at = $2
			WHERE payment_id = $1 AND status = 'PENDING'`), cmd.Args.PaymentID.String(), now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return map[string]string{"status": RiskUnwound}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

var _ = decimal.Zero
