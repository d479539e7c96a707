package orchestration

import (
	"context"

	"github.com/google/uuid"
)

// ParticipantPhases is an execution's participants with the outcome of each of their phases, for
// tools that show them (the console's table of a TCC transaction's try, confirm and cancel).
type ParticipantPhases struct {
	// Phases names the columns, in order (TRY, CONFIRM, CANCEL).
	Phases []string `json:"phases"`
	// Participants are the rows, in the definition's order.
	Participants []ParticipantPhaseRow `json:"participants"`
}

// ParticipantPhaseRow is one participant: one cell per phase, in the order of Phases.
type ParticipantPhaseRow struct {
	ID       string      `json:"id"`
	Optional bool        `json:"optional,omitempty"`
	Cells    []PhaseCell `json:"cells"`
}

// PhaseCell is one phase of one participant: its status ("" when it did not run), its recorded
// attempts and its last error.
type PhaseCell struct {
	Status    string `json:"status,omitempty"`
	Attempts  int    `json:"attempts"`
	ErrorCode string `json:"errorCode,omitempty"`
	Error     string `json:"error,omitempty"`
}

// ParticipantPhaser is implemented by operations whose executions have participants with phases.
type ParticipantPhaser interface {
	ParticipantPhases(ctx context.Context, id uuid.UUID) (*ParticipantPhases, error)
}

// ParticipantPhasesOf returns an execution's participant phases, or nil when its model has none.
func ParticipantPhasesOf(ctx context.Context, ops Operations, id uuid.UUID) (*ParticipantPhases, error) {
	if p, ok := ops.(ParticipantPhaser); ok {
		return p.ParticipantPhases(ctx, id)
	}
	return nil, nil
}
