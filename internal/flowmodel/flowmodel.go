// Package flowmodel is the seam between the shared DAG runner (package workflow) and the
// declarative models built on it (package saga): what a model changes in the runner is said
// here, as plain values, so there is one runner, one replay and one persistence for all of
// them. The runner installs the functions at init; a model calls them.
package flowmodel

import (
	"context"
	"encoding/json"
	"time"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
)

// The compensation policies the runner knows.
const (
	// StrictSequential runs compensations one at a time in reverse completion order; a failed
	// one does not stop the others.
	StrictSequential = "STRICT_SEQUENTIAL"
	// GroupedParallel runs the layers in reverse, the compensations of one layer in parallel.
	GroupedParallel = "GROUPED_PARALLEL"
	// RetryWithBackoff is StrictSequential with each compensation retried by its retry policy
	// (durable retries through the execution's wake time).
	RetryWithBackoff = "RETRY_WITH_BACKOFF"
	// CircuitBreaker is RetryWithBackoff where a critical compensation that fails for good stops
	// the compensations not yet run.
	CircuitBreaker = "CIRCUIT_BREAKER"
	// BestEffortParallel runs every compensation at once.
	BestEffortParallel = "BEST_EFFORT_PARALLEL"
)

// Options are what a model asks of the runner for one definition.
type Options struct {
	// Model is the model name stored on the executions ("saga"); empty: "workflow".
	Model string
	// Policy is the compensation policy (one of the constants); empty: StrictSequential.
	Policy string
	// CompensateOnAny also compensates after permanent failures and exhausted retries, not
	// only after business failures.
	CompensateOnAny bool
	// Result builds the model's result of an execution (the runner's *workflow.Instance) for
	// the generic execution JSON; nil: none.
	Result func(instance any) any
	// OnEnd is told, before it is written, that an operator ends an execution without running
	// it: cancelled without compensations (CANCELLED) or force-completed (COMPLETED), so the
	// model's application can record the outcome; an error refuses the action. nil: nothing.
	OnEnd func(ctx context.Context, row *driver.ExecutionRow, status driver.ExecutionStatus) error
}

// Compensation is a step's compensation settings beyond its function.
type Compensation struct {
	// Retry retries a failing compensation (policies RetryWithBackoff and CircuitBreaker);
	// RetrySet says it was given (else the step's own retry policy applies).
	Retry    orchestration.RetryPolicy
	RetrySet bool
	// Timeout bounds one attempt (zero: the step's timeout).
	Timeout time.Duration
	// Critical opens the circuit (policy CircuitBreaker) when the compensation fails for good.
	Critical bool
}

// Expansion makes one step N instances: Items returns the items from the execution's input,
// Key names each (nil: the suffix is "#n").
type Expansion struct {
	Items func(input json.RawMessage) ([]json.RawMessage, error)
	Key   func(item json.RawMessage) (string, error)
}

// Installed by package workflow.
var (
	// Register registers a *workflow.Definition with a runtime under opts and returns the
	// *workflow.Manager.
	Register func(rt *orchestration.Runtime, def any, opts Options) (any, error)
	// CompensationOption returns the workflow.StepOption setting c.
	CompensationOption func(c Compensation) any
	// ExpandOption returns the workflow.StepOption that expands the step.
	ExpandOption func(e Expansion) any
)
