package drivertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

func exerciseBatch(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("CountsAndCompletion", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		batchID := uuid.New()
		require.NoError(t, b.exec.BatchInsert(ctx, &driver.BatchInsertParams{
			ID: batchID, Name: "import", Domain: "d", TenantID: "tenant", Total: 2, Now: &t0,
		}))
		require.Error(t, b.exec.BatchInsert(ctx, &driver.BatchInsertParams{ID: batchID, Total: 1, Now: &t0}), "duplicate id")

		batch, err := b.exec.BatchGet(ctx, batchID)
		require.NoError(t, err)
		require.Equal(t, batchID, batch.ID)
		require.Equal(t, "import", batch.Name)
		require.Equal(t, "d", batch.Domain)
		require.Equal(t, "tenant", batch.TenantID)
		require.Equal(t, int64(2), batch.Total)
		requireTime(t, t0, batch.CreatedAt, "created_at")
		require.Empty(t, batch.Counts)
		require.Nil(t, batch.CompletedAt)

		first, second := newCommand("d", "q", "T"), newCommand("d", "q", "T")
		first.BatchID, second.BatchID = batchID, batchID
		insert(t, b.exec, &t0, first, second, newCommand("d", "q", "T"))
		batch, err = b.exec.BatchGet(ctx, batchID)
		require.NoError(t, err)
		require.Equal(t, map[driver.CommandStatus]int64{driver.CommandStatusPending: 2}, batch.Counts)
		require.False(t, batch.Complete())

		cancel := func(id uuid.UUID) {
			t.Helper()
			_, err := b.exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
				ID: id, FromStatuses: []driver.CommandStatus{driver.CommandStatusPending},
				ToStatus: driver.CommandStatusCancelled, Event: "OPERATOR_CANCEL", Actor: "alice", Now: &t0,
			})
			require.NoError(t, err)
		}
		cancel(first.ID)
		batch, err = b.exec.BatchGet(ctx, batchID)
		require.NoError(t, err)
		require.Equal(t, map[driver.CommandStatus]int64{driver.CommandStatusPending: 1, driver.CommandStatusCancelled: 1}, batch.Counts)
		require.Nil(t, batch.CompletedAt)

		cancel(second.ID)
		batch, err = b.exec.BatchGet(ctx, batchID)
		require.NoError(t, err)
		require.True(t, batch.Complete())
		require.NotNil(t, batch.CompletedAt, "reading a finished batch stamps it")
		require.WithinDuration(t, time.Now(), *batch.CompletedAt, within)
		stamped := *batch.CompletedAt

		batch, err = b.exec.BatchGet(ctx, batchID)
		require.NoError(t, err)
		requireTimePtr(t, stamped, batch.CompletedAt, "the stamp is kept")

		_, err = b.exec.BatchGet(ctx, uuid.New())
		require.ErrorIs(t, err, driver.ErrNotFound)
	})

	t.Run("EmptyBatchNeverCompletes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		batchID := uuid.New()
		require.NoError(t, b.exec.BatchInsert(ctx, &driver.BatchInsertParams{ID: batchID}))
		batch, err := b.exec.BatchGet(ctx, batchID)
		require.NoError(t, err)
		require.False(t, batch.Complete())
		require.Nil(t, batch.CompletedAt)
		require.Empty(t, batch.Name)
		require.Empty(t, batch.TenantID)
		require.WithinDuration(t, time.Now(), batch.CreatedAt, within)
	})

	t.Run("ListNewestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		batchIDs := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
		for i, id := range batchIDs {
			require.NoError(t, b.exec.BatchInsert(ctx, &driver.BatchInsertParams{
				ID: id, Name: "b", Total: 1, Now: ptr(t0.Add(time.Duration(i) * time.Second)),
			}))
		}
		member := newCommand("d", "q", "T")
		member.BatchID = batchIDs[0]
		insert(t, b.exec, &t0, member)

		batches, err := b.exec.BatchList(ctx, &driver.BatchListParams{})
		require.NoError(t, err)
		require.Len(t, batches, 3)
		for i, batch := range batches {
			require.Equal(t, batchIDs[2-i], batch.ID)
			requireTime(t, t0.Add(time.Duration(2-i)*time.Second), batch.CreatedAt, "created_at")
		}
		require.Equal(t, map[driver.CommandStatus]int64{driver.CommandStatusPending: 1}, batches[2].Counts)
		require.Empty(t, batches[0].Counts)

		batches, err = b.exec.BatchList(ctx, &driver.BatchListParams{Limit: 2})
		require.NoError(t, err)
		require.Len(t, batches, 2)
		require.Equal(t, batchIDs[2], batches[0].ID)
		require.Equal(t, batchIDs[1], batches[1].ID)
	})
}

func exerciseAuditLog(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("InsertAndFilter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		entries := []*driver.AuditLogInsertParams{
			{EntityType: "command", EntityID: "c1", Action: "retry", Actor: "alice", Reason: "fixed", Details: json.RawMessage(`{"attempts":3}`)},
			{EntityType: "command", EntityID: "c2", Action: "cancel", Actor: "bob"},
			{EntityType: "batch", EntityID: "c1", Action: "cancel", Actor: "alice", Reason: "wrong file"},
			{EntityType: "command", EntityID: "c1", Action: "complete", Actor: "carol", Details: json.RawMessage(`{"manual":true}`)},
		}
		for i, e := range entries {
			e.Now = ptr(t0.Add(time.Duration(i) * time.Second))
			require.NoError(t, b.exec.AuditLogInsert(ctx, e))
		}

		list := func(params driver.AuditLogListParams) []*driver.AuditLogRow {
			t.Helper()
			rows, err := b.exec.AuditLogList(ctx, &params)
			require.NoError(t, err)
			return rows
		}
		actions := func(rows []*driver.AuditLogRow) []string {
			out := []string{}
			for _, r := range rows {
				out = append(out, r.EntityType+"/"+r.EntityID+"/"+r.Action)
			}
			return out
		}

		all := list(driver.AuditLogListParams{})
		require.Equal(t, []string{"command/c1/complete", "batch/c1/cancel", "command/c2/cancel", "command/c1/retry"}, actions(all))
		for i, row := range all {
			want := entries[len(entries)-1-i]
			requireTime(t, *want.Now, row.At, "at")
			require.Equal(t, want.Actor, row.Actor)
			require.Equal(t, want.Reason, row.Reason)
			if want.Details == nil {
				require.Empty(t, row.Details)
			} else {
				require.JSONEq(t, string(want.Details), string(row.Details))
			}
			if i > 0 {
				require.Less(t, row.ID, all[i-1].ID, "newest first")
			}
		}

		require.Equal(t, []string{"command/c1/complete", "command/c2/cancel", "command/c1/retry"}, actions(list(driver.AuditLogListParams{EntityType: "command"})))
		require.Equal(t, []string{"command/c1/complete", "batch/c1/cancel", "command/c1/retry"}, actions(list(driver.AuditLogListParams{EntityID: "c1"})))
		require.Equal(t, []string{"batch/c1/cancel", "command/c1/retry"}, actions(list(driver.AuditLogListParams{Actor: "alice"})))
		require.Equal(t, []string{"command/c1/retry"}, actions(list(driver.AuditLogListParams{EntityType: "command", Actor: "alice"})))
		require.Equal(t, []string{"command/c1/complete", "batch/c1/cancel"}, actions(list(driver.AuditLogListParams{Limit: 2})))
		require.Empty(t, list(driver.AuditLogListParams{Actor: "nobody"}))
	})

	t.Run("DatabaseClockWhenNowIsNil", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.exec.AuditLogInsert(ctx, &driver.AuditLogInsertParams{EntityType: "command", EntityID: "c", Action: "a", Actor: "x"}))
		rows, err := b.exec.AuditLogList(ctx, &driver.AuditLogListParams{})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.WithinDuration(t, time.Now(), rows[0].At, within)
	})
}
