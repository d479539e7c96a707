package pgdriver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/drivertest"
	"github.com/commandbus/commandbus/internal/dbtest"
)

func TestDriver(t *testing.T) {
	t.Parallel()
	drivertest.Exercise(t, func(t *testing.T) driver.Driver { return dbtest.Postgres(t) })
}

func TestUnwrapTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := dbtest.Postgres(t)

	insertIn := func(t *testing.T, exec driver.Executor) uuid.UUID {
		t.Helper()
		id := uuid.New()
		_, err := exec.CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: []*driver.CommandInsertParams{{
			ID: id, Domain: "d", Queue: "q", Type: "T", MaxAttempts: 1,
		}}})
		require.NoError(t, err)
		return id
	}

	t.Run("RollbackDiscardsCommandbusWrites", func(t *testing.T) {
		t.Parallel()
		tx, err := drv.Pool().Begin(ctx)
		require.NoError(t, err)
		exec, err := drv.UnwrapTx(tx)
		require.NoError(t, err)
		id := insertIn(t, exec)
		_, err = exec.CommandGetByID(ctx, id)
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
		_, err = drv.Executor().CommandGetByID(ctx, id)
		require.ErrorIs(t, err, driver.ErrNotFound)
	})

	t.Run("CommitPublishesCommandbusWrites", func(t *testing.T) {
		t.Parallel()
		tx, err := drv.Pool().Begin(ctx)
		require.NoError(t, err)
		exec, err := drv.UnwrapTx(tx)
		require.NoError(t, err)
		id := insertIn(t, exec)
		require.NoError(t, tx.Commit(ctx))
		_, err = drv.Executor().CommandGetByID(ctx, id)
		require.NoError(t, err)
	})
}

// TestClaimIsHOTUpdate checks the point of migration 001's index shapes: a claim, first or after
// an expired lease, changes no indexed column (nor one an index predicate reads), so PostgreSQL
// updates the row in place as a heap-only tuple and no index is written.
func TestClaimIsHOTUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := dbtest.Postgres(t)
	const n = 10
	cmds := make([]*driver.CommandInsertParams, n)
	for i := range cmds {
		cmds[i] = &driver.CommandInsertParams{ID: uuid.Must(uuid.NewV7()), Domain: "d", Queue: "q", Type: "T", MaxAttempts: 3}
	}
	_, err := drv.Executor().CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: cmds})
	require.NoError(t, err)

	// The xact statistics count the current transaction's updates at once.
	tx, err := drv.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	exec, err := drv.UnwrapTx(tx)
	require.NoError(t, err)
	now := time.Now()
	for _, at := range []time.Time{now, now.Add(2 * time.Minute)} {
		rows, err := exec.CommandClaim(ctx, &driver.CommandClaimParams{Queue: "q", Max: n, Lease: time.Minute, WorkerID: "w", Now: &at})
		require.NoError(t, err)
		require.Len(t, rows, n)
	}
	var updated, hot int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated($1::regclass),
		pg_stat_get_xact_tuples_hot_updated($1::regclass)`, drv.Schema()+".command").Scan(&updated, &hot))
	require.Equal(t, int64(2*n), updated)
	require.Equal(t, updated, hot, "every claim is a HOT update")
}

// TestOutboxClaimIsHOTUpdate checks the point of migration 014 (the outbox's fillfactor): the
// relay's claim sets a lease, changes no indexed column, and finds room for the new version on
// the row's page, so PostgreSQL writes it as a heap-only tuple and no index entry. On full pages
// (before the migration) every claimed row moved to another page: three index insertions each,
// and dead entries in the unpublished indexes for the next claims to step over.
func TestOutboxClaimIsHOTUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := dbtest.Postgres(t)
	const n = 40
	payload := []byte(`{"events":"` + strings.Repeat("x", 1000) + `"}`) // a checkpoint's packed events
	msgs := make([]*driver.OutboxInsertParams, n)
	for i := range msgs {
		msgs[i] = &driver.OutboxInsertParams{Category: driver.OutboxCategoryEvent, Transport: "kafka", Topic: "t",
			Key: fmt.Sprintf("k%d", i), Type: "E", MessageID: fmt.Sprint(i), Payload: payload}
	}
	_, err := drv.Executor().OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: msgs})
	require.NoError(t, err)

	// The xact statistics count the current transaction's updates at once. The claim takes rows
	// below the horizon, the oldest transaction running in the cluster, which the other tests'
	// transactions may hold back for a moment: until it passes the rows, a claim finds nothing.
	claim := func() (claimed int, updated, hot int64) {
		tx, err := drv.Pool().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		exec, err := drv.UnwrapTx(tx)
		require.NoError(t, err)
		rows, err := exec.OutboxClaim(ctx, &driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: n, Lease: time.Minute, RelayID: "r"})
		require.NoError(t, err)
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated($1::regclass),
			pg_stat_get_xact_tuples_hot_updated($1::regclass)`, drv.Schema()+".outbox").Scan(&updated, &hot))
		return len(rows), updated, hot
	}
	deadline := time.Now().Add(20 * time.Second)
	claimed, updated, hot := claim()
	for claimed == 0 && time.Now().Before(deadline) {
		claimed, updated, hot = claim()
	}
	require.Equal(t, n, claimed)
	require.Equal(t, int64(n), updated)
	require.Equal(t, updated, hot, "every claim is a HOT update")
}
