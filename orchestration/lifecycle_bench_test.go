package orchestration

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/outbox"
)

// BenchmarkLifecycleOutboxMessages measures what writing lifecycle events to the outbox costs the
// checkpoints, before the database: the events of 100 executions' checkpoints (a step that
// succeeded and the next one started, three events each) encoded and packed into one row per
// execution, as for a Kafka sink. Run: go test -run '^$' -bench LifecycleOutboxMessages ./orchestration/
func BenchmarkLifecycleOutboxMessages(b *testing.B) {
	l := &lifecycle{sink: &EventSink{Transport: outbox.TransportKafka, Topic: DefaultEventTopic}}
	at := time.Date(2026, 11, 27, 8, 0, 0, 123456789, time.UTC)
	var checkpoints [][]*cbtype.LifecycleEvent
	for i := range 100 {
		exec := uuid.New()
		var events []*cbtype.LifecycleEvent
		for j, typ := range []cbtype.LifecycleEventType{cbtype.EventStepSucceeded, cbtype.EventStepStarted, cbtype.EventStepStarted} {
			events = append(events, &cbtype.LifecycleEvent{ID: uuid.New(), Type: typ, ExecutionID: exec, Model: "workflow",
				ExecutionType: "bench-dag", Position: int64(16*i + j), Status: cbtype.ExecutionExecuting,
				StepID: fmt.Sprintf("step-%d", j), Attempt: 1, LatencyMs: 3, Payload: json.RawMessage(`{"result":"ok","n":42}`), At: at})
		}
		checkpoints = append(checkpoints, events)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, events := range checkpoints {
			if msgs := l.outboxMessages(nil, events); len(msgs) != 1 {
				b.Fatalf("%d rows, want one packed row", len(msgs))
			}
		}
	}
}
