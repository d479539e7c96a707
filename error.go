package commandbus

import (
	"context"
	"errors"
	"fmt"

	"github.com/commandbus/commandbus/driver"
)

// Error is an error with a stable code. Codes survive the database: an Error read back from a
// command row still matches its sentinel with errors.Is, because Is compares codes.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// The stable error codes written to commands and replies by the engine.
const (
	CodeUnknownCommandType = "UNKNOWN_COMMAND_TYPE"
	CodeInvalidData        = "INVALID_DATA"
	CodeRetriesExhausted   = "RETRIES_EXHAUSTED"
	CodePermanentFailure   = "PERMANENT_FAILURE"
	CodeTransientFailure   = "TRANSIENT_FAILURE"
	CodeBusinessRule       = "BUSINESS_RULE"
	CodeHandlerPanic       = "HANDLER_PANIC"
	CodeLeaseExpired       = "LEASE_EXPIRED"
	CodeDeadlineExceeded   = "DEADLINE_EXCEEDED"
	CodeCancelled          = "CANCELLED"
	CodeNoReplyHandler     = "NO_REPLY_HANDLER"
)

// Sentinels for the engine's codes, to use with errors.Is.
var (
	ErrUnknownCommandType = &Error{Code: CodeUnknownCommandType}
	ErrInvalidData        = &Error{Code: CodeInvalidData}
	ErrRetriesExhausted   = &Error{Code: CodeRetriesExhausted}
)

// ErrNotFound is returned when a command, batch or execution does not exist.
var ErrNotFound = driver.ErrNotFound

// ErrInvalidState is returned when an operator action does not apply to the command's current
// status, such as retrying a command that is not in the troubleshooting queue.
var ErrInvalidState = driver.ErrConflict

// ValidationError is returned for bad input; nothing was written.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Message)
}

// TransientError marks a failure worth retrying (a timeout, an unavailable service). The command
// is retried with backoff until its attempts run out, then goes to the troubleshooting queue.
// Errors a handler returns without classification are treated as transient.
type TransientError struct {
	Code string // optional; default TRANSIENT_FAILURE
	Err  error
}

func (e *TransientError) Error() string { return "transient: " + errString(e.Err) }

// Unwrap returns the cause.
func (e *TransientError) Unwrap() error { return e.Err }

// PermanentError marks a failure that retrying cannot fix (invalid data, a bug). The command goes
// to the troubleshooting queue at once.
type PermanentError struct {
	Code string // optional; default PERMANENT_FAILURE
	Err  error
}

func (e *PermanentError) Error() string { return "permanent: " + errString(e.Err) }

// Unwrap returns the cause.
func (e *PermanentError) Unwrap() error { return e.Err }

// BusinessRuleError is a legitimate negative outcome (insufficient funds, limit exceeded). The
// command ends FAILED and its reply carries the code and message, so a process can compensate.
type BusinessRuleError struct {
	Code    string
	Message string
	// Details is sent in the failure reply's result, JSON encoded.
	Details any
}

func (e *BusinessRuleError) Error() string { return "business rule " + e.Code + ": " + e.Message }

// Transient wraps err as a TransientError.
func Transient(err error) error { return &TransientError{Err: err} }

// Permanent wraps err as a PermanentError with a code.
func Permanent(code string, err error) error { return &PermanentError{Code: code, Err: err} }

// BusinessRule returns a BusinessRuleError.
func BusinessRule(code, message string) error {
	return &BusinessRuleError{Code: code, Message: message}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// ErrorClass is how a failure is handled, by every model the same way: a transient failure is
// retried with backoff while attempts remain; a permanent one goes to the troubleshooting queue
// at once; a business failure is a legitimate negative outcome (a command ends FAILED and its
// reply carries the code; a process step runs its compensations).
type ErrorClass int

// The error classes.
const (
	ClassPermanent ErrorClass = iota
	ClassTransient
	ClassBusiness
)

// String returns the class name: PERMANENT, TRANSIENT or BUSINESS.
func (c ErrorClass) String() string {
	switch c {
	case ClassTransient:
		return "TRANSIENT"
	case ClassBusiness:
		return "BUSINESS"
	}
	return "PERMANENT"
}

// Classify sorts an error by its type with errors.As, never by its message: BusinessRuleError
// is business; PermanentError, and the codes UNKNOWN_COMMAND_TYPE and INVALID_DATA, are
// permanent; TransientError and context.DeadlineExceeded are transient. Any other error gets
// unclassified, which each model chooses and documents: a command handler's unclassified error
// is retried (it is usually the infrastructure), a process step's goes to the troubleshooting
// queue at once (fail fast). Code is the error's own code, or "" when it carries none.
func Classify(err error, unclassified ErrorClass) (class ErrorClass, code string) {
	var business *BusinessRuleError
	var permanent *PermanentError
	var transient *TransientError
	var coded *Error
	switch {
	case errors.As(err, &business):
		return ClassBusiness, business.Code
	case errors.As(err, &permanent):
		return ClassPermanent, permanent.Code
	case errors.As(err, &transient):
		return ClassTransient, transient.Code
	case errors.As(err, &coded):
		if coded.Code == CodeUnknownCommandType || coded.Code == CodeInvalidData {
			return ClassPermanent, coded.Code
		}
		return unclassified, coded.Code
	case errors.Is(err, context.DeadlineExceeded):
		return ClassTransient, ""
	}
	return unclassified, ""
}

// classify sorts a handler error: unclassified errors are transient. It gives the code and
// message written to the command, with each class's default code.
func classify(err error) (class ErrorClass, code, message string) {
	class, code = Classify(err, ClassTransient)
	message = err.Error()
	var business *BusinessRuleError
	var permanent *PermanentError
	var transient *TransientError
	var coded *Error
	switch {
	case errors.As(err, &business):
		message = business.Message
	case errors.As(err, &permanent):
		message = errString(permanent.Err)
	case errors.As(err, &transient):
		message = errString(transient.Err)
	case errors.As(err, &coded) && class == ClassPermanent:
		message = coded.Message
	}
	switch class {
	case ClassBusiness:
		code = orDefault(code, CodeBusinessRule)
	case ClassPermanent:
		code = orDefault(code, CodePermanentFailure)
	default:
		code = CodeTransientFailure
		if transient != nil && transient.Code != "" {
			code = transient.Code
		}
	}
	return class, code, message
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
