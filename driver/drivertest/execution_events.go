package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

// eventMessage is an outbox message standing for a lifecycle event of execution id.
func eventMessage(id uuid.UUID, typ string) *driver.OutboxInsertParams {
	return &driver.OutboxInsertParams{Category: driver.OutboxCategoryEvent, Transport: "kafka", Topic: "events.T",
		Key: id.String(), Type: typ, MessageID: uuid.NewString(), Payload: []byte(`{"type":"` + typ + `"}`)}
}

// eventsOf returns the types of the outbox messages keyed by execution id, oldest first.
func eventsOf(t *testing.T, exec driver.Executor, id uuid.UUID) []string {
	t.Helper()
	rows, err := exec.OutboxList(context.Background(), &driver.OutboxListParams{Limit: 1000})
	require.NoError(t, err)
	var out []string
	for i := len(rows) - 1; i >= 0; i-- { // the listing is newest first
		if rows[i].Key == id.String() {
			out = append(out, rows[i].Type)
		}
	}
	return out
}

// The outbox messages of an insert, a suspension and a resume commit with them, and only when
// they change something: the event of a change exists exactly when the change does.
func exerciseExecutionEvents(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("InsertWritesItsMessagesOnlyWhenItInserts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, leased := newExecution("Pay"), newLeasedExecution("Pay", time.Minute)
		p.Outbox = []*driver.OutboxInsertParams{eventMessage(p.ID, "EXECUTION_STARTED")}
		leased.Outbox = []*driver.OutboxInsertParams{eventMessage(leased.ID, "EXECUTION_STARTED")}
		insertExecutions(t, b.exec, &t0, p, leased)
		require.Equal(t, []string{"EXECUTION_STARTED"}, eventsOf(t, b.exec, p.ID), "never checkpointed, started all the same")
		require.Equal(t, []string{"EXECUTION_STARTED"}, eventsOf(t, b.exec, leased.ID))

		// The same ids again: nothing inserted, no message written.
		again := *p
		again.Outbox = []*driver.OutboxInsertParams{eventMessage(p.ID, "EXECUTION_STARTED")}
		fresh := newExecution("Pay")
		fresh.Outbox = []*driver.OutboxInsertParams{eventMessage(fresh.ID, "EXECUTION_STARTED")}
		fresh2 := newExecution("Pay")
		fresh2.Outbox = []*driver.OutboxInsertParams{eventMessage(fresh2.ID, "EXECUTION_STARTED")}
		var written []driver.WrittenMessage // the messages written, reported after the commit
		inserted, err := b.exec.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{Executions: []*driver.ExecutionInsertParams{&again, fresh, fresh2},
			Now: &t0, OutboxHandoff: &driver.OutboxHandoff{Holder: "relay/handoff", Lease: time.Minute,
				Written: func(msgs []driver.WrittenMessage) { written = append(written, msgs...) }}})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{fresh.ID, fresh2.ID}, inserted)
		require.Equal(t, []string{"EXECUTION_STARTED"}, eventsOf(t, b.exec, p.ID), "a no-op insert writes no event")
		require.Equal(t, []string{"EXECUTION_STARTED"}, eventsOf(t, b.exec, fresh.ID))
		require.Len(t, written, 2)
		for i, id := range []uuid.UUID{fresh.ID, fresh2.ID} {
			row, err := b.exec.OutboxGet(ctx, written[i].ID)
			require.NoError(t, err)
			require.Equal(t, id.String(), row.Key, "message %d", i)
			require.Equal(t, id.String(), written[i].Key, "message %d", i)
			require.Zero(t, written[i].Previous, "a new execution's first message follows none")
			require.True(t, row.CreatedAt.Equal(written[i].CreatedAt), "message %d", i)
			require.Equal(t, "relay/handoff", row.LockedBy, "leased to the hand-off: no claim takes it meanwhile")
			requireTimePtr(t, t0.Add(time.Minute), row.LockedUntil, "locked_until")
		}
		require.Same(t, fresh.Outbox[0], written[0].Message, "the message as written, for the relay to publish from memory")
		require.Same(t, fresh2.Outbox[0], written[1].Message)

		// A checkpoint's child is started with its parent's checkpoint, once.
		child := &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7()), Type: "Sub"}
		child.Outbox = []*driver.OutboxInsertParams{eventMessage(child.ID, "EXECUTION_STARTED")}
		require.Len(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{ID: leased.ID, Fence: 1, Status: driver.ExecutionExecuting,
			Children: []*driver.ExecutionInsertParams{child}}), 1)
		require.Equal(t, []string{"EXECUTION_STARTED"}, eventsOf(t, b.exec, child.ID))
	})

	t.Run("SuspendAndResumeWriteTheirEventsInTheirTransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newExecution("Pay")
		insertExecutions(t, b.exec, &t0, p)
		t1 := t0.Add(time.Second)
		var seen *driver.ExecutionRow
		var seenSeq int
		outbox := func(typ string) driver.OutboxOfChange {
			return func(after *driver.ExecutionRow, logSeq int) ([]*driver.OutboxInsertParams, error) {
				seen, seenSeq = after, logSeq
				return []*driver.OutboxInsertParams{eventMessage(after.ID, typ)}, nil
			}
		}
		row, err := b.exec.ExecutionSuspend(ctx, &driver.ExecutionSuspendParams{ID: p.ID, Actor: "ops", Now: &t1, Outbox: outbox("SUSPENDED")})
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionSuspended, seen.Status, "called with the row as the change leaves it")
		require.Equal(t, row.Fence, seen.Fence)
		require.Equal(t, lastLog(t, b.exec, p.ID).Seq, seenSeq, "and the sequence of the entry it logged")
		require.Equal(t, []string{"SUSPENDED"}, eventsOf(t, b.exec, p.ID))

		_, err = b.exec.ExecutionResume(ctx, &driver.ExecutionResumeParams{ID: p.ID, Actor: "ops", Now: &t1, Outbox: outbox("RESUMED")})
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionPending, seen.Status)
		require.Equal(t, []string{"SUSPENDED", "RESUMED"}, eventsOf(t, b.exec, p.ID))
	})

	t.Run("AFailureAfterTheChangeLeavesNeither", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newExecution("Pay")
		insertExecutions(t, b.exec, &t0, p)
		logBefore := len(logList(t, b.exec, p.ID))
		t1 := t0.Add(time.Second)
		injected := errors.New("injected after the status change")
		failing := func(after *driver.ExecutionRow, _ int) ([]*driver.OutboxInsertParams, error) {
			return []*driver.OutboxInsertParams{eventMessage(after.ID, string(after.Status))}, injected
		}
		_, err := b.exec.ExecutionSuspend(ctx, &driver.ExecutionSuspendParams{ID: p.ID, Actor: "ops", Now: &t1, Outbox: failing})
		require.ErrorIs(t, err, injected)
		row := getExecution(t, b.exec, p.ID)
		require.Equal(t, driver.ExecutionPending, row.Status, "the suspension rolled back")
		require.Zero(t, row.Fence)
		require.Len(t, logList(t, b.exec, p.ID), logBefore, "no log entry")
		require.Empty(t, eventsOf(t, b.exec, p.ID), "no event")
		audit, err := b.exec.AuditLogList(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: p.ID.String()})
		require.NoError(t, err)
		require.Empty(t, audit)

		suspend(t, b.exec, t1, p.ID)
		_, err = b.exec.ExecutionResume(ctx, &driver.ExecutionResumeParams{ID: p.ID, Actor: "ops", Now: &t1, Outbox: failing})
		require.ErrorIs(t, err, injected)
		require.Equal(t, driver.ExecutionSuspended, getExecution(t, b.exec, p.ID).Status, "the resume rolled back")
		require.Empty(t, eventsOf(t, b.exec, p.ID))

		// A suspend that only records a request for the runner changes no status: no event.
		leased := newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, leased)
		called := false
		_, err = b.exec.ExecutionSuspend(ctx, &driver.ExecutionSuspendParams{ID: leased.ID, Actor: "ops", Now: &t1,
			Outbox: func(*driver.ExecutionRow, int) ([]*driver.OutboxInsertParams, error) { called = true; return nil, nil }})
		require.NoError(t, err)
		require.False(t, called)
	})

	t.Run("ReleaseWritesTheSuspensionEventOnlyWhenItSuspends", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		t1 := t0.Add(time.Second)
		asked, free := newLeasedExecution("Pay", time.Minute), newLeasedExecution("Pay", time.Minute)
		insertExecutions(t, b.exec, &t0, asked, free)
		suspend(t, b.exec, t1, asked.ID) // a runner holds it: only a request
		release := func(id uuid.UUID) *driver.ExecutionCheckpoint {
			return &driver.ExecutionCheckpoint{ID: id, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true,
				Log:           []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "STEP", Name: "a", StepStatus: "COMPLETED"}},
				Outbox:        []*driver.OutboxInsertParams{eventMessage(id, "STEP_SUCCEEDED")},
				SuspendOutbox: []*driver.OutboxInsertParams{eventMessage(id, "SUSPENDED")}}
		}
		require.Len(t, checkpoint(t, b.exec, t1, release(asked.ID), release(free.ID)), 2)
		require.Equal(t, driver.ExecutionSuspended, getExecution(t, b.exec, asked.ID).Status)
		require.Equal(t, []string{"STEP_SUCCEEDED", "SUSPENDED"}, eventsOf(t, b.exec, asked.ID))
		rows, err := b.exec.OutboxList(ctx, &driver.OutboxListParams{Limit: 1000})
		require.NoError(t, err)
		for _, row := range rows {
			if row.Key == asked.ID.String() && row.Type == "SUSPENDED" {
				require.JSONEq(t, `{"type":"SUSPENDED","actor":"ops","reason":"hold on"}`, string(row.Payload), "the operator who asked")
			}
		}
		require.Equal(t, driver.ExecutionWaitingForAsync, getExecution(t, b.exec, free.ID).Status)
		require.Equal(t, []string{"STEP_SUCCEEDED"}, eventsOf(t, b.exec, free.ID), "no request, no suspension, no event")

		// A fenced release writes neither.
		stale := release(free.ID)
		stale.Fence = 0
		require.Empty(t, checkpoint(t, b.exec, t1, stale))
		require.Equal(t, []string{"STEP_SUCCEEDED"}, eventsOf(t, b.exec, free.ID))
	})
}
