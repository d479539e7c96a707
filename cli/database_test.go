package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/internal/dbtest"
)

func TestDatabaseKind(t *testing.T) {
	for url, want := range map[string]string{
		"postgres://app@db/payments":           cli.DatabasePostgres,
		"postgresql://app:pw@db:5432/payments": cli.DatabasePostgres,
		"host=db user=app dbname=payments":     cli.DatabasePostgres,
		" dbname=payments":                     cli.DatabasePostgres,
		"sqlite://commandbus.db":               cli.DatabaseSQLite,
		"sqlite:/var/lib/cb/data":              cli.DatabaseSQLite,
		"./data/commandbus.db":                 cli.DatabaseSQLite,
		"/tmp/x.sqlite3":                       cli.DatabaseSQLite,
	} {
		got, err := cli.DatabaseKind(url)
		require.NoError(t, err, url)
		require.Equal(t, want, got, url)
	}
	for url, want := range map[string]string{
		"mysql://app:secret@db/payments": `unknown scheme "mysql"`,
		"payments":                       "neither a URL nor a SQLite file",
		"sqlite://":                      "names no file",
	} {
		_, err := cli.DatabaseKind(url)
		require.ErrorContains(t, err, want, url)
		require.NotContains(t, err.Error(), "secret", "the password is hidden")
		require.Equal(t, cli.ExitUsage, cli.ExitCode(err))
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:s3cret@db:5432/payments?sslmode=require": "postgres://app:xxxxx@db:5432/payments?sslmode=require",
		"postgres://app@db/payments":                             "postgres://app@db/payments",
		"postgres://app@db/payments?password=s3cret":             "postgres://app@db/payments?password=xxxxx",
		"host=db user=app password=s3cret dbname=payments":       "host=db user=app password=xxxxx dbname=payments",
		"host=db password='s3 cret' dbname=payments":             "host=db password=xxxxx dbname=payments",
		"sqlite://commandbus.db":                                 "sqlite://commandbus.db",
		"postgres://app:s3cret@[bad/payments":                    "postgres://xxxxx@[bad/payments",
	} {
		require.Equal(t, want, cli.Redact(in), in)
	}
}

// pgConnParts are the parts of the test database's URL, to write it as a DSN or PG* variables.
func pgConnParts(t *testing.T) *pgx.ConnConfig {
	dbtest.Pool(t) // skips without PostgreSQL
	cfg, err := pgx.ParseConfig(dbtest.DatabaseURL())
	require.NoError(t, err)
	return cfg
}

// A libpq key/value DSN and the PG* variables reach PostgreSQL, as pgx reads them; a DSN is never
// taken for a SQLite file name.
func TestOpenDatabaseByDSNAndEnvironment(t *testing.T) {
	cfg := pgConnParts(t)
	dir := t.TempDir()
	t.Chdir(dir)
	dsn := fmt.Sprintf("host=%s port=%d user=%s dbname=%s", cfg.Host, cfg.Port, cfg.User, cfg.Database)
	if cfg.Password != "" {
		dsn += " password=" + cfg.Password
	}
	ctx := context.Background()
	db, err := cli.OpenDatabase(ctx, dsn, "cbtest_dsn", 1)
	require.NoError(t, err)
	require.Equal(t, "postgres", db.Name())
	db.Close()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no SQLite file named after the DSN")

	t.Setenv("PGHOST", cfg.Host)
	t.Setenv("PGPORT", strconv.Itoa(int(cfg.Port)))
	t.Setenv("PGUSER", cfg.User)
	t.Setenv("PGDATABASE", cfg.Database)
	t.Setenv("PGPASSWORD", cfg.Password)
	db, err = cli.OpenDatabase(ctx, "", "cbtest_env", 1)
	require.NoError(t, err)
	require.Equal(t, "postgres", db.Name())
	db.Close()

	_, err = cli.OpenDatabase(ctx, fmt.Sprintf("postgres://%s:wrong-s3cret@%s:1/%s?connect_timeout=2", cfg.User, cfg.Host, cfg.Database), "x", 1)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "wrong-s3cret")
	require.Contains(t, err.Error(), "xxxxx")
	_, err = cli.OpenDatabase(ctx, "mysql://app@db/x", "x", 1)
	require.ErrorContains(t, err, `unknown scheme "mysql"`)
	_, err = os.Stat(filepath.Join(dir, "mysql:"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
