package saga

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// The statuses of a StepOutcome.
const (
	StepPending            = "PENDING"              // not run yet (or never: the saga unwound first)
	StepDone               = "DONE"                 // completed, not compensated
	StepSkipped            = "SKIPPED"              // its condition did not hold
	StepFailed             = "FAILED"               // failed for good
	StepRetryScheduled     = "RETRY_SCHEDULED"      // failed, another attempt is scheduled
	StepWaiting            = "WAITING"              // a command step waiting for its reply
	StepCompensated        = "COMPENSATED"          // completed, then compensated
	StepCompensating       = "COMPENSATING"         // completed, its compensation waits for a retry
	StepCompensationFailed = "COMPENSATION_FAILED"  // completed, its compensation failed for good
	StepCompensationSkip   = "COMPENSATION_SKIPPED" // completed, an operator gave up its compensation
)

// Result is a saga execution's outcome: its status, each step's outcome, which steps failed and
// which were compensated (in the order their compensations ended), and the first error.
type Result struct {
	Saga        string    `json:"saga"`
	ExecutionID uuid.UUID `json:"executionId"`
	Status      string    `json:"status"`
	// Success is true once every step completed (the saga is COMPLETED).
	Success     bool       `json:"success"`
	StartedAt   time.Time  `json:"startedAt"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	// Steps are the step outcomes by step id (expanded instances by instance id).
	Steps map[string]StepOutcome `json:"steps"`
	// Order lists the step ids in layer order.
	Order []string `json:"order"`
	// FailedSteps failed for good; CompensatedSteps were compensated, in the order their
	// compensations ended; CompensationFailed are those whose compensation failed for good.
	FailedSteps        []string `json:"failedSteps,omitempty"`
	CompensatedSteps   []string `json:"compensatedSteps,omitempty"`
	CompensationFailed []string `json:"compensationFailed,omitempty"`
	// FirstErrorStep is the first step that failed for good, with its error code and message.
	FirstErrorStep string `json:"firstErrorStep,omitempty"`
	FirstErrorCode string `json:"firstErrorCode,omitempty"`
	FirstError     string `json:"firstError,omitempty"`
	// ErrorCode and Error are the execution's: the failure that started the compensations, or
	// why it waits in the troubleshooting queue (COMPENSATION_FAILED naming the compensations).
	ErrorCode string `json:"errorCode,omitempty"`
	Error     string `json:"error,omitempty"`
}

// StepOutcome is one step's outcome.
type StepOutcome struct {
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	// LatencyMs is the last attempt's duration.
	LatencyMs  int64           `json:"latencyMs"`
	StartedAt  *time.Time      `json:"startedAt,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	ErrorCode  string          `json:"errorCode,omitempty"`
	Error      string          `json:"error,omitempty"`
	InstanceOf string          `json:"instanceOf,omitempty"`
	// Compensated says the compensation ran and succeeded; CompensationAttempts counts its
	// attempts and CompensationError is its last error.
	Compensated          bool   `json:"compensated"`
	CompensationAttempts int    `json:"compensationAttempts,omitempty"`
	CompensationError    string `json:"compensationError,omitempty"`
}

// Step returns the outcome of step id and whether the saga has it.
func (r *Result) Step(id string) (StepOutcome, bool) {
	o, ok := r.Steps[id]
	return o, ok
}

// ResultOf builds the Result of an execution from its stored view.
func ResultOf(inst *Instance) *Result {
	r := &Result{Saga: inst.Type, ExecutionID: inst.ID, Status: string(inst.Status), Success: inst.Status == driver.ExecutionCompleted,
		StartedAt: inst.CreatedAt, CompletedAt: inst.CompletedAt, Steps: map[string]StepOutcome{}, ErrorCode: inst.ErrorCode,
		Error: inst.ErrorMessage}
	type comp struct {
		id    string
		order int
	}
	var compensated []comp
	for _, s := range inst.Steps {
		o := StepOutcome{Status: s.Status, Attempts: s.Attempts, StartedAt: s.StartedAt, Result: s.Result, ErrorCode: s.ErrorCode,
			Error: s.Error, InstanceOf: s.Instance, CompensationAttempts: s.CompensationAttempts, CompensationError: s.CompensationError}
		if s.StartedAt != nil && s.EndedAt != nil {
			o.LatencyMs = s.EndedAt.Sub(*s.StartedAt).Milliseconds()
		}
		switch s.Status {
		case "COMPLETED":
			o.Status = StepDone
			switch s.Compensation {
			case "COMPLETED":
				o.Status, o.Compensated = StepCompensated, true
				compensated = append(compensated, comp{s.ID, s.CompensationOrder})
			case "FAILED":
				o.Status = StepCompensationFailed
				r.CompensationFailed = append(r.CompensationFailed, s.ID)
			case "RETRY_SCHEDULED":
				o.Status = StepCompensating
			case "SKIPPED":
				o.Status = StepCompensationSkip
			}
		case "FAILED":
			r.FailedSteps = append(r.FailedSteps, s.ID)
		}
		r.Steps[s.ID] = o
		r.Order = append(r.Order, s.ID)
	}
	slices.SortFunc(compensated, func(a, b comp) int { return a.order - b.order })
	for _, c := range compensated {
		r.CompensatedSteps = append(r.CompensatedSteps, c.id)
	}
	for _, e := range inst.Log {
		if e.EntryType == "STEP" && e.StepStatus == "FAILED" {
			r.FirstErrorStep, r.FirstErrorCode, r.FirstError = e.Name, e.ErrorCode, e.ErrorMessage
			break
		}
	}
	return r
}
