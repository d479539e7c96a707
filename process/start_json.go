package process

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/orchestration"
)

// StartManyJSON implements orchestration.BatchStarter: it decodes each request's input as the
// process's initial state (unknown fields are refused) and creates the executions in one round
// trip, deferred to the runtime's pollers (from NotBefore, when set); a request's id that exists
// starts nothing. The requests must share their tenant, attributes and NotBefore (start the others
// one by one), and none is a dry run.
// Nothing is written when a request is invalid.
func (m *Manager[S]) StartManyJSON(ctx context.Context, reqs []orchestration.StartRequest) ([]uuid.UUID, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	states := make([]S, len(reqs))
	ids := make([]uuid.UUID, len(reqs))
	keys := make([]string, len(reqs))
	for i, req := range reqs {
		field := fmt.Sprintf("requests[%d]", i)
		if req.DryRun {
			return nil, &commandbus.ValidationError{Field: field + ".dryRun", Message: "a process cannot be dry-run: its code is its definition"}
		}
		if req.TenantID != reqs[0].TenantID || !maps.Equal(req.Attributes, reqs[0].Attributes) || !req.NotBefore.Equal(reqs[0].NotBefore) {
			return nil, &commandbus.ValidationError{Field: field, Message: "differs from the first request in tenant, attributes or not-before time; start it alone"}
		}
		if len(req.Input) > 0 {
			dec := json.NewDecoder(bytes.NewReader(req.Input))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&states[i]); err != nil {
				return nil, &commandbus.ValidationError{Field: field + ".input", Message: err.Error()}
			}
		}
		ids[i], keys[i] = req.ID, req.BusinessKey
	}
	opts := []StartOption{Deferred(), WithIDs(ids...), WithBusinessKeys(keys...)}
	if !reqs[0].NotBefore.IsZero() {
		opts = append(opts, notBefore(reqs[0].NotBefore))
	}
	if reqs[0].TenantID != "" {
		opts = append(opts, WithTenant(reqs[0].TenantID))
	}
	if len(reqs[0].Attributes) > 0 {
		opts = append(opts, WithAttributes(reqs[0].Attributes))
	}
	return m.StartBatch(ctx, states, opts...)
}

var _ orchestration.BatchStarter = (*Manager[struct{}])(nil)
