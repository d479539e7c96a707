package process

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// Process is a sequential process: Execute is plain Go that calls Step, Wait, SideEffect and
// CommandStep. It runs from the top every time the execution resumes; completed steps return
// their recorded results instead of running again (deterministic replay), so Execute must call
// the same steps in the same order for the same state.
type Process[S any] interface {
	// Type names the process; it is persisted, so keep it stable.
	Type() string
	// Domain is where the process lives; command-step replies come back to its reply queue.
	Domain() string
	// Execute runs the process. Return the errors the building blocks return (they carry
	// suspension and failure); return nil when the process is done.
	Execute(x *Execution[S]) error
}

// Ender is implemented by a process that keeps its own record of how an execution ended, such as
// a payment's stored status. The manager calls End just before it ends an execution without
// running the process: an operator's cancel without compensations (CANCELLED) or force-complete
// (COMPLETED), and a deadline whose action is FAIL (FAILED). An error leaves the execution as it
// was, and the action reports it. Ends the process reaches by itself (its last step, or its
// compensations) are its own to record.
type Ender[S any] interface {
	End(x *Execution[S], status driver.ExecutionStatus) error
}

// ErrorClass says how a step failure is handled: the one classification every model shares
// (commandbus.ErrorClass).
type ErrorClass = commandbus.ErrorClass

// The error classes.
const (
	// Permanent failures go to the troubleshooting queue at once.
	Permanent = commandbus.ClassPermanent
	// Transient failures are retried with backoff while attempts remain, then go to the TSQ.
	Transient = commandbus.ClassTransient
	// Business failures run the compensations of completed steps in reverse order.
	Business = commandbus.ClassBusiness
)

// ErrorClassifier is implemented by processes that classify step errors themselves. The default
// is commandbus.Classify with unclassified errors Permanent (fail fast): TransientError, timeouts
// and timed-out command replies are Transient, BusinessRuleError and failed command replies are
// Business.
type ErrorClassifier interface {
	ClassifyError(err error) ErrorClass
}

// DeadlineAction is what happens when an execution passes its deadline.
type DeadlineAction string

// The deadline actions.
const (
	DeadlineTSQ        DeadlineAction = "TSQ"
	DeadlineCompensate DeadlineAction = "COMPENSATE"
	DeadlineFail       DeadlineAction = "FAIL"
)

// DeadlineActioner is implemented by processes that choose their default deadline action. The
// configuration's process.types.<type>.deadline-action (or process.<type>.deadline-action)
// overrides it; without either, TSQ applies.
type DeadlineActioner interface {
	DeadlineAction() DeadlineAction
}

// WaitTimeouter is implemented by processes that choose the default timeout of waits without
// one. The configuration's process.types.<type>.default-wait-timeout (or
// process.<type>.default-wait-timeout) overrides it; without either,
// process.default-wait-timeout (1h) applies.
type WaitTimeouter interface {
	DefaultWaitTimeout() time.Duration
}

// ErrSuspended is wrapped by the error a building block returns when the execution must stop
// here for now: a wait is not satisfied, a retry is scheduled, a command step awaits its reply.
// The execution's progress is already durable; Execute should return the error as it is.
var ErrSuspended = errors.New("process: execution suspended")

// errStopReplay ends a replay that only collects compensations.
var errStopReplay = fmt.Errorf("%w: replay stopped at the frontier", ErrSuspended)

// The error codes the process runtime writes.
const (
	CodeNondeterministic = "NONDETERMINISTIC"
	CodeRetriesExhausted = commandbus.CodeRetriesExhausted
	CodePermanentFailure = commandbus.CodePermanentFailure
	CodeWaitTimeout      = "WAIT_TIMEOUT"
	CodeDeadlineExceeded = commandbus.CodeDeadlineExceeded
	CodePanic            = "PANIC"
	CodeBusinessFailure  = "BUSINESS_FAILURE"
	// CodeCompensationFailed parks an execution when one or more of its compensations failed.
	CodeCompensationFailed = "COMPENSATION_FAILED"
	// CodeCommandParked parks an execution whose command step's command was parked in the
	// command troubleshooting queue: the operator acts on the command (retry, complete, cancel)
	// and its reply resumes the execution.
	CodeCommandParked = "COMMAND_PARKED"
)

// commandParkedError stops a replay at a command step whose command waits in the command
// troubleshooting queue; the execution parks with COMMAND_PARKED and its message.
type commandParkedError struct {
	step, message string
}

func (e *commandParkedError) Error() string { return e.message }

// ErrCompensationFailed is returned by an operator action whose compensations ran but did not
// all succeed: the execution waits in the troubleshooting queue with COMPENSATION_FAILED instead
// of ending as asked. It wraps commandbus.ErrInvalidState.
var ErrCompensationFailed = fmt.Errorf("%w: compensation failed", commandbus.ErrInvalidState)

// StepFailedError is returned by a step that failed for good (permanently, or out of retries);
// the execution goes to the troubleshooting queue.
type StepFailedError struct {
	Step    string
	Code    string
	Message string
	Err     error
}

func (e *StepFailedError) Error() string {
	return fmt.Sprintf("step %q failed (%s): %s", e.Step, e.Code, e.Message)
}

// Unwrap returns the step's error.
func (e *StepFailedError) Unwrap() error { return e.Err }

// BusinessFailureError is returned by a step that failed on a business rule; the execution runs
// its compensations and ends COMPENSATED.
type BusinessFailureError struct {
	Step    string
	Code    string
	Message string
	Err     error
}

func (e *BusinessFailureError) Error() string {
	return fmt.Sprintf("step %q failed on a business rule (%s): %s", e.Step, e.Code, e.Message)
}

// Unwrap returns the step's error.
func (e *BusinessFailureError) Unwrap() error { return e.Err }

// NondeterminismError means the code under a running execution changed: on replay it met a step
// other than the one recorded at that position. Nothing re-runs; the execution waits in the TSQ.
type NondeterminismError struct {
	Position int
	Expected string // recorded "KIND name"
	Got      string // called "KIND name"
}

func (e *NondeterminismError) Error() string {
	if e.Expected == "" {
		return fmt.Sprintf("nondeterministic replay at position %d: %s was not recorded", e.Position, e.Got)
	}
	if e.Got == "" {
		return fmt.Sprintf("nondeterministic replay: Execute returned before reaching recorded %s at position %d", e.Expected, e.Position)
	}
	return fmt.Sprintf("nondeterministic replay at position %d: recorded %s, code now calls %s", e.Position, e.Expected, e.Got)
}

// defaultClassify is the classification used when the process has no ClassifyError.
func defaultClassify(err error) ErrorClass {
	class, _ := commandbus.Classify(err, commandbus.ClassPermanent)
	return class
}

// errorCode extracts a stable code from a step error for the log and the TSQ: the error's own
// code, TIMEOUT for a timeout, or def.
func errorCode(err error, def string) string {
	if _, code := commandbus.Classify(err, commandbus.ClassPermanent); code != "" {
		return code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "TIMEOUT"
	}
	return def
}
