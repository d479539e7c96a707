package workflow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// Log entry types and step statuses a workflow writes. Replay is by step id: the log folds into
// one record per step, so the order in which parallel steps completed does not matter.
const (
	entryStep         = "STEP"
	entryCompensation = "COMPENSATION"
	entryLifecycle    = "LIFECYCLE"
	entryTSQRetry     = "TSQ_RETRY"
	entryTSQSkip      = "TSQ_SKIP"
	entryTSQCancel    = "TSQ_CANCEL"
	entryTSQComplete  = "TSQ_COMPLETE"

	nameCreated = "WORKFLOW_CREATED"
	// nameCompensationStarted marks the start of the compensation phase: from it on, a run
	// compensates (whatever the stored status) until the execution ends or parks.
	nameCompensationStarted = "COMPENSATION_STARTED"

	statusCompleted      = "COMPLETED"
	statusSkipped        = "SKIPPED"
	statusFailed         = "FAILED"
	statusRetryScheduled = "RETRY_SCHEDULED"
	// statusWaiting marks a signal gate, timer or child step waiting for its input.
	statusWaiting = "WAITING"

	// reasonBusinessFailure marks a FAILED entry whose failure is a business one.
	reasonBusinessFailure = "business failure"
)

// The error codes the workflow runtime writes.
const (
	// CodeDefinitionChanged parks an execution whose definition changed shape under it; an
	// operator's Retry adopts the new definition.
	CodeDefinitionChanged = "DEFINITION_CHANGED"
	// CodeCompensationFailed parks an execution whose compensations did not all succeed.
	CodeCompensationFailed = "COMPENSATION_FAILED"
	// CodeSignalTimeout is a signal gate's timeout passing without its signal.
	CodeSignalTimeout = "SIGNAL_TIMEOUT"
	// CodeCommandParked parks an execution whose command step's command waits in the command
	// troubleshooting queue; Retry retries that command, whose final reply resumes the execution.
	CodeCommandParked = "COMMAND_PARKED"
	// CodeExpansionFailed parks an execution whose expanded step's items could not be read
	// from its input.
	CodeExpansionFailed = "EXPANSION_FAILED"
)

// StepContext is what a step sees: the execution, its attempt, the workflow input and the results
// of the steps done before it.
type StepContext struct {
	// ExecutionID is the workflow execution's id.
	ExecutionID uuid.UUID
	// Step is the step's id.
	Step string
	// Attempt is the attempt number, from 1.
	Attempt int
	// Input is the workflow's input as JSON.
	Input   json.RawMessage
	results map[string]json.RawMessage
	attrs   map[string]string // search attributes the step set, written with its record
	item    json.RawMessage   // an expanded step instance's item
	itemKey string
}

// Item decodes the item of an expanded step instance (one step made N instances, one per item
// of the input) into v; it fails for a step that is not an instance.
func (sc *StepContext) Item(v any) error {
	if sc.item == nil {
		return fmt.Errorf("%w: step %q is not an expanded instance", commandbus.ErrNotFound, sc.Step)
	}
	return json.Unmarshal(sc.item, v)
}

// ItemKey is an expanded step instance's key (the item's key, or its index), or "".
func (sc *StepContext) ItemKey() string { return sc.itemKey }

// SetAttribute sets a search attribute of the execution, written with the step's record (an
// empty value removes it). Executions are found by their attributes through List and the API.
func (sc *StepContext) SetAttribute(key, value string) error {
	if err := driver.ValidateAttribute(key, value); err != nil {
		return err
	}
	if sc.attrs == nil {
		sc.attrs = map[string]string{}
	}
	sc.attrs[key] = value
	return nil
}

// TimedOut reports whether a signal gate completed because its timeout passed (policy
// TimeoutBranch), for the conditions of the steps after it.
func (sc *StepContext) TimedOut(gate string) bool {
	var r struct {
		TimedOut bool `json:"timedOut"`
	}
	return json.Unmarshal(sc.results[gate], &r) == nil && r.TimedOut
}

// Key is the step's stable idempotency key (execution id : step id), the same on every attempt.
func (sc *StepContext) Key() string { return sc.ExecutionID.String() + ":" + sc.Step }

// DecodeInput decodes the workflow input into v.
func (sc *StepContext) DecodeInput(v any) error {
	if len(sc.Input) == 0 {
		return nil
	}
	return json.Unmarshal(sc.Input, v)
}

// Result decodes the result of a completed step into v. It fails for a step that did not
// complete (skipped, or not run yet).
func (sc *StepContext) Result(step string, v any) error {
	r, ok := sc.results[step]
	if !ok {
		return fmt.Errorf("%w: step %q has no result", commandbus.ErrNotFound, step)
	}
	return json.Unmarshal(r, v)
}

// stepRecord is one step's outcome as the log tells it.
type stepRecord struct {
	status   string // "", COMPLETED, SKIPPED, FAILED, RETRY_SCHEDULED
	attempts int    // failed attempts since the last operator retry
	result   json.RawMessage
	retryAt  time.Time
	order    int // completion order, for compensations
	errCode  string
	errMsg   string
	compStat string // COMPLETED, FAILED or RETRY_SCHEDULED once its compensation ran
	// compAttempts counts the compensation's failed attempts since the last operator retry;
	// compRetryAt is when a scheduled one is due; compErr the last failure.
	compAttempts int
	compRetryAt  time.Time
	compErr      string
	compOrder    int       // the order in which compensations ended, from 1
	commandID    uuid.UUID // the command a waiting command step's current attempt sent
	// sent says a command step sent a command: whatever its replies said, it may have taken
	// effect (an earlier attempt under the same step key landing late).
	sent bool
}

func (r *stepRecord) done() bool { return r.status == statusCompleted || r.status == statusSkipped }

// compensable says the step's compensation runs when the execution unwinds: it completed, or it
// is a command step that sent a command and did not complete (its failure reply does not prove
// that nothing took effect).
func (r *stepRecord) compensable() bool {
	return r.status == statusCompleted || r.sent && r.status != statusSkipped
}

// folded is an execution's log folded by step id.
type folded struct {
	hash    string
	dryRun  bool
	startAt *time.Time // a delayed start: no step runs before it
	// cancelled is set by an operator's cancel with compensations: they end CANCELLED.
	cancelled bool
	// failStep, failCode and failMsg are the first step failure that stands (not retried by an
	// operator since); failBusiness says it was a business failure (compensations).
	failStep, failCode, failMsg string
	failBusiness                bool
	steps                       map[string]*stepRecord
	next                        int // next completion order
	// compensating is set once the compensation phase started.
	compensating bool
	compNext     int
}

type createdInfo struct {
	Hash    string     `json:"hash"`
	Version int        `json:"version"`
	DryRun  bool       `json:"dryRun,omitempty"`
	StartAt *time.Time `json:"startAt,omitempty"`
}

type retryInfo struct {
	Hash string `json:"hash,omitempty"`
}

func fold(entries []*driver.ExecutionLogEntry) *folded {
	f := &folded{steps: map[string]*stepRecord{}}
	rec := func(name string) *stepRecord {
		r := f.steps[name]
		if r == nil {
			r = &stepRecord{}
			f.steps[name] = r
		}
		return r
	}
	for _, e := range entries {
		switch e.EntryType {
		case entryLifecycle:
			if e.Name == nameCreated {
				var info createdInfo
				_ = json.Unmarshal(e.Request, &info)
				f.hash, f.dryRun, f.startAt = info.Hash, info.DryRun, info.StartAt
			}
			if e.Name == nameCompensationStarted {
				f.compensating = true
			}
		case entryStep:
			r := rec(e.Name)
			switch e.StepStatus {
			case statusCompleted, statusSkipped:
				r.status, r.result, r.order = e.StepStatus, e.Response, f.next
				f.next++
			case statusRetryScheduled:
				var at struct {
					RetryAt time.Time `json:"retryAt"`
				}
				_ = json.Unmarshal(e.Request, &at)
				r.status, r.retryAt, r.errCode, r.errMsg = statusRetryScheduled, at.RetryAt, e.ErrorCode, e.ErrorMessage
				r.attempts++
			case statusWaiting:
				r.status = statusWaiting
				f.waiting(r, e.Request)
			case statusFailed:
				r.status, r.errCode, r.errMsg = statusFailed, e.ErrorCode, e.ErrorMessage
				r.attempts++
				if f.failStep == "" {
					f.failStep, f.failCode, f.failMsg = e.Name, e.ErrorCode, e.ErrorMessage
					f.failBusiness = e.Reason == reasonBusinessFailure
				}
			}
		case entryCompensation:
			r := rec(e.Name)
			r.compStat = e.StepStatus
			switch e.StepStatus {
			case statusCompleted:
				f.compNext++
				r.compOrder, r.compErr = f.compNext, ""
			case statusFailed:
				r.compAttempts++
				r.compErr = e.ErrorMessage
				f.compNext++
				r.compOrder = f.compNext
			case statusRetryScheduled:
				var at struct {
					RetryAt time.Time `json:"retryAt"`
				}
				_ = json.Unmarshal(e.Request, &at)
				r.compAttempts++
				r.compRetryAt, r.compErr = at.RetryAt, e.ErrorMessage
			}
		case entryTSQRetry:
			var info retryInfo
			_ = json.Unmarshal(e.Request, &info)
			if info.Hash != "" {
				f.hash = info.Hash
			}
			if f.failStep != "" && !f.compensating {
				f.failStep, f.failCode, f.failMsg, f.failBusiness = "", "", "", false // a retried step failure no longer stands
			}
			for _, r := range f.steps {
				if r.status == statusFailed || r.status == statusRetryScheduled {
					r.status, r.attempts, r.retryAt = "", 0, time.Time{}
				}
				if r.compStat == statusFailed || r.compStat == statusRetryScheduled {
					r.compStat, r.compAttempts, r.compRetryAt = "", 0, time.Time{}
				}
			}
		case entryTSQCancel:
			f.cancelled = true
		case entryTSQSkip:
			r := rec(e.Name)
			if r.compensable() && r.compStat == statusFailed {
				r.compStat = statusSkipped // a failed compensation skipped by an operator
				continue
			}
			r.status, r.result, r.order = statusCompleted, e.Response, f.next
			f.next++
		}
	}
	return f
}

// waiting records a step that waits; request names the command a command step sent. Such a step
// is compensable from then on, ordered as if it completed now: unwound before the steps that
// completed earlier.
func (f *folded) waiting(r *stepRecord, request json.RawMessage) {
	var sent struct {
		CommandID uuid.UUID `json:"commandId"`
	}
	if json.Unmarshal(request, &sent) == nil {
		r.commandID = sent.CommandID
	}
	if r.commandID != uuid.Nil && !r.sent {
		r.sent, r.order = true, f.next
		f.next++
	}
}

func (f *folded) results() map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(f.steps))
	for id, r := range f.steps {
		if r.status == statusCompleted {
			out[id] = r.result
		}
	}
	return out
}
