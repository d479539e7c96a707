// Package driver is the seam between commandbus and a database. Every SQL statement the engine
// runs lives behind the Executor interface, one method per query, each taking a params struct so
// fields can be added without breaking callers. Two implementations ship: driver/pgdriver
// (PostgreSQL through pgx v5, the production store) and driver/sqlitedriver (modernc.org/sqlite,
// pure Go, the embedded default for one process). Package drivertest holds the conformance suite
// both must pass.
//
// The driver layer knows nothing about handlers, processes or retries: engine packages decide what
// to write and drivers only write it.
//
// The Executor interface and its params are a contract between the core and the drivers shipped
// with it, not a stability promise: they change as the core does. The rows and enums that the
// public packages hand out (executions, their log, signals, timers, waits) are defined in package
// cbtype and aliased here.
package driver

import (
	"context"
	"errors"
	"io/fs"
	"time"
)

// ErrNotFound is returned when a row addressed by id does not exist.
var ErrNotFound = errors.New("commandbus: not found")

// ErrConflict is returned when a row exists but is not in a state that allows the requested
// change, for example retrying a command that is not in the troubleshooting queue, or writing an
// execution whose fence has moved on.
var ErrConflict = errors.New("commandbus: state conflict")

// ErrDuplicate is returned by CommandClaimByID when the inbox shows the delivered message was
// already processed by its consumer.
var ErrDuplicate = errors.New("commandbus: message already processed")

// ErrWrongTxType is returned by UnwrapTx when the caller passes a transaction the driver does not
// understand (a *sql.Tx to the PostgreSQL driver, for example).
var ErrWrongTxType = errors.New("commandbus: transaction type not supported by this driver")

// Driver opens executors on one database. It does not own the underlying pool: the caller creates
// the pool and closes it.
type Driver interface {
	// Name is "postgres" or "sqlite"; it appears in benchmarks and logs.
	Name() string
	// Executor runs each query in its own implicit transaction on the pool.
	Executor() Executor
	// UnwrapTx returns an executor that runs inside a transaction the caller began itself
	// (pgx.Tx for pgdriver, *sql.Tx for sqlitedriver), so that commandbus writes commit or roll
	// back with the caller's business writes.
	UnwrapTx(tx any) (Executor, error)
	// Listener returns a listener for wake-up notifications. On PostgreSQL it is LISTEN/NOTIFY on a
	// dedicated connection; on SQLite it is an in-process broadcast.
	Listener() Listener
	// SupportsListenNotify reports whether notifications cross process boundaries.
	SupportsListenNotify() bool
	// Migrations lists the embedded schema migrations in version order.
	Migrations() []Migration
	// Schema is the PostgreSQL schema holding commandbus objects ("" on SQLite).
	Schema() string
}

// Migration is one versioned schema change. Versions are the same numbers on every driver.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
}

// MigrationFiles reads NNN_name.up.sql / NNN_name.down.sql pairs from fsys, sorted by version,
// and applies replace to every statement (drivers use it to substitute the schema name).
func MigrationFiles(fsys fs.FS, replace func(string) string) ([]Migration, error) {
	return readMigrations(fsys, replace)
}

// Executor runs queries. One method per query; implementations hold all SQL.
type Executor interface {
	// Begin starts a transaction (a savepoint when the executor is already a transaction).
	Begin(ctx context.Context) (ExecutorTx, error)
	// Exec runs a raw statement; used by migrations and tests only.
	Exec(ctx context.Context, sql string) error
	// Ping runs the cheapest round trip to the database (SELECT 1), for readiness probes.
	Ping(ctx context.Context) error

	MigrationExecutor
	CommandExecutor
	BatchExecutor
	AuditExecutor
	NotifyExecutor
	ExecutionExecutor
	ExecutionSignalExecutor
	CommandDeliveryExecutor
	OutboxExecutor
	InboxExecutor
	DLQExecutor
	ScheduleExecutor
	JobLeaseExecutor
	TccBarrierExecutor
	TenantExecutor
	MetricsExecutor
	ConsoleSessionExecutor
}

// ExecutorTx is an Executor inside a transaction.
type ExecutorTx interface {
	Executor
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// WithTx runs fn in a transaction on exec, committing when fn returns nil and rolling back
// otherwise.
func WithTx(ctx context.Context, exec Executor, fn func(tx ExecutorTx) error) error {
	tx, err := exec.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}

// MigrationExecutor reads and writes the migration version table.
type MigrationExecutor interface {
	// MigrationTableEnsure creates the schema and the version table when they do not exist.
	MigrationTableEnsure(ctx context.Context) error
	// MigrationGetAll returns the applied versions of every line, ordered by line and version.
	MigrationGetAll(ctx context.Context) ([]*MigrationRow, error)
	MigrationInsert(ctx context.Context, params *MigrationInsertParams) error
	// MigrationDelete forgets a version of a migration line ("" is CoreLine).
	MigrationDelete(ctx context.Context, line string, version int) error
	// MigrationLock serializes concurrent migrators for the rest of the transaction.
	MigrationLock(ctx context.Context) error
}

// MigrationScripter is implemented by drivers whose migrations can be printed as a standalone
// script for a DBA's pipeline (PostgreSQL): MigrationRecordSQL returns the statements that record
// (up) or forget (down) one version in the version table, creating it when needed.
type MigrationScripter interface {
	MigrationRecordSQL(line string, version int, name string, up bool) string
}

// CoreLine is the migration line of commandbus's own tables. Other lines (an application's
// tables, registered with the migrate package) are recorded in the same version table under
// their own names and version numbers.
const CoreLine = "core"

// MigrationRow is an applied migration.
type MigrationRow struct {
	// Line is the migration line the version belongs to (CoreLine for commandbus's own).
	Line      string
	Version   int
	Name      string
	AppliedAt time.Time
}

// MigrationInsertParams records an applied migration.
type MigrationInsertParams struct {
	// Line is the migration line; "" means CoreLine.
	Line    string
	Version int
	Name    string
}

// NotifyExecutor sends wake-up notifications. In a transaction they are delivered only if it
// commits, after it commits. They are wake-ups, not data: Notify may return before they are
// delivered (pgdriver coalesces them), and a lost one only delays a listener until it polls.
type NotifyExecutor interface {
	Notify(ctx context.Context, topics []string) error
}

// Listener receives wake-up notifications. Topics are plain strings such as "queue:fx__commands".
type Listener interface {
	// Connect opens the listening connection.
	Connect(ctx context.Context) error
	// Listen subscribes the connection to the commandbus channel.
	Listen(ctx context.Context) error
	// WaitForNotification blocks until a notification arrives or ctx ends.
	WaitForNotification(ctx context.Context) (string, error)
	// Close releases the connection.
	Close(ctx context.Context) error
}
