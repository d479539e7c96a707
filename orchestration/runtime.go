// Package orchestration is the one runtime every execution model runs on: sequential processes
// (package process) today, and declarative workflows, sagas and TCC transactions on the same
// core. A Runtime owns the client's execution engine (claims, leases, fenced checkpoints, the
// pollers), routes command-step replies back to the executions that sent the commands, and keeps
// the registry of every model's operator operations by (model, type), so the REST API, the
// console and the CLI operate any execution without knowing its model.
//
// Create one runtime per client, before starting it, and hand it to the models:
//
//	rt, err := orchestration.New(client, orchestration.Config{})
//	orders, err := process.NewManager(rt, orderProcess{})
//
// Lifecycle events (started, step started/succeeded/failed/skipped, dead-lettered, compensation,
// suspend and resume, signal, timer, child, continue-as-new, completed) are derived from every
// checkpoint of every model and, when something consumes them, written to the outbox in the
// checkpoint's own transaction: Config.Events publishes them to Kafka, AMQP or a webhook; OnLifecycle
// hands them to in-process listeners; AddCallbacks runs a definition's callbacks (on complete, on
// error, on step complete), in process or as signed webhooks. With none of these, nothing is
// derived and checkpoints cost nothing more.
//
// Definitions may be started by inbound events: a definition names the event types that start
// it (a workflow's TriggeredBy, or Runtime.Trigger for any model), and ReceiveEvent, which POST
// /api/events and the AMQP and Kafka event consumers call, starts one execution per event and
// definition, deduplicated by the event's source and id.
package orchestration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/internal/orchestrate"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/tenant"
	"github.com/commandbus/commandbus/tracing"
)

// HeaderExecutionID is the header a command sent by an execution carries, naming the execution
// its reply resumes.
const HeaderExecutionID = "commandbus-execution-id"

// Operations are the operator actions on the executions of one (model, type), without the
// model's state type, so tools (the REST API, the console, the CLI) act on any execution by id.
type Operations interface {
	// Model names the execution model ("process", "workflow", ...).
	Model() string
	// Type is the execution type within the model.
	Type() string
	// Domain is where the executions live; command replies come back to its reply queue.
	Domain() string
	// GetJSON returns the execution with its state as JSON and its log.
	GetJSON(ctx context.Context, id uuid.UUID) (*InstanceJSON, error)
	// Retry moves an execution parked in the troubleshooting queue on.
	Retry(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error
	// CancelOverride cancels an execution, running its compensations or not.
	CancelOverride(ctx context.Context, id uuid.UUID, runCompensations bool, action commandbus.OperatorAction) error
	// CompleteOverride force-completes an execution with state overrides.
	CompleteOverride(ctx context.Context, id uuid.UUID, stateOverrides map[string]any, action commandbus.OperatorAction) error
	// Skip records a step as done with the given result and moves the execution on.
	Skip(ctx context.Context, id uuid.UUID, step string, result json.RawMessage, action commandbus.OperatorAction) error
	// Suspend pauses an execution: one a runner holds finishes its running step and starts no
	// other; nothing runs a suspended execution until Resume.
	Suspend(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error
	// Resume continues a suspended execution where it stopped, or cancels a pending suspend
	// request.
	Resume(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error
}

// Definition describes what a model registered: the execution type, its domain and, for the
// declarative models, its version, description and topology.
type Definition struct {
	Model       string `json:"model"`
	Type        string `json:"type"`
	Domain      string `json:"domain"`
	Version     int    `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Topology is the DAG of a declarative model (nil for a process, whose code is its
	// definition): layers in dependency order, and edges.
	Topology *Topology `json:"topology,omitempty"`
	// CompensationPolicy is how a saga runs its compensations (STRICT_SEQUENTIAL, ...); empty
	// for models without one.
	CompensationPolicy string `json:"compensationPolicy,omitempty"`
	// TriggeredBy lists the inbound event types that start the definition (Runtime.Trigger, a
	// workflow's TriggeredBy), as Runtime.Describe reports them.
	TriggeredBy []string `json:"triggeredBy,omitempty"`
}

// Topology is a definition's DAG: layers (every step's dependencies are in earlier layers) and
// edges.
type Topology struct {
	Layers [][]string `json:"layers"`
	Edges  []Edge     `json:"edges"`
}

// Edge is a dependency: From must be done before To runs.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// StartRequest starts an execution from JSON, as the REST API and the CLI do.
type StartRequest struct {
	// Input is the execution's input (a process's initial state, a workflow's input).
	Input json.RawMessage
	// ID makes the start idempotent: an id that exists is not started again. Zero: a new id.
	ID          uuid.UUID
	BusinessKey string
	TenantID    string
	// Attributes are search attributes set at the start.
	Attributes map[string]string
	// DryRun walks a declarative definition without running any step (refused by models that
	// cannot).
	DryRun bool
	// NotBefore, when set, creates the execution now but has it taken up no earlier: the id is
	// taken from the start, the first step runs from NotBefore. The scheduler creates a tick's
	// execution ahead of the tick this way. Models that cannot defer a start refuse it.
	NotBefore time.Time
}

// Starter is implemented by operations that can start executions from JSON.
type Starter interface {
	StartJSON(ctx context.Context, req StartRequest) (uuid.UUID, error)
}

// Describer is implemented by operations that describe their definition beyond model, type and
// domain.
type Describer interface {
	Describe() Definition
}

// Describe returns the definition of ops: its own description when it has one.
func Describe(ops Operations) Definition {
	if d, ok := ops.(Describer); ok {
		return d.Describe()
	}
	return Definition{Model: ops.Model(), Type: ops.Type(), Domain: ops.Domain()}
}

// InstanceJSON is an execution with its state left as JSON, its log and its search attributes.
type InstanceJSON struct {
	*cbtype.ExecutionRow
	Log        []*cbtype.ExecutionLogEntry `json:"log"`
	Attributes map[string]string           `json:"attributes,omitempty"`
	// Result is the model's view of the execution's outcome (a saga's per-step outcomes and
	// compensations, a TCC's phases per participant), nil for models that have none.
	Result any `json:"result,omitempty"`
}

// Config tunes a runtime. Zero fields take the client's configuration (its process.* keys).
type Config struct {
	// ExecutionLease is how long a runner owns an execution before another instance may take it
	// over.
	ExecutionLease time.Duration
	// ConcurrentExecutions bounds the executions this instance runs at once.
	ConcurrentExecutions int
	// Events, when set, publishes every lifecycle event durably to this sink (see EventSink).
	// Nil: no event is written, and checkpoints cost nothing more.
	Events *EventSink
	// Webhooks are the HTTP endpoints webhook sinks and callbacks deliver to; the runtime runs
	// a relay that delivers them (signed, retried, FAILED after the last attempt).
	Webhooks *outbox.WebhookConfig
	// Admission configures tenant capacity (see package tenant).
	Admission AdmissionConfig
}

// AdmissionConfig configures the capacity-limited admission of executions by tenant.
type AdmissionConfig struct {
	// CapacityLimited lists the execution types whose executions wait for a free slot of their
	// tenant (LimitCapacity adds more).
	CapacityLimited []string
	// TierLimits sets tiers' limits when the client starts (nil: the stored ones, FREE 1, PRO 5
	// and ENTERPRISE 20 unless changed).
	TierLimits map[string]int
	// PollInterval is how often the admission dispatcher runs without being woken. 0 means 1s.
	PollInterval time.Duration
	// Batch is how many tenants one dispatcher round serves at most. 0 means 100.
	Batch int
	// PerTenant caps what one round admits per tenant. 0 means up to its free slots.
	PerTenant int
	// UnknownDefinitionCheckInterval is how often queued executions of a type this instance does
	// not run end FAILED (UNKNOWN_DEFINITION). 0 means 10s; negative turns it off, as an instance
	// that does not register every capacity-limited type must.
	UnknownDefinitionCheckInterval time.Duration
	// MaxTenantGauges bounds the per-tenant gauges (0: tenant.DefaultMaxTenantGauges, negative:
	// none).
	MaxTenantGauges int
}

// Key names what a model registers: its name and the execution type.
type Key struct {
	Model string
	Type  string
}

type runtimeKey struct{}

// Runtime is a client's orchestration runtime. It is safe for concurrent use.
type Runtime struct {
	client *commandbus.Client
	engine *execution.Engine
	// events are the inbound event triggers (Trigger).
	events eventTriggers

	mu      sync.Mutex
	domains map[string]bool
	ops     map[Key]Operations
	runners map[string]orchestrate.Runner // by execution type
	// schedules are the declared schedules (DeclareSchedule).
	schedules []ScheduleSpec

	lifecycle *lifecycle
}

// New creates the runtime of client. Call it once per client, before the client starts; the
// engine starts and stops with the client (unless the client's process-execution feature is off,
// as on an API-only instance, which then operates executions without running them).
func New(client *commandbus.Client, cfg Config) (*Runtime, error) {
	if client == nil {
		return nil, errors.New("orchestration: New needs a client")
	}
	if client.Started() {
		return nil, errors.New("orchestration: create the runtime before starting the client")
	}
	if cfg.ExecutionLease < 0 || cfg.ConcurrentExecutions < 0 {
		return nil, &commandbus.ValidationError{Field: "orchestration.Config", Message: "ExecutionLease and ConcurrentExecutions must not be negative"}
	}
	fromConfig(&cfg, client.Config())
	if err := validateEvents(&cfg); err != nil {
		return nil, err
	}
	first := false
	plumbing.Extension(client, runtimeKey{}, func() any { first = true; return struct{}{} })
	if !first {
		return nil, errors.New("orchestration: the client already has a runtime; create one per client and share it between models")
	}
	ccfg := client.Config()
	lease := ccfg.Process.ExecutionLease.Std()
	if cfg.ExecutionLease > 0 {
		lease = cfg.ExecutionLease
	}
	concurrency := ccfg.Process.ConcurrentExecutions
	if cfg.ConcurrentExecutions > 0 {
		concurrency = cfg.ConcurrentExecutions
	}
	drv := client.Driver()
	var metrics execution.Metrics
	if reg := ccfg.MetricsRegisterer; reg != nil {
		m, err := newExecutionMetrics(reg)
		if err != nil {
			return nil, fmt.Errorf("orchestration: registering the execution metrics: %w", err)
		}
		metrics = m
	}
	wake, _ := plumbing.Subscribe(client, execution.WakeTopic)
	admissionWake, _ := plumbing.Subscribe(client, driver.TopicAdmission)
	admissionMetrics, err := tenant.NewMetrics(ccfg.MetricsRegisterer, drv.Executor(), cfg.Admission.MaxTenantGauges)
	if err != nil {
		return nil, fmt.Errorf("orchestration: registering the admission metrics: %w", err)
	}
	var clockNow func() time.Time = time.Now
	if !clock.IsReal(ccfg.Clock) {
		clockNow = ccfg.Clock.Now
	}
	engine := execution.New(execution.Config{
		Exec:                  drv.Executor(),
		WorkerID:              ccfg.WorkerID,
		Logger:                client.Logger(),
		Now:                   plumbing.DriverClock(client),
		Clock:                 clockNow,
		Lease:                 lease,
		Concurrency:           concurrency,
		LogCache:              ccfg.Process.LogCache,
		PendingPollInterval:   ccfg.Process.PendingPollInterval.Std(),
		RetryPollInterval:     ccfg.Process.RetryPollInterval.Std(),
		TimeoutCheckInterval:  ccfg.Process.TimeoutCheckInterval.Std(),
		DeadlineCheckInterval: ccfg.Process.DeadlineCheckInterval.Std(),
		Wake:                  wake,
		Observer:              observerOf(ccfg.ExecutionObserver),
		Tracer:                tracing.New(ccfg.TracerProvider),

		Admission:                      admissionMetrics,
		AdmissionWake:                  admissionWake,
		AdmissionPollInterval:          cfg.Admission.PollInterval,
		AdmissionBatch:                 cfg.Admission.Batch,
		AdmissionPerTenant:             cfg.Admission.PerTenant,
		UnknownDefinitionCheckInterval: cfg.Admission.UnknownDefinitionCheckInterval,
		Metrics:                        metrics,
		CommandOutbox: func(cmds []*driver.CommandInsertParams) ([]*driver.OutboxInsertParams, error) {
			return plumbing.CheckpointOutbox(client, cmds)
		},
		Signal: func(topics ...string) { plumbing.SignalLocal(client, topics...) },
		Notify: func(ctx context.Context, topics []string) {
			if err := drv.Executor().Notify(ctx, topics); err != nil {
				client.Logger().Warn("notifying command queues failed; they will poll", "error", err)
			}
		},
	})
	engine.SetCapacityLimited(cfg.Admission.CapacityLimited...)
	if cfg.Admission.TierLimits != nil {
		// Before the engine, so admissions at start use the configured limits.
		client.AddService(&tierLimits{tenants: tenant.New(client), limits: cfg.Admission.TierLimits})
	}
	if *ccfg.Features.ProcessExecution {
		client.AddService(engine)
	}
	rt := &Runtime{
		client: client, engine: engine,
		domains: map[string]bool{}, ops: map[Key]Operations{}, runners: map[string]orchestrate.Runner{},
	}
	rt.lifecycle = &lifecycle{rt: rt, sink: cfg.Events, webhooks: cfg.Webhooks}
	rt.lifecycle.configure()
	client.AddService(rt.lifecycle)
	return rt, nil
}

// fromConfig fills what cfg leaves unset from the client's configuration: the lifecycle-events
// sink and the webhooks endpoints.
func fromConfig(cfg *Config, cc *commandbus.Config) {
	if cfg.Webhooks == nil && len(cc.Webhooks.Endpoints) > 0 {
		hooks := &outbox.WebhookConfig{Endpoints: map[string]outbox.WebhookEndpoint{}, MaxAttempts: cc.Webhooks.MaxAttempts}
		for name, ep := range cc.Webhooks.Endpoints {
			if ep != nil {
				hooks.Endpoints[name] = outbox.WebhookEndpoint{URL: ep.URL, Secret: ep.Secret, Timeout: ep.Timeout.Std()}
			}
		}
		cfg.Webhooks = hooks
	}
	if cfg.Events != nil {
		return
	}
	switch cc.LifecycleEvents {
	case commandbus.EventsKafka, commandbus.EventsAMQP, commandbus.EventsAMQP10:
		cfg.Events = &EventSink{Transport: cc.LifecycleEvents, Topic: cc.LifecycleEventsTopic, Exchange: cc.LifecycleEventsExchange}
	case commandbus.EventsWebhook:
		cfg.Events = &EventSink{Transport: outbox.TransportWebhook, Topic: cc.LifecycleWebhook()}
	}
}

// validateEvents checks the event sink and the webhooks, filling in the default topic.
func validateEvents(cfg *Config) error {
	var errs []error
	if cfg.Webhooks != nil {
		if _, err := outbox.NewWebhookPublisher(*cfg.Webhooks); err != nil {
			errs = append(errs, &commandbus.ValidationError{Field: "orchestration.Config.Webhooks", Message: err.Error()})
		}
	}
	if s := cfg.Events; s != nil {
		sink := *s
		if sink.Topic == "" {
			sink.Topic = DefaultEventTopic
		}
		switch sink.Transport {
		case outbox.TransportKafka, outbox.TransportAMQP, outbox.TransportAMQP10:
		case outbox.TransportWebhook:
			if cfg.Webhooks == nil || cfg.Webhooks.Endpoints[sink.Topic].URL == "" {
				errs = append(errs, &commandbus.ValidationError{Field: "orchestration.Config.Events.Topic", Message: fmt.Sprintf("no webhook endpoint %q in Webhooks", sink.Topic)})
			}
		default:
			errs = append(errs, &commandbus.ValidationError{Field: "orchestration.Config.Events.Transport",
				Message: fmt.Sprintf("%q is not kafka, amqp, amqp10 or webhook", sink.Transport)})
		}
		if sink.Exchange && sink.Transport != outbox.TransportAMQP {
			errs = append(errs, &commandbus.ValidationError{Field: "orchestration.Config.Events.Exchange", Message: "only the amqp transport publishes to an exchange"})
		}
		cfg.Events = &sink
	}
	return errors.Join(errs...)
}

// LimitCapacity marks execution types (of any model) as capacity-limited: their executions need
// a tenant, start QUEUED and run only while their tenant holds fewer slots than its limit (see
// package tenant). Call it before the client starts.
func (rt *Runtime) LimitCapacity(types ...string) error {
	if rt.client.Started() {
		return errors.New("orchestration: limit capacity before starting the client")
	}
	for _, t := range types {
		if t == "" {
			return &commandbus.ValidationError{Field: "type", Message: "must not be empty"}
		}
	}
	rt.engine.SetCapacityLimited(types...)
	return nil
}

// CapacityLimited reports whether executions of typ wait for a tenant's slot.
func (rt *Runtime) CapacityLimited(typ string) bool { return rt.engine.CapacityLimited(typ) }

// tierLimits applies the configured tier limits when the client starts.
type tierLimits struct {
	tenants *tenant.Service
	limits  map[string]int
}

func (t *tierLimits) Start(ctx context.Context) error {
	if err := t.tenants.ApplyTierLimits(ctx, t.limits); err != nil {
		return fmt.Errorf("orchestration: applying the tier limits: %w", err)
	}
	return nil
}

func (t *tierLimits) Stop(context.Context) error { return nil }

// Client returns the client the runtime runs on.
func (rt *Runtime) Client() *commandbus.Client { return rt.client }

// PaceEvents holds back the runtime's checkpoints that write outbox messages (lifecycle events,
// commands for a broker) while relay, the relay publishing them, lags more than maxLag: each
// group of checkpoints waits until a claim of the relay finds the outbox caught up, for at most
// 4 × maxLag. The executions then write no faster than the relay publishes, and a message's
// commit → publish latency stays near maxLag when the CPU is short, instead of a backlog
// growing for as long as the load lasts. It slows the executions, never stops them; a relay
// whose publications fail, or that is stopped, holds nothing back. A nil relay or a zero maxLag
// turns pacing off.
func (rt *Runtime) PaceEvents(relay *outbox.Relay, maxLag time.Duration) {
	if relay == nil || maxLag <= 0 {
		rt.engine.SetPace(nil)
		return
	}
	rt.engine.SetPace(func(ctx context.Context) { relay.Pace(ctx, maxLag, 4*maxLag) })
}

// HandOffOutbox hands relay, a relay in this process, the outbox messages the runtime's
// checkpoints write (lifecycle events, commands for a broker) right after each commit, so that it
// publishes them at once rather than at its next claim (outbox.Relay.Handoff). The checkpoints of
// one execution are written under its row's lock, which keeps each key's order. Messages the
// relay does not take stay for the claims of every relay. A nil relay turns it off.
func (rt *Runtime) HandOffOutbox(relay *outbox.Relay) {
	if relay == nil {
		rt.engine.SetHandoff(nil)
		return
	}
	rt.engine.SetHandoff(relay.OutboxHandoff())
}

// Operations returns the operations of (model, typ), or nil when nothing is registered under it.
func (rt *Runtime) Operations(model, typ string) Operations {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.ops[Key{Model: model, Type: typ}]
}

// OperationsFor returns the operations that act on an execution as stored, by its model and
// type, or nil.
func (rt *Runtime) OperationsFor(row *driver.ExecutionRow) Operations {
	if row == nil {
		return nil
	}
	return rt.Operations(row.Model, row.Type)
}

// All returns the operations of every registered (model, type), ordered by model then type.
func (rt *Runtime) All() []Operations {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]Operations, 0, len(rt.ops))
	for _, o := range rt.ops {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Model() != out[j].Model() {
			return out[i].Model() < out[j].Model()
		}
		return out[i].Type() < out[j].Type()
	})
	return out
}

// register adds a model's runner and operations. Execution types are unique across models (the
// engine claims executions by type), so a type taken by any model is refused.
func (rt *Runtime) register(ops Operations, runner orchestrate.Runner) error {
	if ops.Model() == "" || ops.Type() == "" {
		return errors.New("orchestration: a registration needs a model and a type")
	}
	if ops.Type() != runner.Type() {
		return fmt.Errorf("orchestration: operations of type %q registered with a runner of type %q", ops.Type(), runner.Type())
	}
	if rt.client.Started() {
		return fmt.Errorf("orchestration: register %s %q before starting the client", ops.Model(), ops.Type())
	}
	triggers, err := declaredTriggers(ops)
	if err != nil {
		return err
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, dup := rt.runners[ops.Type()]; dup {
		return fmt.Errorf("orchestration: execution type %q is already registered", ops.Type())
	}
	if err := rt.registerReplies(ops.Domain()); err != nil {
		return err
	}
	if err := rt.engine.Register(runner); err != nil {
		return fmt.Errorf("orchestration: %w", err)
	}
	rt.ops[Key{Model: ops.Model(), Type: ops.Type()}] = ops
	rt.runners[ops.Type()] = runner
	rt.addDeclaredTriggers(ops, triggers)
	return nil
}

// registerReplies installs, once per domain, the reply handler that resumes the executions
// waiting on a command they sent. The caller holds mu.
func (rt *Runtime) registerReplies(domain string) (err error) {
	if rt.domains[domain] {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("orchestration: cannot register the command reply handler of domain %q: %v", domain, r)
		}
	}()
	commandbus.AddReplyHandler(rt.client.Config().Handlers, domain, "", rt.handleReply)
	rt.domains[domain] = true
	return nil
}

func (rt *Runtime) runner(typ string) orchestrate.Runner {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.runners[typ]
}

// deliver hands a response to an execution: straight into a run when nobody holds it (the run's
// first checkpoint records it durably), or stored for the runner that holds it.
func (rt *Runtime) deliver(ctx context.Context, id uuid.UUID, name string, payload json.RawMessage) error {
	lease, err := rt.engine.AcquireLoad(ctx, id)
	switch {
	case errors.Is(err, execution.ErrBusy):
		if _, err := rt.engine.RecordResponse(ctx, &driver.ExecutionResponseInsertParams{
			ExecutionID: id, Name: name, Payload: payload, Now: rt.engine.Config().Now(),
		}); err != nil {
			return fmt.Errorf("recording response for execution %s: %w", id, err)
		}
		return nil // the runner holding it applies the response before letting go
	case err != nil:
		return fmt.Errorf("delivering response to execution %s: %w", id, err)
	}
	runner := rt.runner(lease.Row.Type)
	if runner == nil {
		_ = lease.Release(ctx)
		return fmt.Errorf("no runner for execution type %q on this instance", lease.Row.Type)
	}
	return runner.RunWithResponse(ctx, lease, &driver.ExecutionResponseRow{ExecutionID: id, Name: name, Payload: payload})
}

// handleReply receives replies on a model domain's reply queue and resumes the execution that
// sent the command.
func (rt *Runtime) handleReply(ctx context.Context, msg *commandbus.ReplyMessage) error {
	idText := msg.Reply.Headers[HeaderExecutionID]
	if idText == "" {
		return commandbus.Permanent("NOT_A_COMMAND_STEP_REPLY", fmt.Errorf("reply to command %s carries no %s header; register a reply handler for %q", msg.Reply.CommandID, HeaderExecutionID, msg.Reply.CommandType))
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		return commandbus.Permanent("NOT_A_COMMAND_STEP_REPLY", fmt.Errorf("header %s: %w", HeaderExecutionID, err))
	}
	payload, err := json.Marshal(msg.Reply)
	if err != nil {
		return commandbus.Permanent(commandbus.CodeInvalidData, err)
	}
	// The reply message stays RUNNING until the run's checkpoints (which record the reply's
	// effect) have committed; if the run fails, the error makes the reply redeliver, so the reply
	// is never lost.
	if err := rt.deliver(ctx, id, orchestrate.ReplyResponseName, payload); err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			return commandbus.Permanent("EXECUTION_NOT_FOUND", err)
		}
		return err
	}
	return nil
}

func init() {
	orchestrate.Engine = func(rt any) *execution.Engine { return rt.(*Runtime).engine }
	orchestrate.Register = func(rt any, ops any, runner orchestrate.Runner) error {
		o, ok := ops.(Operations)
		if !ok {
			return fmt.Errorf("orchestration: %T does not implement Operations", ops)
		}
		return rt.(*Runtime).register(o, runner)
	}
	orchestrate.Deliver = func(rt any, ctx context.Context, id uuid.UUID, name string, payload json.RawMessage) error {
		return rt.(*Runtime).deliver(ctx, id, name, payload)
	}
}

// BatchStarter is implemented by operations that start many executions from JSON in one round
// trip (the scheduler uses it for the ticks of many schedules). An id that exists is not started
// again; the ids are returned in request order.
type BatchStarter interface {
	StartManyJSON(ctx context.Context, reqs []StartRequest) ([]uuid.UUID, error)
}
