package payments

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus"
)

// Account kinds.
const (
	AccountCustomer    = "CUSTOMER"
	AccountBeneficiary = "BENEFICIARY"
	AccountFxDesk      = "FX_DESK"
)

// Account is an account of the accounts bounded context.
type Account struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Kind           string          `json:"kind"`
	Currency       string          `json:"currency"`
	OpeningBalance decimal.Decimal `json:"openingBalance"`
	Balance        decimal.Decimal `json:"balance"`
	Held           decimal.Decimal `json:"held"`
	DailyLimit     decimal.Decimal `json:"dailyLimit"`
}

// Available is the balance less the holds.
func (a *Account) Available() decimal.Decimal { return a.Balance.Sub(a.Held) }

// CustomerAccountID is the id of the chart's n-th customer (from 1) in currency, one who pays.
func CustomerAccountID(currency string, n int) string {
	return fmt.Sprintf("CUST-%s-%03d", currency, n)
}

// BeneficiaryAccountID is the id of the chart's n-th beneficiary (from 1) in currency, one who is
// paid.
func BeneficiaryAccountID(currency string, n int) string {
	return fmt.Sprintf("BENE-%s-%03d", currency, n)
}

// chartOfAccounts is the platform's fixed set of accounts: per currency, customers who pay,
// beneficiaries who are paid, and the FX desk through which cross-currency payments pass.
func chartOfAccounts(customersPerCurrency, beneficiariesPerCurrency int) []Account {
	var out []Account
	for _, cur := range Currencies {
		scale := fromUSD(decimal.NewFromInt(1), cur).Round(0) // units per dollar, roughly
		if scale.LessThan(decimal.NewFromInt(1)) {
			scale = decimal.NewFromInt(1)
		}
		for i := 1; i <= customersPerCurrency; i++ {
			out = append(out, Account{
				ID: CustomerAccountID(cur, i), Name: fmt.Sprintf("Customer %d (%s)", i, cur), Kind: AccountCustomer, Currency: cur,
				OpeningBalance: decimal.NewFromInt(50_000_000).Mul(scale), DailyLimit: decimal.NewFromInt(20_000_000).Mul(scale),
			})
		}
		for i := 1; i <= beneficiariesPerCurrency; i++ {
			out = append(out, Account{
				ID: BeneficiaryAccountID(cur, i), Name: fmt.Sprintf("Beneficiary %d (%s)", i, cur), Kind: AccountBeneficiary, Currency: cur,
				OpeningBalance: decimal.NewFromInt(1_000_000).Mul(scale), DailyLimit: decimal.Zero,
			})
		}
		out = append(out, Account{
			ID: "FXDESK-" + cur, Name: "FX desk " + cur, Kind: AccountFxDesk, Currency: cur,
			OpeningBalance: decimal.NewFromInt(1_000_000_000).Mul(scale), DailyLimit: decimal.Zero,
		})
	}
	return out
}

// seedAccounts creates the chart of accounts once.
func (p *Platform) seedAccounts(ctx context.Context) error {
	now := micros(p.now())
	return p.store.tx(ctx, func(tx *sql.Tx) error {
		for _, a := range chartOfAccounts(p.opts.CustomersPerCurrency, p.opts.BeneficiariesPerCurrency) {
			if _, err := tx.ExecContext(ctx, p.store.q(`INSERT INTO {t}account
				(id, name, kind, currency, opening_balance, balance, held, daily_limit, created_at)
				VALUES ($1, $2, $3, $4, $5, $5, '0', $6, $7) ON CONFLICT (id) DO NOTHING`),
				a.ID, a.Name, a.Kind, a.Currency, a.OpeningBalance.String(), a.DailyLimit.String(), now); err != nil {
				return fmt.Errorf("payments: creating account %s: %w", a.ID, err)
			}
		}
		return nil
	})
}

const accountCols = `id, name, kind, currency, opening_balance, balance, held, daily_limit`

type rowScanner interface{ Scan(dest ...any) error }

func scanAccount(row rowScanner) (*Account, error) {
	var a Account
	var opening, balance, held, limit string
	if err := row.Scan(&a.ID, &a.Name, &a.Kind, &a.Currency, &opening, &balance, &held, &limit); err != nil {
		return nil, err
	}
	var err error
	for _, f := range []struct {
		text string
		dst  *decimal.Decimal
	}{{opening, &a.OpeningBalance}, {balance, &a.Balance}, {held, &a.Held}, {limit, &a.DailyLimit}} {
		if *f.dst, err = decimal.NewFromString(f.text); err != nil {
			return nil, fmt.Errorf("account %s: %w", a.ID, err)
		}
	}
	return &a, nil
}

// ListAccounts returns every account with its balance, holds and limit, by id.
func (p *Platform) ListAccounts(ctx context.Context) ([]*Account, error) {
	return p.listAccounts(ctx, p.store.db)
}

type rowsQueryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (p *Platform) listAccounts(ctx context.Context, q rowsQueryer) ([]*Account, error) {
	rows, err := q.QueryContext(ctx, p.store.q(`SELECT `+accountCols+` FROM {t}account ORDER BY id`))
	if err != nil {
		return nil, err
	}
	var out []*Account
	for rows.Next() {
		a, err := scanAccount(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, p.withLedgerBalances(ctx, q, out)
}

// GetAccount returns one account, or commandbus.ErrNotFound.
func (p *Platform) GetAccount(ctx context.Context, id string) (*Account, error) {
	a, err := scanAccount(p.store.db.QueryRowContext(ctx, p.store.q(`SELECT `+accountCols+` FROM {t}account WHERE id = $1`), id))
	if notFound(err) {
		return nil, fmt.Errorf("%w: account %s", commandbus.ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return a, p.withLedgerBalances(ctx, p.store.db, []*Account{a})
}

// withLedgerBalances completes the balance of ledger-only accounts (the FX desks): their stored
// balance stays the opening balance and their movements are their ledger entries.
func (p *Platform) withLedgerBalances(ctx context.Context, q rowsQueryer, accounts []*Account) error {
	desks := map[string]*Account{}
	for _, a := range accounts {
		if a.Kind == AccountFxDesk {
			desks[a.ID] = a
		}
	}
	if len(desks) == 0 {
		return nil
	}
	sums, err := p.sumBy(ctx, q, `SELECT account_id, amount FROM {t}ledger_entry WHERE account_id IN (SELECT id FROM {t}account WHERE kind = 'FX_DESK')`)
	if err != nil {
		return err
	}
	for id, a := range desks {
		a.Balance = a.Balance.Add(sums[id])
	}
	return nil
}

// lockAccounts reads accounts for update in id order (so concurrent transactions never
// deadlock), keyed by id.
func (p *Platform) lockAccounts(ctx context.Context, tx *sql.Tx, ids ...string) (map[string]*Account, error) {
	uniq := map[string]bool{}
	var sorted []string
	for _, id := range ids {
		if !uniq[id] {
			uniq[id] = true
			sorted = append(sorted, id)
		}
	}
	sort.Strings(sorted)
	placeholders := make([]string, len(sorted))
	args := make([]any, len(sorted))
	for i, id := range sorted {
		placeholders[i] = fmt.Sprintf("$%d", i+1)
		args[i] = id
	}
	rows, err := tx.QueryContext(ctx, p.store.q(`SELECT `+accountCols+` FROM {t}account WHERE id IN (`+
		strings.Join(placeholders, ", ")+`) ORDER BY id`+p.store.forUpdate), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]*Account{}
	for rows.Next() {
		a, err := scanAccount(rows)
		if err != nil {
			return nil, err
		}
		out[a.ID] = a
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, id := range sorted {
		if out[id] == nil {
			return nil, commandbus.Permanent("ACCOUNT_NOT_FOUND", fmt.Errorf("account %s does not exist", id))
		}
	}
	return out, nil
}

// saveAccounts writes balances and holds back, in one statement.
func (p *Platform) saveAccounts(ctx context.Context, tx *sql.Tx, accounts ...*Account) error {
	if len(accounts) == 1 {
		a := accounts[0]
		_, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}account SET balance = $2, held = $3 WHERE id = $1`),
			a.ID, a.Balance.String(), a.Held.String())
		return err
	}
	var balance, held, ids []string
	var args []any
	for _, a := range accounts {
		args = append(args, a.ID, a.Balance.String(), a.Held.String())
		n := len(args)
		balance = append(balance, fmt.Sprintf("WHEN $%d THEN $%d", n-2, n-1))
		held = append(held, fmt.Sprintf("WHEN $%d THEN $%d", n-2, n))
		ids = append(ids, fmt.Sprintf("$%d", n-2))
	}
	_, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}account SET balance = CASE id `+strings.Join(balance, " ")+` END,
		held = CASE id `+strings.Join(held, " ")+` END WHERE id IN (`+strings.Join(ids, ", ")+`)`), args...)
	return err
}

// handleCheckBalance places a hold for the payment if the available balance covers it.
func (p *Platform) handleCheckBalance(ctx context.Context, cmd *commandbus.Command[CheckBalance]) (any, error) {
	key := stepKey(cmd)
	if p.mayFail(StepCheckBalance, cmd.Args.Simulation) {
		if res, err := p.holdByKey(ctx, p.store.db, key); err == nil {
			return res, nil // a redelivery: the hold exists; the external is not asked again
		} else if !notFound(err) {
			return nil, err
		}
		if _, err := p.simulate(ctx, StepCheckBalance, cmd.Args.Simulation, rollKey(cmd)); err != nil {
			return nil, err
		}
	}
	args := cmd.Args
	var result *CheckBalanceResult
	err := p.store.tx(ctx, func(tx *sql.Tx) error {
		accounts, err := p.lockAccounts(ctx, tx, args.Account)
		if err != nil {
			return err
		}
		a := accounts[args.Account]
		if a.Currency != args.Currency {
			return commandbus.Permanent("CURRENCY_MISMATCH", fmt.Errorf("account %s is in %s, the payment in %s", a.ID, a.Currency, args.Currency))
		}
		if a.Available().LessThan(args.Amount) {
			if res, err := p.holdByKey(ctx, tx, key); err == nil {
				result = res // the hold this command placed before uses the balance
				return nil
			}
			return &commandbus.BusinessRuleError{Code: "INSUFFICIENT_FUNDS",
				Message: fmt.Sprintf("account %s has %s %s available, the payment needs %s", a.ID, a.Available(), a.Currency, args.Amount)}
		}
		holdID := "HOLD-" + uuid.NewString()
		now := micros(p.now())
		res, err := tx.ExecContext(ctx, p.store.q(`INSERT INTO {t}hold
			(id, idempotency_key, payment_id, account_id, amount, currency, status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'ACTIVE', $7, $7) ON CONFLICT (idempotency_key) DO NOTHING`),
			holdID, key, args.PaymentID.String(), a.ID, args.Amount.String(), a.Currency, now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			result, err = p.holdByKey(ctx, tx, key) // a redelivery: the hold exists
			return err
		}
		a.Held = a.Held.Add(args.Amount)
		result = &CheckBalanceResult{HoldID: holdID, Available: a.Available()}
		return p.saveAccounts(ctx, tx, a)
	})
	if err != nil {
		return nil, err
	}
	if err := p.afterEffect(StepCheckBalance); err != nil {
		return nil, err
	}
	return result, nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (p *Platform) holdByKey(ctx context.Context, q queryer, key string) (*CheckBalanceResult, error) {
	var id string
	if err := q.QueryRowContext(ctx, p.store.q(`SELECT id FROM {t}hold WHERE idempotency_key = $1`), key).Scan(&id); err != nil {
		return nil, err
	}
	return &CheckBalanceResult{HoldID: id}, nil
}

// handleReleaseHold releases the payment's active holds; released or settled holds are left as
// they are, so it is idempotent and harmless after a submission.
func (p *Platform) handleReleaseHold(ctx context.Context, cmd *commandbus.Command[ReleaseHold]) (any, error) {
	released := 0
	err := p.store.tx(ctx, func(tx *sql.Tx) error {
		holds, err := p.activeHolds(ctx, tx, cmd.Args.PaymentID.String())
		if err != nil || len(holds) == 0 {
			return err
		}
		ids := make([]string, 0, len(holds))
		for _, h := range holds {
			ids = append(ids, h.account)
		}
		accounts, err := p.lockAccounts(ctx, tx, ids...)
		if err != nil {
			return err
		}
		// Re-read under the account lock: a submission may have settled a hold meanwhile.
		if holds, err = p.activeHolds(ctx, tx, cmd.Args.PaymentID.String()); err != nil {
			return err
		}
		for _, h := range holds {
			if cmd.Args.HoldID != "" && h.id != cmd.Args.HoldID {
				continue
			}
			if err := p.finishHold(ctx, tx, h, "RELEASED"); err != nil {
				return err
			}
			a := accounts[h.account]
			a.Held = a.Held.Sub(h.amount)
			if err := p.saveAccounts(ctx, tx, a); err != nil {
				return err
			}
			released++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return map[string]int{"released": released}, nil
}

type hold struct {
	id      string
	account string
	amount  decimal.Decimal
}

func (p *Platform) activeHolds(ctx context.Context, tx *sql.Tx, paymentID string) ([]hold, error) {
	rows, err := tx.QueryContext(ctx, p.store.q(`SELECT id, account_id, amount FROM {t}hold WHERE payment_id = $1 AND status = 'ACTIVE' ORDER BY id`), paymentID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []hold
	for rows.Next() {
		var h hold
		var amount string
		if err := rows.Scan(&h.id, &h.account, &amount); err != nil {
			return nil, err
		}
		if h.amount, err = decimal.NewFromString(amount); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// settleHolds settles the payment's active holds and returns them.
func (p *Platform) settleHolds(ctx context.Context, tx *sql.Tx, paymentID string) ([]hold, error) {
	rows, err := tx.QueryContext(ctx, p.store.q(`UPDATE {t}hold SET status = 'SETTLED', updated_at = $2
		WHERE payment_id = $1 AND status = 'ACTIVE' RETURNING id, account_id, amount`), paymentID, micros(p.now()))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []hold
	for rows.Next() {
		var h hold
		var amount string
		if err := rows.Scan(&h.id, &h.account, &amount); err != nil {
			return nil, err
		}
		if h.amount, err = decimal.NewFromString(amount); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func (p *Platform) finishHold(ctx context.Context, tx *sql.Tx, h hold, status string) error {
	_, err := tx.ExecContext(ctx, p.store.q(`UPDATE {t}hold SET status = $2, updated_at = $3 WHERE id = $1 AND status = 'ACTIVE'`),
		h.id, status, micros(p.now()))
	return err
}
