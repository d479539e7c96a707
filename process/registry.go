package process

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
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

// StartJSON implements orchestration.Starter: it decodes the input as the process's initial
// state (unknown fields are refused) and starts the execution for the runtime's pollers. A
// process has no dry run: its code is its definition.
func (m *Manager[S]) StartJSON(ctx context.Context, req orchestration.StartRequest) (uuid.UUID, error) {
	if req.DryRun {
		return uuid.Nil, &commandbus.ValidationError{Field: "dryRun", Message: "a process cannot be dry-run: its code is its definition"}
	}
	var state S
	if len(req.Input) > 0 {
		dec := json.NewDecoder(bytes.NewReader(req.Input))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&state); err != nil {
			return uuid.Nil, &commandbus.ValidationError{Field: "input", Message: err.Error()}
		}
	}
	opts := []StartOption{Deferred()}
	if req.ID != uuid.Nil {
		opts = append(opts, WithID(req.ID))
	}
	if req.BusinessKey != "" {
		opts = append(opts, WithBusinessKey(req.BusinessKey))
	}
	if req.TenantID != "" {
		opts = append(opts, WithTenant(req.TenantID))
	}
	if len(req.Attributes) > 0 {
		opts = append(opts, WithAttributes(req.Attributes))
	}
	if !req.NotBefore.IsZero() {
		opts = append(opts, notBefore(req.NotBefore))
	}
	return m.Start(ctx, state, opts...)
}

var _ orchestration.Starter = (*Manager[struct{}])(nil)
