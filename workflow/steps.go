package workflow

import "time"

// The step kinds StepInfo reports.
const (
	StepKindLocal  = "local"
	StepKindSignal = "signal"
	StepKindSleep  = "sleep"
	StepKindChild  = "child"
)

// StepInfo describes one step of a registered definition, for tools that show it (the console
// draws the DAG with it): its id, kind (StepKindLocal, StepKindSignal, StepKindSleep or
// StepKindChild), what it waits for and its dependencies.
type StepInfo struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Signal is the signal a signal gate waits for; SignalTimeout bounds the wait (zero: none).
	Signal        string        `json:"signal,omitempty"`
	SignalTimeout time.Duration `json:"signalTimeout,omitempty"`
	// Sleep is a sleep step's delay.
	Sleep time.Duration `json:"sleep,omitempty"`
	// ChildType is the workflow a child step starts.
	ChildType string `json:"childType,omitempty"`
	// DependsOn are the steps that must be done before this one runs.
	DependsOn []string `json:"dependsOn,omitempty"`
	// Conditional says the step runs only when its condition holds; Compensated that it has a
	// compensation.
	Conditional bool `json:"conditional,omitempty"`
	Compensated bool `json:"compensated,omitempty"`
}

// Steps describes the definition's steps, in the order they were added.
func (m *Manager) Steps() []StepInfo {
	out := make([]StepInfo, 0, len(m.def.steps))
	for _, s := range m.def.steps {
		info := StepInfo{ID: s.id, DependsOn: append([]string(nil), s.deps...), Conditional: s.cond != nil, Compensated: s.compensate != nil}
		switch s.kind {
		case kindSignal:
			info.Kind, info.Signal, info.SignalTimeout = StepKindSignal, s.signal, s.waitTimeout
		case kindTimer:
			info.Kind, info.Sleep = StepKindSleep, s.sleep
		case kindChild:
			info.Kind, info.ChildType = StepKindChild, s.childType
		default:
			info.Kind = StepKindLocal
		}
		out = append(out, info)
	}
	return out
}
