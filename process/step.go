package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// StepOption configures a step.
type StepOption func(*stepOptions)

type stepOptions struct {
	maxAttempts int
	retryDelay  time.Duration
	timeout     time.Duration
	compensate  any // func(*Execution[S]) error
	request     any
}

// The step defaults of a sequential process: one attempt (no retry; the declarative models and
// commands default to commandbus.DefaultMaxAttempts), 1s base retry delay, 30s timeout.
const (
	DefaultStepAttempts = 1
	DefaultRetryDelay   = time.Second
	DefaultStepTimeout  = 30 * time.Second
)

// MaxAttempts sets how many attempts a step gets in all (1 means no retry).
func MaxAttempts(attempts int) StepOption { return func(o *stepOptions) { o.maxAttempts = attempts } }

// RetryDelay sets the base of the backoff: the retry after attempt n waits delay·2^n, capped at
// five minutes.
func RetryDelay(d time.Duration) StepOption { return func(o *stepOptions) { o.retryDelay = d } }

// Timeout bounds one attempt of the step; a step still running then fails with
// context.DeadlineExceeded (transient by default).
func Timeout(d time.Duration) StepOption { return func(o *stepOptions) { o.timeout = d } }

// Compensate registers the step's compensation: after a business failure later in the process
// (or a cancel or deadline with compensation), completed steps' compensations run in reverse
// order; a command step's also when its command was sent but the step did not complete (see
// CommandStep). fn must have the type func(*Execution[S]) error for the process's S.
func Compensate[S any](fn func(x *Execution[S]) error) StepOption {
	return func(o *stepOptions) { o.compensate = fn }
}

// Request records the step's input in its log entry, for operators reading the timeline.
func Request(v any) StepOption { return func(o *stepOptions) { o.request = v } }

func stepOpts(opts []StepOption) *stepOptions {
	o := &stepOptions{maxAttempts: DefaultStepAttempts, retryDelay: DefaultRetryDelay, timeout: DefaultStepTimeout}
	for _, opt := range opts {
		opt(o)
	}
	if o.maxAttempts < 1 {
		o.maxAttempts = 1
	}
	return o
}

func (x *Execution[S]) register(name string, o *stepOptions) error {
	if o.compensate == nil {
		return nil
	}
	fn, ok := o.compensate.(func(*Execution[S]) error)
	if !ok {
		return &StepFailedError{Step: name, Code: CodePermanentFailure,
			Message: fmt.Sprintf("compensation has type %T, want func(*process.Execution[%T]) error", o.compensate, *new(S))}
	}
	x.compensations = append(x.compensations, compensation[S]{step: name, fn: fn})
	return nil
}

func marshalOrNil(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// Step runs fn once and records its result; on replay it returns the recorded result without
// running fn. A failure is classified (see ErrorClassifier): transient failures are retried
// later — the execution is released WAITING_FOR_RETRY, never sleeping in a goroutine — business
// failures compensate, permanent ones go to the troubleshooting queue.
func Step[S, R any](x *Execution[S], name string, fn func(ctx context.Context) (R, error), opts ...StepOption) (R, error) {
	var zero R
	o := stepOpts(opts)
	recorded, err := x.replay(entryStep, name)
	if err != nil {
		return zero, err
	}
	if recorded != nil {
		var result R
		if len(recorded.Response) > 0 {
			if err := json.Unmarshal(recorded.Response, &result); err != nil {
				return zero, &StepFailedError{Step: name, Code: CodePermanentFailure, Message: "decoding recorded result: " + err.Error(), Err: err}
			}
		}
		return result, x.register(name, o)
	}
	if x.collectOnly {
		return zero, errStopReplay
	}
	h := x.step(name)
	if h.last == statusWaitingRetry && !x.retryDue() {
		return zero, x.suspendRetry(name, h.failedAttempts, 0)
	}
	attempt := h.failedAttempts + 1
	if err := x.flush(); err != nil {
		return zero, err
	}
	started := x.clock()
	ctx, cancel := context.WithTimeout(x.ctx, o.timeout)
	stopKeepAlive := x.lease.KeepAlive(ctx) // a step may outlast the lease
	result, err := tracedStep(ctx, x.ID, name, attempt, fn)
	stopKeepAlive()
	cancel()
	if err == nil {
		x.logMet(&driver.ExecutionLogEntry{EntryType: entryStep, Name: name, StepStatus: statusCompleted, StartedAt: &started,
			Attempt: attempt, MaxAttempts: o.maxAttempts, Request: marshalOrNil(o.request), Response: marshalOrNil(result)})
		if err := x.register(name, o); err != nil {
			return zero, err
		}
		x.progressed(name)
		return result, nil
	}
	x.attemptStarted = &started
	defer func() { x.attemptStarted = nil }()
	return zero, x.stepFailed(name, attempt, o, err)
}

// callStep runs a step function, turning a panic into a permanent error.
func callStep[R any](ctx context.Context, fn func(context.Context) (R, error)) (result R, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &StepFailedError{Code: CodePanic, Message: fmt.Sprintf("panic: %v", r), Err: fmt.Errorf("panic: %v\n%s", r, debug.Stack())}
		}
	}()
	return fn(ctx)
}

// stepFailed records a failed attempt and decides what follows, per the error's class.
func (x *Execution[S]) stepFailed(name string, attempt int, o *stepOptions, err error) error {
	var failed *StepFailedError
	if errors.As(err, &failed) && failed.Code == CodePanic {
		failed.Step = name
		x.log(&driver.ExecutionLogEntry{EntryType: entryStep, Name: name, StepStatus: statusFailed,
			Attempt: attempt, MaxAttempts: o.maxAttempts, ErrorCode: CodePanic, ErrorMessage: failed.Message})
		return failed
	}
	class := x.m.classify(err)
	code := errorCode(err, class.String())
	entry := &driver.ExecutionLogEntry{EntryType: entryStep, Name: name, StepStatus: statusFailed, StartedAt: x.attemptStarted,
		Attempt: attempt, MaxAttempts: o.maxAttempts, Request: marshalOrNil(o.request), ErrorCode: code, ErrorMessage: err.Error()}
	switch class {
	case Transient:
		if attempt < o.maxAttempts {
			entry.StepStatus = statusWaitingRetry
			x.log(entry)
			return x.suspendRetry(name, attempt, backoff(o.retryDelay, attempt))
		}
		x.log(entry)
		return &StepFailedError{Step: name, Code: CodeRetriesExhausted,
			Message: fmt.Sprintf("attempt %d of %d failed: %s", attempt, o.maxAttempts, err), Err: err}
	case Business:
		x.log(entry)
		return &BusinessFailureError{Step: name, Code: code, Message: err.Error(), Err: err}
	}
	x.log(entry)
	return &StepFailedError{Step: name, Code: CodePermanentFailure, Message: err.Error(), Err: err}
}

// suspendRetry releases the execution WAITING_FOR_RETRY; with delay 0 it keeps the scheduled
// time (a re-suspension before the retry was due).
func (x *Execution[S]) suspendRetry(name string, failedAttempts int, delay time.Duration) error {
	return x.suspend("retry of "+name+" scheduled", func(cp *driver.ExecutionCheckpoint) {
		cp.Status = driver.ExecutionWaitingForRetry
		cp.Step = name
		cp.CurrentWait = ""
		cp.NextWaitTimeoutAt = nil
		if delay > 0 {
			cp.RetryDelay = delay
			cp.NextRetryAt = nil
			cp.Retries++
		}
	})
}

// SideEffect runs fn once and records its value (a random id, the time); on replay it returns
// the recorded value. A failure is permanent: the execution goes to the troubleshooting queue.
func SideEffect[S, R any](x *Execution[S], name string, fn func() (R, error)) (R, error) {
	var zero R
	recorded, err := x.replay(entrySideEffect, name)
	if err != nil {
		return zero, err
	}
	if recorded != nil {
		var value R
		if len(recorded.Response) > 0 {
			if err := json.Unmarshal(recorded.Response, &value); err != nil {
				return zero, &StepFailedError{Step: name, Code: CodePermanentFailure, Message: "decoding recorded side effect: " + err.Error(), Err: err}
			}
		}
		return value, nil
	}
	if x.collectOnly {
		return zero, errStopReplay
	}
	value, err := callStep(x.ctx, func(context.Context) (R, error) { return fn() })
	if err != nil {
		x.log(&driver.ExecutionLogEntry{EntryType: entrySideEffect, Name: name, StepStatus: statusFailed, Attempt: 1, ErrorCode: CodePermanentFailure, ErrorMessage: err.Error()})
		return zero, &StepFailedError{Step: name, Code: CodePermanentFailure, Message: err.Error(), Err: err}
	}
	x.logMet(&driver.ExecutionLogEntry{EntryType: entrySideEffect, Name: name, StepStatus: statusRecorded, Attempt: 1, Response: marshalOrNil(value)})
	x.progressed(name)
	return value, nil
}

// Wait suspends the execution until condition holds. The condition is evaluated on every replay
// until it holds once; from then on the wait is recorded as satisfied. A timeout of zero uses the
// process's default wait timeout; when the wait times out the execution goes to the
// troubleshooting queue.
func (x *Execution[S]) Wait(name string, condition func() bool, timeout time.Duration) error {
	recorded, err := x.replay(entryWait, name)
	if err != nil {
		return err
	}
	if recorded != nil {
		return nil
	}
	if x.collectOnly {
		return errStopReplay
	}
	if condition() {
		x.logMet(&driver.ExecutionLogEntry{EntryType: entryWait, Name: name, StepStatus: statusSatisfied})
		x.progressed(name)
		return nil
	}
	if timeout <= 0 {
		timeout = x.m.waitTimeout()
	}
	return x.waitFor(name, timeout, "wait "+name)
}

// waitFor suspends WAITING_FOR_ASYNC on name. Re-suspending on the same wait keeps its original
// timeout: evaluating a condition again never extends it.
func (x *Execution[S]) waitFor(name string, timeout time.Duration, reason string) error {
	row := x.lease.Row
	already := row.CurrentWait == name && row.NextWaitTimeoutAt != nil &&
		(row.ClaimedFrom == driver.ExecutionWaitingForAsync || row.Status == driver.ExecutionWaitingForAsync)
	if !already {
		x.log(&driver.ExecutionLogEntry{EntryType: entryWait, Name: name, StepStatus: statusPending,
			Response: marshalOrNil(map[string]string{"timeout": timeout.String()})})
	}
	return x.suspend(reason, func(cp *driver.ExecutionCheckpoint) {
		cp.Status = driver.ExecutionWaitingForAsync
		cp.CurrentWait = name
		cp.Step = name
		cp.NextRetryAt = nil
		if already {
			cp.NextWaitTimeoutAt = row.NextWaitTimeoutAt
		} else {
			cp.NextWaitTimeoutAt = nil
			cp.WaitTimeout = timeout
		}
	})
}
