package orchestration

import "time"

// The step kinds a StepInfo reports.
const (
	StepKindLocal  = "local"  // runs its function
	StepKindSignal = "signal" // waits for a named signal
	StepKindSleep  = "sleep"  // waits for a durable timer
	StepKindChild  = "child"  // starts a child execution and waits for its end
	// StepKindCommand sends a command to a domain and waits for its reply.
	StepKindCommand = "command"
)

// StepInfo describes one step of a declarative definition, for tools that show it (the console
// draws the DAG with it): its id, kind (StepKindLocal, StepKindSignal, StepKindSleep,
// StepKindChild or StepKindCommand), what it waits for and its dependencies.
type StepInfo struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Signal is the signal a signal gate waits for; SignalTimeout bounds the wait (zero: none).
	Signal        string        `json:"signal,omitempty"`
	SignalTimeout time.Duration `json:"signalTimeout,omitempty"`
	// Sleep is a sleep step's delay.
	Sleep time.Duration `json:"sleep,omitempty"`
	// ChildType is the execution type a child step starts.
	ChildType string `json:"childType,omitempty"`
	// CommandDomain and CommandType name the command a command step sends.
	CommandDomain string `json:"commandDomain,omitempty"`
	CommandType   string `json:"commandType,omitempty"`
	// DependsOn are the steps that must be done before this one runs.
	DependsOn []string `json:"dependsOn,omitempty"`
	// Conditional says the step runs only when its condition holds; Compensated that it has a
	// compensation.
	Conditional bool `json:"conditional,omitempty"`
	Compensated bool `json:"compensated,omitempty"`
	// CompensationCritical says the step's compensation is critical (a saga's circuit breaker
	// opens when it fails); ExpandEach that the step runs as one instance per item of the input.
	CompensationCritical bool `json:"compensationCritical,omitempty"`
	ExpandEach           bool `json:"expandEach,omitempty"`
}

// StepDescriber is implemented by operations of declarative models that describe their steps.
type StepDescriber interface {
	Steps() []StepInfo
}

// StepsOf returns the steps ops describes, or nil when its model does not describe them (a
// process, whose code is its definition).
func StepsOf(ops Operations) []StepInfo {
	if d, ok := ops.(StepDescriber); ok {
		return d.Steps()
	}
	return nil
}
