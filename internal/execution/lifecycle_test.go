package execution

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
)

func eventTypes(events []*cbtype.LifecycleEvent) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = string(ev.Type)
	}
	return out
}

// The derivation is generic over log entries: a model's own entries (a TCC phase, a saga
// specific) become events without the core knowing them.
func TestEntryEventTypes(t *testing.T) {
	t.Parallel()
	started := time.Unix(100, 0)
	for _, tc := range []struct {
		entry driver.ExecutionLogEntry
		want  []cbtype.LifecycleEventType
	}{
		{driver.ExecutionLogEntry{EntryType: "STEP", StepStatus: "COMPLETED", StartedAt: &started}, []cbtype.LifecycleEventType{"STEP_STARTED", "STEP_SUCCEEDED"}},
		{driver.ExecutionLogEntry{EntryType: "STEP", StepStatus: "COMPLETED"}, []cbtype.LifecycleEventType{"STEP_SUCCEEDED"}},
		{driver.ExecutionLogEntry{EntryType: "STEP", StepStatus: "FAILED", StartedAt: &started}, []cbtype.LifecycleEventType{"STEP_STARTED", "STEP_FAILED"}},
		{driver.ExecutionLogEntry{EntryType: "STEP", StepStatus: "WAITING_RETRY"}, []cbtype.LifecycleEventType{"STEP_RETRY_SCHEDULED"}},
		{driver.ExecutionLogEntry{EntryType: "STEP", StepStatus: "SKIPPED"}, []cbtype.LifecycleEventType{"STEP_SKIPPED"}},
		{driver.ExecutionLogEntry{EntryType: "COMMAND", StepStatus: "SENT"}, []cbtype.LifecycleEventType{"STEP_STARTED"}},
		{driver.ExecutionLogEntry{EntryType: "COMPENSATION", StepStatus: "COMPENSATION_SUCCESS"}, []cbtype.LifecycleEventType{"STEP_COMPENSATED"}},
		{driver.ExecutionLogEntry{EntryType: "COMPENSATION", StepStatus: "FAILED"}, []cbtype.LifecycleEventType{"STEP_COMPENSATION_FAILED"}},
		{driver.ExecutionLogEntry{EntryType: "LIFECYCLE", StepStatus: "COMPENSATING"}, []cbtype.LifecycleEventType{"COMPENSATION_STARTED"}},
		{driver.ExecutionLogEntry{EntryType: "LIFECYCLE", Name: "created", StepStatus: "PROCESS_CREATED"}, nil},
		{driver.ExecutionLogEntry{EntryType: "WAIT", StepStatus: "TIMED_OUT"}, []cbtype.LifecycleEventType{"WAIT_TIMED_OUT"}},
		{driver.ExecutionLogEntry{EntryType: "TSQ_RETRY", Actor: "ops"}, []cbtype.LifecycleEventType{"OPERATOR_ACTION"}},
		{driver.ExecutionLogEntry{EntryType: "PHASE", Name: "TRY", StepStatus: "STARTED"}, []cbtype.LifecycleEventType{"PHASE_STARTED"}},
		{driver.ExecutionLogEntry{EntryType: "PARTICIPANT", Name: "debit", StepStatus: "CONFIRMED"}, []cbtype.LifecycleEventType{"PARTICIPANT_CONFIRMED"}},
	} {
		require.Equal(t, tc.want, entryEventTypes(&tc.entry), "%s %s", tc.entry.EntryType, tc.entry.StepStatus)
	}
}

func TestDeriveLifecycle(t *testing.T) {
	t.Parallel()
	id, parent, child := uuid.New(), uuid.New(), uuid.New()
	now := time.Unix(1_000, 0)
	prev := &driver.ExecutionRow{ID: id, Model: "workflow", Type: "t", Status: driver.ExecutionExecuting, ParentID: parent, CreatedAt: now.Add(-time.Second)}
	after := *prev
	after.Status = driver.ExecutionCompleted
	started := now.Add(-10 * time.Millisecond)
	cp := &driver.ExecutionCheckpoint{ID: id, Fence: 3, Status: driver.ExecutionCompleted,
		Log:            []*driver.ExecutionLogEntry{{Seq: 2, EntryType: "STEP", Name: "a", StepStatus: "COMPLETED", StartedAt: &started, Response: []byte(`{"ok":true}`)}},
		ConsumeSignals: []string{"sig-1"}, FireTimers: []string{"t-1"},
		Children: []*driver.ExecutionInsertParams{{ID: child, Type: "sub"}}}
	events := deriveLifecycle(prev, &after, cp, 1, now)
	require.Equal(t, []string{"STEP_STARTED", "STEP_SUCCEEDED", "SIGNAL_DELIVERED", "TIMER_FIRED",
		"CHILD_STARTED", "EXECUTION_COMPLETED", "CHILD_COMPLETED"}, eventTypes(events))
	for i := 1; i < len(events)-1; i++ {
		require.Greater(t, events[i].Position, events[i-1].Position, "positions grow within the execution")
	}
	require.Equal(t, started, events[0].At, "a step's start is when it started")
	require.Equal(t, int64(10), events[1].LatencyMs)
	require.JSONEq(t, `{"ok":true}`, string(events[1].Payload))
	require.Equal(t, child, events[4].RelatedID)
	require.True(t, events[5].Success)
	require.Equal(t, int64(1000), events[5].LatencyMs, "the execution's duration")
	require.Equal(t, parent, events[6].ExecutionID, "a child's end is its parent's event")

	again := deriveLifecycle(prev, &after, cp, 1, now)
	for i := range events {
		require.Equal(t, events[i].ID, again[i].ID, "the same commit yields the same ids")
	}
	cp.Fence = 4
	require.NotEqual(t, events[0].ID, deriveLifecycle(prev, &after, cp, 1, now)[0].ID, "another commit, other ids")

	toTSQ := &driver.ExecutionCheckpoint{ID: id, Fence: 5, Status: driver.ExecutionWaitingForTSQ, ErrorCode: "BAD_IBAN"}
	parked := after
	parked.Status, parked.ErrorCode, parked.Step = driver.ExecutionWaitingForTSQ, "BAD_IBAN", "b"
	got := deriveLifecycle(prev, &parked, toTSQ, 7, now)
	require.Equal(t, []string{"DEAD_LETTERED"}, eventTypes(got))
	require.Equal(t, "BAD_IBAN", got[0].ErrorCode)
	require.Equal(t, "b", got[0].StepID)
}

// An event's id must not change from one version to the next: a commit written again after an
// upgrade yields the ids its consumers have already seen, and they deduplicate by them.
func TestEventIDsAreStable(t *testing.T) {
	execution := uuid.MustParse("5f1d6c2e-6f0b-4f57-9b1e-2c8e2f9f0c11")
	require.Equal(t, "4154bae4-99df-5251-aa42-057ed152d009", eventID(execution, 7, 16*42+3, cbtype.EventStepSucceeded, "debit").String())
	require.Equal(t, "3cbcb86e-8eb1-5080-8fd7-85899487c824", eventID(execution, 0, -1, cbtype.EventExecutionStarted, "").String())
}
