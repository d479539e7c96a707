package tcc

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// EventType names a lifecycle event of a transaction.
type EventType string

// The lifecycle events: a phase starts, completes or fails; a participant starts a phase,
// succeeds in it or fails it (FailedAttempt when a retry follows).
const (
	EventPhaseStarted         EventType = "PHASE_STARTED"
	EventPhaseCompleted       EventType = "PHASE_COMPLETED"
	EventPhaseFailed          EventType = "PHASE_FAILED"
	EventParticipantStarted   EventType = "PARTICIPANT_STARTED"
	EventParticipantSucceeded EventType = "PARTICIPANT_SUCCEEDED"
	EventParticipantFailed    EventType = "PARTICIPANT_FAILED"
	// EventParticipantRetry is a participant's failed attempt after which a retry is scheduled.
	EventParticipantRetry EventType = "PARTICIPANT_RETRY_SCHEDULED"
)

// Event is one lifecycle event of a transaction, read from its log (see Events).
type Event struct {
	Type          EventType `json:"type"`
	TransactionID uuid.UUID `json:"transactionId"`
	Phase         Phase     `json:"phase"`
	// Participant is set for participant events, and names the failed participant of a
	// PHASE_FAILED event.
	Participant string `json:"participant,omitempty"`
	Attempt     int    `json:"attempt,omitempty"`
	ErrorCode   string `json:"errorCode,omitempty"`
	Error       string `json:"error,omitempty"`
	// At is when it happened (a participant's start: when its attempt began).
	At time.Time `json:"at"`
	// Duration is a participant attempt's latency (success and failure events).
	Duration time.Duration `json:"duration,omitempty"`
}

// Events turns log entries of a TCC transaction (as an execution observer receives them with each
// commit, or as read from the log) into lifecycle events, in order. Entries of other kinds give
// none.
func Events(id uuid.UUID, entries []*driver.ExecutionLogEntry) []Event {
	var out []Event
	for _, e := range entries {
		switch e.EntryType {
		case entryPhase:
			ev := Event{TransactionID: id, Phase: Phase(e.Name), At: e.At, ErrorCode: e.ErrorCode, Error: e.ErrorMessage}
			switch e.StepStatus {
			case statusStarted:
				ev.Type = EventPhaseStarted
			case statusCompleted:
				ev.Type = EventPhaseCompleted
			case statusFailed:
				ev.Type = EventPhaseFailed
				var info phaseInfo
				_ = json.Unmarshal(e.Request, &info)
				ev.Participant = info.Participant
			default:
				continue
			}
			out = append(out, ev)
		case string(PhaseTry), string(PhaseConfirm), string(PhaseCancel):
			base := Event{TransactionID: id, Phase: Phase(e.EntryType), Participant: e.Name, Attempt: e.Attempt}
			if e.StartedAt != nil {
				started := base
				started.Type, started.At = EventParticipantStarted, *e.StartedAt
				out = append(out, started)
			}
			ev := base
			ev.At = e.At
			ev.Duration, _ = e.Latency()
			switch e.StepStatus {
			case statusCompleted:
				ev.Type = EventParticipantSucceeded
			case statusRetryScheduled:
				ev.Type, ev.ErrorCode, ev.Error = EventParticipantRetry, e.ErrorCode, e.ErrorMessage
			case statusFailed:
				ev.Type, ev.ErrorCode, ev.Error = EventParticipantFailed, e.ErrorCode, e.ErrorMessage
			default:
				continue
			}
			out = append(out, ev)
		}
	}
	return out
}
