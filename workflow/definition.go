package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/commandbus/commandbus/internal/flowmodel"
	"github.com/commandbus/commandbus/orchestration"
)

// StepFunc is a local step: it gets the step's context (the workflow input, its dependencies'
// results) and returns the step's result, which is stored as JSON. It must be safe to run again
// after a crash between its effect and its record (use StepContext.Key as an idempotency key).
type StepFunc func(ctx context.Context, sc *StepContext) (any, error)

// CompensateFunc undoes a completed step; it gets the step's context with the step's own result
// available through Result(sc.Step, ...).
type CompensateFunc func(ctx context.Context, sc *StepContext) error

// RetryPolicy says how a failing step is retried (see orchestration.RetryPolicy).
type RetryPolicy = orchestration.RetryPolicy

// StepOption configures a step.
type StepOption func(*stepDef)

// DependsOn names the steps that must be done (completed or skipped) before this one runs.
func DependsOn(steps ...string) StepOption {
	return func(s *stepDef) { s.deps = append(s.deps, steps...) }
}

// Retry sets the step's retry policy.
func Retry(p RetryPolicy) StepOption { return func(s *stepDef) { s.retry = p; s.retrySet = true } }

// Timeout bounds one attempt of the step; an attempt still running then fails with
// context.DeadlineExceeded (transient). Default: 30s.
func Timeout(d time.Duration) StepOption { return func(s *stepDef) { s.timeout = d } }

// When runs the step only if cond returns true; otherwise the step is recorded SKIPPED (and the
// skip logged) and its dependants go on.
func When(cond func(sc *StepContext) bool) StepOption { return func(s *stepDef) { s.cond = cond } }

// Compensate registers the step's compensation, run when a later business failure unwinds the
// workflow. A command step's compensation also runs when the step sent its command but did not
// complete (a failure reply does not prove that nothing took effect): it must be idempotent and
// cope with a step that took no effect and has no result, keyed on StepContext.Key.
func Compensate(fn CompensateFunc) StepOption { return func(s *stepDef) { s.compensate = fn } }

// stepKind is what a step does when it is ready.
type stepKind int

const (
	kindLocal   stepKind = iota // runs its function
	kindSignal                  // waits for a signal by name
	kindTimer                   // waits for a durable timer
	kindChild                   // starts a child workflow and waits for its end
	kindCommand                 // sends a command to a domain and waits for its reply
)

// OnTimeout is what a signal gate does when its timeout passes without the signal.
type OnTimeout int

// The timeout policies of a signal gate.
const (
	// TimeoutFail fails the step as a business failure: the workflow runs its compensations.
	TimeoutFail OnTimeout = iota
	// TimeoutBranch completes the step with the result {"timedOut": true}; dependants take the
	// timeout branch with When(func(sc) bool { return sc.TimedOut(gate) }).
	TimeoutBranch
	// TimeoutTSQ parks the execution in the troubleshooting queue (SIGNAL_TIMEOUT) for an
	// operator to retry (wait again) or skip (give the step a result).
	TimeoutTSQ
)

// SignalTimeout bounds how long a signal gate waits, and says what happens then.
func SignalTimeout(d time.Duration, then OnTimeout) StepOption {
	return func(s *stepDef) { s.waitTimeout, s.onTimeout = d, then }
}

type stepDef struct {
	id         string
	kind       stepKind
	signal     string
	sleep      time.Duration
	childType  string
	childInput func(sc *StepContext) (any, error)
	// domain, commandType and request make a command step's command.
	domain, commandType string
	request             func(sc *StepContext) (any, error)
	// waitTimeout and onTimeout bound a signal gate.
	waitTimeout time.Duration
	onTimeout   OnTimeout
	fn          StepFunc
	deps        []string
	retry       RetryPolicy
	retrySet    bool
	timeout     time.Duration
	cond        func(*StepContext) bool
	compensate  CompensateFunc
	// comp are the compensation's retry, timeout and criticality (models on the runner set
	// them through internal/flowmodel).
	comp flowmodel.Compensation
	// expand makes the step one instance per item of the input; an instance has template (the
	// step's id), its item and the item's key.
	expand   *flowmodel.Expansion
	template string
	item     json.RawMessage
	itemKey  string
}

// Definition is a workflow: its id (the execution type), version, description and a DAG of
// steps. Build it with New and Step; Register validates it.
type Definition struct {
	id, description  string
	version          int
	domain           string
	steps            []*stepDef
	layerConcurrency int
	timeout          time.Duration
	onDeadline       DeadlineAction
	retry            RetryPolicy
	triggers         []string
}

// New starts a definition; id names the workflow type and is persisted, so keep it stable.
func New(id string, version int) *Definition {
	return &Definition{id: id, version: version, domain: "workflows"}
}

// Describe sets the description.
func (d *Definition) Describe(text string) *Definition { d.description = text; return d }

// TriggeredBy names inbound event types that start the workflow: an event of one of them (POST
// /api/events, an AMQP event queue, a Kafka event topic) starts an execution with the event's
// data as input, once per event (see orchestration.Runtime.HandleEvent). The triggers are not
// part of the definition's hash: changing them leaves running executions alone.
func (d *Definition) TriggeredBy(eventTypes ...string) *Definition {
	d.triggers = append(d.triggers, eventTypes...)
	return d
}

// Domain sets the domain the workflow lives in (default "workflows").
func (d *Definition) Domain(domain string) *Definition { d.domain = domain; return d }

// LayerConcurrency bounds how many ready steps run at once (default 8).
func (d *Definition) LayerConcurrency(n int) *Definition { d.layerConcurrency = n; return d }

// Timeout sets the workflow's deadline, counted from its start; past it the deadline action
// applies (see OnDeadline; by default the execution parks in the troubleshooting queue with
// DEADLINE_EXCEEDED).
func (d *Definition) Timeout(t time.Duration) *Definition { d.timeout = t; return d }

// DeadlineAction is what happens when a workflow passes its deadline.
type DeadlineAction string

// The deadline actions.
const (
	// DeadlineTSQ parks the execution in the troubleshooting queue (the default).
	DeadlineTSQ DeadlineAction = "TSQ"
	// DeadlineCompensate runs the compensations of the completed steps and ends COMPENSATED.
	DeadlineCompensate DeadlineAction = "COMPENSATE"
	// DeadlineFail ends the execution FAILED at once.
	DeadlineFail DeadlineAction = "FAIL"
)

// OnDeadline sets the deadline action.
func (d *Definition) OnDeadline(action DeadlineAction) *Definition { d.onDeadline = action; return d }

// DefaultRetry sets the retry policy of steps that set none.
func (d *Definition) DefaultRetry(p RetryPolicy) *Definition { d.retry = p; return d }

// Step adds a local step.
func (d *Definition) Step(id string, fn StepFunc, opts ...StepOption) *Definition {
	s := &stepDef{id: id, fn: fn, timeout: 30 * time.Second}
	for _, o := range opts {
		o(s)
	}
	d.steps = append(d.steps, s)
	return d
}

// WaitSignal adds a signal gate: once its dependencies are done, the step waits for a signal
// named signal (one sent earlier is buffered and counts) and completes with the signal's payload
// as its result. SignalTimeout bounds the wait.
func (d *Definition) WaitSignal(id, signal string, opts ...StepOption) *Definition {
	s := &stepDef{id: id, kind: kindSignal, signal: signal, timeout: 30 * time.Second}
	for _, o := range opts {
		o(s)
	}
	d.steps = append(d.steps, s)
	return d
}

// Sleep adds a durable timer: once its dependencies are done, the step completes after delay,
// across restarts; no goroutine sleeps on it.
func (d *Definition) Sleep(id string, delay time.Duration, opts ...StepOption) *Definition {
	s := &stepDef{id: id, kind: kindTimer, sleep: delay, timeout: 30 * time.Second}
	for _, o := range opts {
		o(s)
	}
	d.steps = append(d.steps, s)
	return d
}

// Child adds a child workflow step: once its dependencies are done, it starts an execution of
// workflow childType (registered on the same runtime) with the input input returns, and
// completes with the child's outcome when the child completes. A child that fails, is
// compensated or cancelled fails the step (CHILD_<STATUS>), which parks the parent in the
// troubleshooting queue. Cancelling the parent cancels its children.
func (d *Definition) Child(id, childType string, input func(sc *StepContext) (any, error), opts ...StepOption) *Definition {
	s := &stepDef{id: id, kind: kindChild, childType: childType, childInput: input, timeout: 30 * time.Second}
	for _, o := range opts {
		o(s)
	}
	d.steps = append(d.steps, s)
	return d
}

// Command adds a command step: once its dependencies are done, it sends a command of type
// commandType to domain with the payload request returns, and completes with the reply's
// result. The command goes out in the checkpoint that records the step (with the other ready
// command steps of its layer). The target domain's concurrency is the rate limit. A FAILED reply
// is a business failure (compensations), a TIMED_OUT reply or no reply within the reply timeout
// (the configuration's command-steps.<id>.timeout, 2 minutes by default) a transient one, retried
// by the step's policy with a new command, a CANCELLED reply a permanent one. domain and
// commandType default to the configuration's command-steps.<id> entry when empty.
func (d *Definition) Command(id, domain, commandType string, request func(sc *StepContext) (any, error), opts ...StepOption) *Definition {
	s := &stepDef{id: id, kind: kindCommand, domain: domain, commandType: commandType, request: request, timeout: 30 * time.Second}
	for _, o := range opts {
		o(s)
	}
	d.steps = append(d.steps, s)
	return d
}

// ID returns the workflow type.
func (d *Definition) ID() string { return d.id }

// Version returns the definition's version.
func (d *Definition) Version() int { return d.version }

// DefinitionError lists every problem of a definition, one per line.
type DefinitionError struct {
	Workflow string
	Problems []string
}

func (e *DefinitionError) Error() string {
	return fmt.Sprintf("workflow %q: %s", e.Workflow, strings.Join(e.Problems, "; "))
}

// Is makes a DefinitionError match commandbus.ValidationError's role for callers using
// errors.Is with ErrInvalidDefinition.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

// ErrInvalidDefinition is matched by every DefinitionError.
var ErrInvalidDefinition = errors.New("workflow: invalid definition")

// Topology is a definition's DAG as computed at registration: layers by Kahn's algorithm, in
// which every step's dependencies are in earlier layers, and the edges.
type Topology = orchestration.Topology

// Edge is a dependency: From must be done before To runs.
type Edge = orchestration.Edge

// validate checks the definition and computes its topology. Each problem is reported once: an
// empty definition, a step without id or function, a duplicate id, a missing dependency, a
// self-dependency and a cycle (naming its steps).
func (d *Definition) validate() (*Topology, error) {
	var problems []string
	if d.id == "" {
		problems = append(problems, "the workflow id is empty")
	}
	if d.layerConcurrency < 0 || d.timeout < 0 {
		problems = append(problems, "LayerConcurrency and Timeout must not be negative")
	}
	switch d.onDeadline {
	case "", DeadlineTSQ, DeadlineCompensate, DeadlineFail:
	default:
		problems = append(problems, fmt.Sprintf("the deadline action %q is not TSQ, COMPENSATE or FAIL", d.onDeadline))
	}
	if len(d.steps) == 0 {
		problems = append(problems, "the definition has no steps")
	}
	byID := map[string]*stepDef{}
	for i, s := range d.steps {
		switch {
		case s.id == "":
			problems = append(problems, fmt.Sprintf("step %d has no id", i+1))
			continue
		case byID[s.id] != nil:
			problems = append(problems, fmt.Sprintf("step %q is declared twice", s.id))
			continue
		}
		switch {
		case s.kind == kindLocal && s.fn == nil:
			problems = append(problems, fmt.Sprintf("step %q has no function", s.id))
		case s.kind == kindSignal && s.signal == "":
			problems = append(problems, fmt.Sprintf("step %q waits for a signal without a name", s.id))
		case s.kind == kindTimer && s.sleep <= 0:
			problems = append(problems, fmt.Sprintf("step %q: the sleep must be positive", s.id))
		case s.kind == kindChild && (s.childType == "" || s.childInput == nil):
			problems = append(problems, fmt.Sprintf("step %q needs a child workflow type and an input function", s.id))
		case s.kind == kindCommand && s.request == nil:
			problems = append(problems, fmt.Sprintf("step %q needs a request function", s.id))
		case s.expand != nil && s.kind != kindLocal && s.kind != kindCommand:
			problems = append(problems, fmt.Sprintf("step %q: only local and command steps expand over items", s.id))
		case s.expand != nil && s.expand.Items == nil:
			problems = append(problems, fmt.Sprintf("step %q expands without an items function", s.id))
		}
		if s.comp.Timeout < 0 {
			problems = append(problems, fmt.Sprintf("step %q: the compensation timeout must not be negative", s.id))
		}
		if s.waitTimeout < 0 {
			problems = append(problems, fmt.Sprintf("step %q: the signal timeout must not be negative", s.id))
		}
		if s.timeout <= 0 {
			problems = append(problems, fmt.Sprintf("step %q: the timeout must be positive", s.id))
		}
		byID[s.id] = s
	}
	for _, s := range d.steps {
		seen := map[string]bool{}
		for _, dep := range s.deps {
			switch {
			case dep == s.id:
				problems = append(problems, fmt.Sprintf("step %q depends on itself", s.id))
			case byID[dep] == nil:
				problems = append(problems, fmt.Sprintf("step %q depends on %q, which is not a step", s.id, dep))
			case seen[dep]:
				problems = append(problems, fmt.Sprintf("step %q names dependency %q twice", s.id, dep))
			}
			seen[dep] = true
		}
	}
	if len(problems) > 0 {
		return nil, &DefinitionError{Workflow: d.id, Problems: problems}
	}
	topo := &Topology{Edges: []Edge{}} // a DAG without edges encodes "edges": [], as documented
	indegree := map[string]int{}
	dependants := map[string][]string{}
	for _, s := range d.steps {
		indegree[s.id] = len(s.deps)
		for _, dep := range s.deps {
			dependants[dep] = append(dependants[dep], s.id)
			topo.Edges = append(topo.Edges, Edge{From: dep, To: s.id})
		}
	}
	var layer []string
	for _, s := range d.steps {
		if indegree[s.id] == 0 {
			layer = append(layer, s.id)
		}
	}
	placed := 0
	for len(layer) > 0 {
		topo.Layers = append(topo.Layers, layer)
		placed += len(layer)
		var next []string
		for _, id := range layer {
			for _, to := range dependants[id] {
				if indegree[to]--; indegree[to] == 0 {
					next = append(next, to)
				}
			}
		}
		sort.Strings(next)
		layer = next
	}
	if placed < len(d.steps) {
		problems = append(problems, "cycle: "+strings.Join(cycle(d.steps, indegree), " → "))
		return nil, &DefinitionError{Workflow: d.id, Problems: problems}
	}
	return topo, nil
}

// cycle finds one cycle among the steps Kahn's algorithm could not place and returns it as a
// path that ends where it starts.
func cycle(steps []*stepDef, indegree map[string]int) []string {
	deps := map[string][]string{}
	var start string
	for _, s := range steps {
		if indegree[s.id] > 0 {
			deps[s.id] = s.deps
			if start == "" {
				start = s.id
			}
		}
	}
	// Walk dependencies among unplaced steps until a step repeats: every unplaced step has an
	// unplaced dependency, so the walk must close a cycle.
	index := map[string]int{}
	var path []string
	for at := start; ; {
		if i, ok := index[at]; ok {
			return append(slices.Clone(path[i:]), at)
		}
		index[at] = len(path)
		path = append(path, at)
		for _, dep := range deps[at] {
			if indegree[dep] > 0 {
				at = dep
				break
			}
		}
	}
}

// hash identifies the definition's shape (id, version, steps, dependencies, options that change
// what runs): an execution started under one hash parks with DEFINITION_CHANGED if it resumes
// under another.
func (d *Definition) hash() string {
	type step struct {
		ID   string   `json:"id"`
		Kind int      `json:"kind,omitempty"`
		Wait string   `json:"wait,omitempty"`
		Deps []string `json:"deps,omitempty"`
		Cond bool     `json:"cond,omitempty"`
		Comp bool     `json:"comp,omitempty"`
		Each bool     `json:"each,omitempty"`
	}
	shape := struct {
		ID      string `json:"id"`
		Version int    `json:"version"`
		Steps   []step `json:"steps"`
	}{ID: d.id, Version: d.version}
	for _, s := range d.steps {
		shape.Steps = append(shape.Steps, step{ID: s.id, Kind: int(s.kind), Wait: s.signal + s.childType + s.domain + s.commandType, Deps: s.deps, Cond: s.cond != nil, Comp: s.compensate != nil, Each: s.expand != nil})
	}
	b, _ := json.Marshal(shape)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
