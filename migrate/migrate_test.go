package migrate_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/migrate"
)

// testWriter routes logs to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

// freshSchema returns an unused PostgreSQL schema name that is dropped when the test ends.
func freshSchema(t *testing.T) string {
	t.Helper()
	pool := dbtest.Pool(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "cbmigrate_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Logf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// unmigratedPostgres returns a driver on a schema that does not exist yet.
func unmigratedPostgres(t *testing.T, schema string) driver.Driver {
	t.Helper()
	drv, err := pgdriver.New(dbtest.Pool(t), &pgdriver.Config{Schema: schema})
	require.NoError(t, err)
	return drv
}

// unmigratedSQLite returns a driver on a new, empty database file.
func unmigratedSQLite(t *testing.T) driver.Driver {
	t.Helper()
	drv, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "x.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = drv.Close() })
	return drv
}

// eachUnmigrated runs fn as a parallel subtest per driver, each on an empty database.
func eachUnmigrated(t *testing.T, fn func(t *testing.T, drv driver.Driver)) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, unmigratedPostgres(t, freshSchema(t)))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, unmigratedSQLite(t))
	})
}

// commandTableUsable reports whether the schema of migration 001 is in place, by running a
// query against it.
func commandTableUsable(ctx context.Context, drv driver.Driver) bool {
	_, err := drv.Executor().CommandList(ctx, &driver.CommandListParams{Limit: 1})
	return err == nil
}

func latestVersion(drv driver.Driver) int {
	migrations := drv.Migrations()
	return migrations[len(migrations)-1].Version
}

func TestMigrationsAreNumberedFromOne(t *testing.T) {
	t.Parallel()
	eachUnmigrated(t, func(t *testing.T, drv driver.Driver) {
		migrations := drv.Migrations()
		require.NotEmpty(t, migrations)
		require.Equal(t, "command_bus", migrations[0].Name)
		for i, m := range migrations {
			require.Equal(t, i+1, m.Version, "versions start at 1 without gaps")
			require.NotEmpty(t, m.Up)
			require.NotEmpty(t, m.Down)
		}
	})
}

func TestUpStatusDown(t *testing.T) {
	t.Parallel()
	eachUnmigrated(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		m := migrate.New(drv, testLogger(t))
		known := drv.Migrations()

		status, err := m.Status(ctx)
		require.NoError(t, err)
		require.Len(t, status, len(known))
		for i, s := range status {
			require.Equal(t, known[i].Version, s.Version)
			require.Equal(t, known[i].Name, s.Name)
			require.False(t, s.Applied, "nothing is applied on a fresh database")
			require.Nil(t, s.AppliedAt)
		}
		require.False(t, commandTableUsable(ctx, drv))

		applied, err := m.Up(ctx)
		require.NoError(t, err)
		require.Len(t, applied, len(known))
		require.Equal(t, 1, applied[0].Version)
		require.Equal(t, "command_bus", applied[0].Name)
		require.Positive(t, applied[0].Duration)
		require.True(t, commandTableUsable(ctx, drv))

		again, err := m.Up(ctx)
		require.NoError(t, err)
		require.Empty(t, again, "a second Up applies nothing")

		status, err = m.Status(ctx)
		require.NoError(t, err)
		require.Len(t, status, len(known))
		for _, s := range status {
			require.True(t, s.Applied, "version %d applied", s.Version)
			require.NotNil(t, s.AppliedAt)
			require.WithinDuration(t, time.Now(), *s.AppliedAt, time.Minute)
		}

		reverted, err := m.Down(ctx, 0)
		require.NoError(t, err)
		require.Len(t, reverted, len(known))
		require.Equal(t, latestVersion(drv), reverted[0].Version, "Down reverts the newest first")
		require.False(t, commandTableUsable(ctx, drv))

		status, err = m.Status(ctx)
		require.NoError(t, err)
		for _, s := range status {
			require.False(t, s.Applied, "version %d pending again", s.Version)
			require.Nil(t, s.AppliedAt)
		}
		require.ErrorIs(t, migrate.CheckVersion(ctx, drv), migrate.ErrSchemaOutdated)

		nothing, err := m.Down(ctx, 0)
		require.NoError(t, err)
		require.Empty(t, nothing, "nothing left to revert")

		// The round trip works: the schema can be applied again after being reverted.
		applied, err = m.Up(ctx)
		require.NoError(t, err)
		require.Len(t, applied, len(known))
		require.True(t, commandTableUsable(ctx, drv))
		require.NoError(t, migrate.CheckVersion(ctx, drv))
	})
}

func TestDownSteps(t *testing.T) {
	t.Parallel()
	eachUnmigrated(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		m := migrate.New(drv, nil) // a nil logger is allowed
		_, err := m.Up(ctx)
		require.NoError(t, err)

		reverted, err := m.Down(ctx, 1)
		require.NoError(t, err)
		require.Len(t, reverted, 1, "--steps 1 reverts exactly one migration")
		require.Equal(t, latestVersion(drv), reverted[0].Version)

		status, err := m.Status(ctx)
		require.NoError(t, err)
		for _, s := range status {
			require.Equal(t, s.Version < latestVersion(drv), s.Applied, "version %d", s.Version)
		}
	})
}

func TestCheckVersion(t *testing.T) {
	t.Parallel()
	eachUnmigrated(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		err := migrate.CheckVersion(ctx, drv)
		require.ErrorIs(t, err, migrate.ErrSchemaOutdated)
		require.NotErrorIs(t, err, migrate.ErrSchemaNewer)
		require.Contains(t, err.Error(), "migrate up", "the message says how to fix it")

		_, err = migrate.New(drv, testLogger(t)).Up(ctx)
		require.NoError(t, err)
		require.NoError(t, migrate.CheckVersion(ctx, drv))

		latest := latestVersion(drv)
		future := latest + 1
		require.NoError(t, drv.Executor().MigrationInsert(ctx, &driver.MigrationInsertParams{Version: future, Name: "from_the_future"}))
		err = migrate.CheckVersion(ctx, drv)
		require.ErrorIs(t, err, migrate.ErrSchemaNewer)
		require.NotErrorIs(t, err, migrate.ErrSchemaOutdated)
		msg := err.Error()
		require.Contains(t, msg, fmt.Sprintf("version %d", future), "names the database's version")
		require.Contains(t, msg, fmt.Sprintf("up to %d", latest), "names the binary's version")
		require.Contains(t, msg, "upgrade", "says to upgrade")

		status, err := migrate.New(drv, nil).Status(ctx)
		require.NoError(t, err)
		last := status[len(status)-1]
		require.Equal(t, future, last.Version, "Status lists versions this binary does not know")
		require.True(t, last.Applied)
		require.Contains(t, last.Name, "from_the_future")
		require.Contains(t, last.Name, "unknown to this binary")

		// Up does not touch a newer schema's unknown versions.
		applied, err := migrate.New(drv, nil).Up(ctx)
		require.NoError(t, err)
		require.Empty(t, applied)
		require.ErrorIs(t, migrate.CheckVersion(ctx, drv), migrate.ErrSchemaNewer)
	})
}

func TestClientStartChecksSchemaVersion(t *testing.T) {
	t.Parallel()
	eachUnmigrated(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		newClient := func() *commandbus.Client {
			client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: testLogger(t)})
			require.NoError(t, err)
			return client
		}

		err := newClient().Start(ctx)
		require.ErrorIs(t, err, migrate.ErrSchemaOutdated, "a client does not start on a schema with pending migrations")

		_, err = migrate.New(drv, nil).Up(ctx)
		require.NoError(t, err)
		client := newClient()
		require.NoError(t, client.Start(ctx))
		require.NoError(t, client.Stop(ctx))

		require.NoError(t, drv.Executor().MigrationInsert(ctx, &driver.MigrationInsertParams{Version: latestVersion(drv) + 1, Name: "from_the_future"}))
		err = newClient().Start(ctx)
		require.ErrorIs(t, err, migrate.ErrSchemaNewer, "a client does not start on a schema a newer binary migrated")
		require.Contains(t, err.Error(), "upgrade")
	})
}

func TestConcurrentUpAppliesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	const migrators = 4
	drivers := make([]driver.Driver, migrators)
	for i := range drivers {
		drivers[i] = unmigratedPostgres(t, schema)
	}

	results := make([][]migrate.Applied, migrators)
	errs := make([]error, migrators)
	var ready, wg sync.WaitGroup
	ready.Add(migrators)
	begin := make(chan struct{})
	for i, drv := range drivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-begin
			results[i], errs[i] = migrate.New(drv, testLogger(t)).Up(ctx)
		}()
	}
	ready.Wait()
	close(begin)
	wg.Wait()

	perVersion := map[int]int{}
	for i := range migrators {
		require.NoError(t, errs[i], "migrator %d", i)
		for _, a := range results[i] {
			perVersion[a.Version]++
		}
	}
	for _, m := range drivers[0].Migrations() {
		require.Equal(t, 1, perVersion[m.Version], "version %d applied by exactly one migrator", m.Version)
	}
	rows, err := drivers[0].Executor().MigrationGetAll(ctx)
	require.NoError(t, err)
	require.Len(t, rows, len(drivers[0].Migrations()))
	require.NoError(t, migrate.CheckVersion(ctx, drivers[0]))
}

func TestConcurrentUpAppliesOnceOnSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := unmigratedSQLite(t)
	const migrators = 4
	results := make([][]migrate.Applied, migrators)
	errs := make([]error, migrators)
	var wg sync.WaitGroup
	for i := range migrators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = migrate.New(drv, nil).Up(ctx)
		}()
	}
	wg.Wait()
	total := 0
	for i := range migrators {
		require.NoError(t, errs[i])
		total += len(results[i])
	}
	require.Equal(t, len(drv.Migrations()), total)
	require.NoError(t, migrate.CheckVersion(ctx, drv))
}

// TestUpgradesVersionTableWithoutLines: a database migrated before migration lines existed has a
// version table keyed by version alone. It still reads as the core line, and the next Up adds
// the line column without applying anything again.
func TestUpgradesVersionTableWithoutLines(t *testing.T) {
	t.Parallel()
	eachUnmigrated(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		_, err := migrate.New(drv, nil).Only(driver.CoreLine).Up(ctx)
		require.NoError(t, err)
		exec := drv.Executor()
		old := `CREATE TABLE {schema}.migration (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`
		if drv.Name() == "sqlite" {
			old = `CREATE TABLE {schema}.migration (version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`
		}
		require.NoError(t, exec.Exec(ctx, `DROP TABLE {schema}.migration`))
		require.NoError(t, exec.Exec(ctx, old))
		for _, m := range drv.Migrations() {
			require.NoError(t, exec.Exec(ctx, fmt.Sprintf(`INSERT INTO {schema}.migration (version, name, applied_at) VALUES (%d, '%s', %s)`,
				m.Version, m.Name, map[bool]string{true: "1700000000000000", false: "now()"}[drv.Name() == "sqlite"])))
		}

		require.NoError(t, migrate.CheckVersion(ctx, drv), "the old table reads as the core line")
		applied, err := migrate.New(drv, nil).Only(driver.CoreLine).Up(ctx)
		require.NoError(t, err)
		require.Empty(t, applied, "nothing is applied twice")
		rows, err := exec.MigrationGetAll(ctx)
		require.NoError(t, err)
		require.Len(t, rows, len(drv.Migrations()))
		for _, r := range rows {
			require.Equal(t, driver.CoreLine, r.Line)
		}
		// The upgraded table keys versions by line: another line's version 1 fits beside the core's.
		require.NoError(t, exec.MigrationInsert(ctx, &driver.MigrationInsertParams{Line: "other", Version: 1, Name: "other_tables"}))
		require.NoError(t, migrate.CheckVersion(ctx, drv), "another line's rows do not count for the core")
		require.NoError(t, exec.MigrationDelete(ctx, "other", 1))
		rows, err = exec.MigrationGetAll(ctx)
		require.NoError(t, err)
		require.Len(t, rows, len(drv.Migrations()))
	})
}

func TestUnknownLine(t *testing.T) {
	t.Parallel()
	drv := unmigratedSQLite(t)
	_, err := migrate.New(drv, nil).Only("nonsense").Up(context.Background())
	require.ErrorContains(t, err, `unknown migration line "nonsense"`)
	require.ErrorContains(t, migrate.CheckLine(context.Background(), drv, "nonsense"), "unknown migration line")
}
