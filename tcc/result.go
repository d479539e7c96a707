package tcc

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
)

// Status is a transaction's outcome, or the phase it is in while it runs.
type Status string

// The outcomes, and the statuses of a transaction still running.
const (
	// StatusConfirmed: every try and every confirm succeeded.
	StatusConfirmed Status = "CONFIRMED"
	// StatusCanceled: a try or a confirm failed for good and the cancels succeeded.
	StatusCanceled Status = "CANCELED"
	// StatusFailed: a cancel failed for good; the transaction waits in the troubleshooting queue
	// (CANCEL_FAILED) and its participants may be inconsistent until an operator acts.
	StatusFailed Status = "FAILED"
	// StatusTrying, StatusConfirming and StatusCanceling are the phase a running transaction is
	// in.
	StatusTrying     Status = "TRYING"
	StatusConfirming Status = "CONFIRMING"
	StatusCanceling  Status = "CANCELING"
)

// TccResult is a transaction's outcome: its status, the phase and participant that failed, and
// every participant's outcome. It is read from the transaction's log, so it is the same from Go,
// from the REST API (the execution's "result") and in the console.
type TccResult struct {
	TransactionID uuid.UUID `json:"transactionId"`
	Type          string    `json:"type"`
	Status        Status    `json:"status"`
	// Phase is the phase the transaction is in, or the last it ran.
	Phase Phase `json:"phase"`
	// FailedParticipant and FailedPhase name the phase that failed for good: the cancel that
	// failed for a FAILED transaction, else the try or confirm that sent it to its cancels.
	FailedParticipant string `json:"failedParticipant,omitempty"`
	FailedPhase       Phase  `json:"failedPhase,omitempty"`
	ErrorCode         string `json:"errorCode,omitempty"`
	Error             string `json:"error,omitempty"`
	// CauseParticipant and CausePhase name the try or confirm that sent the transaction to its
	// cancels, also when a cancel failed after it.
	CauseParticipant string `json:"causeParticipant,omitempty"`
	CausePhase       Phase  `json:"causePhase,omitempty"`
	// CancelledByOperator says an operator cancelled the transaction.
	CancelledByOperator bool       `json:"cancelledByOperator,omitempty"`
	StartedAt           time.Time  `json:"startedAt"`
	CompletedAt         *time.Time `json:"completedAt,omitempty"`
	// DurationMs is the time from start to completion (0 while it runs).
	DurationMs   int64                `json:"durationMs"`
	Participants []ParticipantOutcome `json:"participants"`
}

// ParticipantOutcome is what happened to one participant.
type ParticipantOutcome struct {
	ID       string `json:"id"`
	Optional bool   `json:"optional,omitempty"`
	// TryResult is the try's result (JSON) once the try succeeded.
	TryResult json.RawMessage `json:"tryResult,omitempty"`
	Try       PhaseOutcome    `json:"try"`
	Confirm   PhaseOutcome    `json:"confirm"`
	Cancel    PhaseOutcome    `json:"cancel"`
	// Attempts counts the recorded attempts of every phase; LatencyMs adds up their latencies.
	Attempts  int   `json:"attempts"`
	LatencyMs int64 `json:"latencyMs"`
}

// PhaseOutcome is one phase of a participant: its status ("" when it did not run; COMPLETED,
// FAILED, RETRY_SCHEDULED, or SKIPPED for a cancel an operator gave up), its recorded attempts
// and its last error.
type PhaseOutcome struct {
	Status    string     `json:"status,omitempty"`
	Attempts  int        `json:"attempts"`
	ErrorCode string     `json:"errorCode,omitempty"`
	Error     string     `json:"error,omitempty"`
	StartedAt *time.Time `json:"startedAt,omitempty"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
}

// Participant returns a participant's outcome, or nil.
func (r *TccResult) Participant(id string) *ParticipantOutcome {
	for i := range r.Participants {
		if r.Participants[i].ID == id {
			return &r.Participants[i]
		}
	}
	return nil
}

// DecodeTryResult decodes a participant's try result into v; it fails for a participant whose
// try did not succeed.
func (r *TccResult) DecodeTryResult(participant string, v any) error {
	p := r.Participant(participant)
	if p == nil || len(p.TryResult) == 0 {
		return fmt.Errorf("%w: participant %q has no try result", commandbus.ErrNotFound, participant)
	}
	return json.Unmarshal(p.TryResult, v)
}

// result builds a transaction's TccResult from its row and log.
func (m *Manager) result(row *driver.ExecutionRow, entries []*driver.ExecutionLogEntry) *TccResult {
	f := fold(entries)
	res := &TccResult{TransactionID: row.ID, Type: row.Type, Phase: f.phase, StartedAt: row.CreatedAt,
		CompletedAt: row.CompletedAt, CancelledByOperator: f.cancelledByOperator}
	if row.CompletedAt != nil {
		res.DurationMs = row.CompletedAt.Sub(row.CreatedAt).Milliseconds()
	}
	switch row.Status {
	case driver.ExecutionCompleted:
		res.Status = StatusConfirmed
		if f.phase == PhaseCancel {
			res.Status = StatusCanceled // completed by an operator during the cancels
		}
	case driver.ExecutionCompensated, driver.ExecutionCancelled:
		res.Status = StatusCanceled
	case driver.ExecutionFailed:
		res.Status = StatusFailed
	default:
		switch {
		case f.failed.participant != "":
			res.Status = StatusFailed
		case f.phase == PhaseConfirm:
			res.Status = StatusConfirming
		case f.phase == PhaseCancel:
			res.Status = StatusCanceling
		default:
			res.Status = StatusTrying
		}
	}
	fl := f.cause
	if f.failed.participant != "" {
		fl = f.failed
	}
	res.FailedParticipant, res.FailedPhase, res.ErrorCode, res.Error = fl.participant, fl.phase, fl.code, fl.msg
	res.CauseParticipant, res.CausePhase = f.cause.participant, f.cause.phase
	for _, p := range m.def.participants {
		out := ParticipantOutcome{ID: p.id, Optional: p.optional}
		var latency time.Duration
		for i, ph := range phases {
			r := f.peek(p.id, ph)
			po := PhaseOutcome{Status: r.status, Attempts: r.total, ErrorCode: r.errCode, Error: r.errMsg, StartedAt: r.started, EndedAt: r.ended}
			if r.status == statusCompleted {
				po.ErrorCode, po.Error = "", ""
			}
			out.Attempts += r.total
			latency += r.latency
			switch i {
			case tryIdx:
				out.Try = po
				if r.status == statusCompleted {
					out.TryResult = r.result
				}
			case confirmIdx:
				out.Confirm = po
			default:
				out.Cancel = po
			}
		}
		out.LatencyMs = latency.Milliseconds()
		res.Participants = append(res.Participants, out)
	}
	return res
}

// ParticipantPhases implements orchestration.ParticipantPhaser: the transaction's participants
// with their try, confirm and cancel outcomes.
func (m *Manager) ParticipantPhases(ctx context.Context, id uuid.UUID) (*orchestration.ParticipantPhases, error) {
	res, err := m.Result(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &orchestration.ParticipantPhases{Phases: []string{string(PhaseTry), string(PhaseConfirm), string(PhaseCancel)}}
	for _, p := range res.Participants {
		row := orchestration.ParticipantPhaseRow{ID: p.ID, Optional: p.Optional}
		for _, po := range []PhaseOutcome{p.Try, p.Confirm, p.Cancel} {
			row.Cells = append(row.Cells, orchestration.PhaseCell{Status: po.Status, Attempts: po.Attempts, ErrorCode: po.ErrorCode, Error: po.Error})
		}
		out.Participants = append(out.Participants, row)
	}
	return out, nil
}

var _ orchestration.ParticipantPhaser = (*Manager)(nil)
