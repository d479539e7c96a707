// Package dbtest gives tests an isolated, migrated database on each driver: a fresh PostgreSQL
// schema per test (dropped afterwards) and a fresh SQLite file per test.
//
// Tests that need PostgreSQL read COMMANDBUS_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test). Without a reachable server they skip with a message,
// unless COMMANDBUS_REQUIRE_POSTGRES=1, which CI sets so they can never be skipped silently.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/migrate"
)

// DefaultDatabaseURL is used when COMMANDBUS_TEST_DATABASE_URL is unset.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test"

// DatabaseURL returns the PostgreSQL URL tests use.
func DatabaseURL() string {
	if url := os.Getenv("COMMANDBUS_TEST_DATABASE_URL"); url != "" {
		return url
	}
	return DefaultDatabaseURL
}

var (
	poolOnce sync.Once
	pool     *pgxpool.Pool
	poolErr  error
)

// Pool returns a pool shared by the tests of one package, or skips (fails under
// COMMANDBUS_REQUIRE_POSTGRES=1) when PostgreSQL is unreachable.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	poolOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cfg, err := pgxpool.ParseConfig(DatabaseURL())
		if err != nil {
			poolErr = err
			return
		}
		cfg.MaxConns = 24
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			poolErr = err
			return
		}
		if err := p.Ping(ctx); err != nil {
			p.Close()
			poolErr = err
			return
		}
		pool = p
	})
	if poolErr != nil {
		if os.Getenv("COMMANDBUS_REQUIRE_POSTGRES") == "1" {
			tb.Fatalf("PostgreSQL is required (COMMANDBUS_REQUIRE_POSTGRES=1) but unreachable at %s: %v", DatabaseURL(), poolErr)
		}
		tb.Skipf("skipping: PostgreSQL unreachable at %s (%v); set COMMANDBUS_TEST_DATABASE_URL or start it", DatabaseURL(), poolErr)
	}
	return pool
}

// Postgres returns a PostgreSQL driver on a fresh, migrated schema that is dropped when the test
// ends.
func Postgres(tb testing.TB) *pgdriver.Driver {
	tb.Helper()
	p := Pool(tb)
	schema := "cbtest_" + randomHex(6)
	drv, err := pgdriver.New(p, &pgdriver.Config{Schema: schema})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if _, err := migrate.New(drv, nil).Up(ctx); err != nil {
		tb.Fatalf("migrating schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := p.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			tb.Logf("dropping test schema %s: %v", schema, err)
		}
	})
	return drv
}

// SQLite returns a SQLite driver on a fresh, migrated database file in the test's temp dir.
func SQLite(tb testing.TB) *sqlitedriver.Driver {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "commandbus.db")
	drv, err := sqlitedriver.Open(path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = drv.Close() })
	if _, err := migrate.New(drv, nil).Up(context.Background()); err != nil {
		tb.Fatalf("migrating SQLite: %v", err)
	}
	return drv
}

// Each runs fn as a parallel subtest once per driver, "postgres" and "sqlite", each on a fresh
// database.
func Each(t *testing.T, fn func(t *testing.T, drv driver.Driver)) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, Postgres(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, SQLite(t))
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
