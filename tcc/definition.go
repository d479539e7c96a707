package tcc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/orchestration"
)

// Phase is one of a participant's three phases.
type Phase string

// The phases, in the order a transaction may run them.
const (
	PhaseTry     Phase = "TRY"
	PhaseConfirm Phase = "CONFIRM"
	PhaseCancel  Phase = "CANCEL"
)

// RetryPolicy says how a failing phase is retried (see orchestration.RetryPolicy).
type RetryPolicy = orchestration.RetryPolicy

// DefaultTimeout bounds one attempt of a phase when no level of the chain sets a timeout.
const DefaultTimeout = 30 * time.Second

// Context is what a phase sees: the transaction, the participant, the phase and its attempt, the
// transaction's input and, for confirm and cancel, the try's result.
type Context struct {
	// ExecutionID is the transaction's id.
	ExecutionID uuid.UUID
	// Participant is the participant's id.
	Participant string
	// Phase is the phase running.
	Phase Phase
	// Attempt is the phase's attempt number, from 1.
	Attempt int
	// Input is the transaction's input as JSON.
	Input json.RawMessage
	// TryResult is the try's result as JSON (confirm and cancel; null when the try returned
	// nothing).
	TryResult json.RawMessage
}

// Branch names the participant's branch of the transaction, the key of its Barrier records.
func (c *Context) Branch() BranchID {
	return BranchID{Transaction: c.ExecutionID.String(), Participant: c.Participant}
}

// DecodeInput decodes the transaction's input into v.
func (c *Context) DecodeInput(v any) error {
	if len(c.Input) == 0 {
		return nil
	}
	return json.Unmarshal(c.Input, v)
}

// DecodeTryResult decodes the try's result into v (confirm and cancel).
func (c *Context) DecodeTryResult(v any) error {
	if len(c.TryResult) == 0 {
		return fmt.Errorf("participant %q has no try result in phase %s", c.Participant, c.Phase)
	}
	return json.Unmarshal(c.TryResult, v)
}

// TryFunc is a participant's try: it reserves what the participant needs and returns what
// confirm and cancel will need (stored as JSON). It must be safe to run again after a crash
// between its effect and its record: guard it with a Barrier, or key it on Context.Branch.
type TryFunc func(ctx context.Context, c *Context) (any, error)

// PhaseFunc is a participant's confirm or cancel. It must be idempotent, as TryFunc.
type PhaseFunc func(ctx context.Context, c *Context) error

// ParticipantOption configures a participant.
type ParticipantOption func(*participant)

// Optional makes the participant optional: a failed try does not cancel the others; the
// participant is then neither confirmed nor cancelled.
func Optional() ParticipantOption { return func(p *participant) { p.optional = true } }

// Retry sets the retry policy of the participant's three phases (a phase's own policy wins).
func Retry(policy RetryPolicy) ParticipantOption {
	return func(p *participant) { p.retry = &policy }
}

// Timeout bounds one attempt of each of the participant's phases (a phase's own timeout wins).
func Timeout(d time.Duration) ParticipantOption { return func(p *participant) { p.timeout = d } }

// TryRetry sets the try's retry policy.
func TryRetry(policy RetryPolicy) ParticipantOption {
	return func(p *participant) { p.phases[tryIdx].retry = &policy }
}

// ConfirmRetry sets the confirm's retry policy.
func ConfirmRetry(policy RetryPolicy) ParticipantOption {
	return func(p *participant) { p.phases[confirmIdx].retry = &policy }
}

// CancelRetry sets the cancel's retry policy.
func CancelRetry(policy RetryPolicy) ParticipantOption {
	return func(p *participant) { p.phases[cancelIdx].retry = &policy }
}

// TryTimeout bounds one attempt of the try.
func TryTimeout(d time.Duration) ParticipantOption {
	return func(p *participant) { p.phases[tryIdx].timeout = d }
}

// ConfirmTimeout bounds one attempt of the confirm.
func ConfirmTimeout(d time.Duration) ParticipantOption {
	return func(p *participant) { p.phases[confirmIdx].timeout = d }
}

// CancelTimeout bounds one attempt of the cancel.
func CancelTimeout(d time.Duration) ParticipantOption {
	return func(p *participant) { p.phases[cancelIdx].timeout = d }
}

const (
	tryIdx = iota
	confirmIdx
	cancelIdx
)

var phases = [3]Phase{PhaseTry, PhaseConfirm, PhaseCancel}

func phaseIndex(p Phase) int {
	switch p {
	case PhaseConfirm:
		return confirmIdx
	case PhaseCancel:
		return cancelIdx
	}
	return tryIdx
}

// phaseSettings are what a level of the chain sets for a phase: nil or zero inherit.
type phaseSettings struct {
	retry   *RetryPolicy
	timeout time.Duration
}

// effective is a phase's resolved policy and timeout.
type effective struct {
	retry   RetryPolicy
	timeout time.Duration
}

type participant struct {
	id       string
	optional bool
	try      TryFunc
	confirm  PhaseFunc
	cancel   PhaseFunc
	// domain, commands and request make a command participant: its phases are commands.
	domain   string
	commands CommandTypes
	request  CommandRequest
	retry    *RetryPolicy
	timeout  time.Duration
	phases   [3]phaseSettings
	resolved [3]effective
}

// Definition is a TCC transaction type: its id (the execution type), version, description and
// ordered participants. Build it with New and Participant; Register validates it.
type Definition struct {
	id, description string
	version         int
	domain          string
	participants    []*participant
	retry           *RetryPolicy
	timeout         time.Duration
}

// New starts a definition; id names the transaction type and is persisted, so keep it stable.
func New(id string, version int) *Definition {
	return &Definition{id: id, version: version, domain: "tcc"}
}

// Describe sets the description.
func (d *Definition) Describe(text string) *Definition { d.description = text; return d }

// Domain sets the domain the transactions live in (default "tcc").
func (d *Definition) Domain(domain string) *Definition { d.domain = domain; return d }

// DefaultRetry sets the retry policy of the phases that set none (nor their participant).
func (d *Definition) DefaultRetry(policy RetryPolicy) *Definition { d.retry = &policy; return d }

// DefaultTimeout sets the timeout of the phases that set none (nor their participant).
func (d *Definition) DefaultTimeout(t time.Duration) *Definition { d.timeout = t; return d }

// Participant adds a participant after the ones added before: its try runs after theirs.
func (d *Definition) Participant(id string, try TryFunc, confirm, cancel PhaseFunc, opts ...ParticipantOption) *Definition {
	p := &participant{id: id, try: try, confirm: confirm, cancel: cancel}
	for _, o := range opts {
		o(p)
	}
	d.participants = append(d.participants, p)
	return d
}

// CommandTypes names the command types of a command participant's three phases.
type CommandTypes struct {
	Try, Confirm, Cancel string
}

func (c CommandTypes) of(p Phase) string {
	switch p {
	case PhaseConfirm:
		return c.Confirm
	case PhaseCancel:
		return c.Cancel
	}
	return c.Try
}

// CommandRequest builds the payload of a command participant's phase command (Context.Phase says
// which; confirm and cancel see the try's result).
type CommandRequest func(c *Context) (any, error)

// CommandParticipant adds a participant whose phases are commands to domain, handled by that
// domain's handlers: each phase sends its command (types names them) with the payload request
// returns, and completes with the reply. The try's result is the try reply's result; a FAILED
// reply is a business failure, a TIMED_OUT reply or no reply within the phase's timeout a
// transient one (retried by the phase's policy with a new command), a CANCELLED reply a permanent
// one. The command carries the transaction and the participant in its headers (BranchOf), so the
// handler can guard its effects with a Barrier. The command goes out with the checkpoint that
// records its attempt; the transaction waits for the reply without holding a goroutine.
func (d *Definition) CommandParticipant(id, domain string, types CommandTypes, request CommandRequest, opts ...ParticipantOption) *Definition {
	p := &participant{id: id, domain: domain, commands: types, request: request}
	for _, o := range opts {
		o(p)
	}
	d.participants = append(d.participants, p)
	return d
}

func (p *participant) isCommand() bool { return p.domain != "" || p.request != nil }

// ID returns the transaction type.
func (d *Definition) ID() string { return d.id }

// Version returns the definition's version.
func (d *Definition) Version() int { return d.version }

// ErrInvalidDefinition is matched by every DefinitionError.
var ErrInvalidDefinition = errors.New("tcc: invalid definition")

// DefinitionError lists every problem of a definition.
type DefinitionError struct {
	Transaction string
	Problems    []string
}

func (e *DefinitionError) Error() string {
	return fmt.Sprintf("tcc %q: %s", e.Transaction, strings.Join(e.Problems, "; "))
}

// Is makes every DefinitionError match ErrInvalidDefinition.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

// validate reports every problem of the definition at once.
func (d *Definition) validate() error {
	var problems []string
	if d.id == "" {
		problems = append(problems, "the transaction id is empty")
	}
	if d.domain == "" {
		problems = append(problems, "the domain is empty")
	}
	if d.timeout < 0 {
		problems = append(problems, "DefaultTimeout must not be negative")
	}
	if len(d.participants) == 0 {
		problems = append(problems, "the definition has no participants")
	}
	seen := map[string]bool{}
	for i, p := range d.participants {
		if p.id == "" {
			problems = append(problems, fmt.Sprintf("participant %d has no id", i+1))
			continue
		}
		if seen[p.id] {
			problems = append(problems, fmt.Sprintf("participant %q is declared twice", p.id))
			continue
		}
		seen[p.id] = true
		switch {
		case p.isCommand() && (p.domain == "" || p.request == nil || p.commands.Try == "" || p.commands.Confirm == "" || p.commands.Cancel == ""):
			problems = append(problems, fmt.Sprintf("participant %q needs a domain, a request function and the try, confirm and cancel command types", p.id))
		case !p.isCommand() && (p.try == nil || p.confirm == nil || p.cancel == nil):
			problems = append(problems, fmt.Sprintf("participant %q needs try, confirm and cancel functions", p.id))
		}
		if p.timeout < 0 {
			problems = append(problems, fmt.Sprintf("participant %q: the timeout must not be negative", p.id))
		}
		for j, s := range p.phases {
			if s.timeout < 0 {
				problems = append(problems, fmt.Sprintf("participant %q: the %s timeout must not be negative", p.id, phases[j]))
			}
		}
	}
	if len(problems) > 0 {
		return &DefinitionError{Transaction: d.id, Problems: problems}
	}
	return nil
}

// resolve computes every phase's effective retry policy and timeout: phase, then participant,
// then definition, then configuration, then the defaults.
func (d *Definition) resolve(cfg Config) {
	for _, p := range d.participants {
		for i, s := range p.phases {
			retry := firstPolicy(s.retry, p.retry, d.retry, cfg.Retry)
			timeout := firstPositive(s.timeout, p.timeout, d.timeout, cfg.Timeout, DefaultTimeout)
			p.resolved[i] = effective{retry: retry.WithDefaults(), timeout: timeout}
		}
	}
}

func firstPolicy(levels ...*RetryPolicy) RetryPolicy {
	for _, p := range levels {
		if p != nil {
			return *p
		}
	}
	return RetryPolicy{}
}

func firstPositive(levels ...time.Duration) time.Duration {
	for _, d := range levels {
		if d > 0 {
			return d
		}
	}
	return 0
}

// hash identifies the definition's shape (id, version, participants in order, optional flags):
// a transaction started under one hash parks with DEFINITION_CHANGED if it resumes under
// another.
func (d *Definition) hash() string {
	type part struct {
		ID       string       `json:"id"`
		Optional bool         `json:"optional,omitempty"`
		Domain   string       `json:"domain,omitempty"`
		Commands CommandTypes `json:"commands,omitzero"`
	}
	shape := struct {
		ID           string `json:"id"`
		Version      int    `json:"version"`
		Participants []part `json:"participants"`
	}{ID: d.id, Version: d.version}
	for _, p := range d.participants {
		shape.Participants = append(shape.Participants, part{ID: p.id, Optional: p.optional, Domain: p.domain, Commands: p.commands})
	}
	b, _ := json.Marshal(shape)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
