package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// simulator is the payment network simulator: it answers step-process payments' risk
// approvals and network confirmations as their behavior rolls, only through the platform's
// public operations (Approve, Reject, ReceiveNetworkResponse), as the risk officers and the
// network would. A pending roll leaves the item for an operator; a timeout roll never answers
// (the wait times out); a drawn delay postpones the answer.
//
// The simulated externals tell it what happened — the risk engine asked for an approval, the
// network received a submission — so it answers at once; a periodic scan of the waiting payments
// catches whatever that missed (a restart, a delayed or repeated answer).
//
// The network is one external party however many replicas run: one instance at a time simulates
// it, holding the network-simulator lease in the database (renewed every third of its duration,
// released at stop, taken over by another instance when it expires). The others ignore their
// externals' events; the holder's scan answers those payments.
type simulator struct {
	p     *Platform
	lease *roleLease

	heldUntil atomic.Int64 // unix nanoseconds until which this instance holds the lease
	answers   atomic.Int64 // answers given (approval decisions and network responses)

	mu      sync.Mutex
	handled map[string]time.Time // roll key -> when its answer is due (zero: answered, never again)
	cancel  context.CancelFunc
	done    chan struct{}
	events  chan simEvent
	wg      sync.WaitGroup
}

// simEvent is what an external told the simulator: an approval was requested, or (approval
// empty) a payment was submitted to the network.
type simEvent struct {
	paymentID  uuid.UUID
	approvalID string
}

func newSimulator(p *Platform) *simulator {
	return &simulator{p: p, handled: map[string]time.Time{}, events: make(chan simEvent, 8192),
		lease: &roleLease{s: p.store, role: "network-simulator", holder: uuid.NewString(), ttl: p.opts.SimulatorLease}}
}

// holds reports whether this instance simulates the network now.
func (s *simulator) holds() bool { return time.Now().UnixNano() < s.heldUntil.Load() }

// renew takes or renews the lease.
func (s *simulator) renew(ctx context.Context) {
	held, until, err := s.lease.acquire(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.p.logger.Warn("simulator lease could not be renewed", "error", err)
		}
	case held:
		if !s.holds() {
			s.p.logger.Info("this instance simulates the network", "holder", s.lease.holder)
		}
		s.heldUntil.Store(until.Add(-s.lease.ttl / 10).UnixNano()) // stop a little early: clocks drift
	default:
		s.heldUntil.Store(0)
	}
}

// notify hands an event to the simulator without ever blocking the external that reports it.
func (s *simulator) notify(ev simEvent) {
	if s.p.opts.DisableSimulator {
		return
	}
	select {
	case s.events <- ev:
	default: // full: the periodic scan answers it
	}
}

func (s *simulator) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	for range s.p.opts.SimulatorWorkers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-s.events:
					if err := s.handle(ctx, ev); err != nil && ctx.Err() == nil {
						s.p.logger.Warn("simulator could not answer", "payment_id", ev.paymentID, "error", err)
					}
				}
			}
		}()
	}
	s.renew(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ticker := time.NewTicker(s.lease.ttl / 3)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				s.renew(ctx)
			}
		}
	}()
	go func() {
		defer close(s.done)
		ticker := time.NewTicker(s.p.opts.SimulatorPollInterval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if !s.holds() {
				continue
			}
			if err := s.poll(ctx); err != nil && ctx.Err() == nil {
				s.p.logger.Warn("simulator scan failed", "error", err)
			}
		}
	}()
}

func (s *simulator) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
	s.wg.Wait()
	s.cancel = nil
	s.heldUntil.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.lease.release(ctx); err != nil {
		s.p.logger.Warn("simulator lease could not be released; another instance takes over when it expires", "error", err)
	}
}

// handle answers an event from an external, when this instance simulates the network.
func (s *simulator) handle(ctx context.Context, ev simEvent) error {
	if !s.holds() {
		return nil // the holder's scan answers it
	}
	pay, err := s.p.payment(ctx, ev.paymentID)
	if err != nil || pay.processType != TypePaymentStep {
		return err
	}
	if ev.approvalID != "" {
		return s.answerApproval(ctx, pay.executionID, &pay.details, ev.approvalID)
	}
	return s.answerLevels(ctx, pay.executionID, &pay.details, nil)
}

// SimulatesNetwork reports whether this instance holds the network-simulator lease: with several
// replicas, one of them simulates the network at a time.
func (p *Platform) SimulatesNetwork() bool { return p.sim.holds() }

// SimulatorAnswers is how many answers this instance's simulator gave: approval decisions and
// network responses.
func (p *Platform) SimulatorAnswers() int64 { return p.sim.answers.Load() }

// Simulate runs one simulator scan now, for tests and tools that disabled the background
// simulator: every waiting step-process payment whose answer is due gets it.
func (p *Platform) Simulate(ctx context.Context) error { return p.sim.poll(ctx) }

// poll scans the step-process payments waiting for a response and answers those due.
func (s *simulator) poll(ctx context.Context) error {
	before := uuid.Nil
	for {
		rows, err := s.p.exec.ExecutionList(ctx, &driver.ExecutionListParams{Statuses: []driver.ExecutionStatus{driver.ExecutionWaitingForAsync},
			Type: TypePaymentStep, BeforeID: before, Limit: 1000})
		if err != nil {
			return err
		}
		for _, row := range rows {
			if row.CurrentWait != StepAwaitRiskApproval && !strings.HasPrefix(row.CurrentWait, "awaitL") {
				continue // waiting for a bounded context's reply
			}
			var st StepState
			if err := json.Unmarshal(row.State, &st); err != nil {
				return err
			}
			if row.CurrentWait == StepAwaitRiskApproval {
				if !st.RiskApproved && !st.RiskDeclined && st.ApprovalID != "" {
					err = s.answerApproval(ctx, row.ID, &st.PaymentDetails, st.ApprovalID)
				}
			} else {
				err = s.answerLevels(ctx, row.ID, &st.PaymentDetails, &st)
			}
			if err != nil && ctx.Err() == nil {
				s.p.logger.Warn("simulator could not answer", "execution_id", row.ID, "wait", row.CurrentWait, "error", err)
			}
		}
		if len(rows) < 1000 {
			return nil
		}
		before = rows[len(rows)-1].ID
	}
}

// due reports whether the answer under key may be given now, recording the roll's delay the
// first time it is seen; an answered key is never due again.
func (s *simulator) due(key string, delay time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.handled) > 500_000 {
		// Bound the memory of a long run: forgetting may repeat an answer, which the
		// platform treats as a duplicate (an approval decided twice, a level received twice).
		s.handled = map[string]time.Time{}
	}
	at, seen := s.handled[key]
	if !seen {
		if delay <= 0 {
			s.handled[key] = time.Time{}
			return true
		}
		s.handled[key] = time.Now().Add(delay)
		return false
	}
	if at.IsZero() || time.Now().Before(at) {
		return false
	}
	s.handled[key] = time.Time{}
	return true
}

func (s *simulator) seed(d *PaymentDetails) uint64 {
	if d.Seed != 0 {
		return d.Seed
	}
	return s.p.opts.Seed
}

// answerApproval decides an approval as the simulated risk officer.
func (s *simulator) answerApproval(ctx context.Context, execID uuid.UUID, d *PaymentDetails, approvalID string) error {
	key := execID.String() + "|" + StepAwaitRiskApproval
	roll := d.Behavior.Step(StepAwaitRiskApproval).roll(s.seed(d), key)
	if !s.due(key, roll.Delay) {
		return nil
	}
	id, err := uuid.Parse(approvalID)
	if err != nil {
		return err
	}
	switch roll.Outcome {
	case OutcomeSuccess, OutcomeTransient:
		// A transient roll is an officer who was busy and approves after the delay: the roll
		// is deterministic per approval, so "try again" would draw the same answer forever.
		s.answers.Add(1)
		return ignoreDecided(s.p.Approve(ctx, id, "simulator", "approved by the simulated risk officer"))
	case OutcomeBusiness, OutcomePermanent:
		s.answers.Add(1)
		return ignoreDecided(s.p.Reject(ctx, id, "simulator", "declined by the simulated risk officer"))
	}
	return nil // pending: an operator decides; timeout: nobody does
}

// answerLevels sends the network's confirmations in order, as far as they come at once. st,
// when known, tells which levels arrived and how many "try again" answers each had.
func (s *simulator) answerLevels(ctx context.Context, execID uuid.UUID, d *PaymentDetails, st *StepState) error {
	for level := 1; level <= 4; level++ {
		transient := 0
		if st != nil {
			c := st.level(level)
			if c.Received {
				continue
			}
			transient = c.TransientErrors
		}
		step := fmt.Sprintf("awaitL%d", level)
		key := fmt.Sprintf("%s|%s|%d", execID, step, transient)
		roll := d.Behavior.Step(step).roll(s.seed(d), key)
		if !s.due(key, roll.Delay) {
			return nil
		}
		r := NetworkResponse{PaymentID: d.PaymentID, Level: level}
		switch roll.Outcome {
		case OutcomeSuccess:
			r.Outcome, r.Reference = NetworkAccepted, fmt.Sprintf("L%d-REF-%s", level, uuid.NewString()[:8])
		case OutcomeBusiness:
			r.Outcome, r.ErrorMessage = NetworkRejected, "simulated: the network rejected the payment"
		case OutcomePermanent:
			r.Outcome, r.ErrorCode, r.ErrorMessage = NetworkError, NetworkPermanentError, "simulated: permanent network failure"
		case OutcomeTransient:
			r.Outcome, r.ErrorMessage = NetworkTransient, "simulated: network busy, will answer again"
		case OutcomePending:
			r.Outcome = NetworkPending
		case OutcomeTimeout:
			return nil // the network never answers; the wait times out
		}
		if err := s.p.ReceiveNetworkResponse(ctx, r); err != nil {
			return err
		}
		s.answers.Add(1)
		if r.Outcome != NetworkAccepted {
			return nil // the process decides what follows; later levels wait for it
		}
	}
	return nil
}

// ignoreDecided tolerates a decision an operator (or another instance) made first.
func ignoreDecided(err error) error {
	if errors.Is(err, commandbus.ErrInvalidState) {
		return nil
	}
	return err
}
