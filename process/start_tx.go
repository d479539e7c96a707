package process

import (
	"context"
	"fmt"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
)

// InTx creates the executions inside a transaction the caller began (pgx.Tx on PostgreSQL, a
// *sql.Tx begun on the SQLite driver's DB), so they commit or roll back with the caller's own
// writes: a business row and the execution that works on it exist together or not at all.
// Nothing runs before the commit: the executions are created PENDING for the runners, and a
// caller that wants to run one at once calls RunNow after committing. Immediate cannot be
// combined with InTx.
func InTx(tx any) StartOption { return func(o *startOptions) { o.tx = tx } }

// insertInTx writes PENDING executions through the caller's transaction and asks for the pollers
// to be woken (on PostgreSQL the notification is delivered when the transaction commits).
func (m *Manager[S]) insertInTx(ctx context.Context, tx any, params []*driver.ExecutionInsertParams) error {
	exec, err := m.client.Driver().UnwrapTx(tx)
	if err != nil {
		return fmt.Errorf("process: %w", err)
	}
	execution.StampStartTrace(ctx, params)
	m.engine.PrepareInsert(params) // their EXECUTION_STARTED commits with them
	if _, err := m.engine.InsertIn(ctx, exec, params); err != nil {
		return fmt.Errorf("process: creating executions: %w", err)
	}
	if err := exec.Notify(ctx, []string{execution.WakeTopic, execution.OutboxTopic}); err != nil {
		return fmt.Errorf("process: waking the pollers: %w", err)
	}
	return nil
}
