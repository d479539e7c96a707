package main

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

// databaseFlags are the flags every command that opens a database takes.
type databaseFlags struct {
	url    string
	schema string
}

func (f *databaseFlags) register(cmd *cobra.Command, defaultURL string) {
	cmd.Flags().StringVar(&f.url, "database", envOr("COMMANDBUS_DATABASE_URL", defaultURL),
		"database URL: postgres://... for PostgreSQL, or sqlite://PATH / a file path for embedded SQLite (env COMMANDBUS_DATABASE_URL)")
	cmd.Flags().StringVar(&f.schema, "schema", envOr("COMMANDBUS_DATABASE_SCHEMA", pgdriver.DefaultSchema),
		"PostgreSQL schema holding commandbus objects (env COMMANDBUS_DATABASE_SCHEMA)")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// database is an open driver and how to close it.
type database struct {
	driver.Driver
	close func()
}

// isPostgresURL reports whether url names a PostgreSQL server.
func isPostgresURL(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// openDatabase opens PostgreSQL or SQLite by URL.
func openDatabase(ctx context.Context, url, schema string, poolSize int32) (*database, error) {
	if url == "" {
		return nil, fmt.Errorf("no database: pass --database postgres://... or --database sqlite://FILE")
	}
	if isPostgresURL(url) {
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
			return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", redact(url), err)
		}
		drv, err := pgdriver.New(pool, &pgdriver.Config{Schema: schema})
		if err != nil {
			pool.Close()
			return nil, err
		}
		return &database{Driver: drv, close: pool.Close}, nil
	}
	path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite://"), "sqlite:")
	drv, err := sqlitedriver.Open(path, nil)
	if err != nil {
		return nil, err
	}
	return &database{Driver: drv, close: func() { _ = drv.Close() }}, nil
}

// migrateUp applies pending migrations, logging what it applied.
func migrateUp(ctx context.Context, drv driver.Driver, logger *slog.Logger) error {
	_, err := migrate.New(drv, logger).Up(ctx)
	return err
}

// redact hides the password of a URL for messages.
func redact(url string) string {
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
