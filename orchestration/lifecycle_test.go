package orchestration_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/workflow"
)

// recorder keeps the events a listener received, per execution.
type recorder struct {
	mu     sync.Mutex
	events map[uuid.UUID][]orchestration.LifecycleEvent
	calls  []string
}

func newRecorder() *recorder {
	return &recorder{events: map[uuid.UUID][]orchestration.LifecycleEvent{}}
}

func (r *recorder) listen(_ context.Context, ev orchestration.LifecycleEvent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events[ev.ExecutionID] = append(r.events[ev.ExecutionID], ev)
	return nil
}

func (r *recorder) call(name string) func(context.Context, orchestration.LifecycleEvent) error {
	return func(_ context.Context, ev orchestration.LifecycleEvent) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls = append(r.calls, name+":"+string(ev.Type)+":"+ev.StepID)
		return nil
	}
}

func (r *recorder) of(id uuid.UUID) []orchestration.LifecycleEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]orchestration.LifecycleEvent(nil), r.events[id]...)
}

func (r *recorder) callsSoFar() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func types(events []orchestration.LifecycleEvent) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = string(ev.Type)
		if ev.StepID != "" && ev.Type != cbtype.EventExecutionCompleted {
			out[i] += " " + ev.StepID
		}
	}
	return out
}

func fastClient(t *testing.T, drv driver.Driver) *commandbus.Client {
	t.Helper()
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler),
		Process: commandbus.ProcessConfig{PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20), DeadlineCheckInterval: ms(20)}})
	require.NoError(t, err)
	return client
}

// kafkaEventsRuntime is a fastClient and a runtime on it that writes its lifecycle events to the
// outbox for the kafka transport.
func kafkaEventsRuntime(t *testing.T, drv driver.Driver) (*commandbus.Client, *orchestration.Runtime) {
	t.Helper()
	client := fastClient(t, drv)
	rt, err := orchestration.New(client, orchestration.Config{Events: &orchestration.EventSink{Transport: outbox.TransportKafka}})
	require.NoError(t, err)
	return client, rt
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

func TestLifecycleListenersAndCallbacks(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := fastClient(t, drv)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		rec := newRecorder()
		// A failing and a panicking listener harm nothing.
		require.NoError(t, rt.OnLifecycle(func(context.Context, orchestration.LifecycleEvent) error { return errors.New("listener down") }))
		require.NoError(t, rt.OnLifecycle(func(context.Context, orchestration.LifecycleEvent) error { panic("listener bug") }))
		require.NoError(t, rt.OnLifecycle(rec.listen))

		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		ok, err := workflow.Register(rt, workflow.New("events-ok", 1).Step("a", noop).Step("b", noop, workflow.DependsOn("a")))
		require.NoError(t, err)
		failing, err := workflow.Register(rt, workflow.New("events-fail", 1).Step("a", func(context.Context, *workflow.StepContext) (any, error) {
			return nil, commandbus.Permanent("BAD_IBAN", errors.New("checksum"))
		}))
		require.NoError(t, err)

		require.NoError(t, rt.AddCallbacks(workflow.Model, "events-ok", orchestration.Callbacks{
			OnComplete:     []orchestration.Callback{{Name: "second", Priority: 10, Func: rec.call("second")}, {Name: "first", Func: rec.call("first")}},
			OnStepComplete: []orchestration.Callback{{Name: "step-b", StepIDs: []string{"b"}, Func: rec.call("step-b")}},
			OnError:        []orchestration.Callback{{Name: "never", Func: rec.call("never")}},
		}))
		require.NoError(t, rt.AddCallbacks(workflow.Model, "events-fail", orchestration.Callbacks{
			OnError: []orchestration.Callback{
				{Name: "other-code", ErrorCodes: []string{"TIMEOUT"}, Func: rec.call("other-code")},
				{Name: "suppress", ErrorCodes: []string{"BAD_IBAN"}, SuppressError: true, Func: rec.call("suppress")},
			},
		}))
		var verr *commandbus.ValidationError
		err = rt.AddCallbacks(workflow.Model, "events-ok", orchestration.Callbacks{OnComplete: []orchestration.Callback{{Endpoint: "hooks", Func: rec.call("x")}}})
		require.ErrorAs(t, err, &verr)
		require.Equal(t, "Callbacks.OnComplete[0].Func", verr.Field)
		err = rt.AddCallbacks(workflow.Model, "events-ok", orchestration.Callbacks{OnComplete: []orchestration.Callback{{Endpoint: "hooks"}}})
		require.ErrorContains(t, err, `no webhook endpoint "hooks"`)

		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })

		id, err := ok.Start(ctx, nil, workflow.Immediate())
		require.NoError(t, err)
		waitFor(t, "the completion event", func() bool {
			evs := rec.of(id)
			return len(evs) > 0 && evs[len(evs)-1].Type == cbtype.EventExecutionCompleted
		})
		evs := rec.of(id)
		require.Equal(t, []string{"EXECUTION_STARTED", "STEP_STARTED a", "STEP_SUCCEEDED a", "STEP_STARTED b", "STEP_SUCCEEDED b", "EXECUTION_COMPLETED"}, types(evs))
		seen := map[uuid.UUID]bool{}
		for i, ev := range evs {
			require.False(t, seen[ev.ID], "event ids are unique")
			seen[ev.ID] = true
			require.Equal(t, "events-ok", ev.ExecutionType)
			require.Equal(t, workflow.Model, ev.Model)
			if i > 0 {
				require.Greater(t, ev.Position, evs[i-1].Position, "positions grow")
			}
		}
		require.True(t, evs[len(evs)-1].Success)
		waitFor(t, "the callbacks", func() bool { return len(rec.callsSoFar()) >= 3 })
		require.Equal(t, []string{"step-b:STEP_SUCCEEDED:b", "first:EXECUTION_COMPLETED:", "second:EXECUTION_COMPLETED:"}, rec.callsSoFar(),
			"the step callback for b only, then the completion callbacks by priority")

		// The error callback of the matching code runs and suppresses the error: the execution
		// parked in the troubleshooting queue is completed.
		fid, err := failing.Start(ctx, nil, workflow.Immediate())
		require.NoError(t, err)
		inst := waitStatus(t, failing, fid, driver.ExecutionCompleted)
		require.Equal(t, driver.ExecutionCompleted, inst.Status)
		waitFor(t, "the failing execution's completion event", func() bool {
			evs := rec.of(fid)
			return len(evs) > 0 && evs[len(evs)-1].Type == cbtype.EventExecutionCompleted
		})
		ftypes := types(rec.of(fid))
		require.Contains(t, ftypes, "DEAD_LETTERED a")
		require.Contains(t, ftypes, "STEP_FAILED a")
		require.Contains(t, rec.callsSoFar(), "suppress:DEAD_LETTERED:a")
		for _, c := range rec.callsSoFar() {
			require.NotContains(t, c, "other-code", "filtered by error code")
			require.NotContains(t, c, "never", "no error on a successful execution")
		}
	})
}

func waitStatus(t *testing.T, m *workflow.Manager, id uuid.UUID, want driver.ExecutionStatus) *workflow.Instance {
	t.Helper()
	var inst *workflow.Instance
	waitFor(t, "status "+string(want), func() bool {
		var err error
		inst, err = m.Get(context.Background(), id)
		require.NoError(t, err)
		return inst.Status == want
	})
	return inst
}

func TestEventSinkValidation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		var verr *commandbus.ValidationError
		_, err := orchestration.New(newClient(t, drv), orchestration.Config{Events: &orchestration.EventSink{Transport: "carrier-pigeon"}})
		require.ErrorAs(t, err, &verr)
		require.Equal(t, "orchestration.Config.Events.Transport", verr.Field)
		_, err = orchestration.New(newClient(t, drv), orchestration.Config{Events: &orchestration.EventSink{Transport: outbox.TransportWebhook}})
		require.ErrorContains(t, err, `no webhook endpoint "events.Orchestrations"`)
	})
}

// Without a sink, a listener or a callback, no event is derived: checkpoints write no outbox row.
func TestLifecycleOffWritesNothing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := fastClient(t, drv)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		m, err := workflow.Register(rt, workflow.New("quiet", 1).Step("a", noop).Step("b", noop, workflow.DependsOn("a")))
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })
		id, err := m.Start(ctx, nil, workflow.Immediate())
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionCompleted)
		rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{})
		require.NoError(t, err)
		require.Empty(t, rows)
	})
}

// The client's lifecycle-events key turns the Kafka sink on for runtimes that do not choose one
// (as the cli's serve and worker build them).
func TestLifecycleEventsFromClientConfig(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler),
			LifecycleEvents: commandbus.EventsKafka, Kafka: commandbus.KafkaConfig{Brokers: "127.0.0.1:9"}})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		m, err := workflow.Register(rt, workflow.New("configured", 1).Step("a", noop))
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })
		id, err := m.Start(ctx, nil, workflow.Immediate())
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionCompleted)
		rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Transport: outbox.TransportKafka})
		require.NoError(t, err)
		rows, err = outbox.Unpack(rows)
		require.NoError(t, err)
		require.Len(t, rows, 4, "started, step started, step succeeded, completed")
		for _, r := range rows {
			require.Equal(t, orchestration.DefaultEventTopic, r.Topic)
			require.Equal(t, id.String(), r.Key)
		}
	})
}

// A sequential process's events come from the same derivation as a workflow's.
func TestLifecycleEventsOfAProcess(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := fastClient(t, drv)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		rec := newRecorder()
		require.NoError(t, rt.OnLifecycle(rec.listen))
		m, err := process.NewManager(rt, process.Process[greeting](greeter{typ: "greeting-events"}))
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })
		id, err := m.Start(ctx, greeting{Name: "Ada"})
		require.NoError(t, err)
		waitFor(t, "the completion event", func() bool {
			evs := rec.of(id)
			return len(evs) > 0 && evs[len(evs)-1].Type == cbtype.EventExecutionCompleted
		})
		evs := rec.of(id)
		require.Equal(t, []string{"EXECUTION_STARTED", "STEP_STARTED greet", "STEP_SUCCEEDED greet", "EXECUTION_COMPLETED"}, types(evs))
		require.Equal(t, process.Model, evs[0].Model)
		require.JSONEq(t, `"hello Ada"`, string(evs[2].Payload))
	})
}

// acceptAll is a Kafka publisher that accepts everything at once.
type acceptAll struct{}

func (acceptAll) Transport() string { return outbox.TransportKafka }

func (acceptAll) Publish(_ context.Context, msgs []*driver.OutboxRow) []error {
	return make([]error, len(msgs))
}

// PaceEvents holds a workflow's checkpoints that write events while the events' relay lags, and
// lets them go once the relay has caught up.
func TestPaceEventsHoldsCheckpointsWhileTheRelayLags(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client, rt := kafkaEventsRuntime(t, drv)
		var skew atomic.Int64 // the relay's clock runs this far ahead of the database's
		relay, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{Publishers: []outbox.Publisher{acceptAll{}},
			Now: func() *time.Time { now := time.Now().Add(time.Duration(skew.Load())); return &now }})
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		m, err := workflow.Register(rt, workflow.New("paced", 1).Step("a", noop))
		require.NoError(t, err)

		// The relay claims the first workflow's events an hour late: it lags.
		first, err := m.Start(ctx, nil)
		require.NoError(t, err)
		skew.Store(int64(time.Hour))
		waitFor(t, "a claim of its events", func() bool {
			n, err := relay.RunOnce(ctx) // on PostgreSQL, not before older transactions end
			require.NoError(t, err)
			return n > 0
		})
		require.Greater(t, relay.Lag(), time.Minute)
		rt.PaceEvents(relay, time.Minute)

		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })
		// Its checkpoint (step a started, with its event) waits for the relay.
		require.Never(t, func() bool {
			inst, err := m.Get(ctx, first)
			require.NoError(t, err)
			return inst.Status == driver.ExecutionCompleted
		}, 300*time.Millisecond, 20*time.Millisecond, "a checkpoint writing events went through while the relay lagged an hour")

		// The relay catches up (a claim finds only fresh events): the workflow goes on.
		skew.Store(0)
		_, err = relay.RunOnce(ctx)
		require.NoError(t, err)
		waitFor(t, "the workflow completed", func() bool {
			_, err := relay.RunOnce(ctx) // each claim lets the next checkpoint through
			require.NoError(t, err)
			inst, err := m.Get(ctx, first)
			require.NoError(t, err)
			return inst.Status == driver.ExecutionCompleted
		})

		// Without pacing, nothing waits for the relay.
		skew.Store(int64(time.Hour))
		second, err := m.Start(ctx, nil)
		require.NoError(t, err)
		waitFor(t, "a claim an hour late", func() bool {
			_, err := relay.RunOnce(ctx)
			require.NoError(t, err)
			return relay.Lag() > time.Minute
		})
		rt.PaceEvents(nil, 0)
		waitStatus(t, m, second, driver.ExecutionCompleted)
	})
}
