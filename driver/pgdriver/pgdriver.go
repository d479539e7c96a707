// Package pgdriver is the PostgreSQL driver for commandbus, built on a pgx v5 pool.
//
// All commandbus objects live in one schema ("commandbus" unless configured otherwise). Claims
// use FOR UPDATE SKIP LOCKED, wake-ups use LISTEN/NOTIFY on a dedicated connection, and every
// timestamp that decides visibility comes from the database clock unless a test clock is passed
// in the params.
package pgdriver

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/commandbus/commandbus/driver"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// DefaultSchema is the schema used when Config.Schema is empty.
const DefaultSchema = "commandbus"

var schemaNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Config configures the driver.
type Config struct {
	// Schema holds every commandbus object. Default: "commandbus". Lower-case letters, digits and
	// underscores only, so it never needs quoting.
	Schema string
}

// Driver is the PostgreSQL driver. It is safe for concurrent use.
type Driver struct {
	pool       *pgxpool.Pool
	schema     string
	channel    string
	migrations []driver.Migration
	sqlCache   sync.Map
	notifier   notifier
}

var _ driver.Driver = (*Driver)(nil)

// New wraps a pgx pool. The pool stays the caller's to close.
func New(pool *pgxpool.Pool, config *Config) (*Driver, error) {
	if pool == nil {
		return nil, errors.New("pgdriver: pool is nil; create one with pgxpool.New")
	}
	schema := DefaultSchema
	if config != nil && config.Schema != "" {
		schema = config.Schema
	}
	if !schemaNameRE.MatchString(schema) {
		return nil, fmt.Errorf("pgdriver: schema %q must match %s", schema, schemaNameRE)
	}
	d := &Driver{pool: pool, schema: schema, channel: channelName(schema)}
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil {
		return nil, err
	}
	migrations, err := driver.MigrationFiles(sub, d.sql)
	if err != nil {
		return nil, fmt.Errorf("pgdriver: %w", err)
	}
	d.migrations = migrations
	return d, nil
}

// channelName is the NOTIFY channel; one per schema so isolated schemas do not wake each other.
func channelName(schema string) string {
	name := "commandbus_" + schema
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// Name returns "postgres".
func (d *Driver) Name() string { return "postgres" }

// Schema returns the schema holding commandbus objects.
func (d *Driver) Schema() string { return d.schema }

// Pool returns the wrapped pool.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Executor returns an executor on the pool.
func (d *Driver) Executor() driver.Executor { return &executor{d: d, db: d.pool} }

// UnwrapTx accepts a pgx.Tx begun by the caller.
func (d *Driver) UnwrapTx(tx any) (driver.Executor, error) {
	pgxTx, ok := tx.(pgx.Tx)
	if !ok {
		return nil, fmt.Errorf("%w: pgdriver needs a pgx.Tx, got %T", driver.ErrWrongTxType, tx)
	}
	return &executorTx{executor: executor{d: d, db: pgxTx}, tx: pgxTx}, nil
}

// SupportsListenNotify returns true.
func (d *Driver) SupportsListenNotify() bool { return true }

// Migrations returns the embedded migrations with the schema substituted.
func (d *Driver) Migrations() []driver.Migration { return d.migrations }

// Listener returns a LISTEN/NOTIFY listener on a dedicated connection.
func (d *Driver) Listener() driver.Listener { return &listener{d: d} }

// sql substitutes the schema into a statement, caching the result.
func (d *Driver) sql(query string) string {
	if cached, ok := d.sqlCache.Load(query); ok {
		return cached.(string)
	}
	out := strings.ReplaceAll(query, "{schema}", d.schema)
	d.sqlCache.Store(query, out)
	return out
}

// dbtx is what a pool and a transaction have in common.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
}

type executor struct {
	d  *Driver
	db dbtx
}

// executorTx is a transaction. One the driver began (owned) holds its notifications until it
// commits and sends them after, outside it: a NOTIFY inside a transaction takes a database-wide
// lock held through the commit's WAL flush, which serialises every notifying commit and defeats
// group commit. A transaction the caller began (UnwrapTx) notifies inside it, since its commit is
// not ours to follow.
type executorTx struct {
	executor
	tx      pgx.Tx
	owned   bool
	parent  *executorTx // the enclosing transaction of a savepoint
	pending []string    // owned: topics to notify once committed
}

func (e *executor) Begin(ctx context.Context) (driver.ExecutorTx, error) {
	tx, err := e.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &executorTx{executor: executor{d: e.d, db: tx}, tx: tx, owned: true}, nil
}

// Begin starts a savepoint; its notifications join the enclosing transaction's when it commits.
func (e *executorTx) Begin(ctx context.Context) (driver.ExecutorTx, error) {
	tx, err := e.tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &executorTx{executor: executor{d: e.d, db: tx}, tx: tx, owned: e.owned, parent: e}, nil
}

// Commit commits, then sends the transaction's notifications. A notification that fails to go
// out is not an error of the commit: listeners also poll, so it only delays a wake-up.
func (e *executorTx) Commit(ctx context.Context) error {
	if err := e.tx.Commit(ctx); err != nil {
		return err
	}
	if len(e.pending) == 0 {
		return nil
	}
	if e.parent != nil {
		e.parent.pending = append(e.parent.pending, e.pending...)
		return nil
	}
	e.d.notifier.queue(e.d, e.pending)
	return nil
}

// Rollback rolls back and drops the transaction's notifications.
func (e *executorTx) Rollback(ctx context.Context) error {
	e.pending = nil
	return e.tx.Rollback(ctx)
}

// Notify queues the topics until an owned transaction commits; in a caller's transaction it
// notifies inside it.
func (e *executorTx) Notify(ctx context.Context, topics []string) error {
	if !e.owned {
		return e.notifyInTx(ctx, topics) // not asynchronous: the caller's data commits with it
	}
	e.pending = append(e.pending, topics...)
	return nil
}

func (e *executor) Exec(ctx context.Context, sql string) error {
	_, err := e.db.Exec(ctx, e.d.sql(sql))
	return err
}

func (e *executor) Ping(ctx context.Context) error {
	var one int
	return e.db.QueryRow(ctx, `SELECT 1`).Scan(&one)
}

// Notify queues the topics: they go out from the pool, coalesced with other notifications, and
// Notify does not wait for them (see notifier).
func (e *executor) Notify(_ context.Context, topics []string) error {
	e.d.notifier.queue(e.d, topics)
	return nil
}

// notifyInTx sends the topics inside a caller's transaction: they go out when it commits.
func (e *executorTx) notifyInTx(ctx context.Context, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	_, err := e.db.Exec(ctx, `SELECT pg_notify($1, t) FROM unnest($2::text[]) AS t`, e.d.channel, topics)
	return err
}

// notify sends the topics on the schema's channel from the pool (never inside a transaction: the
// statement is its own transaction, committed without waiting for the WAL flush). A notification
// is a wake-up, not data, and the NOTIFY lock is then held only for a moment.
func (d *Driver) notify(ctx context.Context, db dbtx, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	_, err := db.Exec(ctx, `SELECT pg_notify($1, t) FROM (SELECT set_config('synchronous_commit', 'off', true)) AS s, unnest($2::text[]) AS t`,
		d.channel, topics)
	return err
}

type listener struct {
	d    *Driver
	conn *pgx.Conn
}

func (l *listener) Connect(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	l.conn = conn
	return nil
}

func (l *listener) Listen(ctx context.Context) error {
	_, err := l.conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.d.channel}.Sanitize())
	return err
}

func (l *listener) WaitForNotification(ctx context.Context) (string, error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		return "", err
	}
	return n.Payload, nil
}

func (l *listener) Close(ctx context.Context) error {
	if l.conn == nil {
		return nil
	}
	err := l.conn.Close(ctx)
	l.conn = nil
	return err
}

// GuardTx applies timeouts to the rest of transaction tx, which is a pgx.Tx or a *sql.Tx on a
// PostgreSQL connection: lock_timeout, statement_timeout and idle_in_transaction_session_timeout
// are set as SET LOCAL does, so they end with the transaction and never leak into the pool.
// A zero timeout leaves the session's setting. Call it first in the transaction.
func GuardTx(ctx context.Context, tx any, timeouts driver.TxTimeouts) error {
	var sets []string
	var args []any
	for _, s := range []struct {
		name string
		d    time.Duration
	}{
		{"lock_timeout", timeouts.Lock},
		{"statement_timeout", timeouts.Statement},
		{"idle_in_transaction_session_timeout", timeouts.IdleInTransaction},
	} {
		if s.d <= 0 {
			continue
		}
		ms := max(s.d.Milliseconds(), 1) // PostgreSQL counts milliseconds, and 0 means no timeout
		args = append(args, strconv.FormatInt(ms, 10))
		sets = append(sets, fmt.Sprintf("set_config('%s', $%d, true)", s.name, len(args)))
	}
	if len(sets) == 0 {
		return nil
	}
	query := "SELECT " + strings.Join(sets, ", ")
	switch tx := tx.(type) {
	case pgx.Tx:
		_, err := tx.Exec(ctx, query, args...)
		return err
	case *sql.Tx:
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	default:
		return fmt.Errorf("%w: GuardTx needs a pgx.Tx or *sql.Tx, got %T", driver.ErrWrongTxType, tx)
	}
}
