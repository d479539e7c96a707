package payments

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus"
)

// Submission statuses.
const (
	SubmissionSubmitted = "SUBMITTED"
	SubmissionRecalled  = "RECALLED"
)

// leg is one ledger entry of a submission: a signed amount on an account.
type leg struct {
	account  string
	amount   decimal.Decimal
	currency string
}

// legs are the balanced ledger movement of a payment: the customer is debited and the
// beneficiary credited in their currencies; a cross-currency payment passes through the FX desk
// of each currency, so every currency's entries sum to zero.
func legs(args SubmitPayment) []leg {
	debit, credit := args.DebitCurrency, args.CreditCurrency
	if debit == credit {
		return []leg{{args.DebitAccount, args.DebitAmount.Neg(), debit}, {args.CreditAccount, args.DebitAmount, debit}}
	}
	return []leg{
		{args.DebitAccount, args.DebitAmount.Neg(), debit}, {"FXDESK-" + debit, args.DebitAmount, debit},
		{"FXDESK-" + credit, args.CreditAmount.Neg(), credit}, {args.CreditAccount, args.CreditAmount, credit},
	}
}

// handleSubmitPayment submits the payment once. In one transaction it inserts the submission
// (its idempotency key is UNIQUE), settles the payment's hold, and posts the ledger movement.
// A redelivery finds the submission and returns it; nothing moves twice.
func (p *Platform) handleSubmitPayment(ctx context.Context, cmd *commandbus.Command[SubmitPayment]) (any, error) {
	key := stepKey(cmd)
	if p.mayFail(StepSubmitPayment, cmd.Args.Simulation) {
		if res, err := p.submissionByKey(ctx, p.store.db, key); err == nil {
			return res, nil // a redelivery: the network is not asked again
		} else if !notFound(err) {
			return nil, err
		}
		if _, err := p.simulate(ctx, StepSubmitPayment, cmd.Args.Simulation, rollKey(cmd)); err != nil {
			return nil, err
		}
	}
	args := cmd.Args
	if !args.DebitAmount.IsPositive() || !args.CreditAmount.IsPositive() {
		return nil, commandbus.Permanent("INVALID_AMOUNT", fmt.Errorf("debit %s and credit %s must be positive", args.DebitAmount, args.CreditAmount))
	}
	entries := legs(args)
	paymentID := args.PaymentID.String()
	var result *SubmitResult
	err := p.store.tx(ctx, func(tx *sql.Tx) error {
		// The customer and the beneficiary are locked first; the FX desks, touched by every
		// cross-currency payment, are updated last so their row locks are held only until the
		// commit that follows.
		accounts, err := p.lockAccounts(ctx, tx, args.DebitAccount, args.CreditAccount)
		if err != nil {
			return err
		}
		if p.afterAccountsLocked != nil {
			p.afterAccountsLocked(ctx) // a test freezes the handler here, holding the row locks
		}
		for _, l := range entries {
			if a := accounts[l.account]; a != nil && a.Currency != l.currency {
				return commandbus.Permanent("CURRENCY_MISMATCH", fmt.Errorf("account %s is in %s, its leg in %s", a.ID, a.Currency, l.currency))
			}
		}
		now := p.now()
		result = &SubmitResult{SubmissionID: uuid.NewString(), Reference: "NET-" + strings.ToUpper(uuid.NewString()[:12]), SubmittedAt: now.UTC().Truncate(time.Microsecond)}
		// The submission goes first: its idempotency key (a redelivery) and the one-submitted-
		// submission-per-payment index (another process for the same payment) stop a duplicate
		// before anything moves.
		res, err := tx.ExecContext(ctx, p.store.q(`INSERT INTO {t}payment_submission
			(id, payment_id, idempotency_key, reference, debit_account, credit_account, debit_amount, debit_currency,
			 credit_amount, credit_currency, fx_contract_id, status, submitted_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'SUBMITTED', $12) ON CONFLICT DO NOTHING`),
			result.SubmissionID, paymentID, key, result.Reference, args.DebitAccount, args.CreditAccount,
			args.DebitAmount.String(), args.DebitCurrency, args.CreditAmount.String(), args.CreditCurrency,
			nullString(args.FxContractID), micros(now))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			if result, err = p.submissionByKey(ctx, tx, key); err == nil {
				return nil // a redelivery: the first submission is the answer
			} else if !notFound(err) {
				return err
			}
			return &commandbus.BusinessRuleError{Code: "ALREADY_SUBMITTED", Message: fmt.Sprintf("payment %s was already submitted by another process", paymentID)}
		}
		holds, err := p.settleHolds(ctx, tx, paymentID)
		if err != nil {
			return err
		}
		for _, h := range holds {
			if a := accounts[h.account]; a != nil {
				a.Held = a.Held.Sub(h.amount)
			}
		}
		debit := accounts[args.DebitAccount]
		if debit.Available().LessThan(args.DebitAmount) {
			return &commandbus.BusinessRuleError{Code: "INSUFFICIENT_FUNDS",
				Message: fmt.Sprintf("account %s has %s %s available, the payment needs %s", debit.ID, debit.Available(), debit.Currency, args.DebitAmount)}
		}
		if _, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}payment SET status = 'SUBMITTED', updated_at = $2 WHERE id = $1`), paymentID, micros(now)); err != nil {
			return err
		}
		return p.post(ctx, tx, accounts, result.SubmissionID, paymentID, entries, "SUBMISSION", now)
	})
	if err != nil {
		return nil, err
	}
	p.sim.notify(simEvent{paymentID: args.PaymentID}) // the network received the submission
	if err := p.afterEffect(StepSubmitPayment); err != nil {
		return nil, err
	}
	return result, nil
}

// post writes ledger entries and the balances they change. accounts holds the locked accounts
// (customers, beneficiaries), whose balance rows are updated. Legs on the FX desks are posted to
// the ledger only: every cross-currency payment touches a desk, and updating its one balance row
// would queue all of them behind each other's commits. A desk's balance is its opening balance
// plus its ledger entries (see withLedgerBalances).
func (p *Platform) post(ctx context.Context, tx *sql.Tx, accounts map[string]*Account, submissionID, paymentID string, entries []leg, kind string, now time.Time) error {
	values := make([]string, len(entries))
	args := []any{submissionID, paymentID, kind, micros(now)}
	var desks []leg
	for i, l := range entries {
		currency := l.currency
		if a := accounts[l.account]; a != nil {
			a.Balance = a.Balance.Add(l.amount)
			currency = a.Currency
		} else {
			desks = append(desks, l)
		}
		args = append(args, uuid.NewString(), l.account, currency, l.amount.String())
		n := len(args)
		values[i] = fmt.Sprintf("($%d, $1, $2, $%d, $%d, $%d, $3, $4)", n-3, n-2, n-1, n)
	}
	if _, err := tx.ExecContext(ctx, p.store.q(`INSERT INTO {t}ledger_entry (id, submission_id, payment_id, account_id, currency, amount, kind, created_at)
		VALUES `+strings.Join(values, ", ")), args...); err != nil {
		return err
	}
	ids := make([]string, 0, len(accounts))
	for id := range accounts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	list := make([]*Account, len(ids))
	for i, id := range ids {
		list[i] = accounts[id]
	}
	if err := p.saveAccounts(ctx, tx, list...); err != nil {
		return err
	}
	return p.checkDeskLegs(ctx, tx, desks)
}

// checkDeskLegs verifies that the accounts of ledger-only legs exist in the leg's currency, so a
// wrong leg fails the posting instead of unbalancing a currency.
func (p *Platform) checkDeskLegs(ctx context.Context, tx *sql.Tx, legs []leg) error {
	for _, l := range legs {
		var currency, kind string
		err := tx.QueryRowContext(ctx, p.store.q(`SELECT currency, kind FROM {t}account WHERE id = $1`), l.account).Scan(&currency, &kind)
		if notFound(err) {
			return commandbus.Permanent("ACCOUNT_NOT_FOUND", fmt.Errorf("account %s in %s does not exist", l.account, l.currency))
		}
		if err != nil {
			return err
		}
		if kind != AccountFxDesk {
			return commandbus.Permanent("ACCOUNT_NOT_LEDGER_ONLY", fmt.Errorf("account %s is a %s account; only FX desks are posted to the ledger alone", l.account, kind))
		}
		if l.currency != "" && currency != l.currency {
			return commandbus.Permanent("CURRENCY_MISMATCH", fmt.Errorf("account %s is in %s, its leg in %s", l.account, currency, l.currency))
		}
	}
	return nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func (p *Platform) submissionByKey(ctx context.Context, q queryer, key string) (*SubmitResult, error) {
	var res SubmitResult
	var at int64
	if err := q.QueryRowContext(ctx, p.store.q(`SELECT id, reference, submitted_at FROM {t}payment_submission WHERE idempotency_key = $1`), key).
		Scan(&res.SubmissionID, &res.Reference, &at); err != nil {
		return nil, err
	}
	res.SubmittedAt = fromMicros(at)
	return &res, nil
}

// handleRecallPayment reverses a submission's ledger movement (idempotent): the payment's money
// comes back, the FX desks are restored, the submission is RECALLED.
func (p *Platform) handleRecallPayment(ctx context.Context, cmd *commandbus.Command[RecallPayment]) (any, error) {
	paymentID := cmd.Args.PaymentID.String()
	err := p.store.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, p.store.q(`SELECT account_id, amount, currency FROM {t}ledger_entry WHERE submission_id = $1 AND kind = 'SUBMISSION' ORDER BY id`),
			cmd.Args.SubmissionID)
		if err != nil {
			return err
		}
		var reverse []leg
		var ids []string
		for rows.Next() {
			var account, amount, currency string
			if err := rows.Scan(&account, &amount, &currency); err != nil {
				rows.Close()
				return err
			}
			d, err := decimal.NewFromString(amount)
			if err != nil {
				rows.Close()
				return err
			}
			reverse = append(reverse, leg{account: account, amount: d.Neg(), currency: currency})
			if !strings.HasPrefix(account, "FXDESK-") {
				ids = append(ids, account)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(reverse) == 0 {
			return err
		}
		accounts, err := p.lockAccounts(ctx, tx, ids...)
		if err != nil {
			return err
		}
		now := p.now()
		res, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}payment_submission SET status = 'RECALLED', recalled_at = $2 WHERE id = $1 AND status = 'SUBMITTED'`),
			cmd.Args.SubmissionID, micros(now))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // recalled already
		}
		if _, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}payment SET status = 'RECALLED', updated_at = $2 WHERE id = $1`), paymentID, micros(now)); err != nil {
			return err
		}
		return p.post(ctx, tx, accounts, cmd.Args.SubmissionID, paymentID, reverse, "RECALL", now)
	})
	if err != nil {
		return nil, err
	}
	return map[string]string{"status": SubmissionRecalled}, nil
}
