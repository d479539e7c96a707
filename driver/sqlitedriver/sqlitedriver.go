// Package sqlitedriver is the embedded SQLite driver for commandbus, built on modernc.org/sqlite
// (pure Go, no cgo). It is the default store for a single process: tests, examples, desktop and
// edge deployments that do not want to run PostgreSQL.
//
// # One writer
//
// SQLite allows one writer at a time, so the driver embraces it instead of fighting SQLITE_BUSY:
// every write goes through one connection (the writer *sql.DB has SetMaxOpenConns(1)) and every
// transaction starts with BEGIN IMMEDIATE, taking the write lock up front so two transactions
// never deadlock upgrading a read lock. The database runs in WAL mode, so a separate read-only
// pool serves plain reads (CommandGetByID, CommandList, ...) concurrently with the writer and
// without waiting for it. Reads made through a transaction's executor always use that
// transaction, so they see its uncommitted writes.
//
// Because the writer is a single connection, a goroutine that holds a transaction (from
// Executor().Begin, or from DB().BeginTx) must make all its writes through that transaction:
// a write through Executor() would wait for the connection the goroutine itself holds.
//
// # One process
//
// The driver serves one process. Claims need no SKIP LOCKED because the writer serializes them,
// "now" is the process clock (time.Now, or params.Now when given), and wake-up notifications
// are an in-process broadcast: SupportsListenNotify reports false and other processes sharing
// the file must poll. Open the file from one process only.
//
// Tables live in the main database with the prefix "commandbus_" (the PostgreSQL driver's
// "{schema}.command" is "commandbus_command" here). Migrations carry the same version numbers
// as the PostgreSQL ones.
package sqlitedriver

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/commandbus/commandbus/driver"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// TablePrefix is prepended to every commandbus table name; the migrations' "{schema}." token
// is replaced by it.
const TablePrefix = "commandbus_"

// Config configures the driver. A nil *Config means every default.
type Config struct {
	// BusyTimeout is how long a statement waits for a lock held by another connection (a WAL
	// checkpoint, or another process that opened the file despite the one-process rule) before
	// failing with SQLITE_BUSY. Default: 10s.
	BusyTimeout time.Duration
	// MaxReadConns bounds the read-only connection pool used by plain reads. Default: 4.
	MaxReadConns int
}

// WithDefaults returns a copy of c with every zero field set to its default. It accepts nil.
func (c *Config) WithDefaults() *Config {
	out := Config{}
	if c != nil {
		out = *c
	}
	if out.BusyTimeout == 0 {
		out.BusyTimeout = 10 * time.Second
	}
	if out.MaxReadConns == 0 {
		out.MaxReadConns = 4
	}
	return &out
}

func (c *Config) validate() error {
	var errs []error
	if c.BusyTimeout < 0 {
		errs = append(errs, fmt.Errorf("BusyTimeout must not be negative, got %s", c.BusyTimeout))
	}
	if c.MaxReadConns < 0 {
		errs = append(errs, fmt.Errorf("MaxReadConns must not be negative, got %d", c.MaxReadConns))
	}
	return errors.Join(errs...)
}

// Driver is the SQLite driver. It owns its connections: Close releases them. It is safe for
// concurrent use.
type Driver struct {
	writer     *sql.DB
	reader     *sql.DB // the writer itself for an in-memory database
	migrations []driver.Migration
	notifier   *broadcaster
	savepoints atomic.Int64 // names nested transactions uniquely
	sqlCache   sync.Map
}

var _ driver.Driver = (*Driver)(nil)

// Open opens the database file at path, creating it when it does not exist, and configures it
// (WAL, busy timeout, foreign keys, synchronous=NORMAL). It does not migrate: run
// migrate.New(drv, logger).Up(ctx) before use. The path ":memory:" gives a private in-memory
// database that lives as long as the driver; plain reads then share the writer connection.
func Open(path string, config *Config) (*Driver, error) {
	cfg := config.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("sqlitedriver: invalid config: %w", err)
	}
	if path == "" {
		return nil, errors.New("sqlitedriver: path is empty; pass a file path, or \":memory:\" for a private in-memory database")
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlitedriver: path %q must not contain '?'; the driver sets connection parameters itself", path)
	}
	inMemory := path == ":memory:"

	pragmas := url.Values{}
	pragmas.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	pragmas.Add("_pragma", "foreign_keys(1)")
	writerParams := url.Values{"_pragma": append([]string{}, pragmas["_pragma"]...)}
	writerParams.Add("_pragma", "journal_mode(WAL)")
	writerParams.Add("_pragma", "synchronous(NORMAL)")
	writerParams.Set("_txlock", "immediate")

	writer, err := sql.Open("sqlite", path+"?"+writerParams.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitedriver: opening %s: %w", path, err)
	}
	// One writer connection, kept forever: SQLite has one writer anyway, and an in-memory
	// database disappears with its connection.
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.BusyTimeout+10*time.Second)
	defer cancel()
	if err := writer.PingContext(ctx); err != nil {
		_ = writer.Close()
		return nil, fmt.Errorf("sqlitedriver: opening %s: %w", path, err)
	}

	reader := writer
	if !inMemory {
		readerParams := url.Values{"_pragma": append([]string{}, pragmas["_pragma"]...)}
		readerParams.Add("_pragma", "query_only(1)")
		reader, err = sql.Open("sqlite", path+"?"+readerParams.Encode())
		if err != nil {
			_ = writer.Close()
			return nil, fmt.Errorf("sqlitedriver: opening %s for reading: %w", path, err)
		}
		reader.SetMaxOpenConns(cfg.MaxReadConns)
		reader.SetMaxIdleConns(cfg.MaxReadConns)
		if err := reader.PingContext(ctx); err != nil {
			_ = reader.Close()
			_ = writer.Close()
			return nil, fmt.Errorf("sqlitedriver: opening %s for reading: %w", path, err)
		}
	}

	d := &Driver{writer: writer, reader: reader, notifier: newBroadcaster()}
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	if d.migrations, err = driver.MigrationFiles(sub, d.sql); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("sqlitedriver: %w", err)
	}
	return d, nil
}

// Close closes every listener and both connection pools.
func (d *Driver) Close() error {
	d.notifier.close()
	var errs []error
	if d.reader != d.writer {
		errs = append(errs, d.reader.Close())
	}
	errs = append(errs, d.writer.Close())
	return errors.Join(errs...)
}

// DB returns the writer handle. Begin your own transaction on it (it starts IMMEDIATE) and pass
// it to UnwrapTx so that business writes and commandbus writes commit together. It is the only
// writer connection: finish the transaction promptly, and do not write through Executor() while
// holding it.
func (d *Driver) DB() *sql.DB { return d.writer }

// Name returns "sqlite".
func (d *Driver) Name() string { return "sqlite" }

// Schema returns "": SQLite has no schemas, tables carry TablePrefix instead.
func (d *Driver) Schema() string { return "" }

// Executor returns an executor that writes through the writer connection, each call in its own
// transaction, and reads through the read-only pool.
func (d *Driver) Executor() driver.Executor {
	return &executor{d: d, read: d.reader, write: d.writer, notify: d.notifier.broadcast}
}

// UnwrapTx accepts a *sql.Tx begun on DB(). Notify on the returned executor broadcasts at once,
// because the driver cannot see when the caller commits; listeners treat wake-ups as hints and
// poll anyway.
func (d *Driver) UnwrapTx(tx any) (driver.Executor, error) {
	sqlTx, ok := tx.(*sql.Tx)
	if !ok {
		return nil, fmt.Errorf("%w: sqlitedriver needs a *sql.Tx begun on Driver.DB(), got %T", driver.ErrWrongTxType, tx)
	}
	return &executor{d: d, read: sqlTx, write: sqlTx, tx: sqlTx, notify: d.notifier.broadcast}, nil
}

// SupportsListenNotify returns false: notifications are an in-process broadcast.
func (d *Driver) SupportsListenNotify() bool { return false }

// Migrations returns the embedded migrations with the table prefix substituted.
func (d *Driver) Migrations() []driver.Migration { return d.migrations }

// Listener returns a listener on the driver's in-process broadcast.
func (d *Driver) Listener() driver.Listener { return &listener{b: d.notifier} }

// sql substitutes the table prefix into a statement, caching the result.
func (d *Driver) sql(query string) string {
	if cached, ok := d.sqlCache.Load(query); ok {
		return cached.(string)
	}
	out := strings.ReplaceAll(query, "{schema}.", TablePrefix)
	d.sqlCache.Store(query, out)
	return out
}
