// Package orchestrate is how the authoring models of this module (process, and the models to
// come) reach the orchestration runtime's engine and registration, which the public package
// orchestration keeps off its API. Package orchestration sets these hooks when it is initialised;
// a model imports orchestration (for the *Runtime its constructor takes), so they are always set
// before a model calls them.
package orchestrate

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
)

// Runner drives the executions of one (model, type): the engine's Runner plus a run that applies
// a response handed over in memory (a command reply or an async response delivered while no
// runner held the execution).
type Runner interface {
	execution.Runner
	RunWithResponse(ctx context.Context, lease *execution.Lease, r *driver.ExecutionResponseRow) error
}

// The hooks. rt is always a *orchestration.Runtime and ops an orchestration.Operations; they are
// typed any because this package cannot import orchestration.
var (
	// Engine returns the runtime's execution engine.
	Engine func(rt any) *execution.Engine
	// Register adds a model's runner and operator operations for one (model, type), and the
	// reply handler of its domain.
	Register func(rt any, ops any, runner Runner) error
	// Deliver hands a response to an execution: straight into a run when no runner holds it, or
	// stored for the runner that does.
	Deliver func(rt any, ctx context.Context, id uuid.UUID, name string, payload json.RawMessage) error
)

// ReplyResponseName is the response name under which a command step's reply reaches its
// execution.
const ReplyResponseName = "commandbus.command-reply"
