package tcc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
)

// run drives a leased transaction from its log, with extra (an operator's entry) applied after
// it.
func (m *Manager) runUntraced(ctx context.Context, lease *execution.Lease, extra []*driver.ExecutionLogEntry) error {
	if err := lease.Load(ctx); err != nil {
		return m.abandon(ctx, lease, fmt.Errorf("reading log: %w", err))
	}
	entries, err := lease.Log(ctx)
	if err != nil {
		return m.abandon(ctx, lease, fmt.Errorf("reading log: %w", err))
	}
	f := fold(entries)
	for _, e := range extra {
		f.apply(e)
	}
	return m.runFolded(ctx, lease, f, extra)
}

// runFolded drives a leased transaction whose log is folded into f; pending entries are not
// written yet.
func (m *Manager) runFolded(ctx context.Context, lease *execution.Lease, f *folded, pending []*driver.ExecutionLogEntry) error {
	row := lease.Row
	switch {
	case row.Status.Terminal(), row.Status == driver.ExecutionSuspended,
		row.Status == driver.ExecutionWaitingForTSQ && len(pending) == 0:
		return m.runnerResult(lease.Release(ctx))
	case f.hash != m.hash:
		return m.park(ctx, lease, pending, "", CodeDefinitionChanged,
			fmt.Sprintf("the definition of TCC %q changed under this transaction (hash %s, now %s); Retry adopts the new definition", m.def.id, f.hash, m.hash))
	}
	// Phases may run longer than the lease: a heartbeat keeps it while they run.
	stop := lease.KeepAlive(ctx)
	defer stop()
	t := &txn{m: m, ctx: ctx, lease: lease, f: f, pending: pending}
	err := t.run()
	if errors.Is(err, execution.ErrFenced) {
		m.logger.Info("tcc run stopped: another runner has the transaction", "execution_id", row.ID)
	}
	if err = m.runnerResult(err); err != nil {
		m.logger.Warn("tcc run ended without finishing; the transaction is run again once its lease runs out", "execution_id", row.ID, "error", err)
	}
	return err
}

// txn is one run of a transaction.
type txn struct {
	m       *Manager
	ctx     context.Context
	lease   *execution.Lease
	f       *folded
	pending []*driver.ExecutionLogEntry // entries for the next checkpoint
	// commands, openWaits and closeWaits are a command participant's command and reply wait
	// changes for the next checkpoint.
	commands   []*driver.CommandInsertParams
	openWaits  []*driver.WaitParams
	closeWaits []string
	// replies (by command id) and expired (reply waits) are read once per run, when a command
	// phase waits.
	arrivalsLoaded bool
	replies        map[uuid.UUID]*commandbus.Reply
	expired        map[string]bool
}

// log adds an entry to the next checkpoint and folds it in.
func (t *txn) log(e *driver.ExecutionLogEntry) {
	t.pending = append(t.pending, e)
	t.f.apply(e)
}

func (t *txn) logPhase(p Phase, status string, fl *failure) {
	e := &driver.ExecutionLogEntry{EntryType: entryPhase, Name: string(p), StepStatus: status}
	if fl != nil {
		e.ErrorCode, e.ErrorMessage = fl.code, fl.msg
		e.Request, _ = json.Marshal(phaseInfo{Participant: fl.participant})
	}
	t.log(e)
}

// phaseResult is how a phase's participants ended in this run.
type phaseResult struct {
	waitUntil   time.Time // a retry is scheduled: the run must let go until then
	waitFor     string    // the participant waiting
	failed      *failure  // a try or confirm failed for good
	cancelFails []failure // cancels that failed for good (the others ran)
	suspended   bool      // an operator asked to suspend: nothing more starts
	stopped     bool      // the instance is stopping: the run lets go without a write
	waitAsync   string    // a command phase waits for its reply (the wait's name)
	err         error     // a checkpoint failed (or was fenced): the run ends
}

func (t *txn) run() error {
	for {
		switch t.f.phase {
		case PhaseTry:
			if !t.f.started[tryIdx] {
				t.logPhase(PhaseTry, statusStarted, nil)
			}
			res := t.runPhase(PhaseTry, t.m.def.participants)
			if done, err := t.pause(res, driver.ExecutionExecuting); done {
				return err
			}
			if res.failed != nil {
				if err := t.toCancel(res.failed); err != nil {
					return err
				}
				continue
			}
			// Every try is recorded before the first confirm runs: the decision to confirm
			// is durable.
			t.logPhase(PhaseTry, statusCompleted, nil)
			t.logPhase(PhaseConfirm, statusStarted, nil)
			if err := t.checkpoint(func(cp *driver.ExecutionCheckpoint) { cp.Status = driver.ExecutionExecuting }); err != nil {
				return err
			}
		case PhaseConfirm:
			res := t.runConfirms(t.tried())
			if done, err := t.pause(res, driver.ExecutionExecuting); done {
				return err
			}
			if res.failed != nil {
				if err := t.toCancel(res.failed); err != nil {
					return err
				}
				continue
			}
			t.logPhase(PhaseConfirm, statusCompleted, nil)
			t.m.logger.Debug("tcc transaction confirmed", "execution_id", t.lease.Row.ID)
			return t.checkpoint(func(cp *driver.ExecutionCheckpoint) {
				cp.Status, cp.Release, cp.Step, cp.ErrorCode, cp.ErrorMessage, cp.NextRetryAt = driver.ExecutionCompleted, true, "", "", "", nil
			})
		case PhaseCancel:
			res := t.runPhase(PhaseCancel, t.toCancelList())
			if done, err := t.pause(res, driver.ExecutionCompensating); done {
				return err
			}
			if len(res.cancelFails) > 0 {
				first := res.cancelFails[0]
				names := make([]string, len(res.cancelFails))
				for i, fl := range res.cancelFails {
					names[i] = fl.participant
				}
				fl := failure{participant: first.participant, phase: PhaseCancel, code: CodeCancelFailed,
					msg: fmt.Sprintf("the cancel of %v failed (first: %s: %s)", names, first.code, first.msg)}
				t.logPhase(PhaseCancel, statusFailed, &fl)
				t.m.logger.Warn("tcc transaction parked in the troubleshooting queue", "execution_id", t.lease.Row.ID, "participant", first.participant, "code", CodeCancelFailed, "error", fl.msg)
				return t.checkpoint(func(cp *driver.ExecutionCheckpoint) {
					cp.Status, cp.Release, cp.Step, cp.NextRetryAt = driver.ExecutionWaitingForTSQ, true, first.participant+":"+string(PhaseCancel), nil
					cp.ErrorCode, cp.ErrorMessage = CodeCancelFailed, fl.msg
				})
			}
			t.logPhase(PhaseCancel, statusCompleted, nil)
			final, code, message := driver.ExecutionCompensated, CodeTryFailed, ""
			if c := t.f.cause; c.participant != "" {
				if c.phase == PhaseConfirm {
					code = CodeConfirmFailed
				}
				message = fmt.Sprintf("the %s of %q failed: %s: %s; cancels done", c.phase, c.participant, c.code, c.msg)
			}
			if t.f.cancelledByOperator {
				final, code, message = driver.ExecutionCancelled, commandbus.CodeCancelled, "cancelled by an operator, cancels done"
			}
			return t.checkpoint(func(cp *driver.ExecutionCheckpoint) {
				cp.Status, cp.Release, cp.Step, cp.NextRetryAt = final, true, "", nil
				cp.ErrorCode, cp.ErrorMessage = code, message
			})
		default:
			return t.m.park(t.ctx, t.lease, t.pending, "", "STUCK", fmt.Sprintf("unknown phase %q", t.f.phase))
		}
	}
}

// pause ends the run when a retry is due later or an operator asked to suspend.
func (t *txn) pause(res phaseResult, status driver.ExecutionStatus) (bool, error) {
	switch {
	case res.err != nil:
		return true, res.err
	case res.stopped:
		return true, t.ctx.Err()
	case res.suspended:
		// The release stores SUSPENDED; the next run goes on where this one stopped.
		return true, t.checkpoint(func(cp *driver.ExecutionCheckpoint) { cp.Status, cp.Release = status, true })
	case res.waitAsync != "":
		// The command goes out with this checkpoint; its reply (or its timeout) wakes the
		// transaction, as does a retry of another participant falling due meanwhile.
		return true, t.checkpoint(func(cp *driver.ExecutionCheckpoint) {
			cp.Status, cp.Release, cp.NextRetryAt, cp.NextWaitTimeoutAt = driver.ExecutionWaitingForAsync, true, nil, nil
			cp.CurrentWait, cp.Step = res.waitAsync, res.waitAsync
			if !res.waitUntil.IsZero() {
				cp.WakeAt = &res.waitUntil
			}
		})
	case !res.waitUntil.IsZero():
		return true, t.checkpoint(func(cp *driver.ExecutionCheckpoint) {
			cp.Status, cp.Release, cp.NextRetryAt, cp.Step = driver.ExecutionWaitingForRetry, true, nil, res.waitFor
			cp.RetryDelay = max(res.waitUntil.Sub(t.m.engine.Config().Clock()), time.Millisecond)
		})
	}
	return false, nil
}

// toCancel records a try or confirm that failed for good and the decision to cancel, durably,
// before the first cancel runs.
func (t *txn) toCancel(fl *failure) error {
	t.logPhase(fl.phase, statusFailed, fl)
	t.logPhase(PhaseCancel, statusStarted, nil)
	t.m.logger.Info("tcc transaction cancelling", "execution_id", t.lease.Row.ID, "participant", fl.participant, "phase", fl.phase, "code", fl.code)
	return t.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Status, cp.NextRetryAt = driver.ExecutionCompensating, nil
		cp.ErrorCode = CodeTryFailed
		if fl.phase == PhaseConfirm {
			cp.ErrorCode = CodeConfirmFailed
		}
		cp.ErrorMessage = fmt.Sprintf("the %s of %q failed: %s: %s", fl.phase, fl.participant, fl.code, fl.msg)
	})
}

// tried returns the participants whose try succeeded, in order.
func (t *txn) tried() []*participant {
	var out []*participant
	for _, p := range t.m.def.participants {
		if t.f.peek(p.id, PhaseTry).status == statusCompleted {
			out = append(out, p)
		}
	}
	return out
}

// toCancelList returns the participants to cancel, in reverse order: those whose try succeeded
// and that have not confirmed, and the command participants whose try may have taken effect
// without a success reaching the transaction (still in flight, or its reply timed out); their
// handler's Barrier turns a cancel without a try into an empty cancel and refuses the try if it
// arrives later.
func (t *txn) toCancelList() []*participant {
	var out []*participant
	for _, p := range t.m.def.participants {
		try := t.f.peek(p.id, PhaseTry)
		unknown := p.isCommand() && (try.status == statusWaiting || try.errCode == "REPLY_TIMEOUT" || try.errCode == commandbus.CodeRetriesExhausted)
		if (try.status == statusCompleted || unknown) && t.f.peek(p.id, PhaseConfirm).status != statusCompleted {
			out = append(out, p)
		}
	}
	slices.Reverse(out)
	return out
}

// runPhase runs phase p of the participants in list, one after the other, skipping those done.
func (t *txn) runPhase(p Phase, list []*participant) phaseResult {
	var res phaseResult
	idx := phaseIndex(p)
	for i, part := range list {
		// Each outcome is durable before the next participant's phase starts, so a runner
		// that dies repeats at most the attempt it was running. The last outcome of the phase
		// goes with the phase's end.
		more := i < len(list)-1
		r := t.f.peek(part.id, p)
		switch r.status {
		case statusCompleted, statusSkipped:
			continue
		case statusFailed:
			switch {
			case p == PhaseTry && part.optional:
				continue
			case p == PhaseCancel:
				res.cancelFails = append(res.cancelFails, failure{participant: part.id, phase: p, code: r.errCode, msg: r.errMsg})
				continue
			}
			res.failed = &failure{participant: part.id, phase: p, code: r.errCode, msg: r.errMsg}
			return res
		case statusRetryScheduled:
			if now := t.m.engine.Config().Clock(); now.Before(r.retryAt) {
				res.waitUntil, res.waitFor = r.retryAt, part.id+":"+string(p)
				return res
			}
		}
		eff := part.resolved[idx]
		var at *attempt
		if r.status == statusWaiting {
			// A command phase's attempt is in flight: its reply decides.
			var err error
			if at, err = t.replyOf(part, p, r); err != nil {
				return phaseResult{err: err}
			}
			if at == nil {
				res.waitAsync = waitID(part.id, p)
				return res
			}
		} else if t.lease.SuspendRequested() {
			res.suspended = true
			return res
		}
		attemptNo := r.attempts + 1
		c := &Context{ExecutionID: t.lease.Row.ID, Participant: part.id, Phase: p, Attempt: attemptNo, Input: t.lease.Row.State}
		if p != PhaseTry {
			c.TryResult = t.f.peek(part.id, PhaseTry).result
		}
		if at == nil {
			started := t.m.engine.Config().Clock()
			if part.isCommand() {
				if err := t.send(part, p, c, eff); err != nil {
					at = &attempt{started: started, err: err}
				} else {
					res.waitAsync = waitID(part.id, p)
					return res
				}
			} else {
				result, err := call(t.ctx, part, p, eff.timeout, c)
				at = &attempt{started: started, result: result, err: err}
			}
		}
		if !part.isCommand() && t.ctx.Err() != nil {
			// The instance is stopping: the attempt is not recorded; the next run repeats it.
			return phaseResult{stopped: true}
		}
		rec := t.record(part, p, attemptNo, at, eff)
		switch {
		case !rec.retryAt.IsZero():
			res.waitUntil, res.waitFor = rec.retryAt, waitID(part.id, p)
			return res
		case rec.failed != nil && !(p == PhaseTry && part.optional) && p != PhaseCancel:
			res.failed = rec.failed
			return res
		case rec.failed != nil && p == PhaseCancel:
			res.cancelFails = append(res.cancelFails, *rec.failed)
		}
		if more {
			if err := t.checkpoint(func(*driver.ExecutionCheckpoint) {}); err != nil {
				return phaseResult{err: err}
			}
		}
	}
	return res
}

// recorded is what recording an attempt's outcome decided.
type recorded struct {
	retryAt time.Time // a retry is scheduled then
	failed  *failure  // the phase failed for good
}

// record logs an attempt's outcome: completed, failed with a retry scheduled (transient errors
// the policy retries, within its attempts), or failed for good.
func (t *txn) record(part *participant, p Phase, attemptNo int, at *attempt, eff effective) recorded {
	started, err := at.started, at.err
	entry := &driver.ExecutionLogEntry{EntryType: string(p), Name: part.id, Attempt: attemptNo, MaxAttempts: eff.retry.MaxAttempts, StartedAt: &started}
	if err == nil {
		entry.StepStatus, entry.Response = statusCompleted, at.result
		t.log(entry)
		return recorded{}
	}
	class, code := commandbus.Classify(err, commandbus.ClassPermanent)
	if code == "" {
		code = commandbus.CodePermanentFailure
		if errors.Is(err, context.DeadlineExceeded) {
			code = "TIMEOUT"
		}
	}
	entry.ErrorCode, entry.ErrorMessage = code, err.Error()
	retryable := class != commandbus.ClassBusiness && eff.retry.RetryOn(err)
	if retryable && attemptNo < eff.retry.MaxAttempts {
		retryAt := t.m.engine.Config().Clock().Add(eff.retry.Delay(attemptNo, t.m.jitter()))
		entry.StepStatus = statusRetryScheduled
		entry.Request, _ = json.Marshal(map[string]time.Time{"retryAt": retryAt})
		t.log(entry)
		t.m.logger.Info("tcc phase failed; retry scheduled", "execution_id", t.lease.Row.ID, "participant", part.id, "phase", p, "attempt", attemptNo, "retry_at", retryAt, "error", err)
		return recorded{retryAt: retryAt}
	}
	if retryable {
		entry.ErrorCode = commandbus.CodeRetriesExhausted
	}
	entry.StepStatus = statusFailed
	if p == PhaseTry && part.optional {
		entry.Reason = reasonOptional
	}
	t.log(entry)
	t.m.logger.Warn("tcc phase failed", "execution_id", t.lease.Row.ID, "participant", part.id, "phase", p, "attempt", attemptNo, "code", entry.ErrorCode, "error", err)
	return recorded{failed: &failure{participant: part.id, phase: p, code: entry.ErrorCode, msg: entry.ErrorMessage}}
}

// runConfirms runs the confirms of the participants in list at once (the decision to confirm is
// durable, and confirms depend on nothing but their own try). Their outcomes funnel back to this
// goroutine, which records them as they arrive (outcomes that arrive together share a
// checkpoint), so a runner that dies repeats only the confirms still running. The last outcomes
// go with the phase's end.
func (t *txn) runConfirms(list []*participant) phaseResult {
	type done struct {
		part      *participant
		attemptNo int
		at        *attempt
	}
	var res phaseResult
	results := make(chan done, len(list))
	running := 0
	now := t.m.engine.Config().Clock()
	noteRetry := func(at time.Time, who string) {
		if res.waitUntil.IsZero() || at.Before(res.waitUntil) {
			res.waitUntil, res.waitFor = at, who
		}
	}
	for _, part := range list {
		r := t.f.peek(part.id, PhaseConfirm)
		key := waitID(part.id, PhaseConfirm)
		switch r.status {
		case statusCompleted:
			continue
		case statusFailed:
			if res.failed == nil {
				res.failed = &failure{participant: part.id, phase: PhaseConfirm, code: r.errCode, msg: r.errMsg}
			}
			continue
		case statusRetryScheduled:
			if now.Before(r.retryAt) {
				noteRetry(r.retryAt, key)
				continue
			}
		}
		eff := part.resolved[confirmIdx]
		attemptNo := r.attempts + 1
		if r.status == statusWaiting {
			at, err := t.replyOf(part, PhaseConfirm, r)
			if err != nil {
				return phaseResult{err: err}
			}
			if at == nil {
				if res.waitAsync == "" {
					res.waitAsync = key
				}
				continue
			}
			results <- done{part, attemptNo, at}
			running++
			continue
		}
		if res.failed != nil || t.lease.SuspendRequested() {
			res.suspended = res.suspended || res.failed == nil
			continue // nothing more starts
		}
		c := &Context{ExecutionID: t.lease.Row.ID, Participant: part.id, Phase: PhaseConfirm, Attempt: attemptNo, Input: t.lease.Row.State,
			TryResult: t.f.peek(part.id, PhaseTry).result}
		started := t.m.engine.Config().Clock()
		if part.isCommand() {
			if err := t.send(part, PhaseConfirm, c, eff); err != nil {
				results <- done{part, attemptNo, &attempt{started: started, err: err}}
				running++
			} else if res.waitAsync == "" {
				res.waitAsync = key
			}
			continue
		}
		running++
		go func() {
			result, err := callPhase(t.ctx, part, PhaseConfirm, eff.timeout, c)
			results <- done{part, attemptNo, &attempt{started: started, result: result, err: err}}
		}()
	}
	for running > 0 {
		var first done
		select {
		case first = <-results:
		case <-t.ctx.Done():
			// The instance is stopping: the outcomes not recorded yet are lost with the lease.
			return phaseResult{stopped: true}
		}
		batch := []done{first}
	drain:
		for {
			select {
			case d := <-results:
				batch = append(batch, d)
			default:
				break drain
			}
		}
		running -= len(batch)
		for _, d := range batch {
			if !d.part.isCommand() && t.ctx.Err() != nil {
				return phaseResult{stopped: true}
			}
			rec := t.record(d.part, PhaseConfirm, d.attemptNo, d.at, d.part.resolved[confirmIdx])
			switch {
			case !rec.retryAt.IsZero():
				noteRetry(rec.retryAt, waitID(d.part.id, PhaseConfirm))
			case rec.failed != nil && res.failed == nil:
				res.failed = rec.failed
			}
		}
		if running > 0 {
			if err := t.checkpoint(func(*driver.ExecutionCheckpoint) {}); err != nil {
				return phaseResult{err: err}
			}
		}
	}
	if res.failed != nil {
		// A confirm failed for good: the participants that have not confirmed are cancelled.
		// A confirm command still in flight may take effect, so its reply is awaited first
		// (waitAsync stays set); retries of the others are given up.
		res.waitUntil, res.suspended = time.Time{}, false
	}
	return res
}

// call runs one attempt of a phase within its timeout, in a goroutine of its own so that a run
// whose context ends (the instance stops) lets go even if the phase ignores its context; the
// attempt is then not recorded and the next run repeats it.
func call(ctx context.Context, part *participant, p Phase, timeout time.Duration, c *Context) (json.RawMessage, error) {
	type outcome struct {
		result json.RawMessage
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := tracedPhase(ctx, part, p, timeout, c)
		done <- outcome{r, err}
	}()
	select {
	case o := <-done:
		return o.result, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// callPhase runs one attempt of a phase within its timeout; a panic is a permanent failure.
func callPhase(ctx context.Context, part *participant, p Phase, timeout time.Duration, c *Context) (result json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = commandbus.Permanent("PANIC", fmt.Errorf("the %s of participant %q panicked: %v\n%s", p, part.id, r, debug.Stack()))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch p {
	case PhaseTry:
		v, err := part.try(ctx, c)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, commandbus.Permanent("RESULT_NOT_JSON", fmt.Errorf("the try result of participant %q cannot be encoded as JSON: %w", part.id, err))
		}
		return b, nil
	case PhaseConfirm:
		return nil, part.confirm(ctx, c)
	default:
		return nil, part.cancel(ctx, c)
	}
}

// checkpoint writes the pending entries with the changes set applies.
func (t *txn) checkpoint(set func(cp *driver.ExecutionCheckpoint)) error {
	cp := t.lease.Base()
	set(cp)
	cp.Log, t.pending = t.pending, nil
	cp.Commands, cp.OpenWaits, cp.CloseWaits = t.commands, t.openWaits, t.closeWaits
	t.commands, t.openWaits, t.closeWaits = nil, nil, nil
	return t.lease.Checkpoint(t.ctx, cp)
}

// park moves a transaction to the troubleshooting queue.
func (m *Manager) park(ctx context.Context, lease *execution.Lease, entries []*driver.ExecutionLogEntry, step, code, message string) error {
	m.logger.Warn("tcc transaction parked in the troubleshooting queue", "execution_id", lease.Row.ID, "step", step, "code", code, "error", message)
	cp := lease.Base()
	cp.Status, cp.Release, cp.Step, cp.ErrorCode, cp.ErrorMessage, cp.Log = driver.ExecutionWaitingForTSQ, true, step, code, message, entries
	cp.NextRetryAt = nil
	return m.runnerResult(lease.Checkpoint(ctx, cp))
}

// abandon lets go of a transaction the run could not handle; the next poll retries it.
func (m *Manager) abandon(ctx context.Context, lease *execution.Lease, err error) error {
	m.logger.Warn("tcc run abandoned; it will be retried", "execution_id", lease.Row.ID, "error", err)
	_ = lease.Release(ctx)
	return err
}

// runnerResult maps a fenced checkpoint to nil: another runner has the transaction.
func (m *Manager) runnerResult(err error) error {
	if errors.Is(err, execution.ErrFenced) {
		return nil
	}
	return err
}
