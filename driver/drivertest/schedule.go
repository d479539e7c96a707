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

func newSchedule(name string, next *time.Time) *driver.ScheduleInsertParams {
	return &driver.ScheduleInsertParams{
		ID: uuid.New(), Name: name, Enabled: true, NextFireAt: next, Now: t0,
		ScheduleDefinition: driver.ScheduleDefinition{
			Model: "workflow", Type: "Report", Trigger: driver.TriggerCron, Cron: "0 0 2 * * *", Zone: "Europe/Paris",
			Input: json.RawMessage(`{"days":30}`), Description: "nightly", Misfire: driver.MisfireFireAll, MisfireLimit: 3,
			SpecHash: "h1",
		},
	}
}

func insertSchedule(t *testing.T, exec driver.Executor, p *driver.ScheduleInsertParams) *driver.ScheduleRow {
	t.Helper()
	row, inserted, err := exec.ScheduleInsert(context.Background(), p)
	require.NoError(t, err)
	require.True(t, inserted)
	return row
}

func exerciseSchedules(t *testing.T, setup setupFunc) {
	ctx := context.Background()
	at := func(d time.Duration) *time.Time { v := t0.Add(d).Truncate(time.Microsecond); return &v }

	t.Run("InsertGetListUpdateDelete", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newSchedule("nightly", at(time.Hour))
		row := insertSchedule(t, b.exec, p)
		require.Equal(t, p.ID, row.ID)
		require.Equal(t, "nightly", row.Name)
		require.Equal(t, driver.TriggerCron, row.Trigger)
		require.Equal(t, "0 0 2 * * *", row.Cron)
		require.Equal(t, "Europe/Paris", row.Zone)
		require.JSONEq(t, `{"days":30}`, string(row.Input))
		require.Equal(t, driver.MisfireFireAll, row.Misfire)
		require.Equal(t, 3, row.MisfireLimit)
		require.Equal(t, driver.ScheduleFromAPI, row.Source)
		require.True(t, row.Enabled)
		require.True(t, at(time.Hour).Equal(*row.NextFireAt))
		require.Equal(t, "h1", row.SpecHash)

		got, err := b.exec.ScheduleGet(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, row, got)
		got, err = b.exec.ScheduleGetByName(ctx, "nightly")
		require.NoError(t, err)
		require.Equal(t, row, got)
		_, err = b.exec.ScheduleGet(ctx, uuid.New())
		require.ErrorIs(t, err, driver.ErrNotFound)

		// A taken name is a conflict, or a no-op returning the stored row with IfAbsent.
		dup := newSchedule("nightly", nil)
		_, _, err = b.exec.ScheduleInsert(ctx, dup)
		require.ErrorIs(t, err, driver.ErrConflict)
		dup.IfAbsent = true
		existing, inserted, err := b.exec.ScheduleInsert(ctx, dup)
		require.NoError(t, err)
		require.False(t, inserted)
		require.Equal(t, p.ID, existing.ID)

		other := newSchedule("a-first", nil)
		other.Trigger, other.Cron, other.Zone, other.Interval, other.InitialDelay = driver.TriggerFixedRate, "", "", 1500*time.Millisecond, time.Second
		other.Input = nil
		insertSchedule(t, b.exec, other)
		list, err := b.exec.ScheduleList(ctx, &driver.ScheduleListParams{})
		require.NoError(t, err)
		require.Len(t, list, 2)
		require.Equal(t, "a-first", list[0].Name)
		require.Equal(t, 1500*time.Millisecond, list[0].Interval)
		require.Equal(t, time.Second, list[0].InitialDelay)
		require.JSONEq(t, `{}`, string(list[0].Input), "no input stores {}")
		require.Nil(t, list[0].NextFireAt)
		// Paging by name: AfterName resumes past the last name seen.
		list, err = b.exec.ScheduleList(ctx, &driver.ScheduleListParams{Limit: 1})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, "a-first", list[0].Name)
		list, err = b.exec.ScheduleList(ctx, &driver.ScheduleListParams{AfterName: "a-first", Limit: 1})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, "nightly", list[0].Name)
		list, err = b.exec.ScheduleList(ctx, &driver.ScheduleListParams{AfterName: "nightly"})
		require.NoError(t, err)
		require.Empty(t, list)

		upd, err := b.exec.ScheduleUpdate(ctx, &driver.ScheduleUpdateParams{ID: p.ID, Enabled: false, Now: t0.Add(time.Minute),
			ScheduleDefinition: driver.ScheduleDefinition{Model: "saga", Type: "Cleanup", Trigger: driver.TriggerFixedDelay,
				Interval: time.Minute, Misfire: driver.MisfireSkip}})
		require.NoError(t, err)
		require.False(t, upd.Enabled)
		require.Equal(t, "saga", upd.Model)
		require.Equal(t, driver.TriggerFixedDelay, upd.Trigger)
		require.Equal(t, "", upd.Cron)
		require.Nil(t, upd.NextFireAt)
		require.Equal(t, row.Fence+1, upd.Fence, "an update moves the fence on")
		_, err = b.exec.ScheduleUpdate(ctx, &driver.ScheduleUpdateParams{ID: uuid.New(), Now: t0,
			ScheduleDefinition: driver.ScheduleDefinition{Model: "m", Type: "t", Trigger: driver.TriggerCron}})
		require.ErrorIs(t, err, driver.ErrNotFound)

		require.NoError(t, b.exec.ScheduleDelete(ctx, p.ID))
		require.ErrorIs(t, b.exec.ScheduleDelete(ctx, p.ID), driver.ErrNotFound)
		_, err = b.exec.ScheduleGet(ctx, p.ID)
		require.ErrorIs(t, err, driver.ErrNotFound)
	})

	t.Run("ClaimDueAndFired", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		due1 := insertSchedule(t, b.exec, newSchedule("due-1", at(-2*time.Second)))
		due2 := insertSchedule(t, b.exec, newSchedule("due-2", at(-time.Second)))
		insertSchedule(t, b.exec, newSchedule("later", at(time.Minute)))
		disabled := newSchedule("disabled", at(-time.Hour))
		disabled.Enabled = false
		insertSchedule(t, b.exec, disabled)
		insertSchedule(t, b.exec, newSchedule("waiting", nil))

		next, err := b.exec.ScheduleNextDue(ctx)
		require.NoError(t, err)
		require.True(t, at(-2*time.Second).Equal(*next), "the earliest enabled next fire time")

		claimed, err := b.exec.ScheduleClaimDue(ctx, &driver.ScheduleClaimDueParams{Now: t0, Limit: 10, Lease: 30 * time.Second, Holder: "w1"})
		require.NoError(t, err)
		require.Len(t, claimed, 2)
		require.Equal(t, []string{"due-1", "due-2"}, []string{claimed[0].Name, claimed[1].Name}, "earliest first")
		require.Equal(t, "w1", claimed[0].LeaseHolder)
		require.True(t, at(30*time.Second).Equal(*claimed[0].LeaseUntil))
		require.Equal(t, due1.Fence+1, claimed[0].Fence)

		again, err := b.exec.ScheduleClaimDue(ctx, &driver.ScheduleClaimDueParams{Now: t0.Add(time.Second), Limit: 10, Lease: 30 * time.Second, Holder: "w2"})
		require.NoError(t, err)
		require.Empty(t, again, "a live lease keeps another replica out")

		execID := uuid.New()
		written, err := b.exec.ScheduleFiredMany(ctx, &driver.ScheduleFiredManyParams{Now: t0.Add(time.Second), Fired: []*driver.ScheduleFired{
			{ID: due1.ID, Fence: claimed[0].Fence, NextFireAt: at(time.Hour), LastFireAt: at(-2 * time.Second), LastExecutionID: &execID, Fires: 1},
			{ID: due2.ID, Fence: due2.Fence, NextFireAt: at(time.Hour), Fires: 1}, // a stale fence writes nothing
		}})
		require.NoError(t, err)
		require.Equal(t, 1, written)
		got, err := b.exec.ScheduleGet(ctx, due1.ID)
		require.NoError(t, err)
		require.True(t, at(time.Hour).Equal(*got.NextFireAt))
		require.True(t, at(-2*time.Second).Equal(*got.LastFireAt))
		require.Equal(t, execID, *got.LastExecutionID)
		require.Equal(t, int64(1), got.FireCount)
		require.Nil(t, got.LeaseUntil)
		require.Equal(t, "", got.LeaseHolder)

		// The lease of due-2 expires: another replica takes it over, and the first one's write is fenced out.
		taken, err := b.exec.ScheduleClaimDue(ctx, &driver.ScheduleClaimDueParams{Now: t0.Add(40 * time.Second), Limit: 10, Lease: 30 * time.Second, Holder: "w2"})
		require.NoError(t, err)
		require.Len(t, taken, 1)
		require.Equal(t, "due-2", taken[0].Name)
		written, err = b.exec.ScheduleFiredMany(ctx, &driver.ScheduleFiredManyParams{Now: t0.Add(40 * time.Second), Fired: []*driver.ScheduleFired{
			{ID: due2.ID, Fence: claimed[1].Fence, NextFireAt: at(time.Hour)}}})
		require.NoError(t, err)
		require.Equal(t, 0, written)
	})

	t.Run("RearmFixedDelay", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		running := newLeasedExecution("Report", time.Hour)
		ended := newLeasedExecution("Report", time.Hour)
		insertExecutions(t, b.exec, &t0, running, ended)
		checkpoint(t, b.exec, t0.Add(10*time.Second), &driver.ExecutionCheckpoint{ID: ended.ID, Fence: 1, Status: driver.ExecutionCompleted})
		endedRow, err := b.exec.ExecutionGet(ctx, ended.ID)
		require.NoError(t, err)
		require.NotNil(t, endedRow.CompletedAt)

		mk := func(name string, waiting uuid.UUID) *driver.ScheduleRow {
			p := newSchedule(name, at(-time.Second))
			p.Trigger, p.Cron, p.Zone, p.Interval = driver.TriggerFixedDelay, "", "", 5*time.Second
			s := insertSchedule(t, b.exec, p)
			claimed, err := b.exec.ScheduleClaimDue(ctx, &driver.ScheduleClaimDueParams{Now: t0, Limit: 10, Lease: time.Minute, Holder: "w"})
			require.NoError(t, err)
			require.Len(t, claimed, 1)
			_, err = b.exec.ScheduleFiredMany(ctx, &driver.ScheduleFiredManyParams{Now: t0, Fired: []*driver.ScheduleFired{
				{ID: s.ID, Fence: claimed[0].Fence, WaitingExecutionID: &waiting, LastExecutionID: &waiting, Fires: 1}}})
			require.NoError(t, err)
			return s
		}
		onRunning, onEnded, onGone := mk("on-running", running.ID), mk("on-ended", ended.ID), mk("on-gone", uuid.New())

		n, err := b.exec.ScheduleRearm(ctx, &driver.ScheduleRearmParams{Now: t0.Add(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		get := func(id uuid.UUID) *driver.ScheduleRow {
			s, err := b.exec.ScheduleGet(ctx, id)
			require.NoError(t, err)
			return s
		}
		require.Nil(t, get(onRunning.ID).NextFireAt, "waits while its execution runs")
		require.NotNil(t, get(onRunning.ID).WaitingExecutionID)
		require.True(t, endedRow.CompletedAt.Add(5*time.Second).Equal(*get(onEnded.ID).NextFireAt), "the end plus the delay")
		require.Nil(t, get(onEnded.ID).WaitingExecutionID)
		require.True(t, at(time.Minute+5*time.Second).Equal(*get(onGone.ID).NextFireAt), "now plus the delay when the execution is gone")
	})

	t.Run("JobLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		row, ok, err := b.exec.JobLeaseAcquire(ctx, &driver.JobLeaseAcquireParams{Name: "retention", Holder: "a", Lease: time.Minute, Now: t0})
		require.NoError(t, err)
		require.True(t, ok, "the first caller creates and takes the row")
		require.Equal(t, "a", row.Holder)
		require.True(t, t0.Add(time.Minute).Truncate(time.Microsecond).Equal(*row.LeaseUntil))

		row, ok, err = b.exec.JobLeaseAcquire(ctx, &driver.JobLeaseAcquireParams{Name: "retention", Holder: "b", Lease: time.Minute, Now: t0.Add(time.Second)})
		require.NoError(t, err)
		require.False(t, ok, "held")
		require.Equal(t, "a", row.Holder)

		released, err := b.exec.JobLeaseRelease(ctx, &driver.JobLeaseReleaseParams{Name: "retention", Holder: "b", NextRunAt: t0, Now: t0})
		require.NoError(t, err)
		require.False(t, released, "only the holder releases")
		released, err = b.exec.JobLeaseRelease(ctx, &driver.JobLeaseReleaseParams{Name: "retention", Holder: "a",
			NextRunAt: t0.Add(10 * time.Minute), Error: "boom", Now: t0.Add(2 * time.Second)})
		require.NoError(t, err)
		require.True(t, released)

		_, ok, err = b.exec.JobLeaseAcquire(ctx, &driver.JobLeaseAcquireParams{Name: "retention", Holder: "b", Lease: time.Minute, Now: t0.Add(time.Minute)})
		require.NoError(t, err)
		require.False(t, ok, "not due before its next run")
		row, ok, err = b.exec.JobLeaseAcquire(ctx, &driver.JobLeaseAcquireParams{Name: "retention", Holder: "b", Lease: time.Minute, Now: t0.Add(10 * time.Minute)})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "b", row.Holder)
		require.Equal(t, "a", row.LastHolder)
		require.Equal(t, "boom", row.LastError)
		require.Equal(t, int64(1), row.Runs)

		// An expired lease is taken over even when the holder never released it.
		_, ok, err = b.exec.JobLeaseAcquire(ctx, &driver.JobLeaseAcquireParams{Name: "retention", Holder: "c", Lease: time.Minute, Now: t0.Add(12 * time.Minute)})
		require.NoError(t, err)
		require.True(t, ok)

		_, _, err = b.exec.JobLeaseAcquire(ctx, &driver.JobLeaseAcquireParams{Name: "watchdog", Holder: "a", Lease: time.Minute, Now: t0})
		require.NoError(t, err)
		list, err := b.exec.JobLeaseList(ctx)
		require.NoError(t, err)
		require.Len(t, list, 2)
		require.Equal(t, "retention", list[0].Name)
		require.Equal(t, "c", list[0].Holder)
		require.Equal(t, "watchdog", list[1].Name)
	})
}
