package workflow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
)

// StartManyJSON implements orchestration.BatchStarter: one execution per request, PENDING for the
// runtime's pollers (from its NotBefore, when set), in one round trip; a request's id that exists
// starts nothing. A dry run is
// refused (start it alone). Nothing is written when a request is invalid.
func (m *Manager) StartManyJSON(ctx context.Context, reqs []orchestration.StartRequest) ([]uuid.UUID, error) {
	params := make([]*driver.ExecutionInsertParams, len(reqs))
	ids := make([]uuid.UUID, len(reqs))
	for i, req := range reqs {
		if req.DryRun {
			return nil, &commandbus.ValidationError{Field: fmt.Sprintf("requests[%d].dryRun", i), Message: "a dry run starts alone"}
		}
		input := json.RawMessage("null")
		if len(req.Input) > 0 {
			if !json.Valid(req.Input) {
				return nil, &commandbus.ValidationError{Field: fmt.Sprintf("requests[%d].input", i), Message: "not valid JSON"}
			}
			input = req.Input
		}
		if err := driver.ValidateAttributes(req.Attributes); err != nil {
			return nil, &commandbus.ValidationError{Field: fmt.Sprintf("requests[%d].attributes", i), Message: err.Error()}
		}
		ids[i] = req.ID
		if ids[i] == uuid.Nil {
			ids[i] = uuid.Must(uuid.NewV7())
		}
		params[i] = m.newExecution(ids[i], input, createdInfo{})
		params[i].TenantID, params[i].BusinessKey, params[i].Attributes = req.TenantID, req.BusinessKey, req.Attributes
		if !req.NotBefore.IsZero() {
			notBefore := req.NotBefore
			params[i].NotBefore = &notBefore
		}
	}
	if _, err := m.engine.Insert(ctx, params); err != nil {
		return nil, err
	}
	return ids, nil
}

var _ orchestration.BatchStarter = (*Manager)(nil)
