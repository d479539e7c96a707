package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

// enqueue inserts executions of tenant at now and queues them in one transaction, as the engine
// does for a capacity-limited type.
func enqueue(t *testing.T, exec driver.Executor, now time.Time, tenant string, n int) ([]uuid.UUID, []*driver.TenantAdmission) {
	t.Helper()
	ctx := context.Background()
	xs := make([]*driver.ExecutionInsertParams, n)
	ids := make([]uuid.UUID, n)
	for i := range xs {
		xs[i] = newExecution("limited")
		xs[i].TenantID = tenant
		ids[i] = xs[i].ID
	}
	var admissions []*driver.TenantAdmission
	require.NoError(t, driver.WithTx(ctx, exec, func(tx driver.ExecutorTx) error {
		if _, err := tx.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{Executions: xs, Now: &now}); err != nil {
			return err
		}
		var err error
		admissions, err = tx.ExecutionQueue(ctx, &driver.ExecutionQueueParams{IDs: ids, Now: &now})
		return err
	}))
	return ids, admissions
}

func statuses(t *testing.T, exec driver.Executor, ids []uuid.UUID) []driver.ExecutionStatus {
	t.Helper()
	out := make([]driver.ExecutionStatus, len(ids))
	for i, id := range ids {
		out[i] = getExecution(t, exec, id).Status
	}
	return out
}

func exerciseTenants(t *testing.T, setup setupFunc) {
	ctx := context.Background()
	const (
		queued  = driver.ExecutionQueued
		pending = driver.ExecutionPending
		failed  = driver.ExecutionFailed
	)

	t.Run("TiersAndValidation", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tiers, err := b.exec.TenantTierList(ctx)
		require.NoError(t, err)
		require.Len(t, tiers, 3)
		require.Equal(t, []string{"FREE", "PRO", "ENTERPRISE"}, []string{tiers[0].Tier, tiers[1].Tier, tiers[2].Tier})
		require.Equal(t, []int{1, 5, 20}, []int{tiers[0].MaxActive, tiers[1].MaxActive, tiers[2].MaxActive})
		_, err = b.exec.TenantTierUpsert(ctx, &driver.TenantTierUpsertParams{Tier: "PRO", MaxActive: 7, Now: &t0})
		require.NoError(t, err)

		row, err := b.exec.TenantInsert(ctx, &driver.TenantInsertParams{ID: "acme", Tier: "PRO", Actor: "op", Now: &t0})
		require.NoError(t, err)
		require.Equal(t, driver.TenantActive, row.Status)
		require.Equal(t, 7, row.MaxActive, "the tier's configured limit")
		_, err = b.exec.TenantInsert(ctx, &driver.TenantInsertParams{ID: "acme", Tier: "FREE", Now: &t0})
		require.ErrorIs(t, err, driver.ErrConflict)
		_, err = b.exec.TenantInsert(ctx, &driver.TenantInsertParams{ID: "other", Tier: "GOLD", Now: &t0})
		require.ErrorIs(t, err, driver.ErrUnknownTier)
		_, err = b.exec.TenantGet(ctx, "other")
		require.ErrorIs(t, err, driver.ErrNotFound, "nothing written on an unknown tier")
		_, _, err = b.exec.TenantUpdate(ctx, &driver.TenantUpdateParams{ID: "acme", Tier: ptr("GOLD"), Now: &t0})
		require.ErrorIs(t, err, driver.ErrUnknownTier)
		_, _, err = b.exec.TenantUpdate(ctx, &driver.TenantUpdateParams{ID: "nobody", Tier: ptr("PRO"), Now: &t0})
		require.ErrorIs(t, err, driver.ErrNotFound)
		got, err := b.exec.TenantGet(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, "PRO", got.Tier, "a refused update changes nothing")

		row, _, err = b.exec.TenantUpdate(ctx, &driver.TenantUpdateParams{ID: "acme", MaxActiveOverride: ptr(2), Actor: "op", Reason: "trial", Now: &t0})
		require.NoError(t, err)
		require.Equal(t, 2, row.MaxActive)
		require.Equal(t, ptr(2), row.MaxActiveOverride)
		row, _, err = b.exec.TenantUpdate(ctx, &driver.TenantUpdateParams{ID: "acme", ClearOverride: true, Now: &t0})
		require.NoError(t, err)
		require.Equal(t, 7, row.MaxActive)
		require.Nil(t, row.MaxActiveOverride)

		audit, err := b.exec.AuditLogList(ctx, &driver.AuditLogListParams{EntityType: "tenant", EntityID: "acme"})
		require.NoError(t, err)
		require.Len(t, audit, 3, "create and two updates are audited")
		require.Equal(t, "TENANT_UPDATE", audit[1].Action)
		require.Equal(t, "op", audit[1].Actor)
		require.Equal(t, "trial", audit[1].Reason)
		list, err := b.exec.TenantList(ctx, &driver.TenantListParams{})
		require.NoError(t, err)
		require.Len(t, list, 1)
	})

	t.Run("AdmitsUpToTheLimitAndHandsTheSlotOn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.exec.TenantInsert(ctx, &driver.TenantInsertParams{ID: "free", Tier: "FREE", Now: &t0})
		require.NoError(t, err)
		ids, admissions := enqueue(t, b.exec, t0, "free", 3)
		require.Len(t, admissions, 1)
		require.Equal(t, 1, admissions[0].Admitted)
		require.Equal(t, 1, admissions[0].Held)
		require.True(t, admissions[0].AtCapacity())
		require.Equal(t, []driver.ExecutionStatus{pending, queued, queued}, statuses(t, b.exec, ids), "oldest first")

		// Only the admitted one is claimed; the queued ones are not even acquirable.
		later := t0.Add(time.Second)
		claimed := claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, later)
		require.Len(t, claimed, 1)
		require.Equal(t, ids[0], claimed[0].ID)
		_, err = b.exec.ExecutionAcquire(ctx, &driver.ExecutionAcquireParams{ID: ids[1], Lease: time.Minute, WorkerID: runner, Now: &later})
		require.ErrorIs(t, err, driver.ErrConflict, "a queued execution is not run by a response or an operator")

		// A waiting execution keeps its slot.
		require.Len(t, checkpoint(t, b.exec, later, &driver.ExecutionCheckpoint{ID: ids[0], Fence: 1,
			Status: driver.ExecutionWaitingForAsync, CurrentWait: "reply", Release: true}), 1)
		require.Equal(t, []driver.ExecutionStatus{driver.ExecutionWaitingForAsync, queued, queued}, statuses(t, b.exec, ids))

		// Its end admits the next one in the same transaction, woken at the end's time.
		end := t0.Add(2 * time.Second)
		acquired, err := b.exec.ExecutionAcquire(ctx, &driver.ExecutionAcquireParams{ID: ids[0], Lease: time.Minute, WorkerID: runner, Now: &end})
		require.NoError(t, err)
		require.Len(t, checkpoint(t, b.exec, end, &driver.ExecutionCheckpoint{ID: ids[0], Fence: acquired.Fence,
			Status: driver.ExecutionCompleted, Release: true}), 1)
		require.Equal(t, []driver.ExecutionStatus{driver.ExecutionCompleted, pending, queued}, statuses(t, b.exec, ids))
		next := getExecution(t, b.exec, ids[1])
		require.NotNil(t, next.WakeAt)
		requireTime(t, end, *next.WakeAt, "the admitted execution is runnable at once")
		require.Equal(t, 0, next.Retries, "waiting for a slot is not an attempt")
		tenant, err := b.exec.TenantGet(ctx, "free")
		require.NoError(t, err)
		require.Equal(t, 1, tenant.Active)
		require.Equal(t, 1, tenant.Queued)
		require.NotNil(t, tenant.OldestQueuedAt)
	})

	t.Run("TenantStatuses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, id := range []string{"held", "gone"} {
			_, err := b.exec.TenantInsert(ctx, &driver.TenantInsertParams{ID: id, Tier: "PRO", Status: driver.TenantSuspended, Now: &t0})
			require.NoError(t, err)
		}
		heldIDs, admissions := enqueue(t, b.exec, t0, "held", 2)
		require.Equal(t, 0, admissions[0].Admitted, "a suspended tenant's executions stay queued")
		require.Equal(t, []driver.ExecutionStatus{queued, queued}, statuses(t, b.exec, heldIDs))
		goneIDs, _ := enqueue(t, b.exec, t0, "gone", 2)

		row, admission, err := b.exec.TenantUpdate(ctx, &driver.TenantUpdateParams{ID: "held", Status: ptr(driver.TenantActive), Now: &t0})
		require.NoError(t, err)
		require.Equal(t, 2, admission.Admitted, "reactivation admits at once")
		require.Equal(t, 2, row.Active)
		require.Equal(t, []driver.ExecutionStatus{pending, pending}, statuses(t, b.exec, heldIDs))

		_, admission, err = b.exec.TenantUpdate(ctx, &driver.TenantUpdateParams{ID: "gone", Status: ptr(driver.TenantDeleted), Now: &t0})
		require.NoError(t, err)
		require.Equal(t, 2, admission.Failed)
		x := getExecution(t, b.exec, goneIDs[0])
		require.Equal(t, failed, x.Status)
		require.Equal(t, driver.CodeTenantDeleted, x.ErrorCode)
		later, _ := enqueue(t, b.exec, t0, "gone", 1)
		require.Equal(t, failed, getExecution(t, b.exec, later[0]).Status, "a deleted tenant's new executions fail too")

		missing, admissions := enqueue(t, b.exec, t0, "nobody", 1)
		require.Equal(t, 1, admissions[0].Failed)
		x = getExecution(t, b.exec, missing[0])
		require.Equal(t, failed, x.Status)
		require.Equal(t, driver.CodeTenantNotFound, x.ErrorCode)
	})

	t.Run("AdmitNextRoundRobin", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, id := range []string{"a", "b", "c"} {
			_, err := b.exec.TenantInsert(ctx, &driver.TenantInsertParams{ID: id, Tier: "ENTERPRISE", Status: driver.TenantSuspended, Now: &t0})
			require.NoError(t, err)
			enqueue(t, b.exec, t0, id, 3)
		}
		// Activate without admitting (a raw status flip stands for a slot freed behind a lock).
		require.NoError(t, b.exec.Exec(ctx, `UPDATE {schema}.tenant SET status = 'active'`))
		round, err := b.exec.TenantAdmitNext(ctx, &driver.TenantAdmitNextParams{MaxTenants: 2, MaxPerTenant: 1, Now: &t0})
		require.NoError(t, err)
		require.Len(t, round, 2)
		require.Equal(t, []string{"a", "b"}, []string{round[0].TenantID, round[1].TenantID})
		later := t0.Add(time.Second)
		round, err = b.exec.TenantAdmitNext(ctx, &driver.TenantAdmitNextParams{MaxTenants: 2, MaxPerTenant: 1, Now: &later})
		require.NoError(t, err)
		require.Equal(t, "c", round[0].TenantID, "the tenant served longest ago (never) comes first")
		for _, a := range round {
			require.Equal(t, 1, a.Admitted)
		}
	})

	// The seed's "claim a batch of 10 when 15 are pending; the next cycle takes the other 5; an
	// empty queue returns nothing" as admission rounds over tenants.
	t.Run("AdmitNextInBatches", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for i := range 15 {
			id := fmt.Sprintf("t%02d", i)
			_, err := b.exec.TenantInsert(ctx, &driver.TenantInsertParams{ID: id, Tier: "FREE", Status: driver.TenantSuspended, Now: &t0})
			require.NoError(t, err)
			enqueue(t, b.exec, t0, id, 1)
		}
		require.NoError(t, b.exec.Exec(ctx, `UPDATE {schema}.tenant SET status = 'active'`))
		admitted := func(round []*driver.TenantAdmission) int {
			n := 0
			for _, a := range round {
				n += a.Admitted
			}
			return n
		}
		round, err := b.exec.TenantAdmitNext(ctx, &driver.TenantAdmitNextParams{MaxTenants: 10, Now: &t0})
		require.NoError(t, err)
		require.Len(t, round, 10)
		require.Equal(t, 10, admitted(round))
		round, err = b.exec.TenantAdmitNext(ctx, &driver.TenantAdmitNextParams{MaxTenants: 10, Now: &t0})
		require.NoError(t, err)
		require.Len(t, round, 5, "the next round takes the other five")
		require.Equal(t, 5, admitted(round))
		round, err = b.exec.TenantAdmitNext(ctx, &driver.TenantAdmitNextParams{MaxTenants: 10, Now: &t0})
		require.NoError(t, err)
		require.Empty(t, round, "nothing queued: an empty round")
	})

	t.Run("FailUnknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.exec.TenantInsert(ctx, &driver.TenantInsertParams{ID: "free", Tier: "FREE", Now: &t0})
		require.NoError(t, err)
		ids, _ := enqueue(t, b.exec, t0, "free", 2)
		failedIDs, err := b.exec.ExecutionFailUnknown(ctx, &driver.ExecutionFailUnknownParams{KnownTypes: []string{"other"}, Now: &t0})
		require.NoError(t, err)
		require.ElementsMatch(t, ids, failedIDs, "the admitted one and the queued one")
		x := getExecution(t, b.exec, ids[1])
		require.Equal(t, failed, x.Status)
		require.Equal(t, driver.CodeUnknownDefinition, x.ErrorCode)
		tenant, err := b.exec.TenantGet(ctx, "free")
		require.NoError(t, err)
		require.Equal(t, 0, tenant.Active, "the failed slot holder gave its slot back")
	})

	t.Run("CancelQueued", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.exec.TenantInsert(ctx, &driver.TenantInsertParams{ID: "free", Tier: "FREE", Now: &t0})
		require.NoError(t, err)
		ids, _ := enqueue(t, b.exec, t0, "free", 3)
		cancel := func(id uuid.UUID, typ string) (*driver.ExecutionRow, error) {
			return b.exec.ExecutionCancelQueued(ctx, &driver.ExecutionCancelQueuedParams{ID: id, Model: "process", Type: typ,
				Action: "TSQ_CANCEL", Actor: "op", Reason: "withdrawn", Details: []byte(`{"runCompensations":false}`), Now: &t0})
		}
		_, err = b.exec.ExecutionCancelQueued(ctx, &driver.ExecutionCancelQueuedParams{ID: ids[1], Model: "process", Type: "limited", Action: "TSQ_CANCEL"})
		require.ErrorContains(t, err, "the actor is required")
		_, err = cancel(uuid.Must(uuid.NewV7()), "limited")
		require.ErrorIs(t, err, driver.ErrNotFound)
		_, err = cancel(ids[0], "limited")
		require.ErrorIs(t, err, driver.ErrConflict, "the admitted one is not queued")
		_, err = cancel(ids[1], "other")
		require.ErrorIs(t, err, driver.ErrConflict, "another type's execution")
		require.Equal(t, []driver.ExecutionStatus{pending, queued, queued}, statuses(t, b.exec, ids), "a refusal changes nothing")

		row, err := cancel(ids[1], "limited")
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCancelled, row.Status)
		require.Equal(t, "CANCELLED", row.ErrorCode)
		require.Equal(t, driver.QueuedCancelMessage("op", "withdrawn"), row.ErrorMessage)
		require.Equal(t, row, getExecution(t, b.exec, ids[1]))
		entries, err := b.exec.ExecutionLogList(ctx, ids[1])
		require.NoError(t, err)
		last := entries[len(entries)-1]
		require.Equal(t, "TSQ_CANCEL", last.EntryType)
		require.Equal(t, "cancel", last.Name)
		require.Equal(t, "op", last.Actor)
		require.JSONEq(t, `{"runCompensations":false}`, string(last.Request))
		audit, err := b.exec.AuditLogList(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: ids[1].String()})
		require.NoError(t, err)
		require.Len(t, audit, 1)
		require.Equal(t, "TSQ_CANCEL", audit[0].Action)
		_, err = cancel(ids[1], "limited")
		require.ErrorIs(t, err, driver.ErrConflict, "cancelled already")

		tenant, err := b.exec.TenantGet(ctx, "free")
		require.NoError(t, err)
		require.Equal(t, 1, tenant.Active, "no slot taken or freed")
		require.Equal(t, 1, tenant.Queued)
	})
}

func exerciseStaleClaims(t *testing.T, setup setupFunc) {
	b := setup(t)
	x := newExecution("p")
	insertExecutions(t, b.exec, &t0, x)
	first := claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t0)
	require.Len(t, first, 1)
	require.False(t, first[0].StaleLease, "a new execution's first claim")
	// The runner dies: its lease runs out and the execution is claimed again, as a stale claim.
	again := claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t0.Add(2*time.Minute))
	require.Len(t, again, 1)
	require.True(t, again[0].StaleLease)
	require.Equal(t, int64(2), again[0].Fence)
}

// A capacity-limited execution that continues as new gives its slot up; its successor queues for
// one like any other execution of its tenant (it runs at once when a slot is free).
func exerciseTenantContinueAsNew(t *testing.T, setup setupFunc) {
	ctx := context.Background()
	b := setup(t)
	_, err := b.exec.TenantInsert(ctx, &driver.TenantInsertParams{ID: "free", Tier: "FREE", Now: &t0})
	require.NoError(t, err)
	ids, _ := enqueue(t, b.exec, t0, "free", 2)
	claimed := claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t0)
	require.Len(t, claimed, 1)
	successor := &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7())}
	t1 := t0.Add(time.Second)
	require.Len(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{ID: ids[0], Fence: claimed[0].Fence,
		Status: driver.ExecutionCompleted, Release: true, ContinueAsNew: successor}), 1)
	require.Equal(t, driver.ExecutionPending, getExecution(t, b.exec, ids[1]).Status, "the slot went to the oldest queued")
	require.Equal(t, driver.ExecutionQueued, getExecution(t, b.exec, successor.ID).Status, "the successor waits for a slot")
	tenant, err := b.exec.TenantGet(ctx, "free")
	require.NoError(t, err)
	require.Equal(t, 1, tenant.Active, "never over the limit")

	// With a free slot the successor is admitted at once.
	claimed = claimExecutions(t, b.exec, driver.ClaimPending, nil, 10, time.Minute, t1)
	require.Len(t, claimed, 1)
	next := &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7())}
	t2 := t1.Add(time.Second)
	require.Len(t, checkpoint(t, b.exec, t2, &driver.ExecutionCheckpoint{ID: ids[1], Fence: claimed[0].Fence,
		Status: driver.ExecutionCompleted, Release: true, ContinueAsNew: next}), 1)
	require.Equal(t, driver.ExecutionPending, getExecution(t, b.exec, successor.ID).Status, "the first successor got the slot")
	require.Equal(t, driver.ExecutionQueued, getExecution(t, b.exec, next.ID).Status)
}
