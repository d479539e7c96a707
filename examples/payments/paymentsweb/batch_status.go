package paymentsweb

import (
	"context"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
)

// batchWaitingForOperators is the status the console shows for a batch whose unfinished payments
// all wait for an operator: nothing moves until someone acts, so RUNNING would mislead.
const batchWaitingForOperators = "WAITING_FOR_OPERATORS"

// operatorWait counts what the unfinished payments of a batch wait for, when every one of them
// waits for an operator.
type operatorWait struct {
	InTSQ     int // processes in the process troubleshooting queue
	Approvals int // risk approvals to decide
	Network   int // network confirmations to answer
	Commands  int // waiting on a command parked in the command troubleshooting queue
}

// operatorLookups are the operator queues, read once per page and only when a batch needs them.
type operatorLookups struct {
	loaded    bool
	approvals map[uuid.UUID]bool // payment ids
	network   map[uuid.UUID]bool // payment ids
	parked    map[uuid.UUID]bool // execution ids with a parked command
}

func (c *Extension) loadOperatorLookups(ctx context.Context, l *operatorLookups) error {
	if l.loaded {
		return nil
	}
	l.approvals, l.network, l.parked = map[uuid.UUID]bool{}, map[uuid.UUID]bool{}, map[uuid.UUID]bool{}
	approvals, err := c.platform.ListApprovals(ctx, payments.ApprovalFilter{Status: payments.ApprovalPending, Limit: tsqScan})
	if err != nil {
		return err
	}
	for _, a := range approvals {
		l.approvals[a.PaymentID] = true
	}
	pending, err := c.platform.ListPendingNetworkResponses(ctx, payments.ListParams{Limit: tsqScan})
	if err != nil {
		return err
	}
	for _, n := range pending {
		l.network[n.PaymentID] = true
	}
	parked, err := c.client.TSQ().List(ctx, commandbus.TSQFilter{Limit: tsqScan})
	if err != nil {
		return err
	}
	for _, cmd := range parked {
		if cmd.CorrelationID != uuid.Nil {
			l.parked[cmd.CorrelationID] = true
		}
	}
	l.loaded = true
	return nil
}

// batchOperatorWait returns what a running batch waits for when each of its unfinished payments
// waits for an operator, or nil when some payment can still move on its own.
func (c *Extension) batchOperatorWait(ctx context.Context, b *payments.BatchView, l *operatorLookups) (*operatorWait, error) {
	open := b.Total - b.Counts.Terminal()
	// Only payments in the TSQ or waiting for a response can be waiting for an operator.
	if b.Status != payments.BatchRunning || open == 0 || b.Counts.InTSQ+b.Counts.Waiting < open {
		return nil, nil
	}
	w := &operatorWait{InTSQ: b.Counts.InTSQ}
	if b.Counts.Waiting == 0 {
		return w, nil
	}
	// The operator queues are read up to tsqScan items each; beyond that the console cannot tell
	// and keeps saying RUNNING rather than claim what it did not check.
	if b.Counts.Waiting > tsqScan {
		return nil, nil
	}
	if err := c.loadOperatorLookups(ctx, l); err != nil {
		return nil, err
	}
	waiting, err := c.client.Driver().Executor().ExecutionList(ctx, &driver.ExecutionListParams{
		Statuses: []driver.ExecutionStatus{driver.ExecutionWaitingForAsync}, Domain: payments.DomainPayments,
		BatchID: b.ID, Limit: b.Counts.Waiting + 1})
	if err != nil {
		return nil, err
	}
	for _, row := range waiting {
		paymentID := paymentIDOf(row)
		switch {
		case l.parked[row.ID]:
			w.Commands++
		case row.CurrentWait == payments.StepAwaitRiskApproval && l.approvals[paymentID]:
			w.Approvals++
		case l.network[paymentID]:
			w.Network++
		default:
			return nil, nil // waits for a reply or the network: it moves by itself
		}
	}
	return w, nil
}

// markOperatorWaits shows WAITING_FOR_OPERATORS for each listed batch that waits only for
// operators.
func (c *Extension) markOperatorWaits(ctx context.Context, batches []*payments.BatchView) error {
	var l operatorLookups
	for _, b := range batches {
		w, err := c.batchOperatorWait(ctx, b, &l)
		if err != nil {
			return err
		}
		if w != nil {
			b.Status = batchWaitingForOperators
		}
	}
	return nil
}
