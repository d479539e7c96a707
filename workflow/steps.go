package workflow

import "github.com/commandbus/commandbus/orchestration"

// The step kinds StepInfo reports.
const (
	StepKindLocal   = orchestration.StepKindLocal
	StepKindSignal  = orchestration.StepKindSignal
	StepKindSleep   = orchestration.StepKindSleep
	StepKindChild   = orchestration.StepKindChild
	StepKindCommand = orchestration.StepKindCommand
)

// StepInfo describes one step of a registered definition (see orchestration.StepInfo).
type StepInfo = orchestration.StepInfo

// Steps describes the definition's steps, in the order they were added; it implements
// orchestration.StepDescriber.
func (m *Manager) Steps() []StepInfo {
	out := make([]StepInfo, 0, len(m.def.steps))
	for _, s := range m.def.steps {
		info := StepInfo{ID: s.id, DependsOn: append([]string(nil), s.deps...), Conditional: s.cond != nil, Compensated: s.compensate != nil,
			CompensationCritical: s.comp.Critical, ExpandEach: s.expand != nil}
		switch s.kind {
		case kindSignal:
			info.Kind, info.Signal, info.SignalTimeout = StepKindSignal, s.signal, s.waitTimeout
		case kindTimer:
			info.Kind, info.Sleep = StepKindSleep, s.sleep
		case kindChild:
			info.Kind, info.ChildType = StepKindChild, s.childType
		case kindCommand:
			info.Kind, info.CommandDomain, info.CommandType = StepKindCommand, s.domain, s.commandType
		default:
			info.Kind = StepKindLocal
		}
		out = append(out, info)
	}
	return out
}
