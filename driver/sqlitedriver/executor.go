package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/commandbus/commandbus/driver"
)

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// executor runs queries either on the pools (tx == nil: writes on the writer, plain reads on the
// read-only pool) or inside one transaction (read, write and tx are the same *sql.Tx).
type executor struct {
	d     *Driver
	read  querier
	write querier
	tx    *sql.Tx
	// notify receives the topics of Notify: the broadcast itself, or a transaction's buffer.
	notify func(topics []string)
}

var _ driver.Executor = (*executor)(nil)

// executorTx is a transaction (tx == the outer *sql.Tx, savepoint == "") or a savepoint inside
// one.
type executorTx struct {
	executor
	savepoint string
	// parentNotify receives the buffered topics on commit: the broadcast for a transaction,
	// the enclosing transaction's buffer for a savepoint.
	parentNotify func(topics []string)

	mu     sync.Mutex
	topics []string
	done   bool
}

func (e *executor) Begin(ctx context.Context) (driver.ExecutorTx, error) {
	if e.tx == nil {
		tx, err := e.d.writer.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		return newExecutorTx(e.d, tx, "", e.d.notifier.broadcast), nil
	}
	name := fmt.Sprintf("commandbus_savepoint_%d", e.d.savepoints.Add(1))
	if _, err := e.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return nil, err
	}
	return newExecutorTx(e.d, e.tx, name, e.notify), nil
}

func newExecutorTx(d *Driver, tx *sql.Tx, savepoint string, parentNotify func([]string)) *executorTx {
	etx := &executorTx{savepoint: savepoint, parentNotify: parentNotify}
	etx.executor = executor{d: d, read: tx, write: tx, tx: tx, notify: etx.buffer}
	return etx
}

// buffer holds topics until the transaction commits, as PostgreSQL holds NOTIFY.
func (e *executorTx) buffer(topics []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.topics = append(e.topics, topics...)
}

// finish marks the transaction done and returns its buffered topics, or sql.ErrTxDone when it
// was already committed or rolled back.
func (e *executorTx) finish() ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return nil, sql.ErrTxDone
	}
	e.done = true
	topics := e.topics
	e.topics = nil
	return topics, nil
}

func (e *executorTx) Commit(ctx context.Context) error {
	topics, err := e.finish()
	if err != nil {
		return err
	}
	if e.savepoint == "" {
		err = e.tx.Commit()
	} else {
		_, err = e.tx.ExecContext(ctx, "RELEASE "+e.savepoint)
	}
	if err != nil {
		return err
	}
	if len(topics) > 0 {
		e.parentNotify(topics)
	}
	return nil
}

func (e *executorTx) Rollback(ctx context.Context) error {
	if _, err := e.finish(); err != nil {
		return err
	}
	if e.savepoint == "" {
		return e.tx.Rollback()
	}
	// ROLLBACK TO undoes the savepoint's work but keeps it open; RELEASE removes it. Both run
	// even when ctx is done, so the enclosing transaction stays usable.
	ctx = context.WithoutCancel(ctx)
	if _, err := e.tx.ExecContext(ctx, "ROLLBACK TO "+e.savepoint); err != nil {
		return err
	}
	_, err := e.tx.ExecContext(ctx, "RELEASE "+e.savepoint)
	return err
}

// inTx runs fn atomically: in a new writer transaction on a plain executor, in a savepoint of
// the current transaction otherwise (so that a failure leaves the caller's transaction as it
// was).
func (e *executor) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if e.tx == nil {
		tx, err := e.d.writer.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	name := fmt.Sprintf("commandbus_savepoint_%d", e.d.savepoints.Add(1))
	if _, err := e.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return err
	}
	if err := fn(e.tx); err != nil {
		// Undo even when ctx is what failed.
		undoCtx := context.WithoutCancel(ctx)
		_, _ = e.tx.ExecContext(undoCtx, "ROLLBACK TO "+name)
		_, _ = e.tx.ExecContext(undoCtx, "RELEASE "+name)
		return err
	}
	_, err := e.tx.ExecContext(ctx, "RELEASE "+name)
	return err
}

func (e *executor) Exec(ctx context.Context, query string) error {
	_, err := e.write.ExecContext(ctx, e.d.sql(query))
	return err
}

func (e *executor) Ping(ctx context.Context) error {
	var one int
	return e.read.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
}

func (e *executor) Notify(ctx context.Context, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	e.notify(append([]string(nil), topics...))
	return nil
}
