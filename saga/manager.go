package saga

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/internal/flowmodel"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

// Model is the execution model name of sagas.
const Model = "saga"

// Instance is a saga execution as stored, with its per-step view (compensations included) and
// its log.
type Instance = workflow.Instance

// Manager runs one saga definition on the orchestration runtime. It has the workflow runner's
// methods (Start, StartMany, Get, List and the operator actions Retry, Skip, CancelOverride,
// CompleteOverride, Suspend, Resume) and Result. Register managers before starting the client.
type Manager struct {
	*workflow.Manager
	def *Definition
}

// Register validates def (the topology checks of workflows, and the policy) and registers it with
// the runtime under model "saga". Every problem is reported at once in a DefinitionError.
func Register(rt *orchestration.Runtime, def *Definition) (*Manager, error) {
	if rt == nil || def == nil {
		return nil, errors.New("saga: Register needs a runtime and a definition")
	}
	if problems := def.validatePolicy(); len(problems) > 0 {
		return nil, &DefinitionError{Saga: def.id, Problems: problems}
	}
	policy := def.policy
	if policy == "" {
		policy = StrictSequential
	}
	wm, err := flowmodel.Register(rt, def.wf, flowmodel.Options{
		Model: Model, Policy: string(policy), CompensateOnAny: def.trigger == OnAnyFailure,
		Result: func(inst any) any { return ResultOf(inst.(*Instance)) },
		OnEnd:  def.onEnd,
	})
	if err != nil {
		var de *workflow.DefinitionError
		if errors.As(err, &de) {
			return nil, &DefinitionError{Saga: def.id, Problems: de.Problems}
		}
		return nil, fmt.Errorf("saga: %w", err)
	}
	return &Manager{Manager: wm.(*workflow.Manager), def: def}, nil
}

// Policy returns the saga's compensation policy.
func (m *Manager) Policy() CompensationPolicy {
	if m.def.policy == "" {
		return StrictSequential
	}
	return m.def.policy
}

// Result returns the outcome of a saga execution so far (see ResultOf), or
// commandbus.ErrNotFound.
func (m *Manager) Result(ctx context.Context, id uuid.UUID) (*Result, error) {
	inst, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return ResultOf(inst), nil
}

var _ orchestration.Operations = (*Manager)(nil)
