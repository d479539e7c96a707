package orchestration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/outbox"
)

// LifecycleEvent is one thing that happened to an execution (see cbtype.LifecycleEvent).
type LifecycleEvent = cbtype.LifecycleEvent

// LifecycleEventType names what happened (see the cbtype.Event* constants).
type LifecycleEventType = cbtype.LifecycleEventType

// DefaultEventTopic is the topic lifecycle events are published to by default.
const DefaultEventTopic = "events.Orchestrations"

// The outbox transport and topic of the events in-process listeners and callbacks receive.
const (
	TransportInProcess = "inprocess"
	topicLifecycle     = "lifecycle"
)

// EventSink says where durable lifecycle events are published. Every event is written to the
// outbox in the transaction of the checkpoint that caused it, keyed by its execution (the Kafka
// record key; per execution the events are published in order), and an outbox relay publishes it.
// Kafka, AMQP and AMQP 1.0 are published by the relay of the brokered transports (package cli
// wires it); webhooks by the runtime's own relay (Config.Webhooks).
type EventSink struct {
	// Transport is outbox.TransportKafka, TransportAMQP, TransportAMQP10 or TransportWebhook.
	// Required.
	Transport string
	// Topic is the Kafka topic, the AMQP queue (or exchange) or the webhook endpoint's name.
	// Default: DefaultEventTopic.
	Topic string
	// Exchange (TransportAMQP only) publishes to the durable topic exchange named Topic, with
	// the event type as routing key (EXECUTION_COMPLETED, ...), instead of to the queue of that
	// name: bind queues to it to fan the events out.
	Exchange bool
}

// LifecycleListener receives lifecycle events in this process, after their commit. See
// Runtime.OnLifecycle.
type LifecycleListener func(ctx context.Context, ev LifecycleEvent) error

// Callback is one lifecycle callback of a definition. It runs either in this process (Func) or
// as a webhook (Endpoint): the event is POSTed, signed, to the endpoint of Config.Webhooks of
// that name, through the outbox, with retries and a dead letter (FAILED, resendable) after the
// last attempt.
type Callback struct {
	// Name identifies the callback in logs. Default: its kind and position.
	Name string
	// Func runs in this process after the commit (at least once, see Runtime.OnLifecycle).
	Func func(ctx context.Context, ev LifecycleEvent) error
	// Endpoint names the webhook endpoint; exactly one of Func and Endpoint is set.
	Endpoint string
	// Priority orders the callbacks of one event: lower runs first. Default 0.
	Priority int
	// Async runs Func on a goroutine of its own, so a slow callback delays no other; its
	// outcome is only logged.
	Async bool
	// StepIDs restricts OnError to failures of these steps and OnStepComplete to these steps.
	// Empty: every step.
	StepIDs []string
	// ErrorCodes restricts OnError to these error codes (the typed error's code, as the
	// troubleshooting queue shows it). Empty: every error.
	ErrorCodes []string
	// SuppressError (OnError, Func, not Async): when Func returns nil for an execution parked in
	// the troubleshooting queue, the runtime completes the execution (an operator action by
	// "callback"), turning the failure into a success.
	SuppressError bool
}

// Callbacks are the lifecycle callbacks of one definition.
type Callbacks struct {
	// OnComplete runs when an execution completes successfully.
	OnComplete []Callback
	// OnError runs when an execution is parked in the troubleshooting queue or ends failed,
	// compensated or cancelled.
	OnError []Callback
	// OnStepComplete runs when a step succeeds.
	OnStepComplete []Callback
}

type callbackKind string

const (
	onComplete     callbackKind = "OnComplete"
	onError        callbackKind = "OnError"
	onStepComplete callbackKind = "OnStepComplete"
)

type registeredCallback struct {
	Callback
	kind callbackKind
	seq  int // registration order, after priority
}

// lifecycle is the runtime's lifecycle event wiring.
type lifecycle struct {
	rt *Runtime

	mu        sync.RWMutex
	sink      *EventSink
	webhooks  *outbox.WebhookConfig
	listeners []LifecycleListener
	callbacks map[Key][]*registeredCallback
	relay     *outbox.Relay
}

// OnLifecycle adds a listener of every lifecycle event of every execution. Call it before the
// client starts. Events reach the listeners through the outbox: they are written in the
// checkpoint's transaction and delivered after the commit, per execution in order, at least once
// (an event is delivered again if the process dies before its delivery is recorded; dedupe by
// LifecycleEvent.ID). With several instances, each event is delivered on one of them, the one
// whose relay claims it. Listeners are isolated: an error or a panic is logged with the
// execution's and the event's ids and harms neither the execution nor the other listeners, and
// the event is not retried for it.
func (rt *Runtime) OnLifecycle(fn LifecycleListener) error {
	if fn == nil {
		return errors.New("orchestration: OnLifecycle needs a listener")
	}
	if rt.client.Started() {
		return errors.New("orchestration: add lifecycle listeners before starting the client")
	}
	rt.lifecycle.mu.Lock()
	rt.lifecycle.listeners = append(rt.lifecycle.listeners, fn)
	rt.lifecycle.mu.Unlock()
	rt.lifecycle.configure()
	return nil
}

// AddCallbacks adds lifecycle callbacks to the executions of (model, typ). Call it before the
// client starts; the definition need not be registered yet. Invalid callbacks are refused with an
// error naming the field, and none of cbs is added.
func (rt *Runtime) AddCallbacks(model, typ string, cbs Callbacks) error {
	if rt.client.Started() {
		return errors.New("orchestration: add callbacks before starting the client")
	}
	if model == "" || typ == "" {
		return &commandbus.ValidationError{Field: "model", Message: "callbacks need a model and an execution type"}
	}
	l := rt.lifecycle
	l.mu.Lock()
	var errs []error
	var add []*registeredCallback
	n := len(l.callbacks[Key{model, typ}])
	for _, group := range []struct {
		kind callbackKind
		list []Callback
	}{{onComplete, cbs.OnComplete}, {onError, cbs.OnError}, {onStepComplete, cbs.OnStepComplete}} {
		for i, cb := range group.list {
			field := fmt.Sprintf("Callbacks.%s[%d]", group.kind, i)
			if cb.Name == "" {
				cb.Name = fmt.Sprintf("%s[%d]", group.kind, i)
			}
			if (cb.Func == nil) == (cb.Endpoint == "") {
				errs = append(errs, &commandbus.ValidationError{Field: field + ".Func", Message: "set exactly one of Func and Endpoint"})
			}
			if cb.Endpoint != "" {
				if _, ok := l.endpoints()[cb.Endpoint]; !ok {
					errs = append(errs, &commandbus.ValidationError{Field: field + ".Endpoint", Message: fmt.Sprintf("no webhook endpoint %q in orchestration.Config.Webhooks", cb.Endpoint)})
				}
			}
			if len(cb.ErrorCodes) > 0 && group.kind != onError {
				errs = append(errs, &commandbus.ValidationError{Field: field + ".ErrorCodes", Message: "only OnError callbacks filter by error code"})
			}
			if len(cb.StepIDs) > 0 && group.kind == onComplete {
				errs = append(errs, &commandbus.ValidationError{Field: field + ".StepIDs", Message: "OnComplete callbacks do not filter by step"})
			}
			if cb.SuppressError && (group.kind != onError || cb.Func == nil || cb.Async) {
				errs = append(errs, &commandbus.ValidationError{Field: field + ".SuppressError", Message: "only a synchronous OnError Func can suppress the error"})
			}
			add = append(add, &registeredCallback{Callback: cb, kind: group.kind, seq: n})
			n++
		}
	}
	if err := errors.Join(errs...); err != nil {
		l.mu.Unlock()
		return err
	}
	if l.callbacks == nil {
		l.callbacks = map[Key][]*registeredCallback{}
	}
	k := Key{Model: model, Type: typ}
	l.callbacks[k] = append(l.callbacks[k], add...)
	sort.SliceStable(l.callbacks[k], func(i, j int) bool { return l.callbacks[k][i].Priority < l.callbacks[k][j].Priority })
	l.mu.Unlock()
	l.configure()
	return nil
}

// endpoints returns the configured webhook endpoints. The caller holds mu.
func (l *lifecycle) endpoints() map[string]outbox.WebhookEndpoint {
	if l.webhooks == nil {
		return nil
	}
	return l.webhooks.Endpoints
}

// configure turns the engine's event derivation on when anything consumes the events.
func (l *lifecycle) configure() {
	l.mu.RLock()
	on := l.sink != nil || len(l.listeners) > 0 || len(l.callbacks) > 0
	l.mu.RUnlock()
	if on {
		l.rt.engine.SetLifecycle(l.outboxMessages, false)
	} else {
		l.rt.engine.SetLifecycle(nil, false)
	}
}

// matches reports whether cb wants ev.
func (cb *registeredCallback) matches(ev *LifecycleEvent) bool {
	switch cb.kind {
	case onComplete:
		return ev.Type == cbtype.EventExecutionCompleted && ev.Success
	case onStepComplete:
		return ev.Type == cbtype.EventStepSucceeded && (len(cb.StepIDs) == 0 || slices.Contains(cb.StepIDs, ev.StepID))
	case onError:
		failed := ev.Type == cbtype.EventDeadLettered || (ev.Type == cbtype.EventExecutionCompleted && !ev.Success)
		return failed && (len(cb.StepIDs) == 0 || slices.Contains(cb.StepIDs, ev.StepID)) &&
			(len(cb.ErrorCodes) == 0 || slices.Contains(cb.ErrorCodes, ev.ErrorCode))
	}
	return false
}

// outboxMessages are the outbox messages of one commit's events: the sink's, the in-process
// listeners' and callbacks', and the webhook callbacks'. Each destination orders by its own key,
// so a failing webhook never holds the sink back. The events of one key are packed into one row
// (outbox.Pack).
func (l *lifecycle) outboxMessages(_ *driver.ExecutionRow, events []*cbtype.LifecycleEvent) []*driver.OutboxInsertParams {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []*driver.OutboxInsertParams
	for _, ev := range events {
		id, exec := ev.ID.String(), ev.ExecutionID.String()
		payload, err := eventJSON(ev, id, exec)
		if err != nil {
			continue // a LifecycleEvent always marshals
		}
		msg := func(transport, topic, key, typ string) *driver.OutboxInsertParams {
			return &driver.OutboxInsertParams{
				Category: driver.OutboxCategoryEvent, Transport: transport, Topic: topic, Key: key, Type: typ,
				MessageID: id, Payload: payload,
				Headers: map[string]string{outbox.HeaderMessageID: id, outbox.HeaderType: typ, "executionId": exec,
					"model": ev.Model, "executionType": ev.ExecutionType},
			}
		}
		if s := l.sink; s != nil {
			key, topic := exec, s.Topic
			if s.Transport == outbox.TransportWebhook {
				key = "webhook:" + s.Topic + ":" + exec
			}
			if s.Exchange {
				topic = outbox.ExchangeTopicPrefix + s.Topic
			}
			out = append(out, msg(s.Transport, topic, key, string(ev.Type)))
		}
		local := len(l.listeners) > 0
		for _, cb := range l.callbacks[Key{Model: ev.Model, Type: ev.ExecutionType}] {
			if !cb.matches(ev) {
				continue
			}
			if cb.Endpoint != "" {
				out = append(out, msg(outbox.TransportWebhook, cb.Endpoint, "webhook:"+cb.Endpoint+":"+exec, "callback."+string(cb.kind)))
			} else {
				local = true
			}
		}
		if local {
			out = append(out, msg(TransportInProcess, topicLifecycle, TransportInProcess+":"+exec, string(ev.Type)))
		}
	}
	// The events of one execution and destination share a row: a checkpoint's dozen events cost
	// one row to write, claim and mark, and are still published one by one, in order.
	if packed, err := outbox.Pack(out); err == nil {
		return packed
	}
	return out // a LifecycleEvent is always JSON, so Pack does not fail
}

// localPublisher delivers the in-process events to the listeners and callbacks.
type localPublisher struct{ l *lifecycle }

func (p localPublisher) Transport() string { return TransportInProcess }

func (p localPublisher) Publish(ctx context.Context, msgs []*driver.OutboxRow) []error {
	errs := make([]error, len(msgs))
	for _, m := range msgs {
		var ev LifecycleEvent
		if err := json.Unmarshal(m.Payload, &ev); err != nil {
			p.l.rt.client.Logger().Error("lifecycle event undecodable; dropped", "outbox_id", m.ID, "error", err)
			continue
		}
		p.l.dispatch(ctx, &ev)
	}
	return errs
}

// dispatch hands one event to the listeners, then to the matching Func callbacks by priority.
func (l *lifecycle) dispatch(ctx context.Context, ev *LifecycleEvent) {
	l.mu.RLock()
	listeners := l.listeners
	var cbs []*registeredCallback
	for _, cb := range l.callbacks[Key{Model: ev.Model, Type: ev.ExecutionType}] {
		if cb.Func != nil && cb.matches(ev) {
			cbs = append(cbs, cb)
		}
	}
	l.mu.RUnlock()
	for i, fn := range listeners {
		l.call(ctx, fmt.Sprintf("listener %d", i), ev, fn)
	}
	for _, cb := range cbs {
		if cb.Async {
			go l.call(context.WithoutCancel(ctx), cb.Name, ev, cb.Func)
			continue
		}
		if l.call(ctx, cb.Name, ev, cb.Func) && cb.SuppressError && ev.Type == cbtype.EventDeadLettered {
			l.suppress(ctx, cb, ev)
		}
	}
}

// call runs fn on ev, containing errors and panics; it reports whether fn succeeded.
func (l *lifecycle) call(ctx context.Context, name string, ev *LifecycleEvent, fn func(context.Context, LifecycleEvent) error) (ok bool) {
	logger := l.rt.client.Logger()
	defer func() {
		if r := recover(); r != nil {
			ok = false
			logger.Error("lifecycle listener panicked; the event goes on to the others", "listener", name,
				"execution_id", ev.ExecutionID, "event_id", ev.ID, "event", ev.Type, "panic", fmt.Sprint(r))
		}
	}()
	if err := fn(ctx, *ev); err != nil {
		logger.Warn("lifecycle listener failed; the event goes on to the others", "listener", name,
			"execution_id", ev.ExecutionID, "event_id", ev.ID, "event", ev.Type, "error", err)
		return false
	}
	return true
}

// suppress completes an execution parked in the troubleshooting queue whose error a callback
// suppressed.
func (l *lifecycle) suppress(ctx context.Context, cb *registeredCallback, ev *LifecycleEvent) {
	ops := l.rt.Operations(ev.Model, ev.ExecutionType)
	if ops == nil {
		return
	}
	action := commandbus.OperatorAction{Actor: "callback", Reason: "error " + ev.ErrorCode + " suppressed by callback " + cb.Name}
	if err := ops.CompleteOverride(ctx, ev.ExecutionID, nil, action); err != nil {
		l.rt.client.Logger().Warn("suppressing an execution's error failed", "callback", cb.Name, "execution_id", ev.ExecutionID, "error", err)
	}
}

// Start runs the runtime's relay of in-process events and webhooks, when there is anything to
// deliver.
func (l *lifecycle) Start(ctx context.Context) error {
	l.mu.Lock()
	var publishers []outbox.Publisher
	if len(l.listeners) > 0 || len(l.callbacks) > 0 {
		publishers = append(publishers, localPublisher{l})
	}
	if l.webhooks != nil {
		pub, err := outbox.NewWebhookPublisher(*l.webhooks)
		if err != nil {
			l.mu.Unlock()
			return err
		}
		publishers = append(publishers, pub)
	}
	if len(publishers) == 0 || l.relay != nil {
		l.mu.Unlock()
		return nil
	}
	client := l.rt.client
	relay, err := outbox.NewRelay(client.Driver().Executor(), outbox.RelayConfig{
		Publishers: publishers, RelayID: client.Config().WorkerID + "-lifecycle",
		Subscribe: plumbing.Subscriber(client), Metrics: plumbing.MessagingMetrics(client),
		Logger: client.Logger(), Now: plumbing.DriverClock(client), TracerProvider: client.Config().TracerProvider,
	})
	if err != nil {
		l.mu.Unlock()
		return err
	}
	l.relay = relay
	l.mu.Unlock()
	return relay.Start(ctx)
}

// Stop stops the relay.
func (l *lifecycle) Stop(ctx context.Context) error {
	l.mu.Lock()
	relay := l.relay
	l.relay = nil
	l.mu.Unlock()
	if relay == nil {
		return nil
	}
	return relay.Stop(ctx)
}
