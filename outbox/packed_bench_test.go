package outbox

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
)

// BenchmarkUnpack measures what the relay spends turning packed rows back into messages: 500
// rows of three lifecycle events each (a claim's worth in a burst of workflows), as the
// orchestration runtime writes them.
func BenchmarkUnpack(b *testing.B) {
	var rows []*driver.OutboxRow
	for i := range 500 {
		exec := uuid.New()
		var msgs []*driver.OutboxInsertParams
		for j, typ := range []cbtype.LifecycleEventType{cbtype.EventStepStarted, cbtype.EventStepSucceeded, cbtype.EventStepStarted} {
			ev := cbtype.LifecycleEvent{ID: uuid.New(), Type: typ, ExecutionID: exec, Model: "workflow", ExecutionType: "bench-dag",
				Position: int64(16*i + j), Status: cbtype.ExecutionExecuting, StepID: fmt.Sprintf("step-%d", j), Attempt: 1,
				Payload: json.RawMessage(`{"result":"ok","n":42}`), At: time.Now()}
			payload, err := json.Marshal(ev)
			if err != nil {
				b.Fatal(err)
			}
			id := ev.ID.String()
			msgs = append(msgs, &driver.OutboxInsertParams{Category: driver.OutboxCategoryEvent, Transport: TransportKafka,
				Topic: "events.Orchestrations", Key: exec.String(), Type: string(typ), MessageID: id, Payload: payload,
				Headers: map[string]string{HeaderMessageID: id, HeaderType: string(typ), "executionId": exec.String(),
					"model": "workflow", "executionType": "bench-dag"}})
		}
		packed, err := Pack(msgs)
		if err != nil {
			b.Fatal(err)
		}
		p := packed[0]
		rows = append(rows, &driver.OutboxRow{ID: int64(i), Category: p.Category, Transport: p.Transport, Topic: p.Topic,
			Key: p.Key, Type: p.Type, MessageID: p.MessageID, Payload: p.Payload, Headers: p.Headers})
	}
	b.ReportAllocs()
	for b.Loop() {
		msgs, _, bad := unpack(rows)
		if len(msgs) != 1500 || bad != nil {
			b.Fatalf("%d messages, %v", len(msgs), bad)
		}
	}
}
