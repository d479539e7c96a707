package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
)

// WithIDs sets the ids of the executions StartMany creates, one per input; an id that exists is
// not started again.
func WithIDs(ids ...uuid.UUID) StartOption { return func(o *startOptions) { o.ids = ids } }

// WithBusinessKeys sets the business keys of the executions StartMany creates, one per input.
func WithBusinessKeys(keys ...string) StartOption { return func(o *startOptions) { o.keys = keys } }

// WithDeadline sets the executions' deadline (instead of the definition's Timeout): past it, the
// definition's deadline action applies.
func WithDeadline(t time.Time) StartOption { return func(o *startOptions) { o.deadline = &t } }

// WithBatch records the batch the executions belong to.
func WithBatch(id uuid.UUID) StartOption { return func(o *startOptions) { o.batchID = id } }

// InTx creates the executions inside a transaction the caller began (pgx.Tx on PostgreSQL, a
// *sql.Tx begun on the SQLite driver's DB), so they commit or roll back with the caller's own
// writes. Nothing runs before the commit: the executions are PENDING for the runners; call
// RunNow after the commit to run one at once. It excludes Immediate and StartAt.
func InTx(tx any) StartOption { return func(o *startOptions) { o.tx = tx } }

// apply sets the deadline and batch on an execution's insert.
func (o *startOptions) apply(params *driver.ExecutionInsertParams) {
	if o.deadline != nil {
		params.DeadlineAt = o.deadline
	}
	params.BatchID = o.batchID
}

// insertInTx writes PENDING executions through the caller's transaction and wakes the pollers
// (on PostgreSQL the notification is delivered when the transaction commits).
func (m *Manager) insertInTx(ctx context.Context, tx any, params []*driver.ExecutionInsertParams) error {
	exec, err := m.client.Driver().UnwrapTx(tx)
	if err != nil {
		return fmt.Errorf("%s: %w", m.model, err)
	}
	execution.StampStartTrace(ctx, params)
	m.engine.PrepareInsert(params)                                  // their EXECUTION_STARTED commits with them
	if _, err := m.engine.InsertIn(ctx, exec, params); err != nil { // capacity-limited types queue
		return fmt.Errorf("%s: creating executions: %w", m.model, err)
	}
	if err := exec.Notify(ctx, []string{execution.WakeTopic, execution.OutboxTopic}); err != nil {
		return fmt.Errorf("%s: waking the pollers: %w", m.model, err)
	}
	return nil
}

// RunNow runs an execution in the caller's goroutine until it completes, waits or parks, unless a
// runner holds it already (then that runner goes on with it and RunNow returns nil).
func (m *Manager) RunNow(ctx context.Context, id uuid.UUID) error {
	lease, err := m.engine.AcquireLoad(ctx, id)
	switch {
	case errors.Is(err, execution.ErrBusy):
		return nil
	case err != nil:
		return err
	}
	if lease.Row.Model != m.model || lease.Row.Type != m.def.id {
		_ = lease.Release(ctx)
		return fmt.Errorf("execution %s is a %s %q, not %s %q", id, lease.Row.Model, lease.Row.Type, m.model, m.def.id)
	}
	return m.run(ctx, lease, nil)
}
