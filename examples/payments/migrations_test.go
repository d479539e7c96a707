package payments_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/migrate"
)

// newUnstartedClient returns a client on drv for payments.New.
func newUnstartedClient(t *testing.T, drv driver.Driver) *commandbus.Client {
	t.Helper()
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	return client
}

// The platform's tables are the payments migration line: migrate up and down handle them next to
// the core's, and a platform refuses to start on a database without them, saying how to fix it,
// instead of creating them (DDL at every instance start once deadlocked live traffic).
func TestPaymentsMigrationLine(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		known, err := payments.Migrations(drv)
		require.NoError(t, err)
		require.NotEmpty(t, known)
		require.Contains(t, migrate.Lines(), payments.MigrationLine)
		require.NoError(t, migrate.CheckLine(ctx, drv, payments.MigrationLine), "dbtest's migrate up applied the line")

		status, err := migrate.New(drv, nil).Status(ctx)
		require.NoError(t, err)
		var lineStatus []migrate.Status
		for _, s := range status {
			require.True(t, s.Applied, "%s %03d", s.Line, s.Version)
			if s.Line == payments.MigrationLine {
				lineStatus = append(lineStatus, s)
			}
		}
		require.Len(t, lineStatus, len(known))

		db, prefix := businessDB(t, drv)
		tableExists := func() bool {
			_, err := db.ExecContext(ctx, `SELECT count(*) FROM `+prefix+`payment`)
			return err == nil
		}
		require.True(t, tableExists())

		reverted, err := migrate.New(drv, nil).Only(payments.MigrationLine).Down(ctx, 0)
		require.NoError(t, err)
		require.Len(t, reverted, len(known))
		require.Equal(t, payments.MigrationLine, reverted[0].Line)
		require.False(t, tableExists(), "down dropped the platform's tables")
		require.NoError(t, migrate.CheckVersion(ctx, drv), "the core line is untouched")

		_, err = payments.New(newUnstartedClient(t, drv), payments.Options{DisableSimulator: true})
		require.ErrorIs(t, err, migrate.ErrSchemaOutdated)
		require.ErrorContains(t, err, "commandbus migrate up")
		require.ErrorContains(t, err, "payments migration line has 0 of")
		require.False(t, tableExists(), "New never creates the tables")

		applied, err := migrate.New(drv, nil).Up(ctx)
		require.NoError(t, err)
		require.Len(t, applied, len(known), "up applies only the payments line, the core being current")
		require.True(t, tableExists())
		f := setup(t, drv, payments.Options{DisableSimulator: true})
		res := f.submit(domestic(payments.TypePaymentManager))
		f.waitStatus(res.PaymentID, "COMPLETED")

		// A database migrated by a newer binary is refused as well.
		require.NoError(t, drv.Executor().MigrationInsert(ctx, &driver.MigrationInsertParams{Line: payments.MigrationLine, Version: 99, Name: "from_the_future"}))
		_, err = payments.New(newUnstartedClient(t, drv), payments.Options{DisableSimulator: true})
		require.ErrorIs(t, err, migrate.ErrSchemaNewer)
	})
}

// An instance start takes no DDL lock: while another transaction holds ROW EXCLUSIVE locks on
// every platform table (as live UPDATEs do), a platform is created and started without waiting.
// Before, its CREATE INDEX IF NOT EXISTS queued behind them and the live traffic behind it.
func TestPlatformStartTakesNoDDLLock(t *testing.T) {
	t.Parallel()
	drv := dbtest.Postgres(t)
	ctx := context.Background()
	pool := dbtest.Pool(t)
	var tables []string
	rows, err := pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1 AND tablename LIKE 'pay\_%'`, drv.Schema())
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, `"`+drv.Schema()+`".`+name)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, tables)
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `LOCK TABLE `+strings.Join(tables, ", ")+` IN ROW EXCLUSIVE MODE`)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		client := newUnstartedClient(t, drv)
		_, err := payments.New(client, payments.Options{DisableSimulator: true, CustomersPerCurrency: 2, BeneficiariesPerCurrency: 2})
		if err == nil {
			err = client.Start(ctx)
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = errors.Join(err, client.Stop(stopCtx))
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		var waiting string
		_ = pool.QueryRow(ctx, `SELECT coalesce(string_agg(query, ' | '), '') FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&waiting)
		t.Fatalf("the platform's start waits on a lock behind live traffic: %s", waiting)
	}
}
