package execution

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/batching"
	"github.com/commandbus/commandbus/tracing"
)

// SendSignal records a named signal for an execution and wakes it: a runner waiting for the
// signal resumes, and one that does not wait for it yet finds it buffered when it does. A signal
// id sent before is a no-op, reported as Duplicate. It returns driver.ErrNotFound for an unknown
// execution and an error wrapping driver.ErrConflict for one that has ended.
//
// The signal keeps the traceparent of the sender (params.Traceparent, else the span or trace
// context ctx carries), and the run that reads it links to the sender's trace.
func (e *Engine) SendSignal(ctx context.Context, params *driver.ExecutionSignalSendParams) (*driver.ExecutionSignalSendResult, error) {
	if params.Now == nil {
		params.Now = e.cfg.Now()
	}
	if params.Traceparent == "" {
		params.Traceparent = tracing.Traceparent(ctx)
	}
	res, err := e.cfg.Exec.ExecutionSignalSend(ctx, params)
	if err != nil {
		return nil, err
	}
	if !res.Duplicate {
		e.wakeups.poke()
		e.Wake(ctx)
	}
	return res, nil
}

// PendingSignals returns the signals of an execution that no runner has consumed yet, in the
// order received.
func (e *Engine) PendingSignals(ctx context.Context, id uuid.UUID) ([]*driver.ExecutionSignalRow, error) {
	return e.cfg.Exec.ExecutionSignalListPending(ctx, id)
}

// PendingTimers returns the pending timers of an execution, earliest first.
func (e *Engine) PendingTimers(ctx context.Context, id uuid.UUID) ([]*driver.ExecutionTimerRow, error) {
	return e.cfg.Exec.ExecutionTimerList(ctx, &driver.ExecutionTimerListParams{ExecutionID: id, Now: e.cfg.Now()})
}

// CancelTimer cancels a pending timer of an execution (an operator action): it will never be
// due. It returns driver.ErrNotFound when there is no such timer and an error wrapping
// driver.ErrConflict when it already fired or was cancelled.
func (e *Engine) CancelTimer(ctx context.Context, id uuid.UUID, timerID string) error {
	return e.cfg.Exec.ExecutionTimerCancel(ctx, &driver.ExecutionTimerCancelParams{ExecutionID: id, TimerID: timerID})
}

// OpenWaits returns the open waits of an execution, in the order opened.
func (e *Engine) OpenWaits(ctx context.Context, id uuid.UUID) ([]*driver.ExecutionWaitRow, error) {
	return e.cfg.Exec.ExecutionWaitList(ctx, &driver.ExecutionWaitListParams{ExecutionID: id, Now: e.cfg.Now()})
}

// Signals returns the execution's signals not yet consumed, in the order received. The runner
// consumes those it applies with the checkpoint's ConsumeSignals; the others stay buffered.
func (l *Lease) Signals(ctx context.Context) ([]*driver.ExecutionSignalRow, error) {
	return l.engine.cfg.Exec.ExecutionSignalListPending(ctx, l.Row.ID)
}

// TraceSignal marks that the run applies signal s: while the run's span records (StartRun), it
// gets a link to the trace of the signal's sender, once per signal, so a run resumed by a signal
// reads as part of the sender's trace too. A signal sent outside any trace adds nothing.
func (l *Lease) TraceSignal(s *driver.ExecutionSignalRow) {
	if l.runSpan == nil || s == nil || s.Traceparent == "" {
		return
	}
	l.linkMu.Lock()
	defer l.linkMu.Unlock()
	if l.linked[s.SignalID] {
		return
	}
	if l.linked == nil {
		l.linked = map[string]bool{}
	}
	l.linked[s.SignalID] = true
	tracing.AddLink(l.runSpan, s.Traceparent, tracing.String("commandbus.signal.id", s.SignalID), tracing.String("commandbus.signal.name", s.Name))
}

// DueTimers returns the execution's pending timers that are due, earliest first. The runner marks
// those it handles with the checkpoint's FireTimers, after which they are never due again; a due
// timer it leaves pending wakes the execution again when the runner lets go. Concurrent calls of
// many runners share one round trip.
func (l *Lease) DueTimers(ctx context.Context) ([]*driver.ExecutionTimerRow, error) {
	return l.engine.dueTimers.read(ctx, l.Row.ID)
}

// dueTimerReader reads the due timers of many runners' executions in one query: when many timers
// fall due together, each of their runners asks at about the same time.
type dueTimerReader struct {
	exec  driver.Executor
	now   func() *time.Time
	group *batching.Group[*dueTimerRequest]
}

type dueTimerRequest struct {
	id    uuid.UUID
	done  chan struct{}
	rows  []*driver.ExecutionTimerRow
	error error
}

const (
	maxDueTimerBatch      = 500
	maxConcurrentDueTimer = 3
)

func newDueTimerReader(exec driver.Executor, now func() *time.Time) *dueTimerReader {
	r := &dueTimerReader{exec: exec, now: now}
	r.group = batching.New(maxDueTimerBatch, maxConcurrentDueTimer, r.flush)
	return r
}

func (r *dueTimerReader) read(ctx context.Context, id uuid.UUID) ([]*driver.ExecutionTimerRow, error) {
	req := &dueTimerRequest{id: id, done: make(chan struct{})}
	r.group.Submit(req)
	select {
	case <-req.done:
		return req.rows, req.error
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *dueTimerReader) flush(batch []*dueTimerRequest) {
	ids := make([]uuid.UUID, 0, len(batch))
	seen := make(map[uuid.UUID]bool, len(batch))
	for _, req := range batch {
		if !seen[req.id] {
			seen[req.id] = true
			ids = append(ids, req.id)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := r.exec.ExecutionTimerListDueMany(ctx, &driver.ExecutionTimerListDueManyParams{ExecutionIDs: ids, Now: r.now()})
	byID := make(map[uuid.UUID][]*driver.ExecutionTimerRow, len(ids))
	for _, row := range rows {
		byID[row.ExecutionID] = append(byID[row.ExecutionID], row)
	}
	for _, req := range batch {
		req.rows, req.error = byID[req.id], err
		close(req.done)
	}
}

// Waits returns the execution's open waits, in the order opened.
func (l *Lease) Waits(ctx context.Context) ([]*driver.ExecutionWaitRow, error) {
	return l.engine.OpenWaits(ctx, l.Row.ID)
}

// ExpiredWaits returns the execution's open waits whose timeout has passed. What an expired wait
// means is the runner's decision (take another branch, fail, compensate); it closes the wait with
// the checkpoint's CloseWaits, or the execution is woken again when the runner lets go.
func (l *Lease) ExpiredWaits(ctx context.Context) ([]*driver.ExecutionWaitRow, error) {
	return l.engine.cfg.Exec.ExecutionWaitList(ctx, &driver.ExecutionWaitListParams{ExecutionID: l.Row.ID, Expired: true, Now: l.engine.cfg.Now()})
}

// scheduleNextWake asks the database when an execution of this instance's types is next to be
// woken (a timer or a wait's timeout, whoever scheduled it, also before a restart) and, when that
// falls before the next poll, schedules an in-memory wake-up of the pending poller then.
// It asks at most once per nextWakeSpacing, so that a busy poller, woken again and again, does
// not pay a query each time. It looks back to when the claim before it began: a wake-up that fell
// due after the claim looked but before this question was asked would otherwise be lost until the
// next poll (a timer a few milliseconds late in the database's clock, under load).
func (e *Engine) scheduleNextWake(ctx context.Context, interval time.Duration, claimed time.Time) {
	types := e.types()
	now := time.Now()
	if len(types) == 0 {
		return
	}
	if since := now.Sub(e.nextWakeAsked); since < nextWakeSpacing {
		// Asked too recently to ask again; what fell due since this claim began is taken by a
		// poll at the end of the spacing, which asks then.
		e.wakeups.at(e.cfg.Clock().Add(nextWakeSpacing - since))
		return
	}
	e.nextWakeAsked = now
	// What fell due after the claim began was not taken by it: look back to then (and a slot
	// more), so such a wake-up pokes the poller at once instead of waiting for the next poll.
	lookback := e.cfg.Clock().Sub(claimed) + wakeupGranularity
	next, err := e.cfg.Exec.ExecutionNextWake(ctx, &driver.ExecutionNextWakeParams{Types: types, Now: e.cfg.Now(), Lookback: lookback})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("reading the next wake-up failed; the pending poller will poll", "error", err)
		}
		return
	}
	if next != nil && next.Sub(e.cfg.Clock()) < interval {
		e.wakeups.at(*next)
	}
}

// nextWakeSpacing is the least time between two questions of scheduleNextWake.
const nextWakeSpacing = 50 * time.Millisecond

// wakeupGranularity groups in-memory wake-ups: timers due within one such slot share one wake-up
// of the pending poller, taken just after the slot ends.
const wakeupGranularity = 5 * time.Millisecond

// wakeups pokes the pending poller of this instance when a timer or a wait timeout it scheduled
// is due, so that the execution is taken up then rather than at the next poll. It is a hint only:
// the durable wake_at is what makes the pending poller take the execution up, after a restart
// too (then at the next poll).
type wakeups struct {
	clock func() time.Time
	local chan struct{}
	// count counts the wake-ups of timers, wait timeouts and signals. One may find its execution
	// leased; a lease that saw the count move pokes again when it lets go (see Lease.Checkpoint).
	count atomic.Uint64

	mu     sync.Mutex
	timers map[int64]*time.Timer
}

func newWakeups(clock func() time.Time) *wakeups {
	return &wakeups{clock: clock, local: make(chan struct{}, 1), timers: map[int64]*time.Timer{}}
}

// poke wakes the pending poller now.
func (w *wakeups) poke() {
	w.count.Add(1)
	w.pokeQuiet()
}

// pokeQuiet wakes the pending poller now without counting a wake-up.
func (w *wakeups) pokeQuiet() {
	select {
	case w.local <- struct{}{}:
	default:
	}
}

// at schedules a poke at t (rounded up to the next slot).
func (w *wakeups) at(t time.Time) {
	slot := t.UnixNano()/int64(wakeupGranularity) + 1
	d := time.Unix(0, slot*int64(wakeupGranularity)).Sub(w.clock())
	w.mu.Lock()
	defer w.mu.Unlock()
	if d <= 0 {
		w.poke()
		return
	}
	if _, ok := w.timers[slot]; ok {
		return
	}
	w.timers[slot] = time.AfterFunc(d, func() {
		w.mu.Lock()
		delete(w.timers, slot)
		w.mu.Unlock()
		w.poke()
	})
}

// checkpointed schedules pokes for the timers and wait timeouts a committed checkpoint created.
func (w *wakeups) checkpointed(cp *driver.ExecutionCheckpoint, now time.Time) {
	for _, t := range cp.Timers {
		if t.FireAt != nil {
			w.at(*t.FireAt)
		} else {
			w.at(now.Add(t.Delay))
		}
	}
	for _, wait := range cp.OpenWaits {
		switch {
		case wait.TimeoutAt != nil:
			w.at(*wait.TimeoutAt)
		case wait.Timeout > 0:
			w.at(now.Add(wait.Timeout))
		}
	}
}

// stop cancels the scheduled pokes; a stopped engine's next Start schedules anew.
func (w *wakeups) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for slot, t := range w.timers {
		t.Stop()
		delete(w.timers, slot)
	}
}
