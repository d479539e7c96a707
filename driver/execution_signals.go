package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/cbtype"
)

// ExecutionSignalSendParams sends a signal to an execution. SignalID makes the send idempotent:
// sending the same id again records nothing. An empty SignalID is generated (see Normalize).
type ExecutionSignalSendParams struct {
	ExecutionID uuid.UUID
	SignalID    string
	Name        string
	Payload     json.RawMessage // valid JSON, or empty for none
	// Traceparent is the W3C traceparent of the sender (empty for none), stored with the signal
	// so the run it resumes links to the sender's trace.
	Traceparent string
	Now         *time.Time
}

// Normalize generates a missing SignalID and validates the params: a name is required and the
// payload, when given, must be valid JSON.
func (p *ExecutionSignalSendParams) Normalize() error {
	var errs []error
	if p.ExecutionID == uuid.Nil {
		errs = append(errs, errors.New("signal: execution id is required"))
	}
	if p.Name == "" {
		errs = append(errs, errors.New("signal: name is required"))
	}
	if len(p.Payload) > 0 && !json.Valid(p.Payload) {
		errs = append(errs, fmt.Errorf("signal %q: payload is not valid JSON", p.Name))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if p.SignalID == "" {
		p.SignalID = uuid.Must(uuid.NewV7()).String()
	}
	return nil
}

// ExecutionSignalSendResult reports what a send did.
type ExecutionSignalSendResult struct {
	// SignalID is the signal's id (generated when the caller gave none).
	SignalID string
	// Duplicate is true when a signal with this id had already been recorded: nothing changed.
	Duplicate bool
}

// TimerParams schedules a durable timer in a checkpoint, at FireAt or, when FireAt is nil, Delay
// after the database's now. Scheduling an id the execution already has is a no-op, so a runner
// that replays its steps may schedule the same timer again.
type TimerParams struct {
	ID     string
	Name   string
	FireAt *time.Time
	Delay  time.Duration
}

// WaitParams opens a wait in a checkpoint. With TimeoutAt, or a positive Timeout after the
// database's now, the wait expires then: its timeout wakes the execution like a timer and the
// runner sees it through its expired waits. Opening an id that is already open is a no-op.
type WaitParams struct {
	ID        string
	Kind      WaitKind
	Name      string
	TimeoutAt *time.Time
	Timeout   time.Duration
}

// The stable types of signals, timers and waits live in package cbtype.
type (
	// ExecutionSignalRow is cbtype.ExecutionSignalRow.
	ExecutionSignalRow = cbtype.ExecutionSignalRow
	// TimerStatus is cbtype.TimerStatus.
	TimerStatus = cbtype.TimerStatus
	// ExecutionTimerRow is cbtype.ExecutionTimerRow.
	ExecutionTimerRow = cbtype.ExecutionTimerRow
	// WaitKind is cbtype.WaitKind.
	WaitKind = cbtype.WaitKind
	// ExecutionWaitRow is cbtype.ExecutionWaitRow.
	ExecutionWaitRow = cbtype.ExecutionWaitRow
)

// The timer statuses and wait kinds (see cbtype).
const (
	TimerPending   = cbtype.TimerPending
	TimerFired     = cbtype.TimerFired
	TimerCancelled = cbtype.TimerCancelled
	WaitReply      = cbtype.WaitReply
	WaitSignal     = cbtype.WaitSignal
	WaitTimer      = cbtype.WaitTimer
	WaitChild      = cbtype.WaitChild
)

// HasSignalOps reports whether the checkpoint schedules, cancels or fires timers, consumes
// signals, or opens or closes waits.
func (c *ExecutionCheckpoint) HasSignalOps() bool {
	return len(c.Timers) > 0 || len(c.CancelTimers) > 0 || len(c.FireTimers) > 0 ||
		len(c.ConsumeSignals) > 0 || len(c.OpenWaits) > 0 || len(c.CloseWaits) > 0
}

// ValidateSignalOps checks the checkpoint's timers and waits: ids are required, a kind must be
// valid, and timers and timeouts cannot be negative.
func (c *ExecutionCheckpoint) ValidateSignalOps() error {
	var errs []error
	for _, t := range c.Timers {
		switch {
		case t == nil || t.ID == "":
			errs = append(errs, errors.New("timer: id is required"))
		case t.FireAt == nil && t.Delay < 0:
			errs = append(errs, fmt.Errorf("timer %q: negative delay %s", t.ID, t.Delay))
		}
	}
	for _, w := range c.OpenWaits {
		switch {
		case w == nil || w.ID == "":
			errs = append(errs, errors.New("wait: id is required"))
		case !w.Kind.Valid():
			errs = append(errs, fmt.Errorf("wait %q: unknown kind %q (want REPLY, SIGNAL, TIMER or CHILD)", w.ID, w.Kind))
		case w.Timeout < 0:
			errs = append(errs, fmt.Errorf("wait %q: negative timeout %s", w.ID, w.Timeout))
		}
	}
	for _, ids := range [][]string{c.CancelTimers, c.FireTimers, c.ConsumeSignals, c.CloseWaits} {
		for _, id := range ids {
			if id == "" {
				errs = append(errs, errors.New("checkpoint: an empty timer, signal or wait id"))
			}
		}
	}
	return errors.Join(errs...)
}

// ExecutionTimerListParams lists an execution's pending timers; with Due only those due at Now
// (nil: the database clock).
type ExecutionTimerListParams struct {
	ExecutionID uuid.UUID
	Due         bool
	Now         *time.Time
}

// ExecutionTimerListDueManyParams lists the due pending timers of many executions at Now (nil:
// the database clock).
type ExecutionTimerListDueManyParams struct {
	ExecutionIDs []uuid.UUID
	Now          *time.Time
}

// ExecutionNextWakeParams asks when the pending poller next has work: the earliest wake_at after
// Now (nil: the database clock) minus Lookback among executions of Types (all types when empty).
// Lookback covers the wake-ups that fell due since the poller's last claim, which that claim
// could not take and a question asked "after now" would miss.
type ExecutionNextWakeParams struct {
	Types    []string
	Now      *time.Time
	Lookback time.Duration
}

// ExecutionTimerCancelParams cancels one pending timer (an operator action).
type ExecutionTimerCancelParams struct {
	ExecutionID uuid.UUID
	TimerID     string
}

// ExecutionWaitListParams lists an execution's open waits; with Expired only those whose timeout
// passed at Now (nil: the database clock).
type ExecutionWaitListParams struct {
	ExecutionID uuid.UUID
	Expired     bool
	Now         *time.Time
}

// ExecutionSignalExecutor holds the queries of signals, durable timers and open waits. They are
// written by ExecutionCheckpointMany (the checkpoint's Timers, CancelTimers, FireTimers,
// ConsumeSignals, OpenWaits and CloseWaits) and read here.
type ExecutionSignalExecutor interface {
	// ExecutionSignalSend records a signal and wakes the execution now unless a live lease holds
	// it (its runner's release then wakes it). It returns ErrNotFound for an unknown execution
	// and an error wrapping ErrConflict for one that has ended; a signal id already recorded is
	// reported as a Duplicate.
	ExecutionSignalSend(ctx context.Context, params *ExecutionSignalSendParams) (*ExecutionSignalSendResult, error)
	// ExecutionSignalListPending returns the signals not yet consumed, in the order received.
	ExecutionSignalListPending(ctx context.Context, id uuid.UUID) ([]*ExecutionSignalRow, error)
	// ExecutionTimerList returns pending timers, earliest first.
	ExecutionTimerList(ctx context.Context, params *ExecutionTimerListParams) ([]*ExecutionTimerRow, error)
	// ExecutionTimerListDueMany returns the due pending timers of many executions in one round
	// trip, by execution and then earliest first; an unknown id has none.
	ExecutionTimerListDueMany(ctx context.Context, params *ExecutionTimerListDueManyParams) ([]*ExecutionTimerRow, error)
	// ExecutionNextWake returns the earliest wake_at after now minus the lookback (a timer, a
	// wait's timeout, a runner's lease end), or nil when no execution is to be woken later.
	ExecutionNextWake(ctx context.Context, params *ExecutionNextWakeParams) (*time.Time, error)
	// ExecutionTimerCancel cancels a pending timer: ErrNotFound when there is no such timer, an
	// error wrapping ErrConflict when it already fired or was cancelled.
	ExecutionTimerCancel(ctx context.Context, params *ExecutionTimerCancelParams) error
	// ExecutionWaitList returns open waits, in the order opened.
	ExecutionWaitList(ctx context.Context, params *ExecutionWaitListParams) ([]*ExecutionWaitRow, error)
}
