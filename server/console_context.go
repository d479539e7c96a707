package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
)

// A queue row says what it is about: the payment an item concerns (its reference, amount,
// parties, batch and age, with a link to it) and the process it belongs to. The item names
// either its payment (approvals, network responses), its execution (a process in the process
// TSQ) or its execution through the command's correlation id (a command step's command).

// itemContext is the payment and process a queue item belongs to; either may be nil.
type itemContext struct {
	Payment   *payments.PaymentView
	Execution *driver.ExecutionRow
	// ProcessHref is where the process reads best: its payment's page for a payment.
	ProcessHref string
	// ProcessInTSQ says the process waits in the process troubleshooting queue too.
	ProcessInTSQ bool
}

// isPaymentType says whether an execution type runs a payment.
func isPaymentType(typ string) bool {
	return typ == payments.TypePaymentStep || typ == payments.TypePaymentManager
}

// paymentIDOf is the payment an execution runs (its business key), or uuid.Nil.
func (c *console) paymentIDOf(row *driver.ExecutionRow) uuid.UUID {
	if c.platform == nil || row == nil || !isPaymentType(row.Type) {
		return uuid.Nil
	}
	id, err := uuid.Parse(row.BusinessKey)
	if err != nil {
		return uuid.Nil
	}
	return id
}

// executionsByID reads the executions with these ids; ids that name none are absent.
func (c *console) executionsByID(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*driver.ExecutionRow, error) {
	out := map[uuid.UUID]*driver.ExecutionRow{}
	for _, id := range ids {
		if _, done := out[id]; done || id == uuid.Nil {
			continue
		}
		row, err := c.client.Driver().Executor().ExecutionGet(ctx, id)
		if errors.Is(err, driver.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[id] = row
	}
	return out, nil
}

// paymentFacts reads the facts of payments by id; without the payments platform it finds none.
func (c *console) paymentFacts(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*payments.PaymentView, error) {
	if c.platform == nil || len(ids) == 0 {
		return map[uuid.UUID]*payments.PaymentView{}, nil
	}
	return c.platform.PaymentFacts(ctx, ids)
}

// contextsOfExecutions resolves the payment and process of items that name their execution;
// known rows (a listing's) save reading them again.
func (c *console) contextsOfExecutions(ctx context.Context, ids []uuid.UUID, known []*driver.ExecutionRow) (map[uuid.UUID]*itemContext, error) {
	rows := map[uuid.UUID]*driver.ExecutionRow{}
	for _, r := range known {
		rows[r.ID] = r
	}
	var missing []uuid.UUID
	for _, id := range ids {
		if rows[id] == nil {
			missing = append(missing, id)
		}
	}
	read, err := c.executionsByID(ctx, missing)
	if err != nil {
		return nil, err
	}
	for id, r := range read {
		rows[id] = r
	}
	var paymentIDs []uuid.UUID
	for _, r := range rows {
		if id := c.paymentIDOf(r); id != uuid.Nil {
			paymentIDs = append(paymentIDs, id)
		}
	}
	facts, err := c.paymentFacts(ctx, paymentIDs)
	if err != nil {
		return nil, err
	}
	out := map[uuid.UUID]*itemContext{}
	for id, r := range rows {
		out[id] = &itemContext{Execution: r, Payment: facts[c.paymentIDOf(r)], ProcessHref: c.executionHref(r),
			ProcessInTSQ: r.Status == driver.ExecutionWaitingForTSQ}
	}
	return out, nil
}

// paymentFact names the payment a process runs (by its execution id), for a confirmation page.
func (c *console) paymentFact(ctx context.Context, execID uuid.UUID) (fact, bool) {
	if execID == uuid.Nil {
		return fact{}, false
	}
	contexts, err := c.contextsOfExecutions(ctx, []uuid.UUID{execID}, nil)
	if err != nil {
		c.logger.Warn("console: reading the payment of a process failed", "execution_id", execID, "error", err)
		return fact{}, false
	}
	x := contexts[execID]
	if x == nil || x.Payment == nil {
		return fact{}, false
	}
	v := x.Payment
	return fact{Label: "Payment", Value: fmt.Sprintf("%s: %s from %s to %s", shortID(v.ID), formatMoney(v.Amount, v.Currency),
		v.DebitAccount, v.CreditAccount), Href: "/payments/" + v.ID.String()}, true
}
