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

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// acquireExecution leases an execution to runner at now and returns it (its fence grown by one).
func acquireExecution(t *testing.T, exec driver.Executor, id uuid.UUID, now time.Time) *driver.ExecutionRow {
	t.Helper()
	row, err := exec.ExecutionAcquire(context.Background(), &driver.ExecutionAcquireParams{ID: id, Lease: time.Minute, WorkerID: runner, Now: &now})
	require.NoError(t, err)
	return row
}

// listChildren lists the children of parent.
func listChildren(t *testing.T, exec driver.Executor, parent uuid.UUID) []uuid.UUID {
	t.Helper()
	rows, err := exec.ExecutionList(context.Background(), &driver.ExecutionListParams{ParentID: parent})
	require.NoError(t, err)
	return executionIDs(rows)
}

// responses lists the responses of an execution above afterSeq.
func responses(t *testing.T, exec driver.Executor, id uuid.UUID, afterSeq int64) []*driver.ExecutionResponseRow {
	t.Helper()
	rows, err := exec.ExecutionResponseList(context.Background(), id, afterSeq)
	require.NoError(t, err)
	return rows
}

// respond records an async response on an execution at now.
func respond(t *testing.T, exec driver.Executor, id uuid.UUID, name string, now time.Time) {
	t.Helper()
	_, err := exec.ExecutionResponseInsert(context.Background(), &driver.ExecutionResponseInsertParams{
		ExecutionID: id, Name: name, Payload: json.RawMessage(`{"name":"` + name + `"}`), Now: &now,
	})
	require.NoError(t, err)
}

func exerciseExecutionChildren(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("IdempotentInsert", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := newLeasedExecution("Pay", time.Minute)
		first.Traceparent = testTraceparent
		first.Log = []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "LIFECYCLE", Name: "created"}}
		insertExecutions(t, b.exec, &t0, first)
		before := getExecution(t, b.exec, first.ID)
		require.Equal(t, first.ID, before.RootID, "a top-level execution is its own root")
		require.Equal(t, testTraceparent, before.Traceparent)

		// The same id again (another state, another lease, another log), with a new one: only the
		// new one is inserted, and the existing row, lease and log are untouched.
		again := newLeasedExecution("Pay", time.Hour)
		again.ID, again.State = first.ID, json.RawMessage(`{"n":2}`)
		again.Log = []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "LIFECYCLE", Name: "again"}}
		fresh := newExecution("Pay")
		inserted, err := b.exec.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{
			Executions: []*driver.ExecutionInsertParams{again, fresh}, Now: ptr(t0.Add(time.Second)),
		})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{fresh.ID}, inserted)
		requireExecution(t, before, getExecution(t, b.exec, first.ID))
		require.Equal(t, []driver.ExecutionLogEntry{
			{ExecutionID: first.ID, Seq: 1, At: t0, EntryType: "LIFECYCLE", Name: "created"},
		}, logList(t, b.exec, first.ID))
		requireExecution(t, createdExecution(fresh, t0.Add(time.Second)), getExecution(t, b.exec, fresh.ID))

		inserted, err = b.exec.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{
			Executions: []*driver.ExecutionInsertParams{again}, Now: &t0,
		})
		require.NoError(t, err)
		require.Empty(t, inserted, "nothing new")

		// An id given twice in one call is inserted once, as its first occurrence.
		twice, second := newExecution("Twice"), newExecution("Other")
		twice.Log = []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "LIFECYCLE", Name: "first"}}
		second.ID, second.Log = twice.ID, []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "LIFECYCLE", Name: "second"}}
		inserted, err = b.exec.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{
			Executions: []*driver.ExecutionInsertParams{twice, second}, Now: &t0,
		})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{twice.ID}, inserted)
		require.Equal(t, "Twice", getExecution(t, b.exec, twice.ID).Type)
		require.Equal(t, []driver.ExecutionLogEntry{
			{ExecutionID: twice.ID, Seq: 1, At: t0, EntryType: "LIFECYCLE", Name: "first"},
		}, logList(t, b.exec, twice.ID))
	})

	t.Run("TopLevelParentTakesParentsRoot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		top := newExecution("Order")
		insertExecutions(t, b.exec, &t0, top)
		child := newExecution("Pay")
		child.ParentID = top.ID
		insertExecutions(t, b.exec, &t0, child)
		got := getExecution(t, b.exec, child.ID)
		require.Equal(t, top.ID, got.ParentID)
		require.Equal(t, top.ID, got.RootID)
		require.Equal(t, []uuid.UUID{child.ID}, listChildren(t, b.exec, top.ID))
		require.Empty(t, listChildren(t, b.exec, child.ID))
	})

	t.Run("ChildrenInCheckpoint", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		parent := newLeasedExecution("Order", time.Minute)
		parent.TenantID, parent.Traceparent = "tenant-1", testTraceparent
		insertExecutions(t, b.exec, &t0, parent)

		// A child with only an id and a state takes the rest from its parent; one with its own
		// type and trace keeps them.
		plain := &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7()), State: json.RawMessage(`{"leg":1}`),
			Log: []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "LIFECYCLE", Name: "created"}}}
		own := newExecution("Ship")
		own.Traceparent = "00-11111111111111111111111111111111-2222222222222222-01"
		t1 := t0.Add(time.Second)
		require.Equal(t, []uuid.UUID{parent.ID}, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: parent.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true,
			Children: []*driver.ExecutionInsertParams{plain, own},
		}))
		got := getExecution(t, b.exec, plain.ID)
		require.Equal(t, driver.ExecutionPending, got.Status)
		require.Equal(t, parent.ID, got.ParentID)
		require.Equal(t, parent.ID, got.RootID)
		require.Equal(t, "Order", got.Type)
		require.Equal(t, "process", got.Model)
		require.Equal(t, "tenant-1", got.TenantID)
		require.Equal(t, testTraceparent, got.Traceparent)
		require.Zero(t, got.Fence)
		requireTimePtr(t, t1, got.WakeAt, "a child is woken at once")
		require.Len(t, logList(t, b.exec, plain.ID), 1)
		got = getExecution(t, b.exec, own.ID)
		require.Equal(t, "Ship", got.Type)
		require.Equal(t, own.Traceparent, got.Traceparent)
		require.ElementsMatch(t, []uuid.UUID{plain.ID, own.ID}, listChildren(t, b.exec, parent.ID))

		// A grandchild has the parent's root; inserting a child again changes nothing.
		child := acquireExecution(t, b.exec, plain.ID, t1)
		grandchild := newExecution("Pack")
		again := newExecution("Other")
		again.ID = own.ID
		require.Equal(t, []uuid.UUID{plain.ID}, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: plain.ID, Fence: child.Fence, Status: driver.ExecutionExecuting,
			Children: []*driver.ExecutionInsertParams{grandchild, again},
		}))
		got = getExecution(t, b.exec, grandchild.ID)
		require.Equal(t, plain.ID, got.ParentID)
		require.Equal(t, parent.ID, got.RootID)
		got = getExecution(t, b.exec, own.ID)
		require.Equal(t, "Ship", got.Type, "the existing child is untouched")
		require.Equal(t, parent.ID, got.ParentID)
	})

	t.Run("FencedCheckpointWritesNoChildren", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		parent := newLeasedExecution("Order", time.Minute)
		insertExecutions(t, b.exec, &t0, parent)
		acquireExecution(t, b.exec, parent.ID, t0.Add(2*time.Minute)) // fence 2: the first runner lost it
		child, successor := newExecution("Pay"), newExecution("Order")
		require.Empty(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: parent.ID, Fence: 1, Status: driver.ExecutionCompleted, Release: true,
			Children: []*driver.ExecutionInsertParams{child}, ContinueAsNew: successor,
		}))
		for _, id := range []uuid.UUID{child.ID, successor.ID} {
			_, err := b.exec.ExecutionGet(ctx, id)
			require.ErrorIs(t, err, driver.ErrNotFound)
		}
		require.Empty(t, listChildren(t, b.exec, parent.ID))
	})

	t.Run("FailedChildInsertFailsTheCheckpoint", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		parent := newLeasedExecution("Order", time.Minute)
		insertExecutions(t, b.exec, &t0, parent)
		good, bad := newExecution("Pay"), newExecution("Pay")
		bad.State = json.RawMessage(`{"n":`)
		_, err := b.exec.ExecutionCheckpointMany(ctx, &driver.ExecutionCheckpointManyParams{Now: &t0,
			Checkpoints: []*driver.ExecutionCheckpoint{{
				ID: parent.ID, Fence: 1, Status: driver.ExecutionCompleted, Release: true,
				Log:      []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "LIFECYCLE", Name: "done"}},
				Children: []*driver.ExecutionInsertParams{good, bad},
			}},
		})
		require.Error(t, err)
		got := getExecution(t, b.exec, parent.ID)
		require.Equal(t, driver.ExecutionExecuting, got.Status, "the checkpoint and its children commit together or not at all")
		require.Empty(t, logList(t, b.exec, parent.ID))
		_, err = b.exec.ExecutionGet(ctx, good.ID)
		require.ErrorIs(t, err, driver.ErrNotFound)
	})

	t.Run("EndedChildAnswersParentOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		parent := newLeasedExecution("Order", time.Minute)
		insertExecutions(t, b.exec, &t0, parent)
		done, failed := newExecution("Pay"), newExecution("Ship")
		require.Len(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: parent.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, CurrentWait: "children", Release: true,
			Children: []*driver.ExecutionInsertParams{done, failed},
		}), 1)
		require.Nil(t, getExecution(t, b.exec, parent.ID).WakeAt, "released to wait")

		t1 := t0.Add(time.Minute)
		doneRow := acquireExecution(t, b.exec, done.ID, t1)
		require.Len(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: done.ID, Fence: doneRow.Fence, Status: driver.ExecutionCompleted, State: json.RawMessage(`{"paid":true}`), Release: true,
		}), 1)
		p := getExecution(t, b.exec, parent.ID)
		require.Equal(t, int64(1), p.ResponsesReceived)
		requireTimePtr(t, t1, p.WakeAt, "the parent is woken")
		got := responses(t, b.exec, parent.ID, 0)
		require.Len(t, got, 1)
		require.Equal(t, driver.ChildResponseName(done.ID), got[0].Name)
		var outcome driver.ChildOutcome
		require.NoError(t, json.Unmarshal(got[0].Payload, &outcome))
		require.JSONEq(t, `{"paid":true}`, string(outcome.State))
		outcome.State = nil
		require.Equal(t, driver.ChildOutcome{ChildID: done.ID, Type: "Pay", Status: driver.ExecutionCompleted}, outcome)

		// Written again (a release of the ended child): no second answer.
		require.Len(t, checkpoint(t, b.exec, t1.Add(time.Second), &driver.ExecutionCheckpoint{
			ID: done.ID, Fence: doneRow.Fence, Status: driver.ExecutionCompleted, Release: true,
		}), 1)
		require.Len(t, responses(t, b.exec, parent.ID, 0), 1)

		// A failed child answers with its error; the parent, leased now, is not woken early (its
		// runner applies the response before it lets go).
		parentRow := acquireExecution(t, b.exec, parent.ID, t1)
		failedRow := acquireExecution(t, b.exec, failed.ID, t1)
		require.Len(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: failed.ID, Fence: failedRow.Fence, Status: driver.ExecutionFailed, ErrorCode: "DECLINED", ErrorMessage: "card declined", Release: true,
		}), 1)
		p = getExecution(t, b.exec, parent.ID)
		require.Equal(t, int64(2), p.ResponsesReceived)
		requireTimePtr(t, *parentRow.WakeAt, p.WakeAt, "a leased parent keeps its wake time")
		got = responses(t, b.exec, parent.ID, 1)
		require.Len(t, got, 1)
		require.Equal(t, int64(2), got[0].Seq)
		require.NoError(t, json.Unmarshal(got[0].Payload, &outcome))
		require.Equal(t, driver.ExecutionFailed, outcome.Status)
		require.Equal(t, "DECLINED", outcome.ErrorCode)
		require.Equal(t, "card declined", outcome.ErrorMessage)

		// A top-level execution answers nobody; a child of an ended parent neither.
		require.Len(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: parent.ID, Fence: parentRow.Fence, Status: driver.ExecutionCompleted, ResponsesApplied: 2, Release: true,
		}), 1)
		late := newExecution("Late")
		late.ParentID = parent.ID
		late.Lease, late.WorkerID = time.Minute, runner
		insertExecutions(t, b.exec, &t1, late)
		require.Len(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: late.ID, Fence: 1, Status: driver.ExecutionCompleted, Release: true,
		}), 1)
		require.Equal(t, int64(2), getExecution(t, b.exec, parent.ID).ResponsesReceived)
	})

	t.Run("ParentAndEndingChildInOneBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		parent := newLeasedExecution("Order", time.Minute)
		insertExecutions(t, b.exec, &t0, parent)
		child := newExecution("Pay")
		checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: parent.ID, Fence: 1, Status: driver.ExecutionExecuting, Children: []*driver.ExecutionInsertParams{child},
		})
		childRow := acquireExecution(t, b.exec, child.ID, t0)
		// The parent releases itself to wait while its child ends, in one batch: the parent is
		// answered and woken for the answer it has not applied.
		t1 := t0.Add(time.Second)
		require.ElementsMatch(t, []uuid.UUID{parent.ID, child.ID}, checkpoint(t, b.exec, t1,
			&driver.ExecutionCheckpoint{ID: parent.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true},
			&driver.ExecutionCheckpoint{ID: child.ID, Fence: childRow.Fence, Status: driver.ExecutionCompleted, Release: true},
		))
		p := getExecution(t, b.exec, parent.ID)
		require.Equal(t, driver.ExecutionWaitingForAsync, p.Status)
		require.Equal(t, int64(1), p.ResponsesReceived)
		require.Nil(t, p.LeaseUntil)
		requireTimePtr(t, t1, p.WakeAt, "the parent is woken")
		require.Len(t, responses(t, b.exec, parent.ID, 0), 1)
	})

	t.Run("CancelCascadesToDescendants", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		root := newLeasedExecution("Order", time.Minute)
		insertExecutions(t, b.exec, &t0, root)
		child, finished := newExecution("Pay"), newExecution("Ship")
		checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: root.ID, Fence: 1, Status: driver.ExecutionWaitingForAsync, Release: true,
			Children: []*driver.ExecutionInsertParams{child, finished},
		})
		childRow := acquireExecution(t, b.exec, child.ID, t0)
		grandchild := newExecution("Pack")
		checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: child.ID, Fence: childRow.Fence, Status: driver.ExecutionWaitingForAsync, Release: true,
			Children: []*driver.ExecutionInsertParams{grandchild},
		})
		finishedRow := acquireExecution(t, b.exec, finished.ID, t0)
		checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{ID: finished.ID, Fence: finishedRow.Fence, Status: driver.ExecutionCompleted, Release: true})
		// The grandchild's runner holds it when the root is cancelled.
		grandRow := acquireExecution(t, b.exec, grandchild.ID, t0)

		t1 := t0.Add(time.Minute)
		rootRow := acquireExecution(t, b.exec, root.ID, t1)
		require.Len(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: root.ID, Fence: rootRow.Fence, Status: driver.ExecutionCancelled, ResponsesApplied: rootRow.ResponsesReceived, Release: true,
			Log: []*driver.ExecutionLogEntry{{Seq: 2, EntryType: "LIFECYCLE", Name: "cancelled", Actor: "operator"}},
		}), 1)

		for _, x := range []struct {
			id    uuid.UUID
			fence int64
		}{{child.ID, childRow.Fence}, {grandchild.ID, grandRow.Fence}} {
			got := getExecution(t, b.exec, x.id)
			require.Equal(t, driver.ExecutionCancelled, got.Status)
			require.Equal(t, x.fence+1, got.Fence, "the fence grows")
			require.Nil(t, got.LeaseUntil)
			require.Nil(t, got.WakeAt)
			require.Equal(t, driver.CodeParentCancelled, got.ErrorCode)
			requireTimePtr(t, t1, got.CompletedAt, "completed_at")
			log := logList(t, b.exec, x.id)
			last := log[len(log)-1]
			require.Equal(t, "LIFECYCLE", last.EntryType)
			require.Equal(t, driver.EntryParentCancelled, last.Name)
			require.JSONEq(t, `{"cancelledId":"`+root.ID.String()+`"}`, string(last.Response))
			require.Equal(t, len(log), last.Seq, "appended after the execution's own entries")
		}
		got := getExecution(t, b.exec, finished.ID)
		require.Equal(t, driver.ExecutionCompleted, got.Status, "an ended child stays as it ended")
		require.Equal(t, finishedRow.Fence, got.Fence)

		// The grandchild's runner is fenced out.
		require.Empty(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: grandchild.ID, Fence: grandRow.Fence, Status: driver.ExecutionCompleted, Release: true,
		}))
		require.Equal(t, driver.ExecutionCancelled, getExecution(t, b.exec, grandchild.ID).Status)
		// The cancelled children do not answer their cancelled parents.
		require.Equal(t, rootRow.ResponsesReceived, getExecution(t, b.exec, root.ID).ResponsesReceived)
	})

	t.Run("ContinueAsNew", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		top := newExecution("Top")
		insertExecutions(t, b.exec, &t0, top)
		old := newLeasedExecution("Loop", time.Minute)
		old.ParentID, old.TenantID, old.BusinessKey, old.Traceparent = top.ID, "tenant-1", "key-1", testTraceparent
		insertExecutions(t, b.exec, &t0, old)
		// Three responses arrive; the runner applied the first when it continues as new.
		for _, name := range []string{"r1", "r2", "r3"} {
			respond(t, b.exec, old.ID, name, t0)
		}
		// Two signals arrive; the runner consumes the first in the checkpoint that continues.
		for _, id := range []string{"s1", "s2"} {
			_, err := b.exec.ExecutionSignalSend(context.Background(), &driver.ExecutionSignalSendParams{ExecutionID: old.ID, SignalID: id, Name: "approve", Now: &t0})
			require.NoError(t, err)
		}
		successor := &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7()), State: json.RawMessage(`{"round":2}`)}
		t1 := t0.Add(time.Second)
		require.Len(t, checkpoint(t, b.exec, t1, &driver.ExecutionCheckpoint{
			ID: old.ID, Fence: 1, Status: driver.ExecutionCompleted, ResponsesApplied: 1, Release: true,
			ContinueAsNew: successor, ConsumeSignals: []string{"s1"},
		}), 1)
		carried, err := b.exec.ExecutionSignalListPending(context.Background(), successor.ID)
		require.NoError(t, err)
		require.Len(t, carried, 1, "the unconsumed signal moves with the successor")
		require.Equal(t, "s2", carried[0].SignalID)
		left, err := b.exec.ExecutionSignalListPending(context.Background(), old.ID)
		require.NoError(t, err)
		require.Empty(t, left)

		got := getExecution(t, b.exec, successor.ID)
		require.Equal(t, driver.ExecutionPending, got.Status)
		require.Equal(t, "process", got.Model)
		require.Equal(t, "Loop", got.Type)
		require.Equal(t, "d", got.Domain)
		require.Equal(t, "tenant-1", got.TenantID)
		require.Equal(t, "key-1", got.BusinessKey)
		require.Equal(t, top.ID, got.ParentID)
		require.Equal(t, top.ID, got.RootID)
		require.Equal(t, old.ID, got.ContinuedFrom)
		require.Equal(t, testTraceparent, got.Traceparent)
		require.JSONEq(t, `{"round":2}`, string(got.State))
		require.Equal(t, int64(2), got.ResponsesReceived)
		requireTimePtr(t, t1, got.WakeAt, "wake_at")
		moved := responses(t, b.exec, successor.ID, 0)
		require.Len(t, moved, 2)
		for i, name := range []string{"r2", "r3"} {
			require.Equal(t, int64(i+1), moved[i].Seq)
			require.Equal(t, name, moved[i].Name)
			require.JSONEq(t, `{"name":"`+name+`"}`, string(moved[i].Payload))
		}

		prev := getExecution(t, b.exec, old.ID)
		require.Equal(t, driver.ExecutionCompleted, prev.Status)
		require.Equal(t, successor.ID, prev.ContinuedAs)
		require.Nil(t, prev.WakeAt, "nothing left to wake it for")
		require.Empty(t, responses(t, b.exec, old.ID, 1), "the unapplied responses moved")
		require.Len(t, responses(t, b.exec, old.ID, 0), 1, "the applied one stays")
		require.Zero(t, getExecution(t, b.exec, top.ID).ResponsesReceived, "a continued child does not answer its parent")
		require.ElementsMatch(t, []uuid.UUID{old.ID, successor.ID}, listChildren(t, b.exec, top.ID))
	})
}
