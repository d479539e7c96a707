package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/internal/flowmodel"
)

// compensate runs the compensation phase: the compensations of the completed steps (and of the
// command steps that sent a command without completing), in the
// order and with the parallelism of the definition's policy (reverse completion order, one at a
// time, by default). Every attempt is recorded before the next compensation starts, so a runner
// that takes the execution over runs no recorded attempt again. A compensation whose retry policy
// allows another attempt schedules it through the execution's wake time (no goroutine sleeps)
// and lets go. Then the execution ends: CANCELLED after an operator's cancel, else COMPENSATED
// with the failed step's code; or, when a compensation failed for good, it parks in the
// troubleshooting queue with COMPENSATION_FAILED naming it (Retry runs the failed ones again,
// Skip gives one up).
func (m *Manager) compensate(ctx context.Context, lease *execution.Lease, f *folded, entries []*driver.ExecutionLogEntry) error {
	final, code, message := driver.ExecutionCompensated, f.failCode, f.failMsg
	if f.cancelled {
		final, code = driver.ExecutionCancelled, commandbus.CodeCancelled
		message = "cancelled by an operator, compensations run"
	}
	p, err := m.planFor(lease.Row.State)
	if err != nil {
		return m.park(ctx, lease, entries, "", CodeExpansionFailed, err.Error())
	}
	if !f.compensating || lease.Row.Status != driver.ExecutionCompensating {
		if !f.compensating {
			// Status COMPENSATING: the lifecycle events read it as the phase's start.
			started := &driver.ExecutionLogEntry{EntryType: entryLifecycle, Name: nameCompensationStarted,
				StepStatus: string(driver.ExecutionCompensating), ErrorCode: code, ErrorMessage: message}
			started.Request, _ = json.Marshal(map[string]string{"policy": m.flow.Policy, "failedStep": f.failStep})
			entries = append(entries, started)
			f.compensating = true
			m.logger.Info("compensation started", "execution_id", lease.Row.ID, "policy", m.flow.Policy, "failed_step", f.failStep)
		}
		cp := lease.Base()
		cp.Status, cp.ErrorCode, cp.ErrorMessage, cp.Log = driver.ExecutionCompensating, code, message, entries
		cp.NextRetryAt, cp.CurrentWait = nil, ""
		if err := lease.Checkpoint(ctx, cp); err != nil {
			return m.runnerResult(err)
		}
		entries = nil
	}
	stop := lease.KeepAlive(ctx)
	defer stop()
	results := f.results()
	for {
		now := m.engine.Config().Clock()
		ready, _, _ := m.compensationsReady(f, p, now)
		if len(ready) == 0 {
			break
		}
		done := make(chan *driver.ExecutionLogEntry, len(ready))
		for _, sid := range ready {
			s, r := p.steps[sid], f.steps[sid]
			sc := &StepContext{ExecutionID: lease.Row.ID, Step: sid, Attempt: r.compAttempts + 1, Input: lease.Row.State,
				results: results, item: s.item, itemKey: s.itemKey}
			go func() {
				started := m.engine.Config().Clock()
				err := tracedCompensation(ctx, s, sc)
				done <- m.compensationEntry(s, sc.Attempt, started, err)
			}()
		}
		batch := make([]*driver.ExecutionLogEntry, 0, len(ready))
		for range ready {
			select {
			case e := <-done:
				batch = append(batch, e)
			case <-ctx.Done():
				return ctx.Err() // the lease runs out; another runner compensates what is not recorded
			}
		}
		// One order for the log however the parallel ones finished: reverse completion order.
		slices.SortFunc(batch, func(a, b *driver.ExecutionLogEntry) int { return f.steps[b.Name].order - f.steps[a.Name].order })
		for _, e := range batch {
			r := f.steps[e.Name]
			r.compStat = e.StepStatus
			switch e.StepStatus {
			case statusCompleted:
				f.compNext++
				r.compOrder, r.compErr = f.compNext, ""
			case statusFailed:
				r.compAttempts++
				r.compErr = e.ErrorMessage
				f.compNext++
				r.compOrder = f.compNext
				m.logger.Warn("compensation failed", "execution_id", lease.Row.ID, "step", e.Name, "attempt", e.Attempt, "error", e.ErrorMessage)
			case statusRetryScheduled:
				var at struct {
					RetryAt time.Time `json:"retryAt"`
				}
				_ = json.Unmarshal(e.Request, &at)
				r.compAttempts++
				r.compRetryAt, r.compErr = at.RetryAt, e.ErrorMessage
			}
		}
		cp := lease.Base()
		cp.Log = append(entries, batch...)
		entries = nil
		if err := lease.Checkpoint(ctx, cp); err != nil {
			return m.runnerResult(err)
		}
	}
	_, wakeAt, notRun := m.compensationsReady(f, p, m.engine.Config().Clock())
	var failed []string
	for _, s := range p.order {
		if r := f.steps[s.id]; r != nil && r.compensable() && r.compStat == statusFailed {
			failed = append(failed, s.id)
		}
	}
	switch {
	case len(failed) > 0 && len(notRun) > 0 || len(failed) > 0 && wakeAt.IsZero():
		msg := fmt.Sprintf("compensation of %s failed", strings.Join(failed, ", "))
		if len(notRun) > 0 {
			msg += fmt.Sprintf("; a critical compensation failed, so %s did not run (circuit open)", strings.Join(notRun, ", "))
		}
		return m.park(ctx, lease, entries, failed[0], CodeCompensationFailed, msg)
	case !wakeAt.IsZero():
		// A compensation waits for its retry: the execution sleeps until then, still compensating.
		cp := lease.Base()
		cp.Status, cp.Release, cp.Log, cp.WakeAt, cp.NextRetryAt = driver.ExecutionCompensating, true, entries, &wakeAt, nil
		return m.runnerResult(lease.Checkpoint(ctx, cp))
	}
	m.logger.Info("compensation ended", "execution_id", lease.Row.ID, "status", final)
	cp := lease.Base()
	cp.Status, cp.Release, cp.Log, cp.ErrorCode, cp.ErrorMessage = final, true, entries, code, message
	return m.runnerResult(lease.Checkpoint(ctx, cp))
}

// compensationsReady says which compensations run now under the policy, the earliest time a
// compensation waiting for its retry falls due (zero: none waits), and, when the circuit is open
// (policy CIRCUIT_BREAKER, a critical compensation failed for good), the compensations that will
// not run.
func (m *Manager) compensationsReady(f *folded, p *plan, now time.Time) (ready []string, wakeAt time.Time, notRun []string) {
	var todo []string // in reverse completion order
	open := false
	for _, s := range p.order {
		r := f.steps[s.id]
		if r == nil || !r.compensable() || s.compensate == nil {
			continue
		}
		switch r.compStat {
		case statusCompleted, statusSkipped:
		case statusFailed:
			open = open || s.comp.Critical
		default:
			todo = append(todo, s.id)
		}
	}
	slices.SortFunc(todo, func(a, b string) int { return f.steps[b].order - f.steps[a].order })
	if m.flow.Policy == flowmodel.CircuitBreaker && open {
		return nil, time.Time{}, todo
	}
	due := func(sid string) bool {
		r := f.steps[sid]
		if r.compStat != statusRetryScheduled || !now.Before(r.compRetryAt) {
			return true
		}
		if wakeAt.IsZero() || r.compRetryAt.Before(wakeAt) {
			wakeAt = r.compRetryAt
		}
		return false
	}
	if len(todo) == 0 {
		return nil, time.Time{}, nil
	}
	switch m.flow.Policy {
	case flowmodel.BestEffortParallel:
		for _, sid := range todo {
			if due(sid) {
				ready = append(ready, sid)
			}
		}
	case flowmodel.GroupedParallel:
		top := -1
		for _, sid := range todo {
			top = max(top, p.layer[sid])
		}
		for _, sid := range todo {
			if p.layer[sid] == top && due(sid) {
				ready = append(ready, sid)
			}
		}
	default: // one at a time, last completed first
		if due(todo[0]) {
			ready = todo[:1]
		}
	}
	return ready, wakeAt, nil
}

// compensationEntry records one compensation attempt: COMPLETED, RETRY_SCHEDULED (its retry
// policy allows another attempt) or FAILED.
func (m *Manager) compensationEntry(s *stepDef, attempt int, started time.Time, err error) *driver.ExecutionLogEntry {
	e := &driver.ExecutionLogEntry{EntryType: entryCompensation, Name: s.id, StepStatus: statusCompleted, Attempt: attempt, StartedAt: &started}
	retry := m.compensationRetry(s)
	e.MaxAttempts = retry.MaxAttempts
	if err == nil {
		return e
	}
	_, code := commandbus.Classify(err, commandbus.ClassTransient)
	if code == "" {
		code = "COMPENSATION_ERROR"
	}
	e.ErrorCode, e.ErrorMessage, e.StepStatus = code, err.Error(), statusFailed
	if attempt < retry.MaxAttempts && retry.RetryOn(err) {
		at := m.engine.Config().Clock().Add(retry.Delay(attempt, m.jitter()))
		e.StepStatus = statusRetryScheduled
		e.Request, _ = json.Marshal(map[string]time.Time{"retryAt": at})
	}
	return e
}

// compensationRetry is the retry policy of a step's compensation: its own, or the step's under
// the policies that retry compensations (RETRY_WITH_BACKOFF, CIRCUIT_BREAKER); else one attempt.
func (m *Manager) compensationRetry(s *stepDef) RetryPolicy {
	if s.comp.RetrySet || m.flow.Policy == flowmodel.RetryWithBackoff || m.flow.Policy == flowmodel.CircuitBreaker {
		return s.comp.Retry
	}
	one := s.comp.Retry
	one.MaxAttempts = 1
	return one
}

func callCompensation(ctx context.Context, s *stepDef, sc *StepContext) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = commandbus.Permanent("PANIC", fmt.Errorf("compensation panicked: %v", r))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, s.comp.Timeout)
	defer cancel()
	return s.compensate(ctx, sc)
}
