package execution

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/tracecontext"
	"github.com/commandbus/commandbus/tracing"
)

// Lease is an execution leased to this instance. Every write goes through Checkpoint, fenced on
// the lease's fence, so a runner whose lease expired cannot overwrite newer progress.
type Lease struct {
	// Row is the execution as it stands after the last applied checkpoint.
	Row    *driver.ExecutionRow
	engine *Engine
	// nextSeq is the next log sequence number; 0 until the log has been read.
	nextSeq int
	// renewAt is when the next checkpoint should renew the lease.
	renewAt time.Time
	// loaded holds the log and responses read together with the acquire, until used.
	loaded            *driver.ExecutionLoaded
	logUsed, respUsed bool
	// log is the whole log as this lease knows it (read, then appended to by its checkpoints),
	// once logKnown; it is cached when the lease is released.
	log      []*driver.ExecutionLogEntry
	logKnown bool
	// suspendRequested mirrors the operator's pending suspend request as the last acquire,
	// checkpoint or heartbeat reported it; the heartbeat goroutine writes it too.
	suspendRequested atomic.Bool
	// wakeups is the engine's wake-up count when the lease was taken.
	wakeups uint64
	// unstarted means the execution's log holds nothing but lifecycle entries: its next
	// progress is its first step (counted as started by the metrics).
	unstarted bool
	// runSpan is the span of the run holding this lease, while it records (StartRun); TraceSignal
	// links it to the traces of the signals' senders, each once (linked, under linkMu).
	runSpan trace.Span
	linkMu  sync.Mutex
	linked  map[string]bool
}

func (e *Engine) newLease(row *driver.ExecutionRow) *Lease {
	l := &Lease{Row: row, engine: e, renewAt: e.cfg.Clock().Add(e.cfg.Lease / 2), wakeups: e.wakeups.count.Load()}
	l.suspendRequested.Store(row.SuspendRequested)
	return l
}

// Engine returns the engine that leased the execution.
func (l *Lease) Engine() *Engine { return l.engine }

// Load reads the log and the unapplied responses in one round trip, unless they were read with
// the acquire; Log and Responses then return them without another query. A log this instance
// cached when it last released the execution is completed with the entries added since.
func (l *Lease) Load(ctx context.Context) error {
	if l.loaded != nil {
		return nil
	}
	id := l.Row.ID
	cached, after := l.engine.logs.get(id)
	loaded, err := l.engine.cfg.Exec.ExecutionLoadMany(ctx, &driver.ExecutionLoadManyParams{
		IDs: []uuid.UUID{id}, AfterSeq: []int64{l.Row.ResponsesApplied}, LogAfterSeq: []int64{after},
	})
	if err != nil {
		return err
	}
	x := loaded[id]
	var ok bool
	if x.Log, ok = l.engine.logs.join(id, cached, x.Log); !ok {
		return l.Load(ctx) // the cached log is forgotten: read the whole log
	}
	l.loaded, l.logUsed, l.respUsed = x, false, false
	return nil
}

// Log returns the execution's log (read by Load, or now) and remembers where the next entry goes.
func (l *Lease) Log(ctx context.Context) ([]*driver.ExecutionLogEntry, error) {
	var entries []*driver.ExecutionLogEntry
	if l.loaded != nil && !l.logUsed {
		entries, l.logUsed = l.loaded.Log, true
	} else {
		var err error
		if entries, err = l.engine.cfg.Exec.ExecutionLogList(ctx, l.Row.ID); err != nil {
			return nil, err
		}
	}
	l.log, l.logKnown = entries, true
	l.unstarted = onlyLifecycleEntries(entries)
	l.nextSeq = 1
	if len(entries) > 0 {
		l.nextSeq = entries[len(entries)-1].Seq + 1
	}
	return entries, nil
}

// Responses returns the async responses not yet applied, in order: those read by Load, or none
// without a query when the row shows that every response received was applied (an acquire does
// not read them), or those read now.
func (l *Lease) Responses(ctx context.Context) ([]*driver.ExecutionResponseRow, error) {
	if l.loaded != nil && !l.respUsed && l.loaded.Responses != nil {
		l.respUsed = true
		// The preloaded responses serve unless one was stored since (a response recorded under
		// this lease before its run): then they are read again, with it.
		covered := l.Row.ResponsesApplied
		if n := len(l.loaded.Responses); n > 0 {
			covered = l.loaded.Responses[n-1].Seq
		}
		if covered >= l.Row.ResponsesReceived {
			return l.loaded.Responses, nil
		}
	}
	if l.Row.ResponsesReceived <= l.Row.ResponsesApplied {
		return nil, nil
	}
	return l.engine.cfg.Exec.ExecutionResponseList(ctx, l.Row.ID, l.Row.ResponsesApplied)
}

// Base returns a checkpoint that keeps the execution as it is; callers change what moves.
func (l *Lease) Base() *driver.ExecutionCheckpoint {
	r := l.Row
	return &driver.ExecutionCheckpoint{
		Status: r.Status, Step: r.Step, CurrentWait: r.CurrentWait, NextRetryAt: r.NextRetryAt,
		NextWaitTimeoutAt: r.NextWaitTimeoutAt, Retries: r.Retries, ResponsesApplied: r.ResponsesApplied,
		ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage,
	}
}

// Checkpoint writes cp durably (grouped with other executions' checkpoints into one commit) and
// returns when it is committed. It returns ErrFenced when the lease was lost; the caller must
// then stop without further writes. Log entries get their sequence numbers here. A checkpoint
// that continues as new gets the LIFECYCLE CONTINUED_AS_NEW entry naming the successor. Its
// commands that carry no traceparent get the execution's, so they continue the trace of the
// request that started it, whatever model built them. Children, a successor, or the end of a
// child (which answers its parent) wake the pending pollers once committed. Invalid children,
// attributes, timers or waits are rejected before anything is written; the timers and wait
// timeouts of a committed checkpoint also schedule an in-memory wake-up of this instance's
// pending poller.
func (l *Lease) Checkpoint(ctx context.Context, cp *driver.ExecutionCheckpoint) error {
	ctx, span := l.startCheckpoint(ctx, cp)
	err := l.checkpoint(ctx, cp)
	tracing.End(span, err)
	return err
}

func (l *Lease) checkpoint(ctx context.Context, cp *driver.ExecutionCheckpoint) error {
	cp.ID, cp.Fence = l.Row.ID, l.Row.Fence
	if err := cp.Validate(); err != nil {
		return fmt.Errorf("invalid checkpoint: %w", err)
	}
	if err := cp.ValidateSignalOps(); err != nil {
		return fmt.Errorf("invalid checkpoint: %w", err)
	}
	// An invalid attribute fails this checkpoint alone, before it joins a group commit.
	if err := driver.ValidateAttributes(cp.Attributes); err != nil {
		return err
	}
	if l.nextSeq == 0 {
		if _, err := l.Log(ctx); err != nil {
			return err
		}
	}
	stampTraceparent(cp.Commands, l.traceparent(ctx))
	stampIssuer(cp.Commands, l.Row)
	// The outbox messages derived here (the commands' and the lifecycle events') are dropped
	// again when the write fails: a retry of the same checkpoint derives them again.
	outboxBefore := len(cp.Outbox)
	if len(cp.Commands) > 0 && l.engine.cfg.CommandOutbox != nil {
		messages, err := l.engine.cfg.CommandOutbox(cp.Commands)
		if err != nil {
			return fmt.Errorf("invalid checkpoint: %w", err)
		}
		cp.Outbox = append(cp.Outbox, messages...)
	}
	if cp.ContinueAsNew != nil && !logsContinuedAsNew(cp.Log) {
		cp.Log = append(cp.Log, &driver.ExecutionLogEntry{
			EntryType: "LIFECYCLE", Name: driver.EntryContinuedAsNew, StepStatus: string(driver.ExecutionCompleted),
			Response: json.RawMessage(`{"successorId":"` + cp.ContinueAsNew.ID.String() + `"}`),
		})
	}
	for _, entry := range cp.Log {
		entry.Seq = l.nextSeq
		l.nextSeq++
	}
	now := l.engine.cfg.Clock()
	if !cp.Release && cp.Lease == 0 && !now.Before(l.renewAt) {
		cp.Lease = l.engine.cfg.Lease
	}
	// The end of a capacity-limited execution hands its slot to a queued one in the same
	// transaction: the pollers should take that one up at once.
	wake := len(cp.Children) > 0 || cp.ContinueAsNew != nil || cp.Status.Terminal() && (l.Row.ParentID != uuid.Nil || l.engine.isLimited(l.Row.Type))
	var observed *Committed
	if l.engine.observers != nil {
		observed = l.observation(cp, now)
	}
	// starts: this checkpoint is the execution's first real step (the metrics count it started).
	starts := l.unstarted && (!onlyLifecycleEntries(cp.Log) || cp.Status.Terminal() || cp.Status == driver.ExecutionWaitingForTSQ)
	cp.SuspendOutbox = nil
	if toOutbox, on := l.engine.lifecycleOn(); on {
		after := observed
		if after == nil {
			after = l.observation(cp, now)
		}
		lastSeq := l.nextSeq - 1 - len(cp.Log)
		events := deriveLifecycle(l.Row, &after.Row, cp, lastSeq, now)
		// The children and the successor this checkpoint inserts start with it.
		inserted := cp.Children
		if cp.ContinueAsNew != nil {
			inserted = append(slices.Clip(inserted), cp.ContinueAsNew)
		}
		if len(inserted) > 0 {
			events = append(events, attachStarted(toOutbox, inserted, l.Row, now)...)
		}
		if observed != nil {
			observed.Events = events
		}
		if toOutbox != nil && len(events) > 0 {
			cp.Outbox = append(cp.Outbox, toOutbox(&after.Row, events)...)
		}
		if toOutbox != nil && cp.Release && !cp.Status.Terminal() && cp.Status != driver.ExecutionSuspended {
			// Should an operator's suspend request be pending, the driver stores SUSPENDED on this
			// release and writes this event with it.
			cp.SuspendOutbox = toOutbox(&after.Row, []*cbtype.LifecycleEvent{suspendedOnRelease(&after.Row, cp, lastSeq, now)})
		}
	}
	if err := l.engine.checkpointer.write(ctx, cp, wake, observed); err != nil {
		l.nextSeq -= len(cp.Log)
		cp.Outbox = cp.Outbox[:outboxBefore] // a retry derives them again
		return err
	}
	if cp.Lease > 0 {
		l.renewAt = now.Add(cp.Lease / 2)
	}
	prev := l.Row.Status
	l.apply(cp, now)
	if m := l.engine.cfg.Metrics; m != nil {
		m.Checkpointed(prev, l.Row, cp.Log, starts, now)
	}
	if starts {
		l.unstarted = false
	}
	l.applySuspension(cp)
	l.rememberLog(cp, now)
	l.engine.wakeups.checkpointed(cp, now)
	if cp.Release && l.engine.wakeups.count.Load() != l.wakeups {
		// A wake-up went by while this execution was leased: it may have been this execution's
		// (a timer fell due, a signal arrived), found nothing to claim, and would otherwise wait
		// for the next poll.
		l.engine.wakeups.pokeQuiet()
	}
	return nil
}

// stampIssuer gives the commands that name no tenant the execution's, and those that name no
// cause the execution as their cause: the execution issued them.
func stampIssuer(commands []*driver.CommandInsertParams, row *driver.ExecutionRow) {
	for _, cmd := range commands {
		if cmd.TenantID == "" {
			cmd.TenantID = row.TenantID
		}
		if cmd.CausationID == uuid.Nil {
			cmd.CausationID = row.ID
		}
	}
}

// stampTraceparent gives the commands that carry no traceparent header the execution's.
func stampTraceparent(commands []*driver.CommandInsertParams, traceparent string) {
	if traceparent == "" {
		return
	}
	for _, cmd := range commands {
		if _, set := cmd.Headers[tracecontext.Header]; set {
			continue
		}
		headers := make(map[string]string, len(cmd.Headers)+1)
		for k, v := range cmd.Headers {
			headers[k] = v
		}
		headers[tracecontext.Header] = traceparent
		cmd.Headers = headers
	}
}

// logsContinuedAsNew reports whether entries hold the CONTINUED_AS_NEW entry already (a
// checkpoint written again after a failure).
func logsContinuedAsNew(entries []*driver.ExecutionLogEntry) bool {
	for _, e := range entries {
		if e.EntryType == "LIFECYCLE" && e.Name == driver.EntryContinuedAsNew {
			return true
		}
	}
	return false
}

// rememberLog extends the known log with a committed checkpoint's entries and caches it when the
// execution is released to wait; a finished execution's log is dropped from the cache.
func (l *Lease) rememberLog(cp *driver.ExecutionCheckpoint, now time.Time) {
	cache := l.engine.logs
	if cp.Status.Terminal() || !l.logKnown {
		cache.forget(l.Row.ID)
		return
	}
	for _, entry := range cp.Log {
		entry.ExecutionID = l.Row.ID
		if entry.At.IsZero() {
			entry.At = now
		}
	}
	l.log = append(l.log, cp.Log...)
	if cp.Release {
		cache.remember(l.Row.ID, l.log)
	}
}

// apply mirrors a committed checkpoint into Row.
func (l *Lease) apply(cp *driver.ExecutionCheckpoint, now time.Time) { applyCheckpoint(l.Row, cp, now) }

// applyCheckpoint mirrors a checkpoint into r.
func applyCheckpoint(r *driver.ExecutionRow, cp *driver.ExecutionCheckpoint, now time.Time) {
	r.Status, r.Step, r.CurrentWait, r.Retries = cp.Status, cp.Step, cp.CurrentWait, cp.Retries
	r.NextRetryAt, r.NextWaitTimeoutAt = cp.NextRetryAt, cp.NextWaitTimeoutAt
	if cp.RetryDelay > 0 {
		t := now.Add(cp.RetryDelay)
		r.NextRetryAt = &t
	}
	if cp.WaitTimeout > 0 {
		t := now.Add(cp.WaitTimeout)
		r.NextWaitTimeoutAt = &t
	}
	if cp.DeadlineAt != nil {
		r.DeadlineAt = cp.DeadlineAt
	}
	if cp.State != nil {
		r.State = cp.State
	}
	r.ResponsesApplied, r.ErrorCode, r.ErrorMessage = cp.ResponsesApplied, cp.ErrorCode, cp.ErrorMessage
	r.UpdatedAt = now
	if cp.ContinueAsNew != nil {
		r.ContinuedAs = cp.ContinueAsNew.ID
		r.ResponsesApplied = r.ResponsesReceived // the rest moved to the successor
	}
	if cp.Status.Terminal() && r.CompletedAt == nil {
		r.CompletedAt = &now
	}
}

// Release lets go of the execution without changing it.
func (l *Lease) Release(ctx context.Context) error {
	cp := l.Base()
	cp.Release = true
	return l.Checkpoint(ctx, cp)
}
