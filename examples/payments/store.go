package payments

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
)

// store is the platform's business database: the bounded contexts' tables, on the same database
// as commandbus. Statements are portable SQL with $n placeholders; {t} is replaced by the table
// prefix ("<schema>.pay_" on PostgreSQL, "pay_" on SQLite).
type store struct {
	db       *sql.DB
	postgres bool
	prefix   string
	// forUpdate locks the selected rows on PostgreSQL; SQLite's single writer needs no lock.
	forUpdate string
	cache     sync.Map // statement -> statement with the prefix
	// pool is the driver's pgx pool when the business tables live in the bus's PostgreSQL
	// database; shared says the business database is the bus's (either driver), so one
	// transaction can hold business rows and executions together.
	pool   *pgxpool.Pool
	shared bool
}

// openStore finds the business database behind a commandbus driver.
func openStore(drv driver.Driver, override *sql.DB) (*store, error) {
	type pooled interface{ Pool() *pgxpool.Pool }
	type single interface{ DB() *sql.DB }
	s := &store{db: override}
	switch d := drv.(type) {
	case pooled:
		s.postgres = true
		s.prefix = tablePrefix("postgres", drv.Schema())
		s.forUpdate = " FOR UPDATE"
		if s.db == nil {
			s.db = stdlib.OpenDBFromPool(d.Pool())
			s.pool, s.shared = d.Pool(), true
		}
	case single:
		s.prefix = "pay_"
		if s.db == nil {
			s.db = d.DB()
			s.shared = true
		}
	default:
		if override == nil {
			return nil, fmt.Errorf("payments: driver %T is neither pgdriver nor sqlitedriver; pass Options.DB", drv)
		}
		s.postgres = drv.Name() == "postgres"
		s.prefix = "pay_"
		if s.postgres {
			s.prefix = quoteIdent(drv.Schema()) + ".pay_"
			s.forUpdate = " FOR UPDATE"
		}
	}
	return s, nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// q returns a statement with the table prefix substituted.
func (s *store) q(stmt string) string {
	if out, ok := s.cache.Load(stmt); ok {
		return out.(string)
	}
	out := strings.ReplaceAll(stmt, "{t}", s.prefix)
	s.cache.Store(stmt, out)
	return out
}

// tx runs fn in a transaction, committing when it returns nil. On SQLite it holds the single
// writer: fn must not call the bus.
func (s *store) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := s.guard(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// guard bounds a transaction opened by a command handler (ctx is the handler's) on PostgreSQL
// with the lock, statement and idle-in-transaction timeouts of commandbus.HandlerTxTimeouts: a
// worker frozen while it holds account rows loses them after a third of its lease, and the
// other payments on those accounts wait for a lock at most half of theirs per attempt. SQLite has one
// writer, so there is nothing to bound per transaction; its busy timeout and the handler's
// context (which ends with the lease) bound the waits.
func (s *store) guard(ctx context.Context, tx any) error {
	if !s.postgres {
		return nil
	}
	timeouts, ok := commandbus.HandlerTxTimeouts(ctx)
	if !ok {
		return nil
	}
	return pgdriver.GuardTx(ctx, tx, timeouts)
}

// execFunc runs one statement and returns the rows it affected.
type execFunc func(ctx context.Context, stmt string, args ...any) (int64, error)

// errNotShared is returned by busTx when the business database is not the bus's.
var errNotShared = errors.New("payments: the business database is not the commandbus database")

// busTx runs fn in one transaction that business writes (through exec) and commandbus writes
// (through tx, for driver.UnwrapTx or process.InTx) share, committing when fn returns nil. It
// returns errNotShared when Options.DB points elsewhere. On SQLite it holds the single writer:
// fn must write only through exec and tx.
func (s *store) busTx(ctx context.Context, fn func(exec execFunc, tx any) error) error {
	if !s.shared {
		return errNotShared
	}
	if s.pool != nil {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		if err := s.guard(ctx, tx); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		exec := func(ctx context.Context, stmt string, args ...any) (int64, error) {
			tag, err := tx.Exec(ctx, s.q(stmt), args...)
			return tag.RowsAffected(), err
		}
		if err := fn(exec, tx); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		exec := func(ctx context.Context, stmt string, args ...any) (int64, error) {
			res, err := tx.ExecContext(ctx, s.q(stmt), args...)
			if err != nil {
				return 0, err
			}
			return res.RowsAffected()
		}
		return fn(exec, tx)
	})
}

// micros stores times as BIGINT unix microseconds on both databases.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// isUniqueViolation reports a UNIQUE conflict on either database.
func isUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "23505") || strings.Contains(msg, "UNIQUE constraint failed")
}

func notFound(err error) bool { return errors.Is(err, sql.ErrNoRows) }
