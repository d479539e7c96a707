package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/flowmodel"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

// StepContext is what a step and its compensation see: the execution, the attempt, the saga's
// input, the results of the steps done before it and, for an expanded instance, its item.
type StepContext = workflow.StepContext

// StepFunc is a local step. It returns the step's result (stored as JSON). It must be safe to run
// again after a crash between its effect and its record: use StepContext.Key as an idempotency
// key.
type StepFunc = workflow.StepFunc

// CompensateFunc undoes a completed step; the step's own result is available through
// sc.Result(sc.Step, ...). It must be safe to run again for the same reason.
type CompensateFunc = workflow.CompensateFunc

// RetryPolicy says how a failing step or compensation is retried (see
// orchestration.RetryPolicy).
type RetryPolicy = orchestration.RetryPolicy

// CompensationPolicy says in which order and with what parallelism compensations run.
type CompensationPolicy string

// The compensation policies.
const (
	// StrictSequential runs compensations one at a time in reverse completion order; a failed
	// one does not stop the next. The default.
	StrictSequential CompensationPolicy = flowmodel.StrictSequential
	// GroupedParallel runs the DAG's layers in reverse, the compensations of one layer in
	// parallel.
	GroupedParallel CompensationPolicy = flowmodel.GroupedParallel
	// RetryWithBackoff is StrictSequential with each compensation retried by its retry policy
	// (CompensationRetry, else the step's Retry), durably.
	RetryWithBackoff CompensationPolicy = flowmodel.RetryWithBackoff
	// CircuitBreaker is RetryWithBackoff where the failure for good of a Critical step's
	// compensation stops the compensations not yet run (they are named when the saga parks).
	CircuitBreaker CompensationPolicy = flowmodel.CircuitBreaker
	// BestEffortParallel runs every compensation at once; each failure is recorded.
	BestEffortParallel CompensationPolicy = flowmodel.BestEffortParallel
)

// CompensationTrigger says which step failures start the compensation phase.
type CompensationTrigger int

// The compensation triggers.
const (
	// OnBusinessFailure compensates after a business failure (a commandbus.BusinessRuleError, a
	// FAILED command reply); a permanent failure or exhausted retries park the saga in the
	// troubleshooting queue for an operator instead. The default.
	OnBusinessFailure CompensationTrigger = iota
	// OnAnyFailure also compensates after permanent failures and exhausted retries.
	OnAnyFailure
)

// StepOption configures a step.
type StepOption func(*stepConfig)

type stepConfig struct {
	wf     []workflow.StepOption
	comp   flowmodel.Compensation
	expand *flowmodel.Expansion
}

// DependsOn names the steps that must be done before this one runs.
func DependsOn(steps ...string) StepOption {
	return func(c *stepConfig) { c.wf = append(c.wf, workflow.DependsOn(steps...)) }
}

// Retry sets the step's retry policy (by default, the saga's DefaultRetry).
func Retry(p RetryPolicy) StepOption {
	return func(c *stepConfig) { c.wf = append(c.wf, workflow.Retry(p)) }
}

// Timeout bounds one attempt of the step (default 30s); an attempt still running then fails with
// context.DeadlineExceeded (transient).
func Timeout(d time.Duration) StepOption {
	return func(c *stepConfig) { c.wf = append(c.wf, workflow.Timeout(d)) }
}

// When runs the step only if cond holds once its dependencies are done; otherwise the step is
// recorded SKIPPED (nothing to compensate) and its dependants go on.
func When(cond func(sc *StepContext) bool) StepOption {
	return func(c *stepConfig) { c.wf = append(c.wf, workflow.When(cond)) }
}

// Compensate sets the step's compensation, run when the saga unwinds after the step completed,
// and, for a command step, also after it sent its command without completing: its failure reply
// does not prove that nothing took effect (an earlier attempt under the same step key may land
// late). Such a compensation finds no result (StepContext.Result fails): it undoes by the step
// key, StepContext.Key, which the command carried.
func Compensate(fn CompensateFunc) StepOption {
	return func(c *stepConfig) { c.wf = append(c.wf, workflow.Compensate(fn)) }
}

// CompensationRetry sets the compensation's retry policy. Under RetryWithBackoff and
// CircuitBreaker a compensation without one uses the step's Retry; under the other policies a
// compensation is tried once unless it has one.
func CompensationRetry(p RetryPolicy) StepOption {
	return func(c *stepConfig) { c.comp.Retry, c.comp.RetrySet = p, true }
}

// CompensationTimeout bounds one attempt of the compensation (default: the step's Timeout).
func CompensationTimeout(d time.Duration) StepOption {
	return func(c *stepConfig) { c.comp.Timeout = d }
}

// Critical marks the step's compensation critical: under CircuitBreaker, its failure for good
// stops the compensations not yet run.
func Critical() StepOption { return func(c *stepConfig) { c.comp.Critical = true } }

// ExpandEach makes the step one instance per item that items returns from the saga's input, all
// in the step's layer, each with its own retries, record and compensation; the step's
// dependants wait for every instance. An instance's id is the step's id and ":" and key(item),
// or "#" and the item's index when key is nil. Steps read their item with Item.
func ExpandEach[In, Item any](items func(input In) []Item, key func(item Item) string) StepOption {
	e := flowmodel.Expansion{Items: func(raw json.RawMessage) ([]json.RawMessage, error) {
		var in In
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, fmt.Errorf("decoding the saga input: %w", err)
			}
		}
		list := items(in)
		out := make([]json.RawMessage, len(list))
		for i, it := range list {
			b, err := json.Marshal(it)
			if err != nil {
				return nil, fmt.Errorf("item %d cannot be encoded as JSON: %w", i, err)
			}
			out[i] = b
		}
		return out, nil
	}}
	if key != nil {
		e.Key = func(raw json.RawMessage) (string, error) {
			var it Item
			if err := json.Unmarshal(raw, &it); err != nil {
				return "", err
			}
			k := key(it)
			if k == "" || strings.ContainsAny(k, ":#") {
				return "", fmt.Errorf("item key %q is empty or holds ':' or '#'", k)
			}
			return k, nil
		}
	}
	return func(c *stepConfig) { c.expand = &e }
}

// Item decodes the item of an expanded step instance.
func Item[T any](sc *StepContext) (T, error) {
	var v T
	err := sc.Item(&v)
	return v, err
}

// Definition is a saga: its id (the execution type), version, compensation policy and a DAG of
// steps. Build it with New and Step or Command; Register validates it.
type Definition struct {
	wf      *workflow.Definition
	id      string
	domain  string
	policy  CompensationPolicy
	trigger CompensationTrigger
	onEnd   func(ctx context.Context, row *driver.ExecutionRow, status driver.ExecutionStatus) error
}

// New starts a definition; id names the saga type and is persisted, so keep it stable. Sagas live
// in domain "sagas" unless Domain says otherwise.
func New(id string, version int) *Definition {
	// A saga past its deadline (Timeout, or workflow.WithDeadline at its start) compensates.
	return &Definition{wf: workflow.New(id, version).Domain("sagas").OnDeadline(workflow.DeadlineCompensate), id: id, domain: "sagas"}
}

// Describe sets the description.
func (d *Definition) Describe(text string) *Definition { d.wf.Describe(text); return d }

// TriggeredBy names inbound event types that start the saga: an event of one of them starts an
// execution with the event's data as input, once per event (see
// orchestration.Runtime.HandleEvent).
func (d *Definition) TriggeredBy(eventTypes ...string) *Definition {
	d.wf.TriggeredBy(eventTypes...)
	return d
}

// Domain sets the domain the saga lives in (default "sagas"); command steps' replies come back to
// its reply queue.
func (d *Definition) Domain(domain string) *Definition {
	d.wf.Domain(domain)
	d.domain = domain
	return d
}

// LayerConcurrency bounds how many ready steps run at once (default 8).
func (d *Definition) LayerConcurrency(n int) *Definition { d.wf.LayerConcurrency(n); return d }

// DefaultRetry sets the retry policy of steps that set none.
func (d *Definition) DefaultRetry(p RetryPolicy) *Definition { d.wf.DefaultRetry(p); return d }

// Timeout sets the saga's deadline, counted from its start: a saga still running past it
// compensates what completed and ends COMPENSATED with DEADLINE_EXCEEDED.
func (d *Definition) Timeout(t time.Duration) *Definition {
	d.wf.Timeout(t)
	return d
}

// Policy sets the compensation policy (default StrictSequential).
func (d *Definition) Policy(p CompensationPolicy) *Definition { d.policy = p; return d }

// OnOperatorEnd is told, before it is written, that an operator ends a saga without running it:
// cancelled without compensations (CANCELLED) or force-completed (COMPLETED), so the application
// can record the outcome where the saga's steps would have; an error refuses the action.
func (d *Definition) OnOperatorEnd(fn func(ctx context.Context, row *driver.ExecutionRow, status driver.ExecutionStatus) error) *Definition {
	d.onEnd = fn
	return d
}

// CompensateOn sets which failures start the compensation phase (default OnBusinessFailure).
func (d *Definition) CompensateOn(t CompensationTrigger) *Definition { d.trigger = t; return d }

// Step adds a local step.
func (d *Definition) Step(id string, fn StepFunc, opts ...StepOption) *Definition {
	d.wf.Step(id, fn, d.options(opts)...)
	return d
}

// Command adds a command step: once its dependencies are done it sends a command of type
// commandType to domain with the payload request returns, and completes with the reply's result
// (see workflow.Definition.Command for replies, timeouts and retries). A FAILED reply is a
// business failure: the saga compensates.
func (d *Definition) Command(id, domain, commandType string, request func(sc *StepContext) (any, error), opts ...StepOption) *Definition {
	d.wf.Command(id, domain, commandType, request, d.options(opts)...)
	return d
}

func (d *Definition) options(opts []StepOption) []workflow.StepOption {
	c := &stepConfig{}
	for _, o := range opts {
		o(c)
	}
	out := append(c.wf, flowmodel.CompensationOption(c.comp).(workflow.StepOption))
	if c.expand != nil {
		out = append(out, flowmodel.ExpandOption(*c.expand).(workflow.StepOption))
	}
	return out
}

// ID returns the saga type.
func (d *Definition) ID() string { return d.id }

// DefinitionError lists every problem of a definition.
type DefinitionError struct {
	Saga     string
	Problems []string
}

func (e *DefinitionError) Error() string {
	return fmt.Sprintf("saga %q: %s", e.Saga, strings.Join(e.Problems, "; "))
}

// Is makes every DefinitionError match ErrInvalidDefinition.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

// ErrInvalidDefinition is matched by every DefinitionError.
var ErrInvalidDefinition = errors.New("saga: invalid definition")

func (d *Definition) validatePolicy() []string {
	var problems []string
	switch d.policy {
	case "", StrictSequential, GroupedParallel, RetryWithBackoff, CircuitBreaker, BestEffortParallel:
	default:
		problems = append(problems, fmt.Sprintf("the compensation policy %q is not one of STRICT_SEQUENTIAL, GROUPED_PARALLEL, RETRY_WITH_BACKOFF, CIRCUIT_BREAKER, BEST_EFFORT_PARALLEL", d.policy))
	}
	if d.trigger != OnBusinessFailure && d.trigger != OnAnyFailure {
		problems = append(problems, fmt.Sprintf("the compensation trigger %d is not OnBusinessFailure or OnAnyFailure", d.trigger))
	}
	return problems
}
