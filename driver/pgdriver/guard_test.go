package pgdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// GuardTx sets the three timeouts for the transaction only, on a pgx.Tx and on a *sql.Tx; the
// pooled connection is back to its own settings after the commit.
func TestGuardTxSetsTimeoutsForTheTransactionOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	timeouts := driver.TxTimeouts{Lock: 1500 * time.Millisecond, Statement: 2 * time.Second, IdleInTransaction: 700 * time.Millisecond}
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var before [3]string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'),
		current_setting('idle_in_transaction_session_timeout')`).Scan(&before[0], &before[1], &before[2]))

	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, pgdriver.GuardTx(ctx, tx, timeouts))
	var got [3]string
	require.NoError(t, tx.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'),
		current_setting('idle_in_transaction_session_timeout')`).Scan(&got[0], &got[1], &got[2]))
	require.Equal(t, [3]string{"1500ms", "2s", "700ms"}, got)
	require.NoError(t, tx.Commit(ctx))
	var after [3]string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'),
		current_setting('idle_in_transaction_session_timeout')`).Scan(&after[0], &after[1], &after[2]))
	require.Equal(t, before, after, "the settings must end with the transaction")

	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	sqlTx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = sqlTx.Rollback() }()
	require.NoError(t, pgdriver.GuardTx(ctx, sqlTx, driver.TxTimeouts{Lock: 250 * time.Millisecond}))
	var lock string
	require.NoError(t, sqlTx.QueryRowContext(ctx, `SELECT current_setting('lock_timeout')`).Scan(&lock))
	require.Equal(t, "250ms", lock)

	require.ErrorIs(t, pgdriver.GuardTx(ctx, "not a transaction", timeouts), driver.ErrWrongTxType)
}

// A guarded transaction left idle past IdleInTransaction is ended by the server, which frees its
// row locks; a guarded waiter gives up on a held lock after Lock.
func TestGuardTxEndsIdleHolderAndBoundsLockWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := dbtest.Postgres(t)
	pool := drv.Pool()
	table := drv.Schema() + ".guard_test"
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (id int PRIMARY KEY, n int NOT NULL); INSERT INTO `+table+` VALUES (1, 0)`)
	require.NoError(t, err)

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	require.NoError(t, pgdriver.GuardTx(ctx, holder, driver.TxTimeouts{IdleInTransaction: 2 * time.Second}))
	_, err = holder.Exec(ctx, `SELECT n FROM `+table+` WHERE id = 1 FOR UPDATE`)
	require.NoError(t, err)

	// A waiter with a short lock timeout fails fast with lock_not_available while the holder lives.
	waiter, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, pgdriver.GuardTx(ctx, waiter, driver.TxTimeouts{Lock: 100 * time.Millisecond}))
	start := time.Now()
	_, err = waiter.Exec(ctx, `UPDATE `+table+` SET n = n + 1 WHERE id = 1`)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error, got %v", err)
	require.Equal(t, "55P03", pgErr.Code, "lock_not_available")
	require.Less(t, time.Since(start), 2*time.Second)
	require.NoError(t, waiter.Rollback(ctx))

	// An unguarded update waits until the server ends the idle holder, then goes through.
	start = time.Now()
	_, err = pool.Exec(ctx, `UPDATE `+table+` SET n = n + 1 WHERE id = 1`)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), time.Second)
	require.Error(t, holder.Commit(ctx), "the holder's session was ended")
}
