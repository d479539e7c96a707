package orchestration_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/workflow"
)

type triggerBundle struct {
	drv      driver.Driver
	rt       *orchestration.Runtime
	registry *prometheus.Registry
}

// setupTriggers registers a workflow triggered by PaymentReceived through its definition and a
// process triggered by CustomerCreated through Runtime.Trigger (its input mapped from the
// event). The client is not started: executions stay PENDING, so the test sees what the events
// created.
func setupTriggers(t *testing.T, drv driver.Driver) *triggerBundle {
	t.Helper()
	registry := prometheus.NewRegistry()
	client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler), MetricsRegisterer: registry})
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	_, err = workflow.Register(rt, workflow.New("settle-payment", 1).TriggeredBy("PaymentReceived", "PaymentReceived").Step("settle", noop))
	require.NoError(t, err)
	_, err = process.NewManager(rt, process.Process[greeting](greeter{typ: "welcome"}))
	require.NoError(t, err)
	require.NoError(t, rt.Trigger(orchestration.EventTrigger{EventType: "CustomerCreated", Model: process.Model, Type: "welcome",
		Input: func(ev orchestration.InboundEvent) (json.RawMessage, error) {
			var customer struct{ FullName string }
			if err := json.Unmarshal(ev.Data, &customer); err != nil || customer.FullName == "" {
				return nil, errors.New("data.FullName is required")
			}
			return json.Marshal(greeting{Name: customer.FullName})
		}}))
	return &triggerBundle{drv: drv, rt: rt, registry: registry}
}

func (b *triggerBundle) count(t *testing.T, transport, outcome string) float64 {
	t.Helper()
	return testutil.ToFloat64(mustCounter(t, b.registry).WithLabelValues(transport, outcome))
}

func mustCounter(t *testing.T, reg *prometheus.Registry) *prometheus.CounterVec {
	t.Helper()
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "commandbus_inbound_events_total",
		Help: "Inbound events by transport (http, amqp, kafka) and outcome: started, duplicate, unknown (no definition is triggered by the type; acknowledged) or malformed (dead-lettered)."},
		[]string{"transport", "outcome"})
	err := reg.Register(counter)
	var already prometheus.AlreadyRegisteredError
	require.ErrorAs(t, err, &already, "the runtime registered the metric")
	return already.ExistingCollector.(*prometheus.CounterVec)
}

func (b *triggerBundle) executions(t *testing.T, typ string) []*driver.ExecutionRow {
	t.Helper()
	rows, err := b.drv.Executor().ExecutionList(context.Background(), &driver.ExecutionListParams{Type: typ, Limit: 100})
	require.NoError(t, err)
	return rows
}

const paymentEvent = `{"specversion":"1.0","id":"evt-1","type":"PaymentReceived","source":"core-banking",
	"time":"2026-11-26T10:00:00Z","tenant":"acme","data":{"paymentId":"P-1","amount":"12.50"}}`

// eachDatabase runs fn as subtest name on a fresh database of each driver.
func eachDatabase(t *testing.T, name string, fn func(t *testing.T, drv driver.Driver)) {
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		dbtest.Each(t, fn)
	})
}

func TestEventTriggers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	eachDatabase(t, "DuplicateStartsOne", func(t *testing.T, drv driver.Driver) {
		b := setupTriggers(t, drv)
		first, err := b.rt.ReceiveEvent(ctx, orchestration.EventTransportHTTP, []byte(paymentEvent))
		require.NoError(t, err)
		require.Equal(t, orchestration.EventStarted, first.Outcome)
		require.Len(t, first.Executions, 1)
		x := first.Executions[0]
		require.Equal(t, orchestration.TriggeredExecution{Model: workflow.Model, Type: "settle-payment",
			ID: orchestration.TriggeredExecutionID("core-banking", "evt-1", workflow.Model, "settle-payment")}, x)

		again, err := b.rt.ReceiveEvent(ctx, orchestration.EventTransportHTTP, []byte(paymentEvent))
		require.NoError(t, err)
		require.Equal(t, orchestration.EventDuplicate, again.Outcome)
		require.Equal(t, first.Executions, again.Executions, "a duplicate names the executions the event started")

		rows := b.executions(t, "settle-payment")
		require.Len(t, rows, 1, "a redelivered event starts nothing new")
		row := rows[0]
		require.Equal(t, x.ID, row.ID)
		require.Equal(t, "acme", row.TenantID)
		require.JSONEq(t, `{"paymentId":"P-1","amount":"12.50"}`, string(row.State), "the event's data is the input")
		attrs, err := drv.Executor().ExecutionAttributes(ctx, row.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"event.id": "evt-1", "event.type": "PaymentReceived", "event.source": "core-banking"}, attrs)
		require.Equal(t, 1.0, b.count(t, "http", "started"))
		require.Equal(t, 1.0, b.count(t, "http", "duplicate"))

		// The same id from another source is another event.
		other, err := b.rt.HandleEvent(ctx, orchestration.EventTransportKafka, &orchestration.InboundEvent{ID: "evt-1", Type: "PaymentReceived", Source: "cards", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		require.Equal(t, orchestration.EventStarted, other.Outcome)
		require.Len(t, b.executions(t, "settle-payment"), 2)
	})

	eachDatabase(t, "ConcurrentDeliveriesStartOne", func(t *testing.T, drv driver.Driver) {
		b := setupTriggers(t, drv)
		const deliveries = 8
		outcomes := make(chan orchestration.EventOutcome, deliveries)
		var wg sync.WaitGroup
		for range deliveries {
			wg.Go(func() {
				r, err := b.rt.ReceiveEvent(ctx, orchestration.EventTransportAMQP, []byte(paymentEvent))
				if err != nil {
					t.Error(err)
					return
				}
				outcomes <- r.Outcome
			})
		}
		wg.Wait()
		close(outcomes)
		started := 0
		for o := range outcomes {
			if o == orchestration.EventStarted {
				started++
			}
		}
		require.Equal(t, 1, started, "exactly one delivery reports the start")
		require.Len(t, b.executions(t, "settle-payment"), 1)
	})

	eachDatabase(t, "LostInboxRowStillStartsOne", func(t *testing.T, drv driver.Driver) {
		// The inbox row is the fast path; the derived execution id is what keeps a start
		// single when the row is gone (inbox retention) or was never written (a crash
		// between the start and the inbox write).
		b := setupTriggers(t, drv)
		_, err := b.rt.ReceiveEvent(ctx, "", []byte(paymentEvent))
		require.NoError(t, err)
		_, err = drv.Executor().InboxDeleteBefore(ctx, time.Now().Add(time.Hour), 1000)
		require.NoError(t, err)
		_, err = b.rt.ReceiveEvent(ctx, "", []byte(paymentEvent))
		require.NoError(t, err)
		require.Len(t, b.executions(t, "settle-payment"), 1)
	})

	eachDatabase(t, "InputMappedByTheTrigger", func(t *testing.T, drv driver.Driver) {
		b := setupTriggers(t, drv)
		r, err := b.rt.ReceiveEvent(ctx, "http", []byte(`{"id":"c-9","type":"CustomerCreated","source":"crm","data":{"FullName":"Ada Lovelace"}}`))
		require.NoError(t, err)
		require.Equal(t, orchestration.EventStarted, r.Outcome)
		row, err := drv.Executor().ExecutionGet(ctx, r.Executions[0].ID)
		require.NoError(t, err)
		require.Equal(t, process.Model, row.Model)
		require.JSONEq(t, `{"Name":"Ada Lovelace"}`, string(row.State))

		_, err = b.rt.ReceiveEvent(ctx, "http", []byte(`{"id":"c-10","type":"CustomerCreated","source":"crm","data":{"Name":"x"}}`))
		require.ErrorIs(t, err, orchestration.ErrMalformedEvent, "data the trigger refuses makes the event malformed")
		var verr *commandbus.ValidationError
		require.ErrorAs(t, err, &verr)
		require.Equal(t, "data", verr.Field)
		require.Contains(t, verr.Message, "FullName is required")
		require.Len(t, b.executions(t, "welcome"), 1, "nothing started")
		seen, err := drv.Executor().InboxExists(ctx, "event:3:crm:c-10", orchestration.EventInboxHandler)
		require.NoError(t, err)
		require.False(t, seen, "a malformed event is not recorded as handled")
		require.Equal(t, 1.0, b.count(t, "http", "malformed"))

		// Without an Input, the data is the input as is; data the model refuses is malformed.
		require.NoError(t, b.rt.Trigger(orchestration.EventTrigger{EventType: "GreetingRequested", Model: process.Model, Type: "welcome"}))
		r, err = b.rt.ReceiveEvent(ctx, "http", []byte(`{"id":"g-1","type":"GreetingRequested","source":"crm","data":{"Name":"Grace"}}`))
		require.NoError(t, err)
		require.Equal(t, orchestration.EventStarted, r.Outcome)
		_, err = b.rt.ReceiveEvent(ctx, "http", []byte(`{"id":"g-2","type":"GreetingRequested","source":"crm","data":{"Nmae":"Grace"}}`))
		require.ErrorAs(t, err, &verr)
		require.Equal(t, "data", verr.Field)
		require.Contains(t, verr.Message, `refused by process "welcome"`)
		require.Len(t, b.executions(t, "welcome"), 2)
	})

	eachDatabase(t, "UnknownTypeAcknowledgedAndCounted", func(t *testing.T, drv driver.Driver) {
		b := setupTriggers(t, drv)
		for range 2 {
			r, err := b.rt.ReceiveEvent(ctx, "kafka", []byte(`{"id":"x-1","type":"InvoiceSent","source":"billing"}`))
			require.NoError(t, err, "an unknown type is no error: acknowledge it")
			require.Equal(t, orchestration.EventUnknown, r.Outcome)
			require.Empty(t, r.Executions)
		}
		require.Equal(t, 2.0, b.count(t, "kafka", "unknown"))
		require.Empty(t, b.executions(t, ""))
	})

	eachDatabase(t, "MalformedNamesEachField", func(t *testing.T, drv driver.Driver) {
		b := setupTriggers(t, drv)
		cases := map[string][]string{
			`[1,2]`:     {"body"},
			`{"id":"a"`: {"body"},
			`{"id":"a","type":"PaymentReceived","source":"s"} {}`: {"body"},
			`{}`:                              {"id", "type", "source"},
			`{"id":7,"type":"","source":"s"}`: {"id", "type"},
			`{"id":"a","type":"PaymentReceived","source":"s","time":"yesterday"}`:         {"time"},
			`{"id":"a","type":"PaymentReceived","source":"s","specversion":"0.3"}`:        {"specversion"},
			`{"id":"a","type":"PaymentReceived","source":"s","tenant":"a\u0001b"}`:        {"tenant"},
			`{"id":"a","type":"PaymentReceived","source":"s","data":{"note":"x\u0000y"}}`: {"data.note"},
		}
		for body, fields := range cases {
			_, err := b.rt.ReceiveEvent(ctx, "amqp", []byte(body))
			require.ErrorIs(t, err, orchestration.ErrMalformedEvent, body)
			var merr *orchestration.MalformedEventError
			require.ErrorAs(t, err, &merr)
			var got []string
			for _, p := range merr.Problems {
				got = append(got, p.Field)
			}
			require.Equal(t, fields, got, body)
		}
		require.Equal(t, float64(len(cases)), b.count(t, "amqp", "malformed"))
		require.Empty(t, b.executions(t, ""), "a malformed event writes nothing")
	})

	eachDatabase(t, "TriggerValidation", func(t *testing.T, drv driver.Driver) {
		b := setupTriggers(t, drv)
		err := b.rt.Trigger(orchestration.EventTrigger{Model: workflow.Model, Type: "missing"})
		var verr *commandbus.ValidationError
		require.ErrorAs(t, err, &verr)
		require.ErrorContains(t, err, "EventType: is required")
		require.ErrorContains(t, err, `no definition is registered as workflow "missing"`)
		err = b.rt.Trigger(orchestration.EventTrigger{EventType: "PaymentReceived", Model: workflow.Model, Type: "settle-payment"})
		require.ErrorContains(t, err, "already triggered")
		require.Equal(t, []orchestration.EventTrigger{
			{EventType: "PaymentReceived", Model: workflow.Model, Type: "settle-payment"},
		}, withoutInput(b.rt.EventTriggers()[1:]))
		require.Equal(t, "CustomerCreated", b.rt.EventTriggers()[0].EventType)
		require.Equal(t, []string{"CustomerCreated"}, b.rt.Describe(b.rt.Operations(process.Model, "welcome")).TriggeredBy)
		require.Equal(t, []string{"PaymentReceived"}, b.rt.Describe(b.rt.Operations(workflow.Model, "settle-payment")).TriggeredBy)
	})
}

func withoutInput(ts []orchestration.EventTrigger) []orchestration.EventTrigger {
	for i := range ts {
		ts[i].Input = nil
	}
	return ts
}
