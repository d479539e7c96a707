package process

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// Operations are a manager's operator actions without its state type, so tools (the REST API,
// the console) can act on any process by id.
type Operations interface {
	Type() string
	Domain() string
	// GetJSON returns the execution with its state as JSON and its log.
	GetJSON(ctx context.Context, id uuid.UUID) (*InstanceJSON, error)
	Retry(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error
	CancelOverride(ctx context.Context, id uuid.UUID, runCompensations bool, action commandbus.OperatorAction) error
	CompleteOverride(ctx context.Context, id uuid.UUID, stateOverrides map[string]any, action commandbus.OperatorAction) error
	Skip(ctx context.Context, id uuid.UUID, step string, result json.RawMessage, action commandbus.OperatorAction) error
	// Suspend pauses an execution; a running one stops after its current step.
	Suspend(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error
	// Resume continues a suspended execution, or cancels a pending suspend request.
	Resume(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error
}

// InstanceJSON is an execution with its state left as JSON.
type InstanceJSON struct {
	*driver.ExecutionRow
	Log []*driver.ExecutionLogEntry `json:"log"`
}

// GetJSON implements Operations.
func (m *Manager[S]) GetJSON(ctx context.Context, id uuid.UUID) (*InstanceJSON, error) {
	inst, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &InstanceJSON{ExecutionRow: inst.ExecutionRow, Log: inst.Log}, nil
}

var _ Operations = (*Manager[struct{}])(nil)

// Managers returns the operations of every process manager created on the client, by type.
func Managers(client *commandbus.Client) []Operations {
	v, ok := client.LookupExtension(runtimeKey{})
	if !ok {
		return nil
	}
	rt := v.(*runtime)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]Operations, 0, len(rt.managers))
	for _, m := range rt.managers {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type() < out[j].Type() })
	return out
}

// ManagerFor returns the operations of the manager of a process type, or nil.
func ManagerFor(client *commandbus.Client, typ string) Operations {
	for _, m := range Managers(client) {
		if m.Type() == typ {
			return m
		}
	}
	return nil
}
