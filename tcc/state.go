package tcc

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// Log entry types and statuses a transaction writes. Replay is by participant and phase: the log
// folds into one record per participant phase.
const (
	entryLifecycle   = "LIFECYCLE"
	entryPhase       = "PHASE" // Name is the phase; StepStatus STARTED, COMPLETED or FAILED
	entryTSQRetry    = "TSQ_RETRY"
	entryTSQSkip     = "TSQ_SKIP"
	entryTSQCancel   = "TSQ_CANCEL"
	entryTSQComplete = "TSQ_COMPLETE"
	// Participant attempts are logged under their phase's name (TRY, CONFIRM, CANCEL), Name being
	// the participant.

	nameCreated = "TCC_CREATED"

	statusStarted        = "STARTED"
	statusCompleted      = "COMPLETED"
	statusFailed         = "FAILED"
	statusRetryScheduled = "RETRY_SCHEDULED"
	// statusSkipped marks a cancel an operator gave up.
	statusSkipped = "SKIPPED"
	// statusWaiting marks a command participant's phase waiting for its command's reply.
	statusWaiting = "WAITING"

	// reasonOptional marks the failed try of an optional participant.
	reasonOptional = "optional participant"
)

// The error codes a transaction writes.
const (
	// CodeTryFailed ends a transaction CANCELED after a try failed for good.
	CodeTryFailed = "TRY_FAILED"
	// CodeConfirmFailed ends a transaction CANCELED after a confirm failed for good.
	CodeConfirmFailed = "CONFIRM_FAILED"
	// CodeCancelFailed parks a transaction whose cancels did not all succeed (result FAILED).
	CodeCancelFailed = "CANCEL_FAILED"
	// CodeDefinitionChanged parks a transaction whose definition changed shape under it; an
	// operator's Retry adopts the new definition.
	CodeDefinitionChanged = "DEFINITION_CHANGED"
)

// phaseRecord is one participant phase as the log tells it.
type phaseRecord struct {
	status   string // "", COMPLETED, FAILED, RETRY_SCHEDULED, SKIPPED
	attempts int    // failed attempts since the last operator retry (the retry budget)
	total    int    // every recorded attempt
	result   json.RawMessage
	retryAt  time.Time
	errCode  string
	errMsg   string
	latency  time.Duration
	started  *time.Time
	ended    *time.Time
	// commandID and sentAt are the command a waiting phase's current attempt sent, and when.
	commandID uuid.UUID
	sentAt    time.Time
}

type partRecord struct{ phases [3]phaseRecord }

// folded is a transaction's log folded by participant and phase.
type folded struct {
	hash string
	// phase is the phase the transaction is in; started[i] says a PHASE STARTED entry was
	// logged for phases[i], ended[i] a COMPLETED or FAILED one.
	phase          Phase
	started, ended [3]bool
	// cause is the try or confirm failure that sent the transaction to its cancels; failed the
	// cancel failure that parked it (cleared by an operator's retry).
	cause, failed       failure
	cancelledByOperator bool
	completedByOperator bool
	parts               map[string]*partRecord
}

// failure names a participant phase that failed for good, with its error.
type failure struct {
	participant string
	phase       Phase
	code, msg   string
}

type createdInfo struct {
	Hash    string `json:"hash"`
	Version int    `json:"version"`
}

// phaseInfo is a PHASE FAILED entry's request: the participant that failed it.
type phaseInfo struct {
	Participant string `json:"participant,omitempty"`
}

type retryInfo struct {
	Hash string `json:"hash,omitempty"`
}

func newFolded() *folded { return &folded{phase: PhaseTry, parts: map[string]*partRecord{}} }

func (f *folded) rec(participant string, p Phase) *phaseRecord {
	r := f.parts[participant]
	if r == nil {
		r = &partRecord{}
		f.parts[participant] = r
	}
	return &r.phases[phaseIndex(p)]
}

// peek returns the record without creating it (a zero record for none).
func (f *folded) peek(participant string, p Phase) phaseRecord {
	if r := f.parts[participant]; r != nil {
		return r.phases[phaseIndex(p)]
	}
	return phaseRecord{}
}

func fold(entries []*driver.ExecutionLogEntry) *folded {
	f := newFolded()
	for _, e := range entries {
		f.apply(e)
	}
	return f
}

// apply folds one entry in; the runner applies the entries it writes the same way, so its view
// and a replay's never differ.
func (f *folded) apply(e *driver.ExecutionLogEntry) {
	switch e.EntryType {
	case entryLifecycle:
		if e.Name == nameCreated {
			var info createdInfo
			_ = json.Unmarshal(e.Request, &info)
			f.hash = info.Hash
		}
	case entryPhase:
		i := phaseIndex(Phase(e.Name))
		switch e.StepStatus {
		case statusStarted:
			f.phase, f.started[i] = Phase(e.Name), true
		case statusCompleted:
			f.ended[i] = true
		case statusFailed:
			f.ended[i] = true
			var info phaseInfo
			_ = json.Unmarshal(e.Request, &info)
			fl := failure{participant: info.Participant, phase: Phase(e.Name), code: e.ErrorCode, msg: e.ErrorMessage}
			if fl.phase == PhaseCancel {
				f.failed = fl
			} else {
				f.cause = fl
			}
		}
	case string(PhaseTry), string(PhaseConfirm), string(PhaseCancel):
		r := f.rec(e.Name, Phase(e.EntryType))
		at := e.At
		if e.StepStatus == statusWaiting {
			var sent struct {
				CommandID uuid.UUID `json:"commandId"`
			}
			_ = json.Unmarshal(e.Request, &sent)
			r.status, r.commandID, r.sentAt = statusWaiting, sent.CommandID, e.At
			return
		}
		r.total++
		r.started, r.ended = e.StartedAt, &at
		if d, ok := e.Latency(); ok {
			r.latency += d
		}
		r.errCode, r.errMsg = e.ErrorCode, e.ErrorMessage
		switch e.StepStatus {
		case statusCompleted:
			r.status, r.result = statusCompleted, e.Response
		case statusRetryScheduled:
			var at struct {
				RetryAt time.Time `json:"retryAt"`
			}
			_ = json.Unmarshal(e.Request, &at)
			r.status, r.retryAt = statusRetryScheduled, at.RetryAt
			r.attempts++
		case statusFailed:
			r.status = statusFailed
			r.attempts++
		}
	case entryTSQRetry:
		var info retryInfo
		_ = json.Unmarshal(e.Request, &info)
		if info.Hash != "" {
			f.hash = info.Hash
		}
		// Failed cancels get a fresh budget; the cancel phase is open again.
		for _, r := range f.parts {
			c := &r.phases[cancelIdx]
			if c.status == statusFailed || c.status == statusRetryScheduled {
				c.status, c.attempts, c.retryAt = "", 0, time.Time{}
			}
		}
		f.ended[cancelIdx] = false
		f.failed = failure{}
	case entryTSQSkip:
		r := f.rec(e.Name, PhaseCancel)
		r.status = statusSkipped
	case entryTSQCancel:
		f.cancelledByOperator = true
	case entryTSQComplete:
		f.completedByOperator = true
	}
}
