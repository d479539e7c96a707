package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
)

// run drives a leased execution: it folds the log by step id, then runs every ready step (all
// its dependencies done), up to the layer concurrency at once, each in its own goroutine. The
// outcomes funnel back to this goroutine, the only writer, which checkpoints them (outcomes that
// arrive together share a checkpoint) before starting the steps they make ready. A step's record
// is durable before any step that depends on it starts.
func (m *Manager) runUntraced(ctx context.Context, lease *execution.Lease, extra []*driver.ExecutionLogEntry) error {
	if err := lease.Load(ctx); err != nil {
		return m.abandon(ctx, lease, fmt.Errorf("reading log: %w", err))
	}
	entries, err := lease.Log(ctx)
	if err != nil {
		return m.abandon(ctx, lease, fmt.Errorf("reading log: %w", err))
	}
	f := fold(append(entries, extra...))
	row := lease.Row
	answered := row.Status == driver.ExecutionWaitingForTSQ && row.ErrorCode == CodeCommandParked && len(extra) == 0 &&
		row.ResponsesReceived > row.ResponsesApplied
	var stillParked *parkedCommand
	switch {
	case answered:
		// The parked command's final reply (or another response) arrived: the execution resumes,
		// and parks again if the command still waits.
		m.logger.Info("a parked command was answered; the execution resumes", "execution_id", row.ID, "step", row.Step)
		stillParked = &parkedCommand{step: row.Step, message: row.ErrorMessage}
		row.ErrorCode, row.ErrorMessage = "", ""
	case row.Status.Terminal() && row.ResponsesReceived > row.ResponsesApplied:
		// A late response to an ended execution changes nothing; applied, it no longer wakes it.
		m.logger.Info("late responses to an ended execution ignored", "execution_id", row.ID, "status", row.Status)
		cp := lease.Base()
		cp.Release, cp.ResponsesApplied = true, row.ResponsesReceived
		return m.runnerResult(lease.Checkpoint(ctx, cp))
	case row.Status == driver.ExecutionWaitingForTSQ && len(extra) == 0 && row.ResponsesReceived > row.ResponsesApplied:
		// Responses reached a parked execution: their outcomes are recorded (an operator's
		// Retry goes on from them) and it stays parked, no longer woken by them.
		p, err := m.planFor(row.State)
		if err != nil {
			p = m.base
		}
		w := &walk{m: m, p: p, ctx: ctx, lease: lease, f: f}
		if err := w.absorb(); err != nil {
			return m.abandon(ctx, lease, err)
		}
		return m.runnerResult(w.checkpoint(func(cp *driver.ExecutionCheckpoint) { cp.Release = true }))
	case row.Status.Terminal(), row.Status == driver.ExecutionSuspended,
		row.Status == driver.ExecutionWaitingForTSQ && len(extra) == 0:
		return lease.Release(ctx)
	case f.hash != m.hash:
		return m.park(ctx, lease, extra, "", CodeDefinitionChanged,
			fmt.Sprintf("the definition of workflow %q changed under this execution (hash %s, now %s); Retry adopts the new definition", m.def.id, f.hash, m.hash))
	case row.Status == driver.ExecutionCompensating || f.compensating:
		return m.compensate(ctx, lease, f, extra)
	}
	p, err := m.planFor(row.State)
	if err != nil {
		return m.park(ctx, lease, extra, "", CodeExpansionFailed, err.Error())
	}
	if now := m.engine.Config().Clock(); f.startAt != nil && now.Before(*f.startAt) && len(extra) == 0 {
		// Woken before its delayed start (a signal arrived): wait on; signals stay buffered.
		cp := lease.Base()
		cp.Status, cp.Release, cp.NextRetryAt, cp.RetryDelay = driver.ExecutionWaitingForRetry, true, nil, f.startAt.Sub(now)
		return m.runnerResult(lease.Checkpoint(ctx, cp))
	}
	if f.dryRun {
		return m.dryRun(ctx, lease, f, p, extra)
	}
	w := &walk{m: m, p: p, ctx: ctx, lease: lease, f: f, pending: extra, input: row.State, parkedCommand: stillParked}
	// Steps may run longer than the lease: a heartbeat keeps it while they run.
	stop := lease.KeepAlive(ctx)
	defer stop()
	return w.run()
}

// walk is one run of an execution's DAG.
type walk struct {
	m       *Manager
	p       *plan // the DAG this execution runs
	ctx     context.Context
	lease   *execution.Lease
	f       *folded
	pending []*driver.ExecutionLogEntry // entries for the next checkpoint
	ops     waitOps                     // signal, timer, wait and child changes for the next checkpoint
	attrs   map[string]string           // search attributes for the next checkpoint
	input   json.RawMessage
	running map[string]bool
	failed  *outcome // the first step that failed for good
	// parkedCommand is a command step whose command was parked (its PARKED reply arrived).
	parkedCommand *parkedCommand
	// signals are the execution's unconsumed signals, read once per run when a gate needs them.
	signals       []*driver.ExecutionSignalRow
	signalsLoaded bool
}

// waitOps are the changes a checkpoint makes besides its log: signals consumed, timers
// scheduled and fired, waits opened and closed, children started.
type waitOps struct {
	consume, fire, closeWaits []string
	timers                    []*driver.TimerParams
	openWaits                 []*driver.WaitParams
	children                  []*driver.ExecutionInsertParams
	commands                  []*driver.CommandInsertParams
}

func (o *waitOps) empty() bool {
	return len(o.consume)+len(o.fire)+len(o.closeWaits)+len(o.timers)+len(o.openWaits)+len(o.children)+len(o.commands) == 0
}

func (o *waitOps) add(x waitOps) {
	o.consume = append(o.consume, x.consume...)
	o.fire = append(o.fire, x.fire...)
	o.closeWaits = append(o.closeWaits, x.closeWaits...)
	o.timers = append(o.timers, x.timers...)
	o.openWaits = append(o.openWaits, x.openWaits...)
	o.children = append(o.children, x.children...)
	o.commands = append(o.commands, x.commands...)
}

type outcome struct {
	step    string
	attempt int
	started time.Time
	result  json.RawMessage
	err     error
	skipped bool
	// waiting means the step waits for a signal, a timer or a child; ops start or end the wait.
	waiting bool
	request json.RawMessage // what a waiting step waits for, for the log
	ops     waitOps
	attrs   map[string]string // search attributes the step set
}

func (w *walk) run() error {
	m := w.m
	w.running = map[string]bool{}
	results := make(chan *outcome, len(w.p.steps))
	if w.f.failStep != "" && w.f.steps[w.f.failStep].status == statusFailed {
		// A step failed in an earlier run while commands were in flight: it still stands.
		w.failed = &outcome{step: w.f.failStep, err: &stepError{code: w.f.failCode, msg: w.f.failMsg, business: w.f.failBusiness}}
	}
	if err := w.absorb(); err != nil {
		return m.abandon(w.ctx, w.lease, err)
	}
	for {
		if w.failed == nil && !w.lease.SuspendRequested() {
			for _, sid := range w.ready() {
				if len(w.running) >= m.def.layerConcurrency {
					break
				}
				w.start(sid, results)
			}
		}
		if len(w.running) == 0 {
			if w.failed == nil && w.lease.SuspendRequested() && !w.allDone() {
				// An operator asked to suspend: the running steps finished, no other starts; the
				// release stores SUSPENDED.
				return w.m.runnerResult(w.checkpoint(func(cp *driver.ExecutionCheckpoint) {
					cp.Status, cp.Release = driver.ExecutionExecuting, true
				}))
			}
			return w.finish()
		}
		// Take every outcome that is there (at least one), then checkpoint them together. A run
		// whose context ends (the instance stops) lets go: its lease runs out and another
		// instance replays the execution; steps still running here are not recorded.
		var first *outcome
		select {
		case first = <-results:
		case <-w.ctx.Done():
			return w.ctx.Err()
		}
		batch := []*outcome{first}
	drain:
		for {
			select {
			case o := <-results:
				batch = append(batch, o)
			default:
				break drain
			}
		}
		for _, o := range batch {
			delete(w.running, o.step)
			w.record(o)
		}
		if len(w.running) == 0 && w.failed == nil && w.allDone() {
			// The last outcomes and the completion share one checkpoint.
			return w.m.runnerResult(w.complete())
		}
		if err := w.checkpoint(func(cp *driver.ExecutionCheckpoint) { cp.Status = driver.ExecutionExecuting }); err != nil {
			w.wait(results)
			return w.m.runnerResult(err)
		}
	}
}

// wait lets steps still running finish (their outcomes are lost with the lease: the next run
// replays them).
func (w *walk) wait(results chan *outcome) {
	for len(w.running) > 0 {
		o := <-results
		delete(w.running, o.step)
	}
}

// ready returns the steps whose dependencies are done and that are neither done, failed nor
// running, nor waiting for a retry that is not due, in layer order.
func (w *walk) ready() []string {
	now := w.m.engine.Config().Clock()
	var out []string
	for _, layer := range w.p.layers {
		for _, sid := range layer {
			r := w.f.steps[sid]
			if w.running[sid] || r != nil && (r.done() || r.status == statusFailed || r.status == statusWaiting ||
				r.status == statusRetryScheduled && now.Before(r.retryAt)) {
				continue
			}
			if w.depsDone(sid) {
				out = append(out, sid)
			}
		}
	}
	return out
}

func (w *walk) depsDone(sid string) bool {
	for _, dep := range w.p.steps[sid].deps {
		if r := w.f.steps[dep]; r == nil || !r.done() {
			return false
		}
	}
	return true
}

// start runs a step's condition and, if it holds, its function in a goroutine.
func (w *walk) start(sid string, results chan<- *outcome) {
	s := w.p.steps[sid]
	attempt := 1
	if r := w.f.steps[sid]; r != nil {
		attempt = r.attempts + 1
	}
	sc := &StepContext{ExecutionID: w.lease.Row.ID, Step: sid, Attempt: attempt, Input: w.input, results: w.f.results(),
		item: s.item, itemKey: s.itemKey}
	w.running[sid] = true
	started := w.m.engine.Config().Clock()
	if s.cond != nil {
		hold, err := callCond(s.cond, sc)
		if err != nil || !hold {
			o := &outcome{step: sid, attempt: attempt, started: started, skipped: err == nil, err: err}
			results <- o
			return
		}
	}
	if s.kind != kindLocal {
		o := w.openWait(s, sc)
		o.attempt, o.started = attempt, started
		results <- o
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(w.ctx, s.timeout)
		defer cancel()
		res, err := tracedStep(ctx, s.fn, sc)
		o := &outcome{step: sid, attempt: attempt, started: started, err: err}
		if err == nil {
			o.attrs = sc.attrs
		}
		if err == nil {
			if o.result, err = json.Marshal(res); err != nil {
				o.err = commandbus.Permanent("RESULT_NOT_JSON", fmt.Errorf("the result of step %q cannot be encoded as JSON: %w", sid, err))
			}
		}
		results <- o
	}()
}

func callStep(ctx context.Context, fn StepFunc, sc *StepContext) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = commandbus.Permanent("PANIC", fmt.Errorf("step panicked: %v\n%s", r, debug.Stack()))
		}
	}()
	return fn(ctx, sc)
}

func callCond(cond func(*StepContext) bool, sc *StepContext) (hold bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = commandbus.Permanent("PANIC", fmt.Errorf("the condition of step %q panicked: %v", sc.Step, r))
		}
	}()
	return cond(sc), nil
}

// record turns an outcome into a log entry for the next checkpoint and into the folded view.
func (w *walk) record(o *outcome) {
	m := w.m
	s := w.p.steps[o.step]
	r := w.f.steps[o.step]
	if r == nil {
		r = &stepRecord{}
		w.f.steps[o.step] = r
	}
	w.ops.add(o.ops)
	for k, v := range o.attrs {
		if w.attrs == nil {
			w.attrs = map[string]string{}
		}
		w.attrs[k] = v
	}
	started := o.started
	entry := &driver.ExecutionLogEntry{EntryType: entryStep, Name: o.step, Attempt: o.attempt, MaxAttempts: s.retry.MaxAttempts, StartedAt: &started}
	if o.started.IsZero() {
		entry.StartedAt = nil
	}
	switch {
	case o.waiting:
		entry.StepStatus, entry.StartedAt, entry.Request = statusWaiting, nil, o.request
		r.status = statusWaiting
		w.f.waiting(r, o.request)
	case o.skipped:
		entry.StepStatus, entry.StartedAt, entry.Reason = statusSkipped, nil, "condition false"
		r.status, r.order = statusSkipped, w.f.next
		w.f.next++
		m.logger.Info("step skipped", "execution_id", w.lease.Row.ID, "step", o.step)
	case o.err == nil:
		entry.StepStatus, entry.Response = statusCompleted, o.result
		r.status, r.result, r.order = statusCompleted, o.result, w.f.next
		w.f.next++
	default:
		class, code := commandbus.Classify(o.err, commandbus.ClassPermanent)
		entry.ErrorCode, entry.ErrorMessage = code, o.err.Error()
		if entry.ErrorCode == "" {
			switch {
			case errors.Is(o.err, context.DeadlineExceeded):
				entry.ErrorCode = "TIMEOUT"
			case class == commandbus.ClassTransient:
				entry.ErrorCode = commandbus.CodeTransientFailure // an uncoded transient error is not a permanent one
			case class == commandbus.ClassBusiness:
				entry.ErrorCode = commandbus.CodeBusinessRule
			default:
				entry.ErrorCode = commandbus.CodePermanentFailure
			}
		}
		r.attempts++
		r.errCode, r.errMsg = entry.ErrorCode, entry.ErrorMessage
		switch {
		case class != commandbus.ClassBusiness && s.retry.RetryOn(o.err) && o.attempt < s.retry.MaxAttempts:
			at := m.engine.Config().Clock().Add(s.retry.Delay(o.attempt, m.jitter()))
			entry.StepStatus = statusRetryScheduled
			entry.Request, _ = json.Marshal(map[string]time.Time{"retryAt": at})
			r.status, r.retryAt = statusRetryScheduled, at
		default:
			entry.StepStatus, r.status = statusFailed, statusFailed
			if class != commandbus.ClassBusiness && s.retry.RetryOn(o.err) {
				entry.ErrorCode = commandbus.CodeRetriesExhausted
				r.errCode = entry.ErrorCode
			}
			if class == commandbus.ClassBusiness {
				entry.Reason = reasonBusinessFailure
			}
			if w.failed == nil {
				w.failed = o
				w.failed.err = &stepError{code: entry.ErrorCode, msg: entry.ErrorMessage, business: class == commandbus.ClassBusiness}
			}
		}
	}
	w.pending = append(w.pending, entry)
}

type stepError struct {
	code, msg string
	business  bool
}

func (e *stepError) Error() string { return e.code + ": " + e.msg }

// finish ends a run once nothing is running: the workflow completed, failed (compensations or
// the troubleshooting queue), or waits for a retry.
func (w *walk) finish() error {
	m := w.m
	if w.failed != nil {
		// Commands already sent may take effect: wait for their replies, so that their effects
		// are compensated too (or visible to the operator), before unwinding or parking.
		var inFlight []string
		for _, s := range w.p.order {
			if r := w.f.steps[s.id]; r != nil && r.status == statusWaiting && s.kind == kindCommand {
				inFlight = append(inFlight, s.id)
			}
		}
		if len(inFlight) > 0 {
			return m.runnerResult(w.checkpoint(func(cp *driver.ExecutionCheckpoint) {
				cp.Status, cp.Release, cp.NextRetryAt, cp.NextWaitTimeoutAt = driver.ExecutionWaitingForAsync, true, nil, nil
				cp.CurrentWait = strings.Join(inFlight, ",")
			}))
		}
		if !w.ops.empty() {
			// The signals, timers and waits the run handled are recorded before it parks.
			if err := w.checkpoint(func(cp *driver.ExecutionCheckpoint) {}); err != nil {
				return m.runnerResult(err)
			}
		}
		se := w.failed.err.(*stepError)
		msg := fmt.Sprintf("step %q failed: %s", w.failed.step, se.msg)
		if se.business || m.flow.CompensateOnAny {
			w.f.failStep, w.f.failCode, w.f.failMsg = w.failed.step, se.code, msg
			return m.compensate(w.ctx, w.lease, w.f, w.pending)
		}
		return m.park(w.ctx, w.lease, w.pending, w.failed.step, se.code, msg)
	}
	if w.allDone() {
		return w.complete()
	}
	var next time.Time
	var waiting []string
	for _, s := range w.p.order {
		r := w.f.steps[s.id]
		if r != nil && r.status == statusRetryScheduled && (next.IsZero() || r.retryAt.Before(next)) {
			next = r.retryAt
		}
		if r != nil && r.status == statusWaiting {
			waiting = append(waiting, s.id)
		}
	}
	if pc := w.parkedCommand; pc != nil && w.f.steps[pc.step] != nil && w.f.steps[pc.step].status == statusWaiting {
		// A command waits for an operator in the command troubleshooting queue: so does the
		// execution, visibly. Its reply wait closes (no timeout while an operator decides); the
		// command's final reply resumes it.
		w.ops.closeWaits = append(w.ops.closeWaits, pc.step)
		m.logger.Warn("execution parked: its command waits in the command troubleshooting queue", "execution_id", w.lease.Row.ID, "step", pc.step)
		return m.runnerResult(w.checkpoint(func(cp *driver.ExecutionCheckpoint) {
			cp.Status, cp.Release, cp.NextRetryAt, cp.NextWaitTimeoutAt = driver.ExecutionWaitingForTSQ, true, nil, nil
			cp.Step, cp.CurrentWait, cp.ErrorCode, cp.ErrorMessage = pc.step, pc.step, CodeCommandParked, pc.message
		}))
	}
	if len(waiting) > 0 {
		// Waiting for signals, timers or children: their arrival, the timers' and the waits'
		// timeouts wake the execution; so does a retry that falls due meanwhile.
		return w.checkpoint(func(cp *driver.ExecutionCheckpoint) {
			cp.Status, cp.Release, cp.NextRetryAt, cp.NextWaitTimeoutAt = driver.ExecutionWaitingForAsync, true, nil, nil
			cp.CurrentWait = strings.Join(waiting, ",")
			if !next.IsZero() {
				cp.WakeAt = &next
			}
		})
	}
	if next.IsZero() {
		// Nothing runnable and nothing scheduled: cannot happen with a valid DAG; park rather
		// than spin.
		return m.park(w.ctx, w.lease, w.pending, "", "STUCK", "no step is ready and none is scheduled")
	}
	return w.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Status, cp.Release = driver.ExecutionWaitingForRetry, true
		cp.NextRetryAt = nil
		cp.RetryDelay = max(next.Sub(m.engine.Config().Clock()), time.Millisecond)
	})
}

// allDone reports whether every step completed or was skipped.
func (w *walk) allDone() bool {
	for _, s := range w.p.order {
		if r := w.f.steps[s.id]; r == nil || !r.done() {
			return false
		}
	}
	return true
}

// complete ends the execution COMPLETED with the pending entries.
func (w *walk) complete() error {
	return w.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Status, cp.Release, cp.Step, cp.ErrorCode, cp.ErrorMessage, cp.NextRetryAt = driver.ExecutionCompleted, true, "", "", "", nil
	})
}

// checkpoint writes the pending entries with the changes set applies.
func (w *walk) checkpoint(set func(cp *driver.ExecutionCheckpoint)) error {
	cp := w.lease.Base()
	set(cp)
	cp.Log, w.pending = w.pending, nil
	o := w.ops
	w.ops = waitOps{}
	cp.ConsumeSignals, cp.FireTimers, cp.CloseWaits = o.consume, o.fire, o.closeWaits
	cp.Timers, cp.OpenWaits, cp.Children, cp.Commands = o.timers, o.openWaits, o.children, o.commands
	cp.Attributes, w.attrs = w.attrs, nil
	return w.lease.Checkpoint(w.ctx, cp)
}

// dryRun records every step SKIPPED in layer order and completes the execution.
func (m *Manager) dryRun(ctx context.Context, lease *execution.Lease, f *folded, p *plan, extra []*driver.ExecutionLogEntry) error {
	entries := slices.Clone(extra)
	for _, layer := range p.layers {
		for _, sid := range layer {
			if r := f.steps[sid]; r == nil || !r.done() {
				entries = append(entries, &driver.ExecutionLogEntry{EntryType: entryStep, Name: sid, StepStatus: statusSkipped, Reason: "dry run"})
			}
		}
	}
	cp := lease.Base()
	cp.Status, cp.Release, cp.Log = driver.ExecutionCompleted, true, entries
	return m.runnerResult(lease.Checkpoint(ctx, cp))
}

// park moves an execution to the troubleshooting queue.
func (m *Manager) park(ctx context.Context, lease *execution.Lease, entries []*driver.ExecutionLogEntry, step, code, message string) error {
	m.logger.Warn("execution parked in the troubleshooting queue", "execution_id", lease.Row.ID, "step", step, "code", code, "error", message)
	cp := lease.Base()
	cp.Status, cp.Release, cp.Step, cp.ErrorCode, cp.ErrorMessage, cp.Log = driver.ExecutionWaitingForTSQ, true, step, code, message, entries
	cp.NextRetryAt = nil
	return m.runnerResult(lease.Checkpoint(ctx, cp))
}

// deadline parks an execution whose workflow timeout passed.
func (m *Manager) deadline(ctx context.Context, lease *execution.Lease) error {
	message := fmt.Sprintf("the workflow's timeout passed (deadline %s)", lease.Row.DeadlineAt.UTC().Format(time.RFC3339))
	action := m.def.onDeadline
	if action == "" {
		action = DeadlineTSQ
	}
	m.logger.Warn("deadline passed", "execution_id", lease.Row.ID, "action", action, "status", lease.Row.Status)
	entry := &driver.ExecutionLogEntry{EntryType: entryLifecycle, Name: "deadline", StepStatus: string(action),
		ErrorCode: commandbus.CodeDeadlineExceeded, ErrorMessage: message}
	switch action {
	case DeadlineCompensate:
		entries, err := lease.Log(ctx)
		if err != nil {
			return m.abandon(ctx, lease, err)
		}
		f := fold(entries)
		f.failCode, f.failMsg = commandbus.CodeDeadlineExceeded, message
		return m.compensate(ctx, lease, f, []*driver.ExecutionLogEntry{entry})
	case DeadlineFail:
		cp := lease.Base()
		cp.Status, cp.Release, cp.NextRetryAt, cp.NextWaitTimeoutAt, cp.CurrentWait = driver.ExecutionFailed, true, nil, nil, ""
		cp.ErrorCode, cp.ErrorMessage, cp.Log = commandbus.CodeDeadlineExceeded, message, []*driver.ExecutionLogEntry{entry}
		return m.runnerResult(lease.Checkpoint(ctx, cp))
	}
	return m.park(ctx, lease, []*driver.ExecutionLogEntry{entry}, lease.Row.Step, commandbus.CodeDeadlineExceeded, message)
}

// abandon lets go of an execution the run could not handle; the next poll retries it.
func (m *Manager) abandon(ctx context.Context, lease *execution.Lease, err error) error {
	m.logger.Warn("run abandoned; it will be retried", "execution_id", lease.Row.ID, "error", err)
	_ = lease.Release(ctx)
	return err
}

// runnerResult maps a fenced checkpoint to nil: another runner has the execution.
func (m *Manager) runnerResult(err error) error {
	if errors.Is(err, execution.ErrFenced) {
		return nil
	}
	return err
}
