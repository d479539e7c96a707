package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/internal/flowmodel"
	"github.com/commandbus/commandbus/internal/orchestrate"
	"github.com/commandbus/commandbus/orchestration"
)

// Model is the execution model name of workflows.
const Model = "workflow"

// Manager runs one workflow definition on the orchestration runtime: it starts executions, runs
// their DAG (ready steps in parallel, up to the layer concurrency) and offers the operator
// actions. Register managers before starting the client.
type Manager struct {
	rt     *orchestration.Runtime
	client *commandbus.Client
	engine *execution.Engine
	def    *Definition
	topo   *Topology
	steps  map[string]*stepDef
	hash   string
	logger *slog.Logger
	// model is the model name the executions carry ("workflow", or a model built on this
	// runner); flow is what that model asks of the runner.
	model   string
	flow    flowmodel.Options
	base    *plan
	expands bool

	randMu sync.Mutex
	rand   *rand.Rand
}

// Option configures Register.
type Option func(*Manager)

// WithRand sets the random source of retry jitter (tests inject a seeded one).
func WithRand(r *rand.Rand) Option { return func(m *Manager) { m.rand = r } }

// Register validates def, computes its topology and registers it with the runtime. Every problem
// of the definition is reported at once (a DefinitionError): an empty definition, a duplicate
// step id, a missing dependency, a self-dependency, a cycle (naming its steps).
func Register(rt *orchestration.Runtime, def *Definition, opts ...Option) (*Manager, error) {
	return register(rt, def, flowmodel.Options{}, opts...)
}

func register(rt *orchestration.Runtime, def *Definition, flow flowmodel.Options, opts ...Option) (*Manager, error) {
	if rt == nil || def == nil {
		return nil, errors.New("workflow: Register needs a runtime and a definition")
	}
	topo, err := def.validate()
	if err != nil {
		return nil, err
	}
	if flow.Model == "" {
		flow.Model = Model
	}
	if flow.Policy == "" {
		flow.Policy = flowmodel.StrictSequential
	}
	client := rt.Client()
	m := &Manager{
		rt: rt, client: client, engine: orchestrate.Engine(rt), def: def, topo: topo,
		steps: map[string]*stepDef{}, hash: def.hash(), model: flow.Model, flow: flow,
		logger: client.Logger().With(flow.Model, def.id),
		rand:   rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x77f)),
	}
	for _, o := range opts {
		o(m)
	}
	for _, s := range def.steps {
		m.steps[s.id] = s
		if !s.retrySet {
			s.retry = def.retry
		}
		s.retry = s.retry.WithDefaults()
		if !s.comp.RetrySet {
			s.comp.Retry = s.retry
		}
		if s.comp.Retry.RetryOn == nil {
			// A compensation is retried unless its error says retrying cannot help.
			s.comp.Retry.RetryOn = func(err error) bool {
				class, _ := commandbus.Classify(err, commandbus.ClassTransient)
				return class == commandbus.ClassTransient
			}
		}
		s.comp.Retry = s.comp.Retry.WithDefaults()
		if s.comp.Timeout == 0 {
			s.comp.Timeout = s.timeout
		}
		m.expands = m.expands || s.expand != nil
	}
	m.base = newPlan(topo.Layers, def.steps)
	if def.layerConcurrency == 0 {
		def.layerConcurrency = 8
	}
	if err := orchestrate.Register(rt, m, engineRunner{m}); err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	return m, nil
}

// Model returns "workflow" (or the name of the model built on the workflow runner that
// registered this definition, such as "saga").
func (m *Manager) Model() string { return m.model }

// Type returns the workflow id.
func (m *Manager) Type() string { return m.def.id }

// Domain returns the workflow's domain.
func (m *Manager) Domain() string { return m.def.domain }

// TriggerEventTypes implements orchestration.Triggered: the event types the definition names
// with TriggeredBy.
func (m *Manager) TriggerEventTypes() []string { return append([]string(nil), m.def.triggers...) }

// Topology returns the definition's layers and edges.
func (m *Manager) Topology() *Topology { return m.topo }

// StartOption configures Start.
type StartOption func(*startOptions)

type startOptions struct {
	id          uuid.UUID
	businessKey string
	tenantID    string
	dryRun      bool
	immediate   bool
	startAt     *time.Time
	attributes  map[string]string
	// For StartMany (and deadline, batch and transaction for Start too).
	ids      []uuid.UUID
	keys     []string
	deadline *time.Time
	batchID  uuid.UUID
	tx       any
}

// WithAttributes sets search attributes of the execution at its start.
func WithAttributes(attrs map[string]string) StartOption {
	return func(o *startOptions) { o.attributes = attrs }
}

// WithID sets the execution id. Start is idempotent on it: starting an id that exists does
// nothing and returns the id, so a caller may retry a start whose answer it lost.
func WithID(id uuid.UUID) StartOption { return func(o *startOptions) { o.id = id } }

// WithBusinessKey records the business key for lookups.
func WithBusinessKey(key string) StartOption { return func(o *startOptions) { o.businessKey = key } }

// WithTenant records the tenant.
func WithTenant(id string) StartOption { return func(o *startOptions) { o.tenantID = id } }

// DryRun walks the DAG in layer order and records every step SKIPPED without running any step.
func DryRun() StartOption { return func(o *startOptions) { o.dryRun = true } }

// Immediate runs the execution in the caller's goroutine until it completes, parks or schedules
// a retry, instead of leaving it to the runtime's pollers (the default).
func Immediate() StartOption { return func(o *startOptions) { o.immediate = true } }

// StartAt delays the start: the execution waits until t before its first step.
func StartAt(t time.Time) StartOption { return func(o *startOptions) { o.startAt = &t } }

// Start creates an execution of the workflow with input (encoded as JSON) and returns its id;
// the execution is durable when Start returns.
func (m *Manager) Start(ctx context.Context, input any, opts ...StartOption) (uuid.UUID, error) {
	o := &startOptions{}
	for _, opt := range opts {
		opt(o)
	}
	payload, err := json.Marshal(input)
	if err != nil {
		return uuid.Nil, &commandbus.ValidationError{Field: "input", Message: "cannot be encoded as JSON: " + err.Error()}
	}
	if o.immediate && o.startAt != nil {
		return uuid.Nil, &commandbus.ValidationError{Field: "options", Message: "Immediate and StartAt exclude each other"}
	}
	id := o.id
	if id == uuid.Nil {
		id = uuid.Must(uuid.NewV7())
	}
	if err := driver.ValidateAttributes(o.attributes); err != nil {
		return uuid.Nil, &commandbus.ValidationError{Field: "attributes", Message: err.Error()}
	}
	if o.tx != nil && (o.immediate || o.startAt != nil) {
		return uuid.Nil, &commandbus.ValidationError{Field: "options", Message: "InTx creates the execution for the runners: it excludes Immediate and StartAt (call RunNow after the commit)"}
	}
	if o.ids != nil || o.keys != nil {
		return uuid.Nil, &commandbus.ValidationError{Field: "options", Message: "WithIDs and WithBusinessKeys apply to StartMany; Start takes WithID and WithBusinessKey"}
	}
	params := m.newExecution(id, payload, createdInfo{DryRun: o.dryRun, StartAt: o.startAt})
	params.TenantID, params.BusinessKey, params.Attributes = o.tenantID, o.businessKey, o.attributes
	o.apply(params)
	if o.tx != nil {
		return id, m.insertInTx(ctx, o.tx, []*driver.ExecutionInsertParams{params})
	}
	if o.immediate || o.startAt != nil {
		params.Lease, params.WorkerID = m.engine.Config().Lease, m.engine.Config().WorkerID
	}
	leases, err := m.engine.Insert(ctx, []*driver.ExecutionInsertParams{params})
	if err != nil {
		return uuid.Nil, err
	}
	lease := leases[0]
	switch {
	case lease == nil:
		// The id existed (or the execution is pending for the pollers): nothing more to do.
	case o.startAt != nil:
		// Leased at its creation, so only this call sets the delay: the first run waits for it.
		cp := lease.Base()
		cp.Status, cp.Release = driver.ExecutionWaitingForRetry, true
		cp.RetryDelay = max(o.startAt.Sub(m.engine.Config().Clock()), time.Millisecond)
		if err := lease.Checkpoint(ctx, cp); err != nil {
			return id, fmt.Errorf("workflow %s created but its delayed start was not set: %w", id, err)
		}
	default:
		if err := m.run(ctx, lease, nil); err != nil {
			return id, err
		}
	}
	return id, nil
}

// StartMany creates one execution per input in one round trip, PENDING for the runtime's pollers,
// and returns their ids in input order. It takes WithIDs, WithBusinessKeys, WithTenant,
// WithAttributes, WithDeadline, WithBatch and InTx; an id that exists is not started again.
func (m *Manager) StartMany(ctx context.Context, inputs []any, opts ...StartOption) ([]uuid.UUID, error) {
	o := &startOptions{}
	for _, opt := range opts {
		opt(o)
	}
	switch {
	case o.id != uuid.Nil || o.businessKey != "" || o.immediate || o.startAt != nil || o.dryRun:
		return nil, &commandbus.ValidationError{Field: "options", Message: "StartMany takes WithIDs and WithBusinessKeys, not WithID, WithBusinessKey, Immediate, StartAt or DryRun"}
	case o.ids != nil && len(o.ids) != len(inputs):
		return nil, &commandbus.ValidationError{Field: "ids", Message: fmt.Sprintf("WithIDs has %d ids for %d inputs", len(o.ids), len(inputs))}
	case o.keys != nil && len(o.keys) != len(inputs):
		return nil, &commandbus.ValidationError{Field: "businessKeys", Message: fmt.Sprintf("WithBusinessKeys has %d keys for %d inputs", len(o.keys), len(inputs))}
	}
	if err := driver.ValidateAttributes(o.attributes); err != nil {
		return nil, &commandbus.ValidationError{Field: "attributes", Message: err.Error()}
	}
	params := make([]*driver.ExecutionInsertParams, len(inputs))
	ids := make([]uuid.UUID, len(inputs))
	for i, in := range inputs {
		payload, err := json.Marshal(in)
		if err != nil {
			return nil, &commandbus.ValidationError{Field: fmt.Sprintf("inputs[%d]", i), Message: "cannot be encoded as JSON: " + err.Error()}
		}
		ids[i] = uuid.Must(uuid.NewV7())
		if o.ids != nil {
			ids[i] = o.ids[i]
		}
		params[i] = m.newExecution(ids[i], payload, createdInfo{})
		params[i].TenantID, params[i].Attributes = o.tenantID, o.attributes
		if o.keys != nil {
			params[i].BusinessKey = o.keys[i]
		}
		o.apply(params[i])
	}
	if o.tx != nil {
		return ids, m.insertInTx(ctx, o.tx, params)
	}
	if _, err := m.engine.Insert(ctx, params); err != nil {
		return nil, err
	}
	return ids, nil
}

// newExecution is the insert of an execution of this workflow: its model, type and domain, its
// input, its deadline (from the workflow's timeout) and the created entry recording the
// definition's hash and version with info's start options.
func (m *Manager) newExecution(id uuid.UUID, input json.RawMessage, info createdInfo) *driver.ExecutionInsertParams {
	info.Hash, info.Version = m.hash, m.def.version
	created, _ := json.Marshal(info)
	params := &driver.ExecutionInsertParams{
		ID: id, Model: m.model, Type: m.def.id, Domain: m.def.domain, State: input,
		Log: []*driver.ExecutionLogEntry{{Seq: 1, EntryType: entryLifecycle, Name: nameCreated, StepStatus: statusCompleted, Request: created}},
	}
	if m.def.timeout > 0 {
		deadline := m.engine.Config().Clock().Add(m.def.timeout)
		params.DeadlineAt = &deadline
	}
	return params
}

// Instance is a workflow execution as stored, with its log and per-step view.
type Instance struct {
	*cbtype.ExecutionRow
	Steps      []StepStatus                `json:"steps"`
	Attributes map[string]string           `json:"attributes,omitempty"`
	Log        []*cbtype.ExecutionLogEntry `json:"log"`
}

// StepStatus is one step of an execution: its status (PENDING until it ran), attempts, result
// and error, and when it last ran.
type StepStatus struct {
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	Attempts  int             `json:"attempts"`
	Result    json.RawMessage `json:"result,omitempty"`
	ErrorCode string          `json:"errorCode,omitempty"`
	Error     string          `json:"error,omitempty"`
	StartedAt *time.Time      `json:"startedAt,omitempty"`
	EndedAt   *time.Time      `json:"endedAt,omitempty"`
	// Instance is the step an expanded instance was made from ("" for a step that is not one).
	Instance string `json:"instanceOf,omitempty"`
	// Compensation is the step's compensation status (COMPLETED, FAILED, RETRY_SCHEDULED or
	// SKIPPED; "" while it has not run), with its failed attempts and last error, and
	// CompensationOrder the order in which it ended among the execution's compensations (from 1).
	Compensation         string `json:"compensation,omitempty"`
	CompensationAttempts int    `json:"compensationAttempts,omitempty"`
	CompensationError    string `json:"compensationError,omitempty"`
	CompensationOrder    int    `json:"compensationOrder,omitempty"`
}

// Get returns an execution with its steps and log, or commandbus.ErrNotFound.
func (m *Manager) Get(ctx context.Context, id uuid.UUID) (*Instance, error) {
	exec := m.engine.Exec()
	row, err := exec.ExecutionGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if row.Model != m.model || row.Type != m.def.id {
		return nil, fmt.Errorf("%w: execution %s is a %s %q, not %s %q", commandbus.ErrNotFound, id, row.Model, row.Type, m.model, m.def.id)
	}
	entries, err := exec.ExecutionLogList(ctx, id)
	if err != nil {
		return nil, err
	}
	inst := &Instance{ExecutionRow: row, Log: entries}
	if inst.Attributes, err = exec.ExecutionAttributes(ctx, id); err != nil {
		return nil, err
	}
	f := fold(entries)
	times := map[string][2]*time.Time{}
	for _, e := range entries {
		if e.EntryType == entryStep {
			at := e.At
			times[e.Name] = [2]*time.Time{e.StartedAt, &at}
		}
	}
	p, err := m.planFor(row.State)
	if err != nil {
		p = m.base // the execution parked with EXPANSION_FAILED: show the definition's steps
	}
	for _, layer := range p.layers {
		for _, sid := range layer {
			st := StepStatus{ID: sid, Status: "PENDING", Instance: p.steps[sid].template}
			if r := f.steps[sid]; r != nil && r.status != "" {
				st.Status, st.Attempts, st.ErrorCode, st.Error = r.status, r.attempts, r.errCode, r.errMsg
				if r.status == statusCompleted {
					st.Attempts++
					st.Result = r.result
				}
				t := times[sid]
				st.StartedAt, st.EndedAt = t[0], t[1]
				st.Compensation, st.CompensationAttempts, st.CompensationError, st.CompensationOrder = r.compStat, r.compAttempts, r.compErr, r.compOrder
				if r.compStat == statusCompleted {
					st.CompensationAttempts++
				}
			}
			inst.Steps = append(inst.Steps, st)
		}
	}
	return inst, nil
}

// GetJSON implements orchestration.Operations.
func (m *Manager) GetJSON(ctx context.Context, id uuid.UUID) (*orchestration.InstanceJSON, error) {
	inst, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &orchestration.InstanceJSON{ExecutionRow: inst.ExecutionRow, Log: inst.Log, Attributes: inst.Attributes}
	if m.flow.Result != nil {
		out.Result = m.flow.Result(inst)
	}
	return out, nil
}

// Describe implements orchestration.Describer: the definition with its topology.
func (m *Manager) Describe() orchestration.Definition {
	d := orchestration.Definition{Model: m.model, Type: m.def.id, Domain: m.def.domain, Version: m.def.version,
		Description: m.def.description, Topology: m.topo}
	if m.model != Model {
		d.CompensationPolicy = m.flow.Policy // a model built on this runner that chose one
	}
	return d
}

// StartJSON implements orchestration.Starter.
func (m *Manager) StartJSON(ctx context.Context, req orchestration.StartRequest) (uuid.UUID, error) {
	var input any
	if len(req.Input) > 0 {
		if !json.Valid(req.Input) {
			return uuid.Nil, &commandbus.ValidationError{Field: "input", Message: "not valid JSON"}
		}
		input = req.Input
	}
	opts := []StartOption{WithBusinessKey(req.BusinessKey), WithTenant(req.TenantID), WithAttributes(req.Attributes)}
	if req.ID != uuid.Nil {
		opts = append(opts, WithID(req.ID))
	}
	if req.DryRun {
		opts = append(opts, DryRun())
	}
	if !req.NotBefore.IsZero() {
		opts = append(opts, StartAt(req.NotBefore))
	}
	return m.Start(ctx, input, opts...)
}

var (
	_ orchestration.Operations = (*Manager)(nil)
	_ orchestration.Describer  = (*Manager)(nil)
	_ orchestration.Starter    = (*Manager)(nil)
	_ orchestration.Triggered  = (*Manager)(nil)
)

// engineRunner is the manager as the execution core's runner.
type engineRunner struct{ m *Manager }

// Type implements the runtime's runner.
func (r engineRunner) Type() string { return r.m.def.id }

// Run continues a leased execution from its log.
func (r engineRunner) Run(ctx context.Context, lease *execution.Lease) error {
	return r.m.run(ctx, lease, nil)
}

// Deadline parks an execution whose workflow timeout passed in the troubleshooting queue.
func (r engineRunner) Deadline(ctx context.Context, lease *execution.Lease) error {
	return r.m.deadline(ctx, lease)
}

// RunWithResponse records a response (a command step's reply, a child's end) and runs the
// execution, which applies it. The response is stored while this runner holds the lease, before
// the run: releasing first left it to the pending poller (a whole poll interval later, and
// never with a long interval and no notification), and a run that fails now leaves it stored
// for the next one.
func (r engineRunner) RunWithResponse(ctx context.Context, lease *execution.Lease, resp *driver.ExecutionResponseRow) error {
	seq, err := r.m.engine.Exec().ExecutionResponseInsert(ctx, &driver.ExecutionResponseInsertParams{
		ExecutionID: resp.ExecutionID, Name: resp.Name, Payload: resp.Payload, Now: r.m.engine.Config().Now(),
	})
	if err != nil {
		_ = lease.Release(ctx)
		return err
	}
	lease.Row.ResponsesReceived = max(lease.Row.ResponsesReceived, seq)
	return r.m.run(ctx, lease, nil)
}

func (m *Manager) jitter() float64 {
	m.randMu.Lock()
	defer m.randMu.Unlock()
	return m.rand.Float64()
}

// ListParams filters List; zero fields do not filter.
type ListParams struct {
	Statuses    []cbtype.ExecutionStatus
	BusinessKey string
	TenantID    string
	// Attributes keeps executions with every one of these search attributes.
	Attributes map[string]string
	BeforeID   uuid.UUID
	Limit      int
}

// List returns executions of this workflow, newest first.
func (m *Manager) List(ctx context.Context, params ListParams) ([]*cbtype.ExecutionRow, error) {
	return m.engine.Exec().ExecutionList(ctx, &driver.ExecutionListParams{
		Statuses: params.Statuses, Model: m.model, Type: m.def.id, BusinessKey: params.BusinessKey,
		TenantID: params.TenantID, Attributes: params.Attributes, BeforeID: params.BeforeID, Limit: params.Limit,
	})
}

func init() {
	flowmodel.Register = func(rt *orchestration.Runtime, def any, opts flowmodel.Options) (any, error) {
		d, ok := def.(*Definition)
		if !ok {
			return nil, fmt.Errorf("workflow: %T is not a *workflow.Definition", def)
		}
		return register(rt, d, opts)
	}
	flowmodel.CompensationOption = func(c flowmodel.Compensation) any {
		return StepOption(func(s *stepDef) { s.comp = c })
	}
	flowmodel.ExpandOption = func(e flowmodel.Expansion) any {
		return StepOption(func(s *stepDef) { s.expand = &e })
	}
}
