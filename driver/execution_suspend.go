package driver

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// The audit actions and log entry names of the suspension operator actions.
const (
	AuditExecutionSuspend = "EXECUTION_SUSPEND"
	AuditExecutionResume  = "EXECUTION_RESUME"
	// LogEntryLifecycle is the entry type of lifecycle log entries.
	LogEntryLifecycle = "LIFECYCLE"
	// LogSuspended names the log entry written when an execution becomes SUSPENDED.
	LogSuspended = "SUSPENDED"
	// LogResumed names the log entry written when a SUSPENDED execution is resumed.
	LogResumed = "RESUMED"
)

// ExecutionSuspendParams suspends an execution. Actor is required; the audit log and the
// execution's log record it with Reason.
type ExecutionSuspendParams struct {
	ID     uuid.UUID
	Actor  string
	Reason string
	Now    *time.Time
	// Outbox, when set, is called when the execution becomes SUSPENDED (not when only a
	// request is recorded for its runner); its messages are written in the suspension's
	// transaction.
	Outbox OutboxOfChange
}

// OutboxOfChange returns the outbox messages of a status change an operator made (the
// lifecycle events of a suspension or a resume). The driver calls it inside the change's
// transaction with the row as the change leaves it and the sequence number of the LIFECYCLE log
// entry the change wrote, and writes the messages in that transaction: they exist exactly when
// the change committed. An error rolls the change back.
type OutboxOfChange func(after *ExecutionRow, logSeq int) ([]*OutboxInsertParams, error)

// Validate checks that the execution and the actor are named.
func (p *ExecutionSuspendParams) Validate() error {
	return validateOperator("ExecutionSuspend", p.ID, p.Actor)
}

// ExecutionResumeParams resumes a SUSPENDED execution, or cancels a pending suspend request.
type ExecutionResumeParams struct {
	ID     uuid.UUID
	Actor  string
	Reason string
	Now    *time.Time
	// Outbox, when set, is called when a SUSPENDED execution is resumed (not when only a
	// pending request is cancelled); its messages are written in the resume's transaction.
	Outbox OutboxOfChange
}

// Validate checks that the execution and the actor are named.
func (p *ExecutionResumeParams) Validate() error {
	return validateOperator("ExecutionResume", p.ID, p.Actor)
}

func validateOperator(op string, id uuid.UUID, actor string) error {
	var errs []error
	if id == uuid.Nil {
		errs = append(errs, errors.New(op+": the execution id is required"))
	}
	if actor == "" {
		errs = append(errs, errors.New(op+": the actor is required (who asks)"))
	}
	return errors.Join(errs...)
}

// ExecutionHeartbeatParams renews the lease of execution ID held with fence Fence for Lease from
// now, without writing anything else.
type ExecutionHeartbeatParams struct {
	ID    uuid.UUID
	Fence int64
	Lease time.Duration
	Now   *time.Time
}

// SuspendedFromStatus is the status a suspension remembers for an execution in status s: a
// running execution (PENDING or EXECUTING) is remembered as PENDING, runnable at once on resume.
func SuspendedFromStatus(s ExecutionStatus) ExecutionStatus {
	if s == ExecutionExecuting {
		return ExecutionPending
	}
	return s
}
