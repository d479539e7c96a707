package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/migrate"
)

// DatabaseFlags are the flags every command that opens a database takes: --database (URL) and
// --schema (the PostgreSQL schema).
type DatabaseFlags struct {
	// URL is postgres://... or a libpq key/value DSN for PostgreSQL (empty: the PG* environment
	// variables, when set), or sqlite://PATH (or a bare path ending .db) for SQLite.
	URL string
	// Schema is the PostgreSQL schema holding commandbus objects; SQLite ignores it.
	Schema string
}

// Register adds --database and --schema to cmd. Their defaults come from COMMANDBUS_DATABASE_URL
// (else defaultURL) and COMMANDBUS_DATABASE_SCHEMA (else the driver's default schema).
func (f *DatabaseFlags) Register(cmd *cobra.Command, defaultURL string) {
	cmd.Flags().StringVar(&f.URL, "database", EnvOr("COMMANDBUS_DATABASE_URL", defaultURL),
		"database: postgres://USER@HOST/DB or a key/value DSN (host=... dbname=...) for PostgreSQL, or sqlite://PATH for embedded SQLite; empty: the PG* variables (PGHOST, PGDATABASE, ...) when set (env COMMANDBUS_DATABASE_URL)")
	cmd.Flags().StringVar(&f.Schema, "schema", EnvOr("COMMANDBUS_DATABASE_SCHEMA", pgdriver.DefaultSchema),
		"PostgreSQL schema holding commandbus objects (env COMMANDBUS_DATABASE_SCHEMA)")
}

// EnvOr returns the environment variable key, or def when it is unset or empty.
func EnvOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Database is an open driver; Close releases its connections.
type Database struct {
	driver.Driver
	close func()
}

// NewDatabase wraps an open driver; close releases its connections and is what Close calls.
// Use it to add work to closing (dropping a scratch schema, say) to a database OpenDatabase opened.
func NewDatabase(drv driver.Driver, close func()) *Database {
	return &Database{Driver: drv, close: close}
}

// Close releases the database's connections (the PostgreSQL pool or the SQLite file).
func (d *Database) Close() { d.close() }

// The kinds of database a --database value names.
const (
	DatabasePostgres = "postgres" // a postgres:// URL, a libpq key/value DSN, or the PG* variables
	DatabaseSQLite   = "sqlite"   // sqlite://PATH, sqlite:PATH, or a bare path ending .db, .sqlite or .sqlite3
)

// pgEnvironment are the libpq variables that, with no --database, select PostgreSQL.
var pgEnvironment = []string{"PGHOST", "PGHOSTADDR", "PGDATABASE", "PGSERVICE"}

// dsnKey matches the first key of a libpq key/value connection string ("host=db user=app").
var dsnKey = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

// DatabaseKind tells which database url names: DatabasePostgres for a postgres:// or
// postgresql:// URL or a libpq key/value DSN ("host=db user=app dbname=payments"), and, when url
// is empty, for the PG* environment variables (PGHOST, PGDATABASE, PGSERVICE) as pgx reads them;
// DatabaseSQLite for sqlite://PATH, sqlite:PATH or a bare path ending .db, .sqlite or .sqlite3.
// Anything else is an error naming what is accepted: an unknown scheme is never taken for a file
// name.
func DatabaseKind(url string) (string, error) {
	trimmed := strings.TrimSpace(url)
	lower := strings.ToLower(trimmed)
	switch {
	case trimmed == "":
		for _, v := range pgEnvironment {
			if os.Getenv(v) != "" {
				return DatabasePostgres, nil
			}
		}
		return "", usageErrorf("no database: pass --database postgres://USER@HOST/DB (or a key/value DSN, or set PGHOST), or --database sqlite://FILE")
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"), dsnKey.MatchString(trimmed):
		return DatabasePostgres, nil
	case strings.HasPrefix(lower, "sqlite:"):
		if strings.TrimPrefix(trimmed[len("sqlite:"):], "//") == "" {
			return "", usageErrorf("--database %q names no file: use sqlite://PATH", url)
		}
		return DatabaseSQLite, nil
	}
	if i := strings.Index(trimmed, "://"); i > 0 {
		return "", usageErrorf("--database: unknown scheme %q in %s: use postgres://, postgresql://, a key/value DSN (host=... dbname=...) or sqlite://PATH",
			trimmed[:i], Redact(trimmed))
	}
	switch strings.ToLower(filepath.Ext(trimmed)) {
	case ".db", ".sqlite", ".sqlite3":
		return DatabaseSQLite, nil
	}
	return "", usageErrorf("--database %s is neither a URL nor a SQLite file: use postgres://..., a key/value DSN (host=... dbname=...) or sqlite://PATH",
		Redact(trimmed))
}

// IsPostgresURL reports whether url names a PostgreSQL server (see DatabaseKind).
func IsPostgresURL(url string) bool {
	kind, err := DatabaseKind(url)
	return err == nil && kind == DatabasePostgres
}

// OpenDatabase opens PostgreSQL (checked with a ping) or SQLite by url, as DatabaseKind tells
// them apart. poolSize caps the PostgreSQL pool when positive; schema names the PostgreSQL
// schema. It does not migrate: see MigrateUp. Errors show the URL with its password hidden.
func OpenDatabase(ctx context.Context, url, schema string, poolSize int32) (*Database, error) {
	kind, err := DatabaseKind(url)
	if err != nil {
		return nil, err
	}
	if kind == DatabasePostgres {
		cfg, err := pgxpool.ParseConfig(strings.TrimSpace(url))
		if err != nil {
			return nil, usageErrorf("parsing --database %s: %s", Redact(url), redactSecrets(err.Error(), url))
		}
		if poolSize > 0 {
			cfg.MaxConns = poolSize
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("connecting to PostgreSQL at %s: %s", Redact(url), redactSecrets(err.Error(), url))
		}
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("connecting to PostgreSQL at %s: %s", describePostgres(url, cfg.ConnConfig.Host, cfg.ConnConfig.Database), redactSecrets(err.Error(), url))
		}
		drv, err := pgdriver.New(pool, &pgdriver.Config{Schema: schema})
		if err != nil {
			pool.Close()
			return nil, err
		}
		return &Database{Driver: drv, close: pool.Close}, nil
	}
	path := strings.TrimSpace(url)
	if strings.HasPrefix(strings.ToLower(path), "sqlite:") {
		path = strings.TrimPrefix(path[len("sqlite:"):], "//")
	}
	drv, err := sqlitedriver.Open(path, nil)
	if err != nil {
		return nil, err
	}
	return &Database{Driver: drv, close: func() { _ = drv.Close() }}, nil
}

// describePostgres names the server for an error: the redacted URL, or host and database when
// they came from the environment.
func describePostgres(url, host, database string) string {
	if strings.TrimSpace(url) == "" {
		return fmt.Sprintf("host=%s dbname=%s (from the PG* environment)", host, database)
	}
	return Redact(url)
}

// MigrateUp applies the pending migrations of every registered line, logging what it applied.
func MigrateUp(ctx context.Context, drv driver.Driver, logger *slog.Logger) error {
	_, err := migrate.New(drv, logger).Up(ctx)
	return err
}

// dsnPassword matches the password of a key/value DSN: password=secret or password='se cret'.
var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// Redact hides the password of a database URL or key/value DSN so it can be printed or logged:
// postgres://app:xxxxx@db/payments, host=db password=xxxxx.
func Redact(raw string) string {
	trimmed := strings.TrimSpace(raw)
	if strings.Contains(trimmed, "://") {
		if u, err := url.Parse(trimmed); err == nil {
			redacted := u.Redacted()
			if q := u.Query(); q.Has("password") {
				q.Set("password", "xxxxx")
				u.RawQuery = q.Encode()
				redacted = u.Redacted()
			}
			return redacted
		}
		// Unparsable: hide whatever sits between the scheme and the last @.
		scheme := strings.Index(trimmed, "://")
		if at := strings.LastIndex(trimmed, "@"); at > scheme {
			return trimmed[:scheme+3] + "xxxxx" + trimmed[at:]
		}
		return trimmed
	}
	return dsnPassword.ReplaceAllString(trimmed, "${1}xxxxx")
}

// redactSecrets removes the password of dsn from msg (a driver's error may quote it).
func redactSecrets(msg, dsn string) string {
	msg = strings.ReplaceAll(msg, strings.TrimSpace(dsn), Redact(dsn))
	if u, err := url.Parse(strings.TrimSpace(dsn)); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
		if pw := u.Query().Get("password"); pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	for _, m := range dsnPassword.FindAllStringSubmatch(dsn, -1) {
		if pw := strings.Trim(m[2], "'"); pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	if pw := os.Getenv("PGPASSWORD"); pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return dsnPassword.ReplaceAllString(msg, "${1}xxxxx")
}
