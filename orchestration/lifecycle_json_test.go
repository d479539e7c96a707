package orchestration

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/cbtype"
)

// requireEventJSON checks that eventJSON writes what json.Marshal writes, or fails as it does.
func requireEventJSON(t *testing.T, ev *LifecycleEvent) {
	t.Helper()
	want, wantErr := json.Marshal(ev)
	got, err := eventJSON(ev, ev.ID.String(), ev.ExecutionID.String())
	if wantErr != nil {
		require.Error(t, err)
		return
	}
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

func TestEventJSONIsWhatEncodingJSONWrites(t *testing.T) {
	at := time.Date(2026, 3, 29, 1, 30, 0, 123456789, time.FixedZone("CET", 3600))
	full := LifecycleEvent{ID: uuid.New(), Type: cbtype.EventStepFailed, ExecutionID: uuid.New(), Model: "saga", ExecutionType: "transfer",
		TenantID: "acme", BusinessKey: "pay-42", Position: 1<<40 + 3, Status: cbtype.ExecutionCompensating, StepID: "debit",
		Attempt: 3, ErrorCode: "INSUFFICIENT_FUNDS", ErrorMessage: "balance 10 < 20", Actor: "ops@bank", Reason: "retry",
		Success: true, LatencyMs: -5, RelatedID: uuid.New(), Payload: json.RawMessage(`{"amount":"20.00","tags":["a","b"]}`), At: at}
	events := map[string]LifecycleEvent{
		"full":    full,
		"minimal": {ID: uuid.New(), Type: cbtype.EventExecutionStarted, ExecutionID: uuid.New(), At: time.Unix(0, 0).UTC()},
	}
	with := func(name string, change func(ev *LifecycleEvent)) {
		ev := full
		change(&ev)
		events[name] = ev
	}
	with("escapes in strings", func(ev *LifecycleEvent) {
		ev.ErrorMessage, ev.StepID, ev.Model = "bad \"quote\" \\ <b>&</b>\n\t\x01", "é日本🙂", "bad \xff"
	})
	with("payload with spaces", func(ev *LifecycleEvent) { ev.Payload = json.RawMessage(" {\n \"a\" : [ 1 , \"x y\" ] }\n") })
	with("payload with HTML", func(ev *LifecycleEvent) { ev.Payload = json.RawMessage(`{"html":"<b>&</b>"}`) })
	with("payload with U+2028", func(ev *LifecycleEvent) { ev.Payload = json.RawMessage("\"a\u2028b\u2029\"") })
	with("payload null", func(ev *LifecycleEvent) { ev.Payload = json.RawMessage(`null`) })
	with("empty payload", func(ev *LifecycleEvent) { ev.Payload = json.RawMessage{} })
	with("invalid payload", func(ev *LifecycleEvent) { ev.Payload = json.RawMessage(`{"a":`) })
	with("year 10000", func(ev *LifecycleEvent) { ev.At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) })
	with("zero time", func(ev *LifecycleEvent) { ev.At = time.Time{} })
	with("zero ids", func(ev *LifecycleEvent) { ev.ID, ev.ExecutionID, ev.RelatedID = uuid.Nil, uuid.Nil, uuid.Nil })
	for name, ev := range events {
		t.Run(name, func(t *testing.T) { requireEventJSON(t, &ev) })
	}
}

func FuzzEventJSON(f *testing.F) {
	f.Add("workflow", "step-1", "boom <&>", []byte(`{"a": [1, 2]}`), int64(17), 2, int64(1800000000123456789))
	f.Add("saga", "é\u2028", "\x00", []byte("\"x\u2029\""), int64(-1), 0, int64(0))
	f.Fuzz(func(t *testing.T, model, step, message string, payload []byte, position int64, attempt int, at int64) {
		ev := LifecycleEvent{ID: uuid.New(), Type: cbtype.EventStepFailed, ExecutionID: uuid.New(), Model: model, ExecutionType: model,
			Position: position, Status: cbtype.ExecutionExecuting, StepID: step, Attempt: attempt, ErrorMessage: message,
			Payload: payload, At: time.Unix(0, at).In(time.FixedZone("", int(position%50000)))}
		requireEventJSON(t, &ev)
	})
}
