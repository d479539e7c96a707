// Package cbtype holds the stable types of commandbus's executions: their statuses, rows, log
// entries, responses, signals, timers and waits, as the public packages (orchestration, process,
// workflow, server) hand them out. Package driver aliases them; the driver interface itself is an
// implementation contract between the core and its drivers, not a stability promise.
package cbtype

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// ExecutionStatus is where an execution (a process, saga, TCC transaction or workflow run) is in
// its lifecycle:
//
//	PENDING ──runner──▶ EXECUTING ──▶ COMPLETED
//	                        │  ▲
//	                        ▼  │ response / retry due / operator retry
//	          WAITING_FOR_ASYNC | WAITING_FOR_RETRY | WAITING_FOR_TSQ
//	EXECUTING ──business failure──▶ COMPENSATING ──▶ COMPENSATED
//	operator cancel ──▶ CANCELLED;  deadline FAIL ──▶ FAILED
//	any non-terminal ──operator suspend──▶ SUSPENDED ──operator resume──▶ the status it had
//	QUEUED ──tenant slot free──▶ PENDING   (capacity-limited types only; see package tenant)
//
// QUEUED is an execution of a capacity-limited type waiting for a free slot of its tenant: it is
// not claimed, acquired or run until it is admitted (then PENDING, holding the slot until it is
// terminal).
//
// SUSPENDED is an operator's pause. An execution no runner holds is suspended at once; one a
// runner holds is asked to stop (ExecutionRow.SuspendRequested): its running step finishes, no
// new step starts, and its release stores SUSPENDED (a terminal checkpoint simply ends it).
// While suspended nothing runs it: claims, the wait-timeout check and the deadline check skip
// it (it has no wake time of its own), and async responses are recorded to be applied after the
// resume. Its deadline and its wait's timeout keep counting, but their actions do not apply
// while it is suspended: they apply at once after the resume if the time passed meanwhile. A
// resume restores the status it had with its wait, retry time and error, and wakes it at once if
// it was runnable, responses arrived or a retry fell due.
type ExecutionStatus string

// The execution statuses.
const (
	ExecutionPending         ExecutionStatus = "PENDING"
	ExecutionExecuting       ExecutionStatus = "EXECUTING"
	ExecutionWaitingForAsync ExecutionStatus = "WAITING_FOR_ASYNC"
	ExecutionWaitingForRetry ExecutionStatus = "WAITING_FOR_RETRY"
	ExecutionWaitingForTSQ   ExecutionStatus = "WAITING_FOR_TSQ"
	ExecutionCompensating    ExecutionStatus = "COMPENSATING"
	ExecutionCompensated     ExecutionStatus = "COMPENSATED"
	ExecutionCompleted       ExecutionStatus = "COMPLETED"
	ExecutionCancelled       ExecutionStatus = "CANCELLED"
	ExecutionFailed          ExecutionStatus = "FAILED"
	ExecutionSuspended       ExecutionStatus = "SUSPENDED"
	ExecutionQueued          ExecutionStatus = "QUEUED"
)

// Terminal reports whether the execution has ended.
func (s ExecutionStatus) Terminal() bool {
	switch s {
	case ExecutionCompleted, ExecutionCompensated, ExecutionCancelled, ExecutionFailed:
		return true
	}
	return false
}

// Valid reports whether s is one of the twelve statuses.
func (s ExecutionStatus) Valid() bool {
	switch s {
	case ExecutionPending, ExecutionExecuting, ExecutionWaitingForAsync, ExecutionWaitingForRetry,
		ExecutionWaitingForTSQ, ExecutionCompensating, ExecutionCompensated, ExecutionCompleted,
		ExecutionCancelled, ExecutionFailed, ExecutionSuspended, ExecutionQueued:
		return true
	}
	return false
}

// ExecutionRow is an execution as stored: one row serves every model, holding a sequential
// process with its step-manager bookkeeping as well as a saga instance with its current step and
// retries.
type ExecutionRow struct {
	ID                uuid.UUID       `json:"id"`
	Model             string          `json:"model,omitempty"` // "process", "saga", "tcc", "workflow", ...
	Type              string          `json:"type,omitempty"`  // the process type, e.g. "PaymentStep"
	Domain            string          `json:"domain,omitempty"`
	TenantID          string          `json:"tenantId,omitempty"`
	BusinessKey       string          `json:"businessKey,omitempty"`
	BatchID           uuid.UUID       `json:"batchId,omitzero"`
	Status            ExecutionStatus `json:"status"`
	State             json.RawMessage `json:"state,omitempty"`       // the user's state
	Step              string          `json:"step,omitempty"`        // the step the execution is at
	CurrentWait       string          `json:"currentWait,omitempty"` // the wait or command step it is blocked on
	NextRetryAt       *time.Time      `json:"nextRetryAt,omitempty"`
	NextWaitTimeoutAt *time.Time      `json:"nextWaitTimeoutAt,omitempty"`
	DeadlineAt        *time.Time      `json:"deadlineAt,omitempty"`
	Retries           int             `json:"retries"` // retries scheduled so far
	LeaseUntil        *time.Time      `json:"leaseUntil,omitempty"`
	Fence             int64           `json:"fence"`
	WorkerID          string          `json:"workerId,omitempty"`
	WakeAt            *time.Time      `json:"wakeAt,omitempty"` // when a runner should take it up (pending, response arrived)
	// ResponsesReceived counts async responses recorded; ResponsesApplied those a runner has
	// applied. A runner that finishes while they differ leaves the execution to be woken again.
	ResponsesReceived int64      `json:"responsesReceived"`
	ResponsesApplied  int64      `json:"responsesApplied"`
	ErrorCode         string     `json:"errorCode,omitempty"`
	ErrorMessage      string     `json:"errorMessage,omitempty"`
	CreatedAt         time.Time  `json:"createdAt"`
	UpdatedAt         time.Time  `json:"updatedAt"`
	CompletedAt       *time.Time `json:"completedAt,omitempty"`
	// ParentID is the execution that started this one as a child in its checkpoint (zero for a
	// top-level execution); RootID is the top of its tree, its own id for a top-level execution.
	ParentID uuid.UUID `json:"parentId,omitzero"`
	RootID   uuid.UUID `json:"rootId,omitzero"`
	// ContinuedFrom is the execution this one continues (continue-as-new); ContinuedAs is the
	// successor this one continued as.
	ContinuedFrom uuid.UUID `json:"continuedFrom,omitzero"`
	ContinuedAs   uuid.UUID `json:"continuedAs,omitzero"`
	// Traceparent is the W3C trace context of the request that started the execution; the
	// commands it sends carry it.
	Traceparent string `json:"traceparent,omitempty"`
	// SuspendedFrom is the status a SUSPENDED execution had (PENDING for one that was running),
	// restored by the resume.
	SuspendedFrom ExecutionStatus `json:"suspendedFrom,omitempty"`
	// SuspendRequested means an operator asked to suspend the execution while a runner held it:
	// the runner starts no new step and its release stores SUSPENDED.
	SuspendRequested bool `json:"suspendRequested,omitempty"`
	// ClaimedFrom is the status the execution had when a claim or acquire took it (those queries
	// only).
	ClaimedFrom ExecutionStatus `json:"claimedFrom"`
	// StaleLease means a claim took the execution from a runner whose lease had expired (it
	// died or stalled without releasing it): a stale claim recovered (claims only).
	StaleLease bool `json:"-"`
}

// ExecutionLogEntry is one entry of an execution's append-only log. Entry types: STEP, WAIT,
// SIDE_EFFECT, COMMAND (a command step's command sent), ASYNC_RESPONSE, COMPENSATION, LIFECYCLE
// and TSQ_* (operator actions).
type ExecutionLogEntry struct {
	ExecutionID  uuid.UUID       `json:"executionId,omitzero"`
	Seq          int             `json:"seq"`
	At           time.Time       `json:"at"`
	EntryType    string          `json:"entryType,omitempty"`
	Name         string          `json:"name,omitempty"`
	StepStatus   string          `json:"stepStatus,omitempty"` // STARTED, COMPLETED, FAILED, WAITING_RETRY, SATISFIED, PENDING, TIMED_OUT, ...
	Attempt      int             `json:"attempt"`
	MaxAttempts  int             `json:"maxAttempts"`
	Request      json.RawMessage `json:"request,omitempty"`
	Response     json.RawMessage `json:"response,omitempty"`
	ErrorCode    string          `json:"errorCode,omitempty"`
	ErrorMessage string          `json:"errorMessage,omitempty"`
	Actor        string          `json:"actor,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	// StartedAt is when the work the entry records began (a step's attempt), nil when the entry
	// marks an instant; At is when it ended, so At − StartedAt is the step's latency. Drivers
	// store it as given.
	StartedAt *time.Time `json:"startedAt,omitempty"`
}

// Latency is how long the work an entry records took (At − StartedAt), and false for an entry
// without a start.
func (e *ExecutionLogEntry) Latency() (time.Duration, bool) {
	if e.StartedAt == nil {
		return 0, false
	}
	return e.At.Sub(*e.StartedAt), true
}

// MarshalJSON writes the entry with its latency in milliseconds ("latencyMs") when it has a
// start, so API clients read a step's latency without computing it.
func (e ExecutionLogEntry) MarshalJSON() ([]byte, error) {
	type plain ExecutionLogEntry
	out := struct {
		plain
		LatencyMs *float64 `json:"latencyMs,omitempty"`
	}{plain: plain(e)}
	if d, ok := e.Latency(); ok {
		ms := float64(d.Microseconds()) / 1000
		out.LatencyMs = &ms
	}
	return json.Marshal(out)
}

// ExecutionResponseRow is an async response recorded for an execution.
type ExecutionResponseRow struct {
	ExecutionID uuid.UUID       `json:"executionId,omitzero"`
	Seq         int64           `json:"seq"`
	Name        string          `json:"name,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	ReceivedAt  time.Time       `json:"receivedAt"`
}

// ExecutionSignalRow is a named signal sent to an execution. It stays pending (ConsumedAt nil)
// until a runner consumes it in a checkpoint.
type ExecutionSignalRow struct {
	ExecutionID uuid.UUID       `json:"executionId,omitzero"`
	SignalID    string          `json:"signalId"`
	Name        string          `json:"name"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	ReceivedAt  time.Time       `json:"receivedAt"`
	ConsumedAt  *time.Time      `json:"consumedAt,omitempty"`
	// Traceparent is the W3C traceparent of the sender, or empty.
	Traceparent string `json:"traceparent,omitempty"`
}

// TimerStatus is where a durable timer is: pending until its runner marks it fired or cancels it.
type TimerStatus string

// The timer statuses.
const (
	TimerPending   TimerStatus = "PENDING"
	TimerFired     TimerStatus = "FIRED"
	TimerCancelled TimerStatus = "CANCELLED"
)

// ExecutionTimerRow is a durable timer of an execution.
type ExecutionTimerRow struct {
	ExecutionID uuid.UUID   `json:"executionId,omitzero"`
	TimerID     string      `json:"timerId"`
	Name        string      `json:"name,omitempty"`
	FireAt      time.Time   `json:"fireAt"`
	Status      TimerStatus `json:"status"`
	CreatedAt   time.Time   `json:"createdAt"`
	FiredAt     *time.Time  `json:"firedAt,omitempty"`
}

// WaitKind names what an open wait waits for.
type WaitKind string

// The wait kinds.
const (
	WaitReply  WaitKind = "REPLY"
	WaitSignal WaitKind = "SIGNAL"
	WaitTimer  WaitKind = "TIMER"
	WaitChild  WaitKind = "CHILD"
)

// Valid reports whether k is one of the wait kinds.
func (k WaitKind) Valid() bool {
	switch k {
	case WaitReply, WaitSignal, WaitTimer, WaitChild:
		return true
	}
	return false
}

// ExecutionWaitRow is an open wait of an execution.
type ExecutionWaitRow struct {
	ExecutionID uuid.UUID  `json:"executionId,omitzero"`
	WaitID      string     `json:"waitId"`
	Kind        WaitKind   `json:"kind"`
	Name        string     `json:"name,omitempty"`
	TimeoutAt   *time.Time `json:"timeoutAt,omitempty"`
	OpenedAt    time.Time  `json:"openedAt"`
}
