package sqlitedriver_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/drivertest"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/migrate"
)

func TestDriver(t *testing.T) {
	t.Parallel()
	drivertest.Exercise(t, func(t *testing.T) driver.Driver { return dbtest.SQLite(t) })
}

func newCommand() *driver.CommandInsertParams {
	return &driver.CommandInsertParams{ID: uuid.New(), Domain: "d", Queue: "q", Type: "T", MaxAttempts: 1}
}

func insert(t *testing.T, exec driver.Executor, cmds ...*driver.CommandInsertParams) {
	t.Helper()
	_, err := exec.CommandInsertMany(context.Background(), &driver.CommandInsertManyParams{Commands: cmds})
	require.NoError(t, err)
}

func TestUnwrapTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	setup := func(t *testing.T) (*sqlitedriver.Driver, *sql.Tx, driver.Executor) {
		t.Helper()
		drv := dbtest.SQLite(t)
		_, err := drv.DB().ExecContext(ctx, `CREATE TABLE business (id TEXT PRIMARY KEY)`)
		require.NoError(t, err)
		tx, err := drv.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		exec, err := drv.UnwrapTx(tx)
		require.NoError(t, err)
		return drv, tx, exec
	}
	countBusiness := func(t *testing.T, drv *sqlitedriver.Driver) int {
		t.Helper()
		var n int
		require.NoError(t, drv.DB().QueryRowContext(ctx, `SELECT count(*) FROM business`).Scan(&n))
		return n
	}

	t.Run("CommitsWithBusinessWrites", func(t *testing.T) {
		t.Parallel()
		drv, tx, exec := setup(t)
		cmd := newCommand()
		_, err := tx.ExecContext(ctx, `INSERT INTO business (id) VALUES (?)`, cmd.ID.String())
		require.NoError(t, err)
		insert(t, exec, cmd)
		_, err = exec.CommandGetByID(ctx, cmd.ID)
		require.NoError(t, err, "reads inside the transaction see its writes")
		_, err = drv.Executor().CommandGetByID(ctx, cmd.ID)
		require.ErrorIs(t, err, driver.ErrNotFound, "plain reads do not")
		require.NoError(t, tx.Commit())
		_, err = drv.Executor().CommandGetByID(ctx, cmd.ID)
		require.NoError(t, err)
		require.Equal(t, 1, countBusiness(t, drv))
	})

	t.Run("RollsBackWithBusinessWrites", func(t *testing.T) {
		t.Parallel()
		drv, tx, exec := setup(t)
		cmd := newCommand()
		_, err := tx.ExecContext(ctx, `INSERT INTO business (id) VALUES (?)`, cmd.ID.String())
		require.NoError(t, err)
		insert(t, exec, cmd)
		nested, err := exec.Begin(ctx)
		require.NoError(t, err)
		insert(t, nested, newCommand())
		require.NoError(t, nested.Commit(ctx))
		require.NoError(t, tx.Rollback())
		_, err = drv.Executor().CommandGetByID(ctx, cmd.ID)
		require.ErrorIs(t, err, driver.ErrNotFound)
		require.Zero(t, countBusiness(t, drv))
	})

	t.Run("NotifyBroadcastsAtOnce", func(t *testing.T) {
		t.Parallel()
		drv, tx, exec := setup(t)
		defer func() { _ = tx.Rollback() }()
		l := drv.Listener()
		require.NoError(t, l.Connect(ctx))
		require.NoError(t, l.Listen(ctx))
		defer func() { _ = l.Close(ctx) }()
		require.NoError(t, exec.Notify(ctx, []string{"queue:q"}))
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		topic, err := l.WaitForNotification(waitCtx)
		require.NoError(t, err)
		require.Equal(t, "queue:q", topic)
	})
}

func TestListener(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("CoalescesDuplicates", func(t *testing.T) {
		t.Parallel()
		drv := dbtest.SQLite(t)
		l := drv.Listener()
		require.NoError(t, l.Connect(ctx))
		require.NoError(t, l.Listen(ctx))
		for range 1000 {
			require.NoError(t, drv.Executor().Notify(ctx, []string{"queue:a", "queue:b"}))
		}
		require.NoError(t, drv.Executor().Notify(ctx, []string{"queue:c"}))
		var got []string
		for range 3 {
			topic, err := l.WaitForNotification(ctx)
			require.NoError(t, err)
			got = append(got, topic)
		}
		require.Equal(t, []string{"queue:a", "queue:b", "queue:c"}, got)
	})

	t.Run("CloseWakesWaiter", func(t *testing.T) {
		t.Parallel()
		drv := dbtest.SQLite(t)
		l := drv.Listener()
		require.NoError(t, l.Connect(ctx))
		require.NoError(t, l.Listen(ctx))
		errs := make(chan error, 1)
		go func() {
			_, err := l.WaitForNotification(ctx)
			errs <- err
		}()
		require.NoError(t, l.Close(ctx))
		require.ErrorIs(t, <-errs, sqlitedriver.ErrListenerClosed)

		// A closed listener can connect again.
		require.NoError(t, l.Connect(ctx))
		require.NoError(t, l.Listen(ctx))
		require.NoError(t, drv.Executor().Notify(ctx, []string{"again"}))
		topic, err := l.WaitForNotification(ctx)
		require.NoError(t, err)
		require.Equal(t, "again", topic)
	})

	t.Run("DriverCloseClosesListeners", func(t *testing.T) {
		t.Parallel()
		drv, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "db"), nil)
		require.NoError(t, err)
		l := drv.Listener()
		require.NoError(t, l.Connect(ctx))
		require.NoError(t, l.Listen(ctx))
		require.NoError(t, drv.Close())
		_, err = l.WaitForNotification(ctx)
		require.ErrorIs(t, err, sqlitedriver.ErrListenerClosed)
		require.ErrorIs(t, l.Listen(ctx), sqlitedriver.ErrListenerClosed)
	})
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("InvalidConfig", func(t *testing.T) {
		t.Parallel()
		_, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "db"), &sqlitedriver.Config{BusyTimeout: -1, MaxReadConns: -1})
		require.ErrorContains(t, err, "BusyTimeout")
		require.ErrorContains(t, err, "MaxReadConns")
		_, err = sqlitedriver.Open("", nil)
		require.Error(t, err)
		_, err = sqlitedriver.Open(filepath.Join(t.TempDir(), "db?x=1"), nil)
		require.Error(t, err)
	})

	t.Run("Pragmas", func(t *testing.T) {
		t.Parallel()
		drv := dbtest.SQLite(t)
		var journal string
		var fk, busy int
		require.NoError(t, drv.DB().QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal))
		require.NoError(t, drv.DB().QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk))
		require.NoError(t, drv.DB().QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy))
		require.Equal(t, "wal", journal)
		require.Equal(t, 1, fk)
		require.Equal(t, 10000, busy)
		require.Equal(t, 1, drv.DB().Stats().MaxOpenConnections)
	})

	t.Run("InMemory", func(t *testing.T) {
		t.Parallel()
		drv, err := sqlitedriver.Open(":memory:", nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = drv.Close() })
		_, err = migrate.New(drv, nil).Up(ctx)
		require.NoError(t, err)
		cmd := newCommand()
		insert(t, drv.Executor(), cmd)
		got, err := drv.Executor().CommandGetByID(ctx, cmd.ID)
		require.NoError(t, err)
		require.Equal(t, cmd.ID, got.ID)
	})

	t.Run("ReopenKeepsData", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "db")
		drv, err := sqlitedriver.Open(path, nil)
		require.NoError(t, err)
		_, err = migrate.New(drv, nil).Up(ctx)
		require.NoError(t, err)
		cmd := newCommand()
		insert(t, drv.Executor(), cmd)
		require.NoError(t, drv.Close())

		drv, err = sqlitedriver.Open(path, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = drv.Close() })
		require.NoError(t, migrate.CheckVersion(ctx, drv))
		_, err = drv.Executor().CommandGetByID(ctx, cmd.ID)
		require.NoError(t, err)
	})
}

// TestConcurrentWriters checks that the single writer serializes concurrent callers instead of
// failing them with SQLITE_BUSY, and that concurrent claims never hand a command out twice.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := dbtest.SQLite(t)
	exec := drv.Executor()

	const writers, perWriter = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for range perWriter {
				if _, err := exec.CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: []*driver.CommandInsertParams{newCommand()}}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	var mu sync.Mutex
	claimed := map[uuid.UUID]int{}
	claimErrs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for {
				rows, err := exec.CommandClaim(ctx, &driver.CommandClaimParams{Queue: "q", Max: 7, Lease: time.Hour, WorkerID: "w"})
				if err != nil {
					claimErrs <- err
					return
				}
				if len(rows) == 0 {
					return
				}
				mu.Lock()
				for _, r := range rows {
					claimed[r.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(claimErrs)
	for err := range claimErrs {
		require.NoError(t, err)
	}
	require.Len(t, claimed, writers*perWriter)
	for id, n := range claimed {
		require.Equal(t, 1, n, "command %s claimed %d times", id, n)
	}
}
