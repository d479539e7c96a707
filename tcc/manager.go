package tcc

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
	"github.com/commandbus/commandbus/internal/orchestrate"
	"github.com/commandbus/commandbus/orchestration"
)

// Model is the execution model name of TCC transactions.
const Model = "tcc"

// Config is the last level of the chain that resolves a phase's retry policy and timeout
// (phase → participant → definition → Config): what a registration uses for the phases no
// other level sets.
type Config struct {
	// Retry is the retry policy of phases no other level sets. Default: RetryPolicy{} with its
	// defaults (3 attempts, transient errors only).
	Retry *RetryPolicy
	// Timeout bounds one attempt of a phase no other level bounds. Default: DefaultTimeout.
	Timeout time.Duration
}

// Manager runs one TCC definition on the orchestration runtime: it starts transactions, runs
// their phases and offers the operator actions. Register managers before starting the client.
type Manager struct {
	rt     *orchestration.Runtime
	engine *execution.Engine
	def    *Definition
	byID   map[string]*participant
	hash   string
	logger *slog.Logger

	randMu sync.Mutex
	rand   *rand.Rand
}

// Option configures Register.
type Option func(*registration)

type registration struct {
	cfg  Config
	rand *rand.Rand
}

// WithConfig sets the configuration level of the retry and timeout chain.
func WithConfig(cfg Config) Option { return func(r *registration) { r.cfg = cfg } }

// WithRand sets the random source of retry jitter (tests inject a seeded one).
func WithRand(src *rand.Rand) Option { return func(r *registration) { r.rand = src } }

// Register validates def and registers it with the runtime under model "tcc". Every problem of
// the definition is reported at once (a DefinitionError).
func Register(rt *orchestration.Runtime, def *Definition, opts ...Option) (*Manager, error) {
	if rt == nil || def == nil {
		return nil, errors.New("tcc: Register needs a runtime and a definition")
	}
	reg := &registration{}
	for _, o := range opts {
		o(reg)
	}
	if reg.cfg.Timeout < 0 {
		return nil, &commandbus.ValidationError{Field: "Config.Timeout", Message: "must not be negative"}
	}
	if err := def.validate(); err != nil {
		return nil, err
	}
	def.resolve(reg.cfg)
	m := &Manager{
		rt: rt, engine: orchestrate.Engine(rt), def: def, byID: map[string]*participant{}, hash: def.hash(),
		logger: rt.Client().Logger().With("tcc", def.id),
		rand:   reg.rand,
	}
	if m.rand == nil {
		m.rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x7cc))
	}
	for _, p := range def.participants {
		m.byID[p.id] = p
	}
	if err := orchestrate.Register(rt, m, engineRunner{m}); err != nil {
		return nil, fmt.Errorf("tcc: %w", err)
	}
	return m, nil
}

// Model returns "tcc".
func (m *Manager) Model() string { return Model }

// Type returns the transaction type (the definition's id).
func (m *Manager) Type() string { return m.def.id }

// Domain returns the transactions' domain.
func (m *Manager) Domain() string { return m.def.domain }

// PhasePolicy returns the retry policy and timeout a participant's phase runs with, as resolved
// at registration (phase, participant, definition, configuration, defaults).
func (m *Manager) PhasePolicy(participant string, phase Phase) (RetryPolicy, time.Duration, error) {
	p := m.byID[participant]
	if p == nil {
		return RetryPolicy{}, 0, &commandbus.ValidationError{Field: "participant", Message: fmt.Sprintf("TCC %q has no participant %q", m.def.id, participant)}
	}
	if phase != PhaseTry && phase != PhaseConfirm && phase != PhaseCancel {
		return RetryPolicy{}, 0, &commandbus.ValidationError{Field: "phase", Message: fmt.Sprintf("%q is not TRY, CONFIRM or CANCEL", phase)}
	}
	eff := p.resolved[phaseIndex(phase)]
	return eff.retry, eff.timeout, nil
}

// StartOption configures Start.
type StartOption func(*startOptions)

type startOptions struct {
	id          uuid.UUID
	businessKey string
	tenantID    string
	immediate   bool
	attributes  map[string]string
}

// WithID sets the transaction id. Start is idempotent on it: starting an id that exists does
// nothing and returns the id.
func WithID(id uuid.UUID) StartOption { return func(o *startOptions) { o.id = id } }

// WithBusinessKey records the business key for lookups.
func WithBusinessKey(key string) StartOption { return func(o *startOptions) { o.businessKey = key } }

// WithTenant records the tenant.
func WithTenant(id string) StartOption { return func(o *startOptions) { o.tenantID = id } }

// WithAttributes sets search attributes of the transaction at its start.
func WithAttributes(attrs map[string]string) StartOption {
	return func(o *startOptions) { o.attributes = attrs }
}

// Immediate runs the transaction in the caller's goroutine until it ends, parks or waits for a
// retry, instead of leaving it to the runtime's pollers (the default).
func Immediate() StartOption { return func(o *startOptions) { o.immediate = true } }

// Start creates a transaction with input (encoded as JSON) and returns its id; the transaction is
// durable when Start returns.
func (m *Manager) Start(ctx context.Context, input any, opts ...StartOption) (uuid.UUID, error) {
	o := &startOptions{}
	for _, opt := range opts {
		opt(o)
	}
	payload, err := json.Marshal(input)
	if err != nil {
		return uuid.Nil, &commandbus.ValidationError{Field: "input", Message: "cannot be encoded as JSON: " + err.Error()}
	}
	if err := driver.ValidateAttributes(o.attributes); err != nil {
		return uuid.Nil, &commandbus.ValidationError{Field: "attributes", Message: err.Error()}
	}
	id := o.id
	if id == uuid.Nil {
		id = uuid.Must(uuid.NewV7())
	}
	params := m.newExecution(id, payload)
	params.TenantID, params.BusinessKey, params.Attributes = o.tenantID, o.businessKey, o.attributes
	if o.immediate {
		params.Lease, params.WorkerID = m.engine.Config().Lease, m.engine.Config().WorkerID
	}
	leases, err := m.engine.Insert(ctx, []*driver.ExecutionInsertParams{params})
	if err != nil {
		return uuid.Nil, err
	}
	if lease := leases[0]; lease != nil {
		// A new transaction's log is its created entry: run it without reading the log back.
		if err := m.runFolded(ctx, lease, fold(params.Log), nil); err != nil {
			return id, err
		}
	}
	return id, nil
}

// StartMany creates one transaction per input in one round trip, PENDING for the runtime's
// pollers, and returns their ids in input order.
func (m *Manager) StartMany(ctx context.Context, inputs []any) ([]uuid.UUID, error) {
	params := make([]*driver.ExecutionInsertParams, len(inputs))
	ids := make([]uuid.UUID, len(inputs))
	for i, in := range inputs {
		payload, err := json.Marshal(in)
		if err != nil {
			return nil, &commandbus.ValidationError{Field: fmt.Sprintf("inputs[%d]", i), Message: "cannot be encoded as JSON: " + err.Error()}
		}
		ids[i] = uuid.Must(uuid.NewV7())
		params[i] = m.newExecution(ids[i], payload)
	}
	if _, err := m.engine.Insert(ctx, params); err != nil {
		return nil, err
	}
	return ids, nil
}

func (m *Manager) newExecution(id uuid.UUID, input json.RawMessage) *driver.ExecutionInsertParams {
	created, _ := json.Marshal(createdInfo{Hash: m.hash, Version: m.def.version})
	return &driver.ExecutionInsertParams{
		ID: id, Model: Model, Type: m.def.id, Domain: m.def.domain, State: input,
		Log: []*driver.ExecutionLogEntry{{Seq: 1, EntryType: entryLifecycle, Name: nameCreated, StepStatus: statusCompleted, Request: created}},
	}
}

// Instance is a transaction as stored, with its result and log.
type Instance struct {
	*cbtype.ExecutionRow
	Result     *TccResult                  `json:"result"`
	Attributes map[string]string           `json:"attributes,omitempty"`
	Log        []*cbtype.ExecutionLogEntry `json:"log"`
}

// Get returns a transaction with its result and log, or commandbus.ErrNotFound.
func (m *Manager) Get(ctx context.Context, id uuid.UUID) (*Instance, error) {
	exec := m.engine.Exec()
	row, err := exec.ExecutionGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if row.Model != Model || row.Type != m.def.id {
		return nil, fmt.Errorf("%w: execution %s is a %s %q, not TCC %q", commandbus.ErrNotFound, id, row.Model, row.Type, m.def.id)
	}
	entries, err := exec.ExecutionLogList(ctx, id)
	if err != nil {
		return nil, err
	}
	inst := &Instance{ExecutionRow: row, Log: entries, Result: m.result(row, entries)}
	if inst.Attributes, err = exec.ExecutionAttributes(ctx, id); err != nil {
		return nil, err
	}
	return inst, nil
}

// Result returns a transaction's TccResult, or commandbus.ErrNotFound.
func (m *Manager) Result(ctx context.Context, id uuid.UUID) (*TccResult, error) {
	inst, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return inst.Result, nil
}

// GetJSON implements orchestration.Operations; the TccResult is the instance's Result.
func (m *Manager) GetJSON(ctx context.Context, id uuid.UUID) (*orchestration.InstanceJSON, error) {
	inst, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &orchestration.InstanceJSON{ExecutionRow: inst.ExecutionRow, Log: inst.Log, Attributes: inst.Attributes, Result: inst.Result}, nil
}

// Describe implements orchestration.Describer: the participants as a chain, in try order.
func (m *Manager) Describe() orchestration.Definition {
	topo := &orchestration.Topology{}
	for i, p := range m.def.participants {
		topo.Layers = append(topo.Layers, []string{p.id})
		if i > 0 {
			topo.Edges = append(topo.Edges, orchestration.Edge{From: m.def.participants[i-1].id, To: p.id})
		}
	}
	return orchestration.Definition{Model: Model, Type: m.def.id, Domain: m.def.domain, Version: m.def.version,
		Description: m.def.description, Topology: topo}
}

// Steps implements orchestration.StepDescriber: one step per participant (local, or a command
// named by its try's command type), each with its cancel as compensation; an optional
// participant is reported conditional.
func (m *Manager) Steps() []orchestration.StepInfo {
	out := make([]orchestration.StepInfo, 0, len(m.def.participants))
	for i, p := range m.def.participants {
		info := orchestration.StepInfo{ID: p.id, Kind: orchestration.StepKindLocal, Compensated: true, Conditional: p.optional}
		if p.isCommand() {
			info.Kind, info.CommandDomain, info.CommandType = orchestration.StepKindCommand, p.domain, p.commands.Try
		}
		if i > 0 {
			info.DependsOn = []string{m.def.participants[i-1].id}
		}
		out = append(out, info)
	}
	return out
}

// StartJSON implements orchestration.Starter.
func (m *Manager) StartJSON(ctx context.Context, req orchestration.StartRequest) (uuid.UUID, error) {
	if req.DryRun {
		return uuid.Nil, &commandbus.ValidationError{Field: "dryRun", Message: "a TCC transaction has no dry run"}
	}
	if !req.NotBefore.IsZero() {
		return uuid.Nil, &commandbus.ValidationError{Field: "notBefore", Message: "a TCC transaction starts at once; start it at its time"}
	}
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
	return m.Start(ctx, input, opts...)
}

// ListParams filters List; zero fields do not filter.
type ListParams struct {
	Statuses    []cbtype.ExecutionStatus
	BusinessKey string
	TenantID    string
	BeforeID    uuid.UUID
	Limit       int
}

// List returns transactions of this type, newest first.
func (m *Manager) List(ctx context.Context, params ListParams) ([]*cbtype.ExecutionRow, error) {
	return m.engine.Exec().ExecutionList(ctx, &driver.ExecutionListParams{
		Statuses: params.Statuses, Model: Model, Type: m.def.id, BusinessKey: params.BusinessKey,
		TenantID: params.TenantID, BeforeID: params.BeforeID, Limit: params.Limit,
	})
}

var (
	_ orchestration.Operations    = (*Manager)(nil)
	_ orchestration.Describer     = (*Manager)(nil)
	_ orchestration.Starter       = (*Manager)(nil)
	_ orchestration.StepDescriber = (*Manager)(nil)
)

// engineRunner is the manager as the execution core's runner.
type engineRunner struct{ m *Manager }

// Type implements the runtime's runner.
func (r engineRunner) Type() string { return r.m.def.id }

// Run continues a leased transaction from its log.
func (r engineRunner) Run(ctx context.Context, lease *execution.Lease) error {
	return r.m.run(ctx, lease, nil)
}

// Deadline runs the transaction on: a TCC transaction sets no deadline of its own.
func (r engineRunner) Deadline(ctx context.Context, lease *execution.Lease) error {
	return r.m.run(ctx, lease, nil)
}

// RunWithResponse records a response (a command participant's reply) and runs the transaction,
// which applies it. The response is stored before the run, while this runner holds the lease, so
// it is never lost: a run that fails leaves it for the next one.
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
