package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/internal/orchestrate"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tracecontext"
)

// Model is the execution model name of sequential processes, stored in their executions' rows.
const Model = "process"

// Manager runs one process type: it starts executions, drives them through their steps, and
// offers the troubleshooting-queue operations. Create managers before starting the client.
type Manager[S any] struct {
	client   *commandbus.Client
	rt       *orchestration.Runtime
	engine   *execution.Engine
	process  Process[S]
	typ      string
	domain   string
	logger   *slog.Logger
	classify func(error) ErrorClass

	mu       sync.RWMutex
	appliers map[string]func(state *S, payload json.RawMessage) error
}

// NewManager registers p with the orchestration runtime. It fails when the client already
// started (its reply worker for the process domain must start with it), when the type is taken
// (by any model), or when the state type cannot be encoded as JSON.
func NewManager[S any](rt *orchestration.Runtime, p Process[S]) (*Manager[S], error) {
	if rt == nil || p == nil {
		return nil, errors.New("process: NewManager needs a runtime and a process")
	}
	if p.Type() == "" {
		return nil, errors.New("process: Type() must not be empty")
	}
	client := rt.Client()
	if client.Started() {
		return nil, fmt.Errorf("process: create the manager for %q before starting the client", p.Type())
	}
	var zero S
	if _, err := json.Marshal(zero); err != nil {
		return nil, fmt.Errorf("process: state type %T cannot be encoded as JSON: %w", zero, err)
	}
	m := &Manager[S]{
		client:   client,
		rt:       rt,
		engine:   orchestrate.Engine(rt),
		process:  p,
		typ:      p.Type(),
		domain:   p.Domain(),
		logger:   client.Logger().With("process_type", p.Type()),
		classify: defaultClassify,
		appliers: map[string]func(*S, json.RawMessage) error{},
	}
	if c, ok := p.(ErrorClassifier); ok {
		m.classify = c.ClassifyError
	}
	if err := orchestrate.Register(rt, m, engineRunner[S]{m}); err != nil {
		return nil, fmt.Errorf("process: %w", err)
	}
	return m, nil
}

// Model returns the execution model, "process".
func (m *Manager[S]) Model() string { return Model }

// Type returns the process type.
func (m *Manager[S]) Type() string { return m.typ }

// Domain returns the process domain.
func (m *Manager[S]) Domain() string { return m.domain }

// StartOption configures Start and StartBatch.
type StartOption func(*startOptions)

type startOptions struct {
	deferred    *bool
	id          uuid.UUID
	ids         []uuid.UUID
	businessKey string
	keys        []string
	tenantID    string
	batchID     uuid.UUID
	deadline    *time.Time
	attributes  map[string]string
	tx          any
	notBefore   *time.Time // deferred executions are taken up from then (StartJSON, StartManyJSON)
}

// Deferred creates the execution PENDING for a runner to pick up, instead of running it in the
// caller's goroutine. It is StartBatch's default.
func Deferred() StartOption { return func(o *startOptions) { t := true; o.deferred = &t } }

// notBefore has the deferred executions taken up from t (orchestration.StartRequest.NotBefore).
func notBefore(t time.Time) StartOption { return func(o *startOptions) { o.notBefore = &t } }

// Immediate runs the execution in the caller's goroutine until it completes, waits or schedules a
// retry. It is Start's default.
func Immediate() StartOption { return func(o *startOptions) { f := false; o.deferred = &f } }

// WithID sets the execution id (Start only), for deterministic ids. Starting again with an id
// that exists creates nothing and runs nothing: the execution starts once.
func WithID(id uuid.UUID) StartOption { return func(o *startOptions) { o.id = id } }

// WithIDs sets the execution ids of StartBatch, one per state in order, so a caller can record
// them with its own rows before the executions exist (and start any that are missing after a
// crash without creating a second: an id that exists is skipped).
func WithIDs(ids ...uuid.UUID) StartOption { return func(o *startOptions) { o.ids = ids } }

// WithBusinessKeys sets the business keys of StartBatch, one per state in order.
func WithBusinessKeys(keys ...string) StartOption { return func(o *startOptions) { o.keys = keys } }

// WithBusinessKey records the business key (a payment id) for lookups.
func WithBusinessKey(key string) StartOption { return func(o *startOptions) { o.businessKey = key } }

// WithTenant records the tenant.
func WithTenant(id string) StartOption { return func(o *startOptions) { o.tenantID = id } }

// WithBatch records the batch the execution belongs to.
func WithBatch(id uuid.UUID) StartOption { return func(o *startOptions) { o.batchID = id } }

// WithDeadline sets the process deadline: past it, the deadline action applies.
func WithDeadline(t time.Time) StartOption { return func(o *startOptions) { o.deadline = &t } }

// WithAttributes sets custom search attributes of the execution (of every execution of
// StartBatch): short key/value pairs to find it by with ListParams.Attributes. Keys are 1 to 64
// letters, digits, '_', '.' or '-'; values at most 1024 bytes; an empty value is not stored.
// Later options add to earlier ones. A step changes them with Execution.SetAttribute.
func WithAttributes(attrs map[string]string) StartOption {
	return func(o *startOptions) {
		if o.attributes == nil {
			o.attributes = make(map[string]string, len(attrs))
		}
		for k, v := range attrs {
			o.attributes[k] = v
		}
	}
}

// Start creates an execution with the initial state and, by default, runs it in the caller's
// goroutine until it completes, waits for a response or schedules a retry. It returns the
// execution id; the execution exists (durably) whatever happens after.
func (m *Manager[S]) Start(ctx context.Context, state S, opts ...StartOption) (uuid.UUID, error) {
	o := &startOptions{}
	for _, opt := range opts {
		opt(o)
	}
	ids, err := m.start(ctx, []S{state}, o, false)
	if err != nil {
		return uuid.Nil, err
	}
	return ids[0], nil
}

// StartBatch creates many executions in one round trip; by default runners pick them up
// (Deferred). With Immediate they run one after another in the caller's goroutine.
func (m *Manager[S]) StartBatch(ctx context.Context, states []S, opts ...StartOption) ([]uuid.UUID, error) {
	o := &startOptions{}
	for _, opt := range opts {
		opt(o)
	}
	if o.id != uuid.Nil {
		return nil, errors.New("process: WithID applies to Start only")
	}
	return m.start(ctx, states, o, true)
}

func (m *Manager[S]) start(ctx context.Context, states []S, o *startOptions, batchDefault bool) ([]uuid.UUID, error) {
	deferred := batchDefault
	if o.deferred != nil {
		deferred = *o.deferred
	}
	if o.tx != nil {
		if !deferred && o.deferred != nil {
			return nil, errors.New("process: Immediate cannot run an execution inside the caller's transaction; call RunNow after the commit")
		}
		deferred = true
	}
	if o.ids != nil && len(o.ids) != len(states) {
		return nil, fmt.Errorf("process: WithIDs has %d ids for %d states", len(o.ids), len(states))
	}
	if o.keys != nil && len(o.keys) != len(states) {
		return nil, fmt.Errorf("process: WithBusinessKeys has %d keys for %d states", len(o.keys), len(states))
	}
	if err := driver.ValidateAttributes(o.attributes); err != nil {
		return nil, fmt.Errorf("process: WithAttributes: %w", err)
	}
	params := make([]*driver.ExecutionInsertParams, len(states))
	ids := make([]uuid.UUID, len(states))
	// The starting request's trace context is the execution's: its commands carry it.
	var traceparent string
	if sc, ok := tracecontext.FromContext(ctx); ok {
		traceparent = sc.Traceparent()
	}
	for i, s := range states {
		encoded, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("process: encoding initial state: %w", err)
		}
		id := o.id
		if o.ids != nil {
			id = o.ids[i]
		}
		if id == uuid.Nil {
			id = uuid.Must(uuid.NewV7())
		}
		ids[i] = id
		businessKey := o.businessKey
		if o.keys != nil {
			businessKey = o.keys[i]
		}
		params[i] = &driver.ExecutionInsertParams{
			ID: id, Model: Model, Type: m.typ, Domain: m.domain, TenantID: o.tenantID,
			BusinessKey: businessKey, BatchID: o.batchID, State: encoded, DeadlineAt: o.deadline,
			WorkerID: m.client.Config().WorkerID, Traceparent: traceparent, Attributes: o.attributes,
			Log: []*driver.ExecutionLogEntry{{Seq: 1, EntryType: entryLifecycle, Name: "created", StepStatus: statusProcessCreated,
				Actor: "process:" + m.typ, Response: marshalOrNil(createdEntry{BusinessKey: businessKey, Deferred: deferred})}},
		}
		if !deferred {
			params[i].Lease = m.engine.Config().Lease
		}
		params[i].NotBefore = o.notBefore
	}
	if o.tx != nil {
		return ids, m.insertInTx(ctx, o.tx, params)
	}
	leases, err := m.engine.Insert(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("process: creating executions: %w", err)
	}
	if !deferred {
		for _, lease := range leases {
			if lease == nil {
				continue // the id existed: started before, by this call or another
			}
			if err := m.run(ctx, lease, nil, nil); err != nil {
				return ids, err
			}
		}
	}
	return ids, nil
}

// Instance is an execution of this process as stored: its row, decoded state and, from Get, its
// log and search attributes.
type Instance[S any] struct {
	*cbtype.ExecutionRow
	State S
	Log   []*cbtype.ExecutionLogEntry
	// Attributes are the execution's custom search attributes (Get only; nil from List).
	Attributes map[string]string
}

// Get returns an execution with its state and log, or commandbus.ErrNotFound.
func (m *Manager[S]) Get(ctx context.Context, id uuid.UUID) (*Instance[S], error) {
	exec := m.engine.Exec()
	row, err := exec.ExecutionGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if row.Type != m.typ {
		return nil, fmt.Errorf("%w: execution %s is a %q, not a %q", commandbus.ErrNotFound, id, row.Type, m.typ)
	}
	inst, err := m.instance(row)
	if err != nil {
		return nil, err
	}
	if inst.Log, err = exec.ExecutionLogList(ctx, id); err != nil {
		return nil, err
	}
	if inst.Attributes, err = exec.ExecutionAttributes(ctx, id); err != nil {
		return nil, err
	}
	return inst, nil
}

// ListParams filters List; zero fields do not filter.
type ListParams struct {
	Statuses    []cbtype.ExecutionStatus
	BusinessKey string
	TenantID    string
	BatchID     uuid.UUID
	// Attributes keeps executions that have every one of these search attributes with exactly
	// this value.
	Attributes map[string]string
	BeforeID   uuid.UUID
	Limit      int
}

// List returns executions of this process type, newest first.
func (m *Manager[S]) List(ctx context.Context, params ListParams) ([]*Instance[S], error) {
	rows, err := m.engine.Exec().ExecutionList(ctx, &driver.ExecutionListParams{
		Statuses: params.Statuses, Model: Model, Type: m.typ, BusinessKey: params.BusinessKey,
		TenantID: params.TenantID, BatchID: params.BatchID, Attributes: params.Attributes,
		BeforeID: params.BeforeID, Limit: params.Limit,
	})
	if err != nil {
		return nil, err
	}
	out := make([]*Instance[S], 0, len(rows))
	for _, row := range rows {
		inst, err := m.instance(row)
		if err != nil {
			return nil, err
		}
		out = append(out, inst)
	}
	return out, nil
}

func (m *Manager[S]) instance(row *driver.ExecutionRow) (*Instance[S], error) {
	inst := &Instance[S]{ExecutionRow: row}
	if err := json.Unmarshal(row.State, &inst.State); err != nil {
		return nil, fmt.Errorf("decoding state of execution %s: %w", row.ID, err)
	}
	return inst, nil
}

// RunNow runs an execution now in the caller's goroutine if no runner holds it and it is not
// terminal, suspended or in the troubleshooting queue; otherwise it does nothing.
func (m *Manager[S]) RunNow(ctx context.Context, id uuid.UUID) error {
	lease, err := m.engine.Acquire(ctx, id)
	if errors.Is(err, execution.ErrBusy) {
		return nil
	}
	if err != nil {
		return err
	}
	return m.run(ctx, lease, nil, nil)
}

// waitTimeout is the timeout of a wait that gives none.
func (m *Manager[S]) waitTimeout() time.Duration {
	cfg := m.client.Config()
	if t := cfg.ProcessType(m.typ); t != nil && t.DefaultWaitTimeout > 0 {
		return t.DefaultWaitTimeout.Std() // the deployment's override wins over the code's default
	}
	if w, ok := m.process.(WaitTimeouter); ok && w.DefaultWaitTimeout() > 0 {
		return w.DefaultWaitTimeout()
	}
	return cfg.Process.DefaultWaitTimeout.Std()
}

// deadlineAction is the action applied past the deadline.
func (m *Manager[S]) deadlineAction() DeadlineAction {
	if t := m.client.Config().ProcessType(m.typ); t != nil && t.DeadlineAction != "" {
		return DeadlineAction(t.DeadlineAction) // the deployment's override wins over the code's default
	}
	if d, ok := m.process.(DeadlineActioner); ok && d.DeadlineAction() != "" {
		return d.DeadlineAction()
	}
	return DeadlineTSQ
}

// OnResponse registers how a response type changes the state of this process's executions. The
// response's ResponseName routes it; registering a name twice panics.
func OnResponse[S any, R AsyncResponse](m *Manager[S], apply func(state *S, r R) error) {
	var zero R
	name := responseName(zero)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.appliers[name]; dup {
		panic(fmt.Sprintf("process: a response applier for %q is already registered on %q", name, m.typ))
	}
	m.appliers[name] = func(state *S, payload json.RawMessage) error {
		var r R
		if reflect.TypeOf(r) != nil && reflect.TypeOf(r).Kind() == reflect.Pointer {
			r = reflect.New(reflect.TypeOf(r).Elem()).Interface().(R)
			if err := json.Unmarshal(payload, r); err != nil {
				return err
			}
		} else if err := json.Unmarshal(payload, &r); err != nil {
			return err
		}
		return apply(state, r)
	}
}

func (m *Manager[S]) applier(name string) func(*S, json.RawMessage) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.appliers[name]
}
