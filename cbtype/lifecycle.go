package cbtype

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// LifecycleEventType names what happened to an execution. The catalogue is open: log entries of
// a kind the core does not know become "<ENTRY TYPE>_<STEP STATUS>" events (a TCC phase entry
// PHASE/STARTED is PHASE_STARTED), so every model's own entries flow without the core knowing
// them.
type LifecycleEventType string

// The lifecycle event types the core derives itself.
const (
	// EventExecutionStarted: the execution's first run wrote its first progress.
	EventExecutionStarted LifecycleEventType = "EXECUTION_STARTED"
	// EventExecutionCompleted: the execution reached a terminal status (Success says whether it
	// is COMPLETED).
	EventExecutionCompleted LifecycleEventType = "EXECUTION_COMPLETED"
	// EventDeadLettered: the execution was parked in the troubleshooting queue.
	EventDeadLettered       LifecycleEventType = "DEAD_LETTERED"
	EventStepStarted        LifecycleEventType = "STEP_STARTED"
	EventStepSucceeded      LifecycleEventType = "STEP_SUCCEEDED"
	EventStepFailed         LifecycleEventType = "STEP_FAILED"
	EventStepSkipped        LifecycleEventType = "STEP_SKIPPED"
	EventStepRetryScheduled LifecycleEventType = "STEP_RETRY_SCHEDULED"
	EventStepWaiting        LifecycleEventType = "STEP_WAITING"
	// EventCompensationStarted: a business failure started compensating the completed steps.
	EventCompensationStarted    LifecycleEventType = "COMPENSATION_STARTED"
	EventStepCompensated        LifecycleEventType = "STEP_COMPENSATED"
	EventStepCompensationFailed LifecycleEventType = "STEP_COMPENSATION_FAILED"
	EventSuspended              LifecycleEventType = "SUSPENDED"
	EventResumed                LifecycleEventType = "RESUMED"
	EventSignalDelivered        LifecycleEventType = "SIGNAL_DELIVERED"
	EventTimerFired             LifecycleEventType = "TIMER_FIRED"
	EventChildStarted           LifecycleEventType = "CHILD_STARTED"
	EventChildCompleted         LifecycleEventType = "CHILD_COMPLETED"
	EventContinuedAsNew         LifecycleEventType = "CONTINUED_AS_NEW"
	EventOperatorAction         LifecycleEventType = "OPERATOR_ACTION"
	EventDeadlineReached        LifecycleEventType = "DEADLINE_REACHED"
	EventWaitTimedOut           LifecycleEventType = "WAIT_TIMED_OUT"
)

// LifecycleEvent is one thing that happened to an execution, derived from a checkpoint when it
// committed. Its ID is derived from the execution and the event's place in the execution's
// history, so a consumer that sees it twice (delivery is at least once) dedupes by ID. Events of
// one execution carry increasing Positions and are published in that order.
type LifecycleEvent struct {
	ID   uuid.UUID          `json:"id"`
	Type LifecycleEventType `json:"type"`
	// ExecutionID is the execution the event is about (for CHILD_COMPLETED: the parent).
	ExecutionID uuid.UUID `json:"executionId"`
	Model       string    `json:"model"`
	// ExecutionType is the execution's type within its model (the definition's name).
	ExecutionType string `json:"executionType"`
	TenantID      string `json:"tenantId,omitempty"`
	BusinessKey   string `json:"businessKey,omitempty"`
	// Position orders the events of one execution: the log sequence the event derives from,
	// times 16, plus its rank within that entry. It is 0 on the events of changes made outside a
	// checkpoint (an operator's suspend and resume) and on CHILD_COMPLETED; those are still
	// published in order with the execution's other events.
	Position int64 `json:"position"`
	// Status is the execution's status after the commit.
	Status ExecutionStatus `json:"status"`
	// StepID is the step, phase, participant, signal, timer or wait the event is about.
	StepID       string `json:"stepId,omitempty"`
	Attempt      int    `json:"attempt,omitempty"`
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	// Actor and Reason say who acted and why, on operator actions.
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Success is set on EXECUTION_COMPLETED and CHILD_COMPLETED when the status is COMPLETED.
	Success bool `json:"success,omitempty"`
	// LatencyMs is the step's latency, or the execution's duration on EXECUTION_COMPLETED.
	LatencyMs int64 `json:"latencyMs,omitempty"`
	// RelatedID is the child (CHILD_STARTED, CHILD_COMPLETED) or successor (CONTINUED_AS_NEW).
	RelatedID uuid.UUID `json:"relatedId,omitzero"`
	// Payload is the entry's result or request, when it has one.
	Payload json.RawMessage `json:"payload,omitempty"`
	At      time.Time       `json:"at"`
}
