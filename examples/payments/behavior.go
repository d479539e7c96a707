package payments

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/input"
)

// The steps a behavior can shape. The first group are calls to simulated externals made by the
// bounded contexts' handlers; the second are answers the network simulator gives.
const (
	StepCheckBalance      = "checkBalance"
	StepCheckDailyLimit   = "checkDailyLimit"
	StepBookRisk          = "bookRisk"
	StepBookFx            = "bookFx"
	StepSubmitPayment     = "submitPayment"
	StepAwaitRiskApproval = "awaitRiskApproval"
	StepAwaitL1           = "awaitL1"
	StepAwaitL2           = "awaitL2"
	StepAwaitL3           = "awaitL3"
	StepAwaitL4           = "awaitL4"
)

// BehaviorSteps lists every step a Behavior may configure.
var BehaviorSteps = []string{StepCheckBalance, StepCheckDailyLimit, StepBookRisk, StepBookFx, StepSubmitPayment,
	StepAwaitRiskApproval, StepAwaitL1, StepAwaitL2, StepAwaitL3, StepAwaitL4}

// StepBehavior is how one simulated step behaves, by probabilities: each call
// rolls once and fails permanently, transiently, on a business rule, times out, stays pending for
// an operator, or succeeds, with these percentages in that order, after a delay drawn between
// MinDurationMs and MaxDurationMs.
type StepBehavior struct {
	FailPermanentPct    float64 `json:"failPermanentPct,omitempty" yaml:"failPermanentPct"`
	FailTransientPct    float64 `json:"failTransientPct,omitempty" yaml:"failTransientPct"`
	FailBusinessRulePct float64 `json:"failBusinessRulePct,omitempty" yaml:"failBusinessRulePct"`
	TimeoutPct          float64 `json:"timeoutPct,omitempty" yaml:"timeoutPct"`
	PendingPct          float64 `json:"pendingPct,omitempty" yaml:"pendingPct"`
	MinDurationMs       int     `json:"minDurationMs,omitempty" yaml:"minDurationMs"`
	MaxDurationMs       int     `json:"maxDurationMs,omitempty" yaml:"maxDurationMs"`
}

// Behavior configures the simulated externals and the network simulator for a batch (or one
// payment). It travels with the payment: in the process state and in the commands sent to the
// bounded contexts, so a payment behaves the same whichever instance handles it.
type Behavior struct {
	// Name is a preset's name or a label of your own.
	Name string `json:"name,omitempty" yaml:"name"`
	// Seed makes the rolls reproducible; zero uses the platform's seed.
	Seed uint64 `json:"seed,omitempty" yaml:"seed"`
	// Steps maps a step (see BehaviorSteps) to its behavior; absent steps always succeed at once.
	Steps map[string]StepBehavior `json:"steps,omitempty" yaml:"steps"`
}

// Outcome is what a roll decided.
type Outcome string

// The outcomes of a roll, in the order their percentages are applied.
const (
	OutcomePermanent Outcome = "PERMANENT"
	OutcomeTransient Outcome = "TRANSIENT"
	OutcomeBusiness  Outcome = "BUSINESS"
	OutcomeTimeout   Outcome = "TIMEOUT"
	OutcomePending   Outcome = "PENDING"
	OutcomeSuccess   Outcome = "SUCCESS"
)

// Roll is one decision of a simulated external or of the network simulator.
type Roll struct {
	Outcome Outcome
	Delay   time.Duration
}

// roll decides deterministically from the seed and key: the same payment, step and attempt
// always get the same outcome, whatever order goroutines run in.
func (b StepBehavior) roll(seed uint64, key string) Roll {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	u := r.Float64() * 100
	var delay time.Duration
	if b.MaxDurationMs > b.MinDurationMs {
		delay = time.Duration(b.MinDurationMs+r.IntN(b.MaxDurationMs-b.MinDurationMs+1)) * time.Millisecond
	} else {
		delay = time.Duration(b.MinDurationMs) * time.Millisecond
	}
	cumulative := 0.0
	for _, c := range []struct {
		pct     float64
		outcome Outcome
	}{
		{b.FailPermanentPct, OutcomePermanent}, {b.FailTransientPct, OutcomeTransient},
		{b.FailBusinessRulePct, OutcomeBusiness}, {b.TimeoutPct, OutcomeTimeout}, {b.PendingPct, OutcomePending},
	} {
		cumulative += c.pct
		if u < cumulative {
			return Roll{Outcome: c.outcome, Delay: delay}
		}
	}
	return Roll{Outcome: OutcomeSuccess, Delay: delay}
}

// Step returns the behavior of a step (the zero value, always succeeding, when unset).
func (b *Behavior) Step(name string) StepBehavior {
	if b == nil {
		return StepBehavior{}
	}
	return b.Steps[name]
}

// MaxStepDurationMs bounds a simulated step's delay: one hour.
const MaxStepDurationMs = 3_600_000

// Validate returns every problem at once: a printable name of at most 100 characters, known
// steps, percentages between 0 and 100 that add up to at most 100, and delays between 0 and
// MaxStepDurationMs.
func (b *Behavior) Validate() error {
	if b == nil {
		return nil
	}
	var errs []error
	if msg := (input.Text{Max: 100}).Check(b.Name); msg != "" {
		errs = append(errs, &commandbus.ValidationError{Field: "behavior.name", Message: msg})
	}
	known := map[string]bool{}
	for _, s := range BehaviorSteps {
		known[s] = true
	}
	names := make([]string, 0, len(b.Steps))
	for name := range b.Steps {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := b.Steps[name]
		field := "behavior.steps." + name
		if !known[name] {
			// The field names the step only when it is a short printable name; the message then
			// never repeats an oversized or binary key.
			if input.Identifier.Check(name) != "" || len(name) > 40 {
				field = "behavior.steps"
			}
			errs = append(errs, &commandbus.ValidationError{Field: field, Message: "unknown step " + input.Quote(name) + "; known: " + strings.Join(BehaviorSteps, ", ")})
			continue
		}
		total := 0.0
		for _, pct := range []float64{s.FailPermanentPct, s.FailTransientPct, s.FailBusinessRulePct, s.TimeoutPct, s.PendingPct} {
			if pct < 0 || pct > 100 {
				errs = append(errs, &commandbus.ValidationError{Field: field, Message: fmt.Sprintf("percentages must be between 0 and 100, got %g", pct)})
			}
			total += pct
		}
		if total > 100 {
			errs = append(errs, &commandbus.ValidationError{Field: field, Message: fmt.Sprintf("percentages add up to %g, more than 100", total)})
		}
		if s.MinDurationMs < 0 || s.MaxDurationMs < 0 {
			errs = append(errs, &commandbus.ValidationError{Field: field, Message: "durations must not be negative"})
		}
		if s.MinDurationMs > MaxStepDurationMs || s.MaxDurationMs > MaxStepDurationMs {
			errs = append(errs, &commandbus.ValidationError{Field: field, Message: fmt.Sprintf("durations must be at most %d ms (one hour)", MaxStepDurationMs)})
		}
		if s.MaxDurationMs != 0 && s.MaxDurationMs < s.MinDurationMs {
			errs = append(errs, &commandbus.ValidationError{Field: field, Message: fmt.Sprintf("maxDurationMs %d is below minDurationMs %d", s.MaxDurationMs, s.MinDurationMs)})
		}
	}
	return errors.Join(errs...)
}

// Preset names.
const (
	PresetHappy     = "happy"
	PresetRealistic = "realistic"
	PresetChaos     = "chaos"
)

// Preset returns a named behavior: "happy" (everything succeeds at once), "realistic" (rare
// failures, some pending items for operators, network latency) or "chaos" (frequent failures of
// every kind).
func Preset(name string) (*Behavior, error) {
	switch name {
	case PresetHappy, "":
		return &Behavior{Name: PresetHappy}, nil
	case PresetRealistic:
		net := StepBehavior{FailTransientPct: 2, TimeoutPct: 0.5, PendingPct: 1, MinDurationMs: 5, MaxDurationMs: 50}
		return &Behavior{Name: PresetRealistic, Steps: map[string]StepBehavior{
			StepCheckBalance:      {FailTransientPct: 1},
			StepCheckDailyLimit:   {FailTransientPct: 1},
			StepBookRisk:          {FailTransientPct: 2, PendingPct: 2, MinDurationMs: 1, MaxDurationMs: 20},
			StepBookFx:            {FailTransientPct: 3, FailBusinessRulePct: 1, TimeoutPct: 0.5, MinDurationMs: 2, MaxDurationMs: 30},
			StepSubmitPayment:     {FailTransientPct: 1, FailBusinessRulePct: 1, MinDurationMs: 1, MaxDurationMs: 20},
			StepAwaitRiskApproval: {FailBusinessRulePct: 5, PendingPct: 10, MinDurationMs: 10, MaxDurationMs: 100},
			StepAwaitL1:           net, StepAwaitL2: net, StepAwaitL3: net,
			StepAwaitL4: {FailBusinessRulePct: 0.5, PendingPct: 1, MinDurationMs: 5, MaxDurationMs: 50},
		}}, nil
	case PresetChaos:
		bad := StepBehavior{FailPermanentPct: 3, FailTransientPct: 15, FailBusinessRulePct: 5, TimeoutPct: 2, PendingPct: 5, MaxDurationMs: 40}
		steps := map[string]StepBehavior{}
		for _, s := range BehaviorSteps {
			steps[s] = bad
		}
		return &Behavior{Name: PresetChaos, Steps: steps}, nil
	}
	return nil, &commandbus.ValidationError{Field: "behavior", Message: fmt.Sprintf("unknown preset %s (happy, realistic, chaos)", input.Quote(name))}
}

// LoadBehavior reads a behavior from a JSON or YAML file (YAML is a superset of JSON) and
// validates it. Unknown keys are rejected.
func LoadBehavior(path string) (*Behavior, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseBehavior(data)
}

// ParseBehavior decodes a behavior from JSON or YAML and validates it.
func ParseBehavior(data []byte) (*Behavior, error) {
	var b Behavior
	if json.Valid(data) {
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			return nil, &commandbus.ValidationError{Field: "behavior", Message: err.Error()}
		}
	} else {
		dec := yaml.NewDecoder(strings.NewReader(string(data)))
		dec.KnownFields(true)
		if err := dec.Decode(&b); err != nil {
			return nil, &commandbus.ValidationError{Field: "behavior", Message: err.Error()}
		}
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return &b, nil
}
