package payments

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/commandbus/commandbus"
)

// FaultClass is an injected failure of a simulated external.
type FaultClass string

// The injectable faults. FaultLostReply lets the effect commit and then fails transiently, as a
// worker that crashed before its reply: the redelivery must find the effect and not repeat it.
const (
	FaultPermanent FaultClass = "PERMANENT"
	FaultTransient FaultClass = "TRANSIENT"
	FaultBusiness  FaultClass = "BUSINESS"
	FaultTimeout   FaultClass = "TIMEOUT"
	FaultLostReply FaultClass = "LOST_REPLY"
)

// Fault makes the next Times calls of a simulated external step fail with Class, whatever the
// behavior says. Operators' chaos drills and tests use it to make one failure happen for sure.
type Fault struct {
	Step  string     `json:"step"`
	Class FaultClass `json:"class"`
	Times int        `json:"times"`
}

// faults holds injected faults by step.
type faults struct {
	mu     sync.Mutex
	queued map[string][]FaultClass
}

func (f *faults) add(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queued == nil {
		f.queued = map[string][]FaultClass{}
	}
	for range max(fault.Times, 1) {
		f.queued[fault.Step] = append(f.queued[fault.Step], fault.Class)
	}
}

// pending reports whether faults are queued for a step.
func (f *faults) pending(step string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queued[step]) > 0
}

// mayFail reports whether a simulated external call can fail for this command: only then must a
// handler look for its earlier effect before calling it (the transaction's UNIQUE key catches a
// redelivery anyway).
func (p *Platform) mayFail(step string, sim Simulation) bool {
	return sim.Behavior != nil || p.faults.pending(step)
}

// take consumes the next fault of a step; lost-reply faults are only taken after the effect.
func (f *faults) take(step string, afterEffect bool) (FaultClass, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queued[step]
	if len(q) == 0 || (q[0] == FaultLostReply) != afterEffect {
		return "", false
	}
	f.queued[step] = q[1:]
	return q[0], true
}

// businessCodes are the business failures each simulated external reports.
var businessCodes = map[string]struct{ code, message string }{
	StepCheckBalance:    {"INSUFFICIENT_FUNDS", "the core banking system reports insufficient funds"},
	StepCheckDailyLimit: {"DAILY_LIMIT_EXCEEDED", "the limits engine rejects the amount for today"},
	StepBookRisk:        {"RISK_REJECTED", "the risk engine rejects the exposure"},
	StepBookFx:          {"RATE_REJECTED", "the FX provider rejected the quote"},
	StepSubmitPayment:   {"NETWORK_REJECTED", "the payment network rejected the submission"},
}

// simulate is the call to a simulated external made by a handler before its effect: it consumes
// an injected fault or rolls the step's behavior, waits the drawn delay, and returns the error
// the external's answer maps to. A PENDING outcome is returned for the caller to interpret.
func (p *Platform) simulate(ctx context.Context, step string, sim Simulation, key string) (Outcome, error) {
	outcome := OutcomeSuccess
	if fault, ok := p.faults.take(step, false); ok {
		outcome = Outcome(fault)
	} else if sim.Behavior != nil {
		seed := sim.Seed
		if seed == 0 {
			seed = p.opts.Seed
		}
		roll := sim.Behavior.roll(seed, step+"|"+key)
		outcome = roll.Outcome
		if roll.Delay > 0 {
			timer := time.NewTimer(roll.Delay)
			select {
			case <-ctx.Done():
				timer.Stop()
				return outcome, commandbus.Transient(ctx.Err())
			case <-timer.C:
			}
		}
	}
	return outcome, outcomeError(step, outcome)
}

func outcomeError(step string, outcome Outcome) error {
	switch outcome {
	case OutcomePermanent:
		return commandbus.Permanent("EXTERNAL_PERMANENT_FAILURE", fmt.Errorf("simulated %s: permanent failure", step))
	case OutcomeTransient:
		return &commandbus.TransientError{Code: "EXTERNAL_UNAVAILABLE", Err: fmt.Errorf("simulated %s: service unavailable", step)}
	case OutcomeTimeout:
		return &commandbus.TransientError{Code: "EXTERNAL_TIMEOUT", Err: fmt.Errorf("simulated %s: no answer in time", step)}
	case OutcomeBusiness:
		b := businessCodes[step]
		if b.code == "" {
			b.code, b.message = "BUSINESS_RULE", "simulated "+step+": rejected"
		}
		return commandbus.BusinessRule(b.code, b.message)
	}
	return nil
}

// afterEffect fails a handler whose effect committed when a lost-reply fault is queued.
func (p *Platform) afterEffect(step string) error {
	if _, ok := p.faults.take(step, true); ok {
		return &commandbus.TransientError{Code: "REPLY_LOST", Err: errors.New("simulated crash after the effect committed")}
	}
	return nil
}
