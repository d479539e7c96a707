package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
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
	// URL is postgres://... for PostgreSQL, or sqlite://PATH (or a bare file path) for SQLite.
	URL string
	// Schema is the PostgreSQL schema holding commandbus objects; SQLite ignores it.
	Schema string
}

// Register adds --database and --schema to cmd. Their defaults come from COMMANDBUS_DATABASE_URL
// (else defaultURL) and COMMANDBUS_DATABASE_SCHEMA (else the driver's default schema).
func (f *DatabaseFlags) Register(cmd *cobra.Command, defaultURL string) {
	cmd.Flags().StringVar(&f.URL, "database", EnvOr("COMMANDBUS_DATABASE_URL", defaultURL),
		"database URL: postgres://... for PostgreSQL, or sqlite://PATH / a file path for embedded SQLite (env COMMANDBUS_DATABASE_URL)")
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

// IsPostgresURL reports whether url names a PostgreSQL server (postgres:// or postgresql://).
func IsPostgresURL(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// OpenDatabase opens PostgreSQL (a postgres:// URL, checked with a ping) or SQLite (sqlite://PATH,
// sqlite:PATH or a bare path) by URL. poolSize caps the PostgreSQL pool when positive; schema names
// the PostgreSQL schema. It does not migrate: see MigrateUp.
func OpenDatabase(ctx context.Context, url, schema string, poolSize int32) (*Database, error) {
	if url == "" {
		return nil, fmt.Errorf("no database: pass --database postgres://... or --database sqlite://FILE")
	}
	if IsPostgresURL(url) {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, fmt.Errorf("parsing database URL: %w", err)
		}
		if poolSize > 0 {
			cfg.MaxConns = poolSize
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
		}
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", Redact(url), err)
		}
		drv, err := pgdriver.New(pool, &pgdriver.Config{Schema: schema})
		if err != nil {
			pool.Close()
			return nil, err
		}
		return &Database{Driver: drv, close: pool.Close}, nil
	}
	path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite://"), "sqlite:")
	drv, err := sqlitedriver.Open(path, nil)
	if err != nil {
		return nil, err
	}
	return &Database{Driver: drv, close: func() { _ = drv.Close() }}, nil
}

// MigrateUp applies the pending migrations of every registered line, logging what it applied.
func MigrateUp(ctx context.Context, drv driver.Driver, logger *slog.Logger) error {
	_, err := migrate.New(drv, logger).Up(ctx)
	return err
}

// Redact hides the password of a URL so the URL can be printed or logged.
func Redact(url string) string {
	at := strings.LastIndex(url, "@")
	scheme := strings.Index(url, "://")
	if at < 0 || scheme < 0 {
		return url
	}
	userinfo := url[scheme+3 : at]
	if colon := strings.Index(userinfo, ":"); colon >= 0 {
		return url[:scheme+3] + userinfo[:colon] + ":***" + url[at:]
	}
	return url
}
