package orchestration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/outbox"
)

// EventInboxHandler is the inbox handler name under which inbound events are recorded: the inbox
// row (message id "event:<len(source)>:<source>:<id>") says the event was handled.
const EventInboxHandler = "orchestration.events"

// The transports an inbound event arrives by, as metrics and logs name them.
const (
	EventTransportHTTP  = "http"
	EventTransportAMQP  = "amqp"
	EventTransportKafka = "kafka"
)

// EventTrigger starts an execution of a registered definition, (Model, Type), for every inbound
// event of type EventType (see Runtime.Trigger).
type EventTrigger struct {
	// EventType is the inbound event type that starts the definition ("PaymentReceived").
	// Required.
	EventType string
	// Model and Type name a registered definition whose operations can start executions from
	// JSON (an orchestration.Starter). Required.
	Model string
	Type  string
	// Input maps the event to the execution's input. Default: the event's data. An error makes
	// the event malformed (dead-lettered with the error as its reason); nothing is started.
	Input func(InboundEvent) (json.RawMessage, error)
}

// Triggered is implemented by operations whose definition names the event types that start it
// (a workflow's TriggeredBy). The runtime registers a trigger per type when the definition
// registers, with the event's data as input.
type Triggered interface {
	TriggerEventTypes() []string
}

// EventOutcome is what an inbound event did.
type EventOutcome string

// The outcomes of an inbound event; malformed events end in an error matching ErrMalformedEvent.
const (
	// EventStarted: the event started its executions.
	EventStarted EventOutcome = "started"
	// EventDuplicate: the event was handled before; nothing new started.
	EventDuplicate EventOutcome = "duplicate"
	// EventUnknown: no definition is triggered by the event's type; it is acknowledged and
	// counted, and nothing starts.
	EventUnknown EventOutcome = "unknown"
	// eventMalformed counts malformed events in the metric.
	eventMalformed EventOutcome = "malformed"
)

// TriggeredExecution is an execution an inbound event started (or started before, for a
// duplicate).
type TriggeredExecution struct {
	Model string    `json:"model"`
	Type  string    `json:"type"`
	ID    uuid.UUID `json:"id"`
}

// EventReceipt is the answer to an inbound event.
type EventReceipt struct {
	EventID    string               `json:"eventId"`
	EventType  string               `json:"eventType"`
	Source     string               `json:"source"`
	Outcome    EventOutcome         `json:"outcome"`
	Executions []TriggeredExecution `json:"executions"`
}

// triggerNamespace derives execution ids from events (UUID v5).
var triggerNamespace = uuid.MustParse("6f1c9d2e-8a47-4b52-9d0e-3c5a7e1b2f60")

// TriggeredExecutionID is the id of the execution of (model, typ) that the event (source, id)
// starts. It is derived, never random, so that every delivery of the event names the same
// execution: the start is idempotent even when two deliveries race past the inbox.
func TriggeredExecutionID(source, eventID, model, typ string) uuid.UUID {
	key := strconv.Itoa(len(source)) + ":" + source + ":" + strconv.Itoa(len(eventID)) + ":" + eventID + ":" +
		strconv.Itoa(len(model)) + ":" + model + ":" + typ
	return uuid.NewSHA1(triggerNamespace, []byte(key))
}

// eventTriggers is the runtime's registry of triggers by event type, with the inbound event
// metric.
type eventTriggers struct {
	once    sync.Once
	inbox   *outbox.Inbox
	counter *prometheus.CounterVec
	byType  map[string][]EventTrigger
}

func (rt *Runtime) eventRegistry() *eventTriggers {
	rt.events.once.Do(func() {
		rt.events.inbox = outbox.NewInbox(plumbing.MessagingMetrics(rt.client))
		counter := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_inbound_events_total",
			Help: "Inbound events by transport (http, amqp, kafka) and outcome: started, duplicate, unknown (no definition is triggered by the type; acknowledged) or malformed (dead-lettered).",
		}, []string{"transport", "outcome"})
		if reg := rt.client.Config().MetricsRegisterer; reg != nil {
			if err := reg.Register(counter); err != nil {
				var already prometheus.AlreadyRegisteredError
				if errors.As(err, &already) {
					if existing, ok := already.ExistingCollector.(*prometheus.CounterVec); ok {
						counter = existing
					}
				} else {
					rt.client.Logger().Warn("registering the inbound event metric failed", "error", err)
				}
			}
		}
		rt.events.counter = counter
		rt.events.byType = map[string][]EventTrigger{}
	})
	return &rt.events
}

// Trigger registers t: every inbound event of type t.EventType starts an execution of (t.Model,
// t.Type). Several definitions may be triggered by one event type; each starts its own
// execution. Register the definition first.
func (rt *Runtime) Trigger(t EventTrigger) error {
	var problems []error
	if msg := checkName(t.EventType); msg != "" {
		problems = append(problems, &commandbus.ValidationError{Field: "EventType", Message: msg})
	}
	ops := rt.Operations(t.Model, t.Type)
	switch {
	case ops == nil:
		problems = append(problems, &commandbus.ValidationError{Field: "Type", Message: fmt.Sprintf("no definition is registered as %s %q; register it first", t.Model, t.Type)})
	default:
		if _, ok := ops.(Starter); !ok {
			problems = append(problems, &commandbus.ValidationError{Field: "Type", Message: fmt.Sprintf("%s %q cannot be started from JSON", t.Model, t.Type)})
		}
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("orchestration: trigger: %w", err)
	}
	reg := rt.eventRegistry()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, other := range reg.byType[t.EventType] {
		if other.Model == t.Model && other.Type == t.Type {
			return fmt.Errorf("orchestration: %s %q is already triggered by event type %q", t.Model, t.Type, t.EventType)
		}
	}
	reg.byType[t.EventType] = append(reg.byType[t.EventType], t)
	return nil
}

func checkName(s string) string {
	if s == "" {
		return "is required"
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return "must be printable text"
		}
	}
	if len(s) > 200 {
		return "is longer than 200 bytes"
	}
	return ""
}

// EventTriggers returns every registered trigger, ordered by event type, then model and type.
func (rt *Runtime) EventTriggers() []EventTrigger {
	reg := rt.eventRegistry()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []EventTrigger
	for _, ts := range reg.byType {
		out = append(out, ts...)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.EventType != b.EventType {
			return a.EventType < b.EventType
		}
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		return a.Type < b.Type
	})
	return out
}

// Describe returns the definition of ops (see Describe) with the event types that trigger it.
func (rt *Runtime) Describe(ops Operations) Definition {
	def := Describe(ops)
	for _, t := range rt.EventTriggers() {
		if t.Model == def.Model && t.Type == def.Type {
			def.TriggeredBy = append(def.TriggeredBy, t.EventType)
		}
	}
	return def
}

func (rt *Runtime) triggersFor(eventType string) []EventTrigger {
	reg := rt.eventRegistry()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]EventTrigger(nil), reg.byType[eventType]...)
}

// declaredTriggers returns the event types a definition names (Triggered), checked.
func declaredTriggers(ops Operations) ([]string, error) {
	declared, ok := ops.(Triggered)
	if !ok {
		return nil, nil
	}
	types := declared.TriggerEventTypes()
	for _, eventType := range types {
		if msg := checkName(eventType); msg != "" {
			return nil, fmt.Errorf("orchestration: %s %q: trigger event type %q %s", ops.Model(), ops.Type(), eventType, msg)
		}
	}
	if _, ok := ops.(Starter); !ok && len(types) > 0 {
		return nil, fmt.Errorf("orchestration: %s %q names trigger events but cannot be started from JSON", ops.Model(), ops.Type())
	}
	return types, nil
}

// addDeclaredTriggers registers a trigger per event type a definition names, with the event's
// data as input. The caller holds mu.
func (rt *Runtime) addDeclaredTriggers(ops Operations, types []string) {
	reg := rt.eventRegistry()
	for _, eventType := range types {
		if !slices.ContainsFunc(reg.byType[eventType], func(t EventTrigger) bool { return t.Model == ops.Model() && t.Type == ops.Type() }) {
			reg.byType[eventType] = append(reg.byType[eventType], EventTrigger{EventType: eventType, Model: ops.Model(), Type: ops.Type()})
		}
	}
}

// ReceiveEvent decodes an event envelope (see InboundEvent) that arrived by transport and hands
// it to HandleEvent. A malformed envelope is counted and gives an error matching
// ErrMalformedEvent that names each bad field.
func (rt *Runtime) ReceiveEvent(ctx context.Context, transport string, body []byte) (*EventReceipt, error) {
	ev, err := ParseInboundEvent(body)
	if err != nil {
		rt.countEvent(transport, eventMalformed)
		rt.client.Logger().Warn("inbound event is malformed; dead-lettered", "transport", transport, "error", err)
		return nil, err
	}
	return rt.HandleEvent(ctx, transport, ev)
}

// HandleEvent starts the executions the event triggers, once per event: the event is
// deduplicated by (source, id) through the inbox, and each execution's id derives from the event
// (TriggeredExecutionID), so a redelivery, even one racing the first delivery, starts nothing
// new. It answers:
//   - EventStarted with the executions started;
//   - EventDuplicate with the same executions, when the event was handled before;
//   - EventUnknown, when no definition is triggered by the event's type (counted, nothing
//     started: acknowledge the event, never retry it);
//   - an error matching ErrMalformedEvent when the event or its data is refused (dead-letter
//     it with the error as reason; nothing was started);
//   - any other error when the database failed: deliver the event again later.
//
// Executions start PENDING for the runtime's pollers, with the event's tenant and the search
// attributes event.id, event.type and event.source.
func (rt *Runtime) HandleEvent(ctx context.Context, transport string, ev *InboundEvent) (*EventReceipt, error) {
	logger := rt.client.Logger().With("event_id", ev.ID, "event_type", ev.Type, "event_source", ev.Source, "transport", transport)
	if err := ev.validate(); err != nil {
		rt.countEvent(transport, eventMalformed)
		logger.Warn("inbound event is malformed; dead-lettered", "error", err)
		return nil, err
	}
	receipt := &EventReceipt{EventID: ev.ID, EventType: ev.Type, Source: ev.Source, Executions: []TriggeredExecution{}}
	triggers := rt.triggersFor(ev.Type)
	if len(triggers) == 0 {
		receipt.Outcome = EventUnknown
		rt.countEvent(transport, EventUnknown)
		logger.Warn("no definition is triggered by the inbound event's type; acknowledged, nothing started")
		return receipt, nil
	}
	for _, t := range triggers {
		receipt.Executions = append(receipt.Executions, TriggeredExecution{Model: t.Model, Type: t.Type,
			ID: TriggeredExecutionID(ev.Source, ev.ID, t.Model, t.Type)})
	}
	reg := rt.eventRegistry()
	exec := rt.client.Driver().Executor()
	key := ev.dedupeKey()
	seen, err := reg.inbox.Seen(ctx, exec, key, EventInboxHandler)
	if err != nil {
		return nil, fmt.Errorf("checking the inbox for event %s: %w", ev.ID, err)
	}
	if seen {
		receipt.Outcome = EventDuplicate
		rt.countEvent(transport, EventDuplicate)
		logger.Info("inbound event was handled before; nothing new started")
		return receipt, nil
	}
	// Every input first, so that an event one trigger refuses starts nothing.
	inputs := make([]json.RawMessage, len(triggers))
	for i, t := range triggers {
		inputs[i] = ev.Data
		if t.Input != nil {
			in, err := t.Input(*ev)
			if err != nil {
				rt.countEvent(transport, eventMalformed)
				err = malformed(ev.ID, &commandbus.ValidationError{Field: "data", Message: fmt.Sprintf("refused by the trigger of %s %q: %v", t.Model, t.Type, err)})
				logger.Warn("inbound event is malformed; dead-lettered", "error", err)
				return nil, err
			}
			inputs[i] = in
		}
	}
	attributes := map[string]string{"event.id": ev.ID, "event.type": ev.Type, "event.source": ev.Source}
	for i, t := range triggers {
		starter, _ := rt.Operations(t.Model, t.Type).(Starter)
		if starter == nil {
			return nil, fmt.Errorf("event %s: %s %q is not registered on this instance", ev.ID, t.Model, t.Type)
		}
		id := receipt.Executions[i].ID
		_, err := starter.StartJSON(ctx, StartRequest{ID: id, Input: inputs[i], TenantID: ev.Tenant, Attributes: attributes})
		var verr *commandbus.ValidationError
		if errors.As(err, &verr) {
			rt.countEvent(transport, eventMalformed)
			field := verr.Field
			if field == "input" {
				field = "data"
			}
			err = malformed(ev.ID, &commandbus.ValidationError{Field: field, Message: fmt.Sprintf("refused by %s %q: %s", t.Model, t.Type, verr.Message)})
			logger.Warn("inbound event is malformed; dead-lettered", "error", err)
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("starting %s %q for event %s: %w", t.Model, t.Type, ev.ID, err)
		}
	}
	first, err := reg.inbox.Record(ctx, exec, key, EventInboxHandler)
	if err != nil {
		// The executions exist; a redelivery finds them by their derived ids and starts nothing.
		return nil, fmt.Errorf("recording event %s in the inbox: %w", ev.ID, err)
	}
	if !first {
		receipt.Outcome = EventDuplicate
		rt.countEvent(transport, EventDuplicate)
		logger.Info("inbound event was handled concurrently; nothing new started")
		return receipt, nil
	}
	receipt.Outcome = EventStarted
	rt.countEvent(transport, EventStarted)
	for _, x := range receipt.Executions {
		logger.Info("inbound event started an execution", "execution_id", x.ID, "model", x.Model, "type", x.Type)
	}
	return receipt, nil
}

func (rt *Runtime) countEvent(transport string, outcome EventOutcome) {
	if transport == "" {
		transport = "library"
	}
	rt.eventRegistry().counter.WithLabelValues(transport, string(outcome)).Inc()
}
