// Package moneytransfer is the reference saga: a transfer between two accounts written as a saga
// of three steps. The debit is a local step on the bank's own ledger; the credit is a command to
// the "ledger" domain, whose handler may refuse it (the target account is closed); the
// notification is local. When the credit is refused, the saga compensates: the debit is refunded
// and the saga ends COMPENSATED, with money conserved. A debit the account cannot cover is a
// business failure with nothing to undo.
//
// The ledger is in memory and idempotent by key (every step's key is stable across attempts), as
// a real ledger's posting API is.
package moneytransfer

import (
	"context"
	"fmt"
	"sync"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/saga"
)

// Type is the saga id.
const Type = "MoneyTransfer"

// LedgerDomain is the domain whose handler credits accounts.
const LedgerDomain = "ledger"

// Transfer is the saga's input.
type Transfer struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// CreditAccount is the command the credit step sends to the ledger domain.
type CreditAccount struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	Key     string `json:"key"`
}

// Kind names the command.
func (CreditAccount) Kind() string { return "CreditAccount" }

// Ledger holds balances. Postings are idempotent by key: posting a key twice changes nothing.
type Ledger struct {
	mu       sync.Mutex
	balances map[string]int64
	closed   map[string]bool
	posted   map[string]bool
	// Notified lists the transfers announced to their customers, by saga execution.
	Notified []string
}

// NewLedger returns a ledger with the given opening balances.
func NewLedger(balances map[string]int64) *Ledger {
	l := &Ledger{balances: map[string]int64{}, closed: map[string]bool{}, posted: map[string]bool{}}
	for k, v := range balances {
		l.balances[k] = v
	}
	return l
}

// Close closes an account: credits to it are refused.
func (l *Ledger) Close(account string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed[account] = true
}

// Balance returns an account's balance.
func (l *Ledger) Balance(account string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.balances[account]
}

// Total is the sum of every balance (a transfer conserves it).
func (l *Ledger) Total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sum int64
	for _, v := range l.balances {
		sum += v
	}
	return sum
}

// post moves amount into account (negative: out of it) once per key. A debit the balance cannot
// cover, or a credit to a closed account, is refused with a business error.
func (l *Ledger) post(key, account string, amount int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.posted[key] {
		return nil
	}
	if _, ok := l.balances[account]; !ok {
		return commandbus.BusinessRule("UNKNOWN_ACCOUNT", fmt.Sprintf("account %s does not exist", account))
	}
	if amount < 0 && l.balances[account]+amount < 0 {
		return commandbus.BusinessRule("INSUFFICIENT_FUNDS", fmt.Sprintf("account %s cannot cover %d", account, -amount))
	}
	if amount > 0 && l.closed[account] {
		return commandbus.BusinessRule("ACCOUNT_CLOSED", fmt.Sprintf("account %s is closed", account))
	}
	l.balances[account] += amount
	l.posted[key] = true
	return nil
}

// AddHandlers registers the ledger domain's CreditAccount handler.
func (l *Ledger) AddHandlers(handlers *commandbus.Handlers) {
	commandbus.AddHandler(handlers, LedgerDomain, commandbus.HandlerFunc[CreditAccount](func(ctx context.Context, cmd *commandbus.Command[CreditAccount]) (any, error) {
		if err := l.post(cmd.Args.Key, cmd.Args.Account, cmd.Args.Amount); err != nil {
			return nil, err
		}
		return map[string]any{"account": cmd.Args.Account, "credited": cmd.Args.Amount}, nil
	}))
}

// Definition returns the transfer saga bound to the ledger.
func (l *Ledger) Definition() *saga.Definition {
	return saga.New(Type, 1).
		Describe("Debit the payer, credit the payee through the ledger domain, notify; refund the debit when the credit is refused").
		Domain("transfers").
		Step("debit", l.debit, saga.Compensate(l.refund)).
		Command("credit", LedgerDomain, "CreditAccount", creditRequest, saga.DependsOn("debit")).
		Step("notify", l.notify, saga.DependsOn("credit"))
}

// Register registers the transfer saga with the runtime; the ledger's handlers must be in the
// client's configuration (AddHandlers).
func (l *Ledger) Register(rt *orchestration.Runtime) (*saga.Manager, error) {
	return saga.Register(rt, l.Definition())
}

func (l *Ledger) debit(ctx context.Context, sc *saga.StepContext) (any, error) {
	var t Transfer
	if err := sc.DecodeInput(&t); err != nil {
		return nil, commandbus.Permanent(commandbus.CodeInvalidData, err)
	}
	if t.Amount <= 0 {
		return nil, commandbus.BusinessRule("INVALID_AMOUNT", "the amount must be positive")
	}
	if err := l.post(sc.Key(), t.From, -t.Amount); err != nil {
		return nil, err
	}
	return map[string]any{"account": t.From, "debited": t.Amount}, nil
}

func (l *Ledger) refund(ctx context.Context, sc *saga.StepContext) error {
	var t Transfer
	if err := sc.DecodeInput(&t); err != nil {
		return err
	}
	return l.post(sc.Key()+":refund", t.From, t.Amount)
}

func creditRequest(sc *saga.StepContext) (any, error) {
	var t Transfer
	if err := sc.DecodeInput(&t); err != nil {
		return nil, err
	}
	return CreditAccount{Account: t.To, Amount: t.Amount, Key: sc.Key()}, nil
}

func (l *Ledger) notify(ctx context.Context, sc *saga.StepContext) (any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.Notified {
		if n == sc.ExecutionID.String() {
			return nil, nil
		}
	}
	l.Notified = append(l.Notified, sc.ExecutionID.String())
	return nil, nil
}
