package process

import (
	"context"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/orchestration"
)

// Operations are a manager's operator actions without its state type (the runtime's
// Operations).
type Operations = orchestration.Operations

// InstanceJSON is an execution with its state left as JSON.
type InstanceJSON = orchestration.InstanceJSON

// GetJSON implements Operations.
func (m *Manager[S]) GetJSON(ctx context.Context, id uuid.UUID) (*InstanceJSON, error) {
	inst, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &InstanceJSON{ExecutionRow: inst.ExecutionRow, Log: inst.Log, Attributes: inst.Attributes}, nil
}

var _ Operations = (*Manager[struct{}])(nil)
