package saga_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/saga"
	"github.com/commandbus/commandbus/workflow"
)

// callerTx begins a transaction of the kind drv's UnwrapTx takes and returns it with its commit
// and rollback.
func callerTx(t *testing.T, drv driver.Driver) (tx any, commit, rollback func() error) {
	t.Helper()
	ctx := context.Background()
	switch d := drv.(type) {
	case interface{ Pool() *pgxpool.Pool }:
		pgTx, err := d.Pool().Begin(ctx)
		require.NoError(t, err)
		return pgTx, func() error { return pgTx.Commit(ctx) }, func() error { return pgTx.Rollback(ctx) }
	case interface{ DB() *sql.DB }:
		sqlTx, err := d.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		return sqlTx, sqlTx.Commit, sqlTx.Rollback
	}
	t.Fatalf("unknown driver %T", drv)
	return nil, nil, nil
}

// Sagas start in the caller's transaction (they exist only if it commits), many at once with
// their ids, business keys, deadline and batch, and RunNow runs one in the caller's goroutine.
func TestStartOptions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		fake := clock.NewFake(testStart)
		client, rt := newRuntime(t, drv, testConfig(t, fake))
		j := &journal{}
		m, err := saga.Register(rt, chain("started", j, nil))
		require.NoError(t, err)
		// Not started: only RunNow runs what is created.

		tx, _, rollback := callerTx(t, drv)
		rolledBack, err := m.Start(ctx, nil, workflow.InTx(tx))
		require.NoError(t, err)
		require.NoError(t, rollback())
		_, err = m.Get(ctx, rolledBack)
		require.True(t, errors.Is(err, driver.ErrNotFound), "a rolled-back start leaves no saga: %v", err)

		ids := []uuid.UUID{uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())}
		batch := uuid.Must(uuid.NewV7())
		deadline := testStart.Add(time.Hour)
		tx, commit, _ := callerTx(t, drv)
		got, err := m.StartMany(ctx, []any{map[string]int{"n": 1}, map[string]int{"n": 2}}, workflow.InTx(tx),
			workflow.WithIDs(ids...), workflow.WithBusinessKeys("pay-1", "pay-2"), workflow.WithDeadline(deadline), workflow.WithBatch(batch))
		require.NoError(t, err)
		require.Equal(t, ids, got)
		require.NoError(t, commit())
		for i, id := range ids {
			inst, err := m.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, driver.ExecutionPending, inst.Status)
			require.Equal(t, []string{"pay-1", "pay-2"}[i], inst.BusinessKey)
			require.Equal(t, batch, inst.BatchID)
			require.True(t, deadline.Equal(*inst.DeadlineAt))
		}
		require.NoError(t, m.RunNow(ctx, ids[0]))
		r, err := m.Result(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, "COMPENSATED", r.Status, "RunNow ran it to its end")

		_, err = m.StartMany(ctx, []any{1, 2}, workflow.WithIDs(ids[0]))
		var ve *commandbus.ValidationError
		require.ErrorAs(t, err, &ve)
		require.Equal(t, "ids", ve.Field)
		tx, _, rollback = callerTx(t, drv)
		_, err = m.Start(ctx, nil, workflow.InTx(tx), workflow.Immediate())
		require.ErrorContains(t, err, "RunNow after the commit")
		require.NoError(t, rollback())

		// Past the deadline it was started with, a saga compensates (the default deadline action of
		// sagas).
		stuck, err := saga.Register(rt, saga.New("stuck", 1).
			Step("debit", okStep(j), saga.Compensate(undo(j))).
			Step("credit", func(context.Context, *saga.StepContext) (any, error) {
				return nil, commandbus.Transient(errors.New("the bank is closed"))
			}, saga.DependsOn("debit"), saga.Retry(saga.RetryPolicy{MaxAttempts: 5, InitialDelay: time.Hour, MaxDelay: time.Hour})))
		require.NoError(t, err)
		late, err := stuck.StartMany(ctx, []any{nil}, workflow.WithDeadline(testStart.Add(10*time.Minute)))
		require.NoError(t, err)
		start(t, client)
		waitStatus(t, stuck, late[0], driver.ExecutionWaitingForRetry)
		fake.Advance(11 * time.Minute)
		r = waitStatus(t, stuck, late[0], driver.ExecutionCompensated)
		require.Equal(t, commandbus.CodeDeadlineExceeded, r.ErrorCode)
		require.Equal(t, []string{"debit"}, r.CompensatedSteps)
	})
}
