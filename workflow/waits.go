package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/orchestrate"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/orchestration"
)

// openWait starts a signal gate, a timer or a child step. A gate whose signal was sent before it
// opened completes at once with it.
func (w *walk) openWait(s *stepDef, sc *StepContext) *outcome {
	o := &outcome{step: s.id}
	switch s.kind {
	case kindSignal:
		sig, err := w.takeSignal(s.signal)
		if err != nil {
			o.err = err
			return o
		}
		if sig != nil {
			o.result, o.ops.consume = signalResult(sig), []string{sig.SignalID}
			return o
		}
		o.waiting = true
		o.request, _ = json.Marshal(map[string]any{"signal": s.signal, "timeout": s.waitTimeout.String()})
		wait := &driver.WaitParams{ID: s.id, Kind: driver.WaitSignal, Name: s.signal}
		if s.waitTimeout > 0 {
			wait.Timeout = s.waitTimeout
		}
		o.ops.openWaits = []*driver.WaitParams{wait}
	case kindTimer:
		o.waiting = true
		o.request, _ = json.Marshal(map[string]string{"sleep": s.sleep.String()})
		o.ops.timers = []*driver.TimerParams{{ID: s.id, Name: s.id, Delay: s.sleep}}
	case kindCommand:
		cmd, timeout, err := w.commandParams(s, sc)
		if err != nil {
			o.err = err
			return o
		}
		o.waiting = true
		o.request, _ = json.Marshal(map[string]any{"commandId": cmd.ID, "domain": cmd.Domain, "type": cmd.Type})
		o.ops.commands = []*driver.CommandInsertParams{cmd}
		o.ops.openWaits = []*driver.WaitParams{{ID: s.id, Kind: driver.WaitReply, Name: cmd.Type, Timeout: timeout}}
	case kindChild:
		child, err := w.childParams(s, sc)
		if err != nil {
			o.err = err
			return o
		}
		o.waiting = true
		o.request, _ = json.Marshal(map[string]any{"childId": child.ID, "workflow": s.childType})
		o.ops.children = []*driver.ExecutionInsertParams{child}
	}
	return o
}

// commandParams builds a command step's command for attempt sc.Attempt, and its reply timeout.
func (w *walk) commandParams(s *stepDef, sc *StepContext) (*driver.CommandInsertParams, time.Duration, error) {
	m := w.m
	step := m.client.Config().CommandStepOr(s.id, s.domain, s.commandType)
	input, err := callRequest(s, sc)
	if err != nil {
		return nil, 0, err
	}
	data, err := json.Marshal(input)
	if err != nil {
		return nil, 0, commandbus.Permanent(commandbus.CodeInvalidData, fmt.Errorf("the request of step %q cannot be encoded as JSON: %w", s.id, err))
	}
	cmd, err := plumbing.BuildCommand(m.client, commandbus.SendParams{
		Domain: step.Domain,
		Args:   commandbus.RawArgs{Type: step.CommandType, Data: data},
		Opts: &commandbus.SendOpts{
			CorrelationID:  sc.ExecutionID,
			ReplyTo:        m.def.domain,
			IdempotencyKey: fmt.Sprintf("%s:%d", sc.Key(), sc.Attempt),
			Headers: map[string]string{
				orchestration.HeaderExecutionID: sc.ExecutionID.String(), headerStep: s.id, headerStepKey: sc.Key(),
				// A command parked in the command troubleshooting queue answers PARKED: the
				// execution then parks too (COMMAND_PARKED) instead of waiting unseen.
				commandbus.HeaderNotifyParked: "true",
			},
			Actor: "workflow:" + m.def.id,
		},
	})
	if err != nil {
		return nil, 0, commandbus.Permanent(commandbus.CodeInvalidData, fmt.Errorf("step %q: %w", s.id, err))
	}
	return cmd, step.Timeout.Std(), nil
}

// Headers a command step's command carries; its reply carries them back.
const (
	headerStep    = "commandbus-step"
	headerStepKey = commandbus.HeaderStepKey
)

func callRequest(s *stepDef, sc *StepContext) (in any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = commandbus.Permanent("PANIC", fmt.Errorf("the request of step %q panicked: %v", s.id, r))
		}
	}()
	return s.request(sc)
}

// replyOutcome turns a command step's reply into the step's outcome.
func replyOutcome(s *stepDef, reply *commandbus.Reply, at time.Time) *outcome {
	o := &outcome{step: s.id, attempt: 1, started: at, ops: waitOps{closeWaits: []string{s.id}}}
	if reply.Succeeded() {
		o.result = reply.Result
		if len(o.result) == 0 {
			o.result = json.RawMessage("null")
		}
		return o
	}
	msg := fmt.Errorf("%s replied %s: %s", reply.CommandType, reply.Outcome, reply.ErrorMessage)
	switch reply.Outcome {
	case commandbus.OutcomeTimedOut:
		o.err = &commandbus.TransientError{Code: reply.ErrorCode, Err: msg}
	case commandbus.OutcomeCancelled:
		o.err = commandbus.Permanent(reply.ErrorCode, msg)
	default:
		o.err = &commandbus.BusinessRuleError{Code: reply.ErrorCode, Message: msg.Error()}
	}
	return o
}

// childID is the id of the child a step starts: derived from the parent and the step, so a
// replayed start inserts the same child (idempotently).
func childID(parent uuid.UUID, step string) uuid.UUID {
	return uuid.NewSHA1(parent, []byte("child:"+step))
}

func (w *walk) childParams(s *stepDef, sc *StepContext) (*driver.ExecutionInsertParams, error) {
	ops, _ := w.m.rt.Operations(Model, s.childType).(*Manager)
	if ops == nil {
		return nil, commandbus.Permanent("CHILD_NOT_REGISTERED", fmt.Errorf("step %q starts workflow %q, which is not registered on this runtime", s.id, s.childType))
	}
	input, err := callChildInput(s, sc)
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(input)
	if err != nil {
		return nil, commandbus.Permanent(commandbus.CodeInvalidData, fmt.Errorf("the input of child %q cannot be encoded as JSON: %w", s.id, err))
	}
	return ops.newExecution(childID(sc.ExecutionID, s.id), payload, createdInfo{}), nil
}

func callChildInput(s *stepDef, sc *StepContext) (in any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = commandbus.Permanent("PANIC", fmt.Errorf("the child input of step %q panicked: %v", s.id, r))
		}
	}()
	return s.childInput(sc)
}

// takeSignal returns the first unconsumed signal named name, and takes it from the run's view
// (the checkpoint consumes it); nil when there is none.
func (w *walk) takeSignal(name string) (*driver.ExecutionSignalRow, error) {
	if !w.signalsLoaded {
		signals, err := w.lease.Signals(w.ctx)
		if err != nil {
			return nil, fmt.Errorf("reading signals: %w", err)
		}
		w.signals, w.signalsLoaded = signals, true
	}
	for i, sig := range w.signals {
		if sig.Name == name {
			w.signals = slices.Delete(w.signals, i, i+1)
			w.lease.TraceSignal(sig)
			return sig, nil
		}
	}
	return nil, nil
}

func signalResult(sig *driver.ExecutionSignalRow) json.RawMessage {
	if len(sig.Payload) == 0 {
		return json.RawMessage("null")
	}
	return sig.Payload
}

// absorb applies what arrived for the waiting steps since the last run: signals for open gates,
// due timers, expired gate timeouts and the ends of children. It reads only what some waiting
// step needs.
func (w *walk) absorb() error {
	var gates, timers, children, commands []*stepDef
	gateTimeouts := false
	for _, s := range w.p.order {
		if r := w.f.steps[s.id]; r == nil || r.status != statusWaiting {
			continue
		}
		switch s.kind {
		case kindSignal:
			gates = append(gates, s)
			gateTimeouts = gateTimeouts || s.waitTimeout > 0
		case kindTimer:
			timers = append(timers, s)
		case kindChild:
			children = append(children, s)
		case kindCommand:
			commands = append(commands, s)
			gateTimeouts = true // a reply timeout is an expired wait too
		}
	}
	if err := w.absorbResponses(children, commands); err != nil {
		return err
	}
	if len(gates)+len(timers)+len(children)+len(commands) == 0 {
		return nil
	}
	now := w.m.engine.Config().Clock()
	for _, s := range gates {
		sig, err := w.takeSignal(s.signal)
		if err != nil {
			return err
		}
		if sig != nil {
			w.record(&outcome{step: s.id, attempt: 1, started: now, result: signalResult(sig),
				ops: waitOps{consume: []string{sig.SignalID}, closeWaits: []string{s.id}}})
		}
	}
	if gateTimeouts {
		expired, err := w.lease.ExpiredWaits(w.ctx)
		if err != nil {
			return fmt.Errorf("reading expired waits: %w", err)
		}
		for _, wait := range expired {
			s := w.p.steps[wait.WaitID]
			if s == nil || w.f.steps[s.id].status != statusWaiting {
				continue
			}
			if s.kind == kindCommand {
				w.record(&outcome{step: s.id, attempt: w.f.steps[s.id].attempts + 1, started: now, ops: waitOps{closeWaits: []string{s.id}},
					err: &commandbus.TransientError{Code: "REPLY_TIMEOUT", Err: fmt.Errorf("no reply to %s within its timeout", wait.Name)}})
				continue
			}
			if s.kind != kindSignal {
				continue
			}
			o := &outcome{step: s.id, attempt: 1, started: now, ops: waitOps{closeWaits: []string{s.id}}}
			msg := fmt.Sprintf("no signal %q within %s", s.signal, s.waitTimeout)
			switch s.onTimeout {
			case TimeoutBranch:
				o.result = json.RawMessage(`{"timedOut":true}`)
			case TimeoutTSQ:
				o.err = commandbus.Permanent(CodeSignalTimeout, errors.New(msg))
			default:
				o.err = commandbus.BusinessRule(CodeSignalTimeout, msg)
			}
			w.m.logger.Info("signal gate timed out", "execution_id", w.lease.Row.ID, "step", s.id, "policy", s.onTimeout)
			w.record(o)
		}
	}
	if len(timers) > 0 {
		due, err := w.lease.DueTimers(w.ctx)
		if err != nil {
			return fmt.Errorf("reading due timers: %w", err)
		}
		for _, t := range due {
			if s := w.p.steps[t.TimerID]; s != nil && s.kind == kindTimer && w.f.steps[s.id].status == statusWaiting {
				w.record(&outcome{step: s.id, attempt: 1, started: t.CreatedAt, result: json.RawMessage(`{"fired":true}`),
					ops: waitOps{fire: []string{t.TimerID}}})
			}
		}
		if err := w.absorbCancelledTimers(timers); err != nil {
			return err
		}
	}
	return nil
}

// absorbCancelledTimers completes the sleep steps whose timer an operator cancelled (it is no
// longer pending), with the result {"cancelled": true}.
func (w *walk) absorbCancelledTimers(timers []*stepDef) error {
	var still []*stepDef
	for _, s := range timers {
		if w.f.steps[s.id].status == statusWaiting {
			still = append(still, s)
		}
	}
	if len(still) == 0 {
		return nil
	}
	pending, err := w.m.engine.PendingTimers(w.ctx, w.lease.Row.ID)
	if err != nil {
		return fmt.Errorf("reading timers: %w", err)
	}
	for _, s := range still {
		if !slices.ContainsFunc(pending, func(t *driver.ExecutionTimerRow) bool { return t.TimerID == s.id }) {
			w.record(&outcome{step: s.id, attempt: 1, started: w.m.engine.Config().Clock(), result: json.RawMessage(`{"cancelled":true}`)})
		}
	}
	return nil
}

// absorbReply applies a command step's reply if it answers the step's current attempt; a late or
// duplicate reply is ignored.
func (w *walk) absorbReply(r *driver.ExecutionResponseRow, commands []*stepDef) {
	var reply commandbus.Reply
	if err := json.Unmarshal(r.Payload, &reply); err != nil {
		return
	}
	for _, s := range commands {
		rec := w.f.steps[s.id]
		if reply.Headers[headerStep] != s.id || rec.status != statusWaiting || rec.commandID != reply.CommandID {
			continue
		}
		if reply.Outcome == commandbus.OutcomeParked {
			// The command waits in the command troubleshooting queue for an operator; its final
			// reply follows. The execution waits visibly too: it parks with COMMAND_PARKED once
			// nothing else can run.
			msg := "waiting on parked command " + reply.CommandType
			if reply.ErrorCode != "" {
				msg += ": " + reply.ErrorCode
			}
			if reply.ErrorMessage != "" {
				msg += ": " + reply.ErrorMessage
			}
			w.parkedCommand = &parkedCommand{step: s.id, message: msg + " (command " + reply.CommandID.String() + ")"}
			return
		}
		o := replyOutcome(s, &reply, r.ReceivedAt)
		o.attempt = rec.attempts + 1
		w.record(o)
		return
	}
	w.m.logger.Info("reply ignored: it answers no waiting command step", "execution_id", w.lease.Row.ID, "command_id", reply.CommandID, "step", reply.Headers[headerStep])
}

// absorbResponses applies the responses the execution received: a child's end completes or fails
// the step that started it. Every response read is marked applied.
func (w *walk) absorbResponses(children, commands []*stepDef) error {
	row := w.lease.Row
	if row.ResponsesReceived <= row.ResponsesApplied {
		return nil
	}
	responses, err := w.lease.Responses(w.ctx)
	if err != nil {
		return fmt.Errorf("reading responses: %w", err)
	}
	byName := map[string]*stepDef{}
	for _, s := range children {
		byName[driver.ChildResponseName(childID(row.ID, s.id))] = s
	}
	now := w.m.engine.Config().Clock()
	for _, r := range responses {
		row.ResponsesApplied = max(row.ResponsesApplied, r.Seq)
		if r.Name == orchestrate.ReplyResponseName {
			w.absorbReply(r, commands)
			continue
		}
		s := byName[r.Name]
		if s == nil || w.f.steps[s.id].status != statusWaiting {
			continue
		}
		var child driver.ChildOutcome
		if err := json.Unmarshal(r.Payload, &child); err != nil {
			w.record(&outcome{step: s.id, attempt: 1, started: now, err: commandbus.Permanent(commandbus.CodeInvalidData, err)})
			continue
		}
		o := &outcome{step: s.id, attempt: 1, started: r.ReceivedAt}
		if child.Status == driver.ExecutionCompleted {
			o.result, _ = json.Marshal(map[string]any{"childId": child.ChildID, "status": child.Status})
		} else {
			o.err = commandbus.Permanent("CHILD_"+strings.ToUpper(string(child.Status)),
				fmt.Errorf("child workflow %s ended %s: %s %s", child.ChildID, child.Status, child.ErrorCode, child.ErrorMessage))
		}
		w.record(o)
	}
	return nil
}

// parkedCommand is a command step whose command an operator must act on.
type parkedCommand struct {
	step, message string
}
