// Package execution is the durable execution core shared by every authoring model (sequential
// processes, sagas, TCC, workflows). It owns what all of them need and none of them should
// reimplement: creating executions, claiming them with leases and fencing, the four pollers
// (pending, due retries, wait timeouts, deadlines), group-committed checkpoints, durable
// async responses, and the TSQ bookkeeping. A model only decides what runs next: it implements
// Runner and writes its progress through Lease.Checkpoint.
//
// For models with several things in flight at once, the engine also keeps named signals
// (buffered until a runner consumes them), durable timers and open waits with timeouts. A runner
// reads them through its lease (Signals, DueTimers, Waits, ExpiredWaits) and changes them in its
// checkpoints; the execution's wake_at follows its earliest timer or wait timeout, so the pending
// poller takes it up when one is due, and this instance also wakes its poller in memory then.
//
// This package holds no SQL (that is the drivers') and imports nothing of the models.
package execution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/startstop"
	"github.com/commandbus/commandbus/tracing"
)

// ErrFenced means a checkpoint was rejected because another runner has since taken the
// execution (this runner's lease expired). The runner must stop at once.
var ErrFenced = errors.New("execution: lease lost to another runner (fence moved)")

// ErrBusy means another runner holds the execution's lease right now.
var ErrBusy = errors.New("execution: another runner holds it")

// Runner drives executions of one type. The engine calls it with an execution leased to this
// instance; the runner makes progress with Lease.Checkpoint and must end by releasing the lease
// (a checkpoint with Release) unless it was fenced.
type Runner interface {
	// Type is the execution type this runner drives.
	Type() string
	// Run continues an execution from its log.
	Run(ctx context.Context, lease *Lease) error
	// Deadline applies the type's deadline action to an execution whose deadline passed.
	Deadline(ctx context.Context, lease *Lease) error
}

// Config configures an Engine.
type Config struct {
	Exec     driver.Executor
	WorkerID string
	Logger   *slog.Logger
	// Now returns the time to pass to the driver (nil: the database clock).
	Now func() *time.Time
	// Clock is the engine's notion of now for decisions made in Go.
	Clock func() time.Time
	// Lease is how long a runner owns an execution before another may take it over.
	Lease time.Duration
	// Concurrency bounds executions run at once by the pollers of this instance.
	Concurrency           int
	PendingPollInterval   time.Duration
	RetryPollInterval     time.Duration
	TimeoutCheckInterval  time.Duration
	DeadlineCheckInterval time.Duration
	// Wake signals that executions may be runnable (a notification).
	Wake <-chan struct{}
	// Notify sends wake-up topics after a checkpoint committed (command queues).
	Notify func(ctx context.Context, topics []string)
	// Signal, when set, wakes this instance's subscribers of topics at once, before Notify's
	// round trip reaches the other instances: the engine signals OutboxTopic, so the relay of
	// this instance starts publishing a commit's lifecycle events as soon as it committed.
	Signal func(topics ...string)
	// CommandOutbox, when set, returns the outbox messages that deliver a checkpoint's commands
	// through their domains' brokers; they are written in the checkpoint's transaction.
	CommandOutbox func(cmds []*driver.CommandInsertParams) ([]*driver.OutboxInsertParams, error)
	// LogCache is how many waiting executions' logs the engine keeps in memory, so resuming one
	// reads only the entries added since it let go. 0 means DefaultLogCache; negative turns it off.
	LogCache int
	// Observer, when set, is told about every checkpoint and insert after it committed (see
	// Observer).
	Observer Observer
	// Tracer creates the spans of runs, checkpoints and resumed waits, and is handed to the
	// models' steps through the run's context (package tracing). Nil: no spans.
	Tracer *tracing.Tracer
	// ObserverQueue is how many observations wait for a slow observer before further ones are
	// dropped. 0 means DefaultObserverQueue.
	ObserverQueue int

	// Admission is told what capacity-limited admission did (nil: nothing).
	Admission AdmissionRecorder
	// AdmissionPollInterval is how often the admission dispatcher runs a round without being
	// woken (a slot freed while its tenant's row was locked, a raised limit). 0 means 1s.
	AdmissionPollInterval time.Duration
	// AdmissionWake wakes the admission dispatcher (the admission topic).
	AdmissionWake <-chan struct{}
	// AdmissionBatch is how many tenants one round serves at most. 0 means 100.
	AdmissionBatch int
	// AdmissionPerTenant caps what one round admits per tenant, so a round serves many tenants
	// fairly. 0 means up to the tenant's free slots.
	AdmissionPerTenant int
	// UnknownDefinitionCheckInterval is how often queued executions of types no runner of this
	// instance has are ended FAILED (UNKNOWN_DEFINITION). 0 means 10s; negative turns it off
	// (for instances that do not run every capacity-limited type).
	UnknownDefinitionCheckInterval time.Duration
	// Metrics, when set, is told about every committed checkpoint and every rescued execution.
	Metrics Metrics
}

// WakeTopic is the notification topic that wakes the pending poller.
const WakeTopic = "executions"

// Engine runs executions.
type Engine struct {
	cfg          Config
	checkpointer *checkpointer
	acquirer     *acquirer
	logs         *logCache
	observers    *observers // nil without an observer
	wakeups      *wakeups
	dueTimers    *dueTimerReader
	// nextWakeAsked is when the pending poller last asked for the next wake-up (its goroutine only).
	nextWakeAsked time.Time

	mu      sync.RWMutex
	runners map[string]Runner
	// limited are the capacity-limited types (guarded by mu).
	limited map[string]bool
	// admissionRetry runs the admission dispatcher again soon (a round found tenants locked).
	admissionRetry chan struct{}
	// lifecycleOutbox and lifecycleObserved turn lifecycle events on (SetLifecycle; guarded by mu).
	lifecycleOutbox   LifecycleOutbox
	lifecycleObserved bool

	slots chan struct{}
	// base gives the engine the start/stop shape of every service; cancel ends the current run's
	// executions (guarded by mu).
	base   startstop.Base
	cancel context.CancelFunc
}

// New returns an engine; register runners, then Start it.
func New(cfg Config) *Engine {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = func() *time.Time { return nil }
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 50
	}
	if cfg.Admission == nil {
		cfg.Admission = noAdmissionRecorder{}
	}
	if cfg.AdmissionPollInterval <= 0 {
		cfg.AdmissionPollInterval = time.Second
	}
	if cfg.AdmissionBatch <= 0 {
		cfg.AdmissionBatch = 100
	}
	if cfg.UnknownDefinitionCheckInterval == 0 {
		cfg.UnknownDefinitionCheckInterval = 10 * time.Second
	}
	e := &Engine{
		cfg:     cfg,
		runners: map[string]Runner{},
		slots:   make(chan struct{}, cfg.Concurrency),

		admissionRetry: make(chan struct{}, 1),
	}
	if cfg.Observer != nil {
		e.observers = newObservers(cfg.Observer, cfg.ObserverQueue, cfg.Logger)
	}
	e.checkpointer = newCheckpointer(cfg.Exec, cfg.Now, cfg.Logger, cfg.Notify, e.observers)
	e.checkpointer.signal = cfg.Signal
	e.acquirer = newAcquirer(e)
	e.logs = newLogCache(cfg.LogCache)
	e.wakeups = newWakeups(cfg.Clock)
	e.dueTimers = newDueTimerReader(cfg.Exec, cfg.Now)
	return e
}

// Register adds a runner; it fails when the type is taken.
func (e *Engine) Register(r Runner) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.runners[r.Type()]; dup {
		return fmt.Errorf("execution type %q is already registered", r.Type())
	}
	e.runners[r.Type()] = r
	return nil
}

func (e *Engine) runner(typ string) Runner {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.runners[typ]
}

func (e *Engine) types() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	types := make([]string, 0, len(e.runners))
	for t := range e.runners {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}

// SetPace makes each group of checkpoints that writes outbox messages (lifecycle events,
// commands for a broker) call pace before its write; pace may wait to slow the writers down (see
// outbox.Relay.Pace). Nil removes it.
func (e *Engine) SetPace(pace func(ctx context.Context)) {
	if pace == nil {
		e.checkpointer.pace.Store(nil)
		return
	}
	e.checkpointer.pace.Store(&pace)
}

// SetHandoff hands the outbox messages each group of checkpoints (and each start) writes to a
// relay in this process (driver.OutboxHandoff, outbox.Relay.Handoff): written leased to it, they
// are given to it right after their commit and it publishes them at once. No relay is woken for
// them: the one handed them wakes its claims for what it does not take. Nil removes it.
func (e *Engine) SetHandoff(handoff *driver.OutboxHandoff) {
	e.checkpointer.handoff.Store(handoff)
}

// Exec returns the executor.
func (e *Engine) Exec() driver.Executor { return e.cfg.Exec }

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Start runs the pollers. Starting a running engine does nothing; a stopped engine can start
// again.
func (e *Engine) Start(context.Context) error {
	stop, ok := e.base.StartInit()
	if !ok {
		return nil
	}
	runCtx, cancel := context.WithCancel(context.Background())
	e.mu.Lock()
	e.cancel = cancel
	e.mu.Unlock()
	pollers := []struct {
		name     string
		interval time.Duration
		wake     <-chan struct{}
		local    <-chan struct{} // this instance's own wake-ups (signals sent, timers due)
		poll     func(ctx context.Context) (more bool)
	}{
		{"pending", e.cfg.PendingPollInterval, e.cfg.Wake, e.wakeups.local, func(ctx context.Context) bool {
			claimed := e.cfg.Clock()
			more := e.claimAndRun(ctx, driver.ClaimPending)
			if !more {
				e.scheduleNextWake(ctx, e.cfg.PendingPollInterval, claimed)
			}
			return more
		}},
		{"retry", e.cfg.RetryPollInterval, nil, nil, func(ctx context.Context) bool { return e.claimAndRun(ctx, driver.ClaimRetry) }},
		{"wait-timeout", e.cfg.TimeoutCheckInterval, nil, nil, func(ctx context.Context) bool { return e.handleDue(ctx, driver.DueWaitTimeout) }},
		{"deadline", e.cfg.DeadlineCheckInterval, nil, nil, func(ctx context.Context) bool { return e.handleDue(ctx, driver.DueDeadline) }},
	}
	if e.hasLimited() {
		pollers = append(pollers, struct {
			name     string
			interval time.Duration
			wake     <-chan struct{}
			local    <-chan struct{}
			poll     func(ctx context.Context) (more bool)
		}{"admission", e.cfg.AdmissionPollInterval, e.cfg.AdmissionWake, e.admissionRetry, e.admitRound})
		if e.cfg.UnknownDefinitionCheckInterval > 0 {
			pollers = append(pollers, struct {
				name     string
				interval time.Duration
				wake     <-chan struct{}
				local    <-chan struct{}
				poll     func(ctx context.Context) (more bool)
			}{"unknown-definitions", e.cfg.UnknownDefinitionCheckInterval, nil, nil, func(ctx context.Context) bool {
				e.failUnknown(ctx)
				return false
			}})
		}
	}
	for _, p := range pollers {
		e.base.Go(func() { e.pollLoop(runCtx, stop, p.interval, p.wake, p.local, p.poll) })
	}
	return nil
}

// Stop stops polling, waits for running executions until ctx ends, then cancels them; their
// leases run out and another instance resumes them.
func (e *Engine) Stop(ctx context.Context) error {
	if !e.base.StopInit() {
		return nil
	}
	e.mu.RLock()
	cancel := e.cancel
	e.mu.RUnlock()
	done := e.base.Done()
	select {
	case <-done:
	case <-ctx.Done():
		cancel()
		<-done
	}
	cancel()
	e.wakeups.stop()
	e.acquirer.group.Wait()
	e.dueTimers.group.Wait()
	e.checkpointer.group.Wait()
	if e.observers != nil {
		e.observers.wait(ctx)
	}
	e.base.Stopped()
	return nil
}

func (e *Engine) pollLoop(ctx context.Context, stop <-chan struct{}, interval time.Duration, wake, local <-chan struct{}, poll func(ctx context.Context) bool) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		for poll(ctx) {
			select {
			case <-stop:
				return
			default:
			}
		}
		select {
		case <-stop:
			return
		case <-ticker.C:
		case <-wake:
		case <-local:
		}
	}
}

// claimAndRun claims runnable executions for free slots and runs each in its own goroutine. It
// reports whether it filled every slot it asked for (more work is likely waiting).
func (e *Engine) claimAndRun(ctx context.Context, kind driver.ExecutionClaimKind) bool {
	types := e.types()
	if len(types) == 0 {
		return false
	}
	free := cap(e.slots) - len(e.slots)
	if free == 0 {
		return false
	}
	want := min(free, 100)
	rows, err := e.cfg.Exec.ExecutionClaim(ctx, &driver.ExecutionClaimParams{
		Kind: kind, Types: types, Max: want, Lease: e.cfg.Lease, WorkerID: e.cfg.WorkerID, Now: e.cfg.Now(),
	})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("claiming executions failed; will retry at the next poll", "kind", kind, "error", err)
		}
		return false
	}
	e.recordStale(rows)
	if m := e.cfg.Metrics; m != nil && kind == driver.ClaimPending {
		for _, row := range rows {
			if rescued(row) {
				m.Rescued(row)
			}
		}
	}
	for _, lease := range e.preload(ctx, rows) {
		e.slots <- struct{}{}
		e.base.Go(func() {
			defer func() { <-e.slots }()
			e.run(ctx, lease)
		})
	}
	return len(rows) == want
}

// preload reads the logs and unapplied responses of claimed executions in one round trip, so
// their runners need not read them one by one. If it fails, each runner reads its own.
func (e *Engine) preload(ctx context.Context, rows []*driver.ExecutionRow) []*Lease {
	leases := make([]*Lease, len(rows))
	params := &driver.ExecutionLoadManyParams{IDs: make([]uuid.UUID, len(rows)), AfterSeq: make([]int64, len(rows))}
	for i, row := range rows {
		leases[i] = e.newLease(row)
		params.IDs[i], params.AfterSeq[i] = row.ID, row.ResponsesApplied
	}
	if len(rows) == 0 {
		return leases
	}
	var cached [][]*driver.ExecutionLogEntry
	cached, params.LogAfterSeq = e.logs.logAfterSeqs(params.IDs)
	loaded, err := e.cfg.Exec.ExecutionLoadMany(ctx, params)
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("reading the logs of claimed executions failed; each runner reads its own", "executions", len(rows), "error", err)
		}
		return leases
	}
	for i, lease := range leases {
		x := loaded[lease.Row.ID]
		var ok bool
		if x.Log, ok = e.logs.join(lease.Row.ID, cached[i], x.Log); ok {
			lease.loaded = x
		}
	}
	return leases
}

// run hands a leased execution to its runner.
func (e *Engine) run(ctx context.Context, lease *Lease) {
	r := e.runner(lease.Row.Type)
	if r == nil {
		e.cfg.Logger.Error("no runner for execution type; leaving it for an instance that has one", "execution_id", lease.Row.ID, "type", lease.Row.Type)
		return
	}
	if err := r.Run(ctx, lease); err != nil && !errors.Is(err, context.Canceled) {
		e.cfg.Logger.Warn("execution run ended with an error", "execution_id", lease.Row.ID, "type", lease.Row.Type, "error", err)
	}
}

// handleDue takes executions whose wait timed out or whose deadline passed.
func (e *Engine) handleDue(ctx context.Context, kind driver.ExecutionDueKind) bool {
	types := e.types()
	if len(types) == 0 {
		return false
	}
	const max = 100
	rows, err := e.cfg.Exec.ExecutionListDue(ctx, &driver.ExecutionListDueParams{Kind: kind, Types: types, Max: max, Now: e.cfg.Now()})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("listing due executions failed", "kind", kind, "error", err)
		}
		return false
	}
	handled := 0
	for _, row := range rows {
		lease, err := e.Acquire(ctx, row.ID)
		if errors.Is(err, ErrBusy) {
			continue // running right now; the next check sees it again if still due
		}
		if err != nil {
			e.cfg.Logger.Warn("acquiring a due execution failed", "execution_id", row.ID, "error", err)
			continue
		}
		handled++
		switch kind {
		case driver.DueWaitTimeout:
			err = e.waitTimedOut(ctx, lease)
		case driver.DueDeadline:
			err = e.deadline(ctx, lease)
		}
		if err != nil && !errors.Is(err, ErrFenced) {
			e.cfg.Logger.Warn("handling a due execution failed", "execution_id", row.ID, "kind", kind, "error", err)
		}
	}
	return len(rows) == max && handled > 0
}

// waitTimedOut moves an execution whose wait expired to the troubleshooting queue.
func (e *Engine) waitTimedOut(ctx context.Context, lease *Lease) error {
	row := lease.Row
	now := e.cfg.Clock()
	if row.Status != driver.ExecutionWaitingForAsync || row.NextWaitTimeoutAt == nil || now.Before(*row.NextWaitTimeoutAt) ||
		row.ResponsesReceived > row.ResponsesApplied {
		// Things moved on (or a response is waiting to be applied): let the runner decide.
		return lease.Release(ctx)
	}
	e.cfg.Logger.Warn("wait timed out; execution moved to the troubleshooting queue", "execution_id", row.ID, "type", row.Type, "wait", row.CurrentWait)
	return lease.Checkpoint(ctx, &driver.ExecutionCheckpoint{
		Status: driver.ExecutionWaitingForTSQ, CurrentWait: row.CurrentWait, Step: row.Step,
		ErrorCode: "WAIT_TIMEOUT", ErrorMessage: fmt.Sprintf("wait %q timed out", row.CurrentWait),
		Release: true,
		Log: []*driver.ExecutionLogEntry{{EntryType: "WAIT", Name: row.CurrentWait, StepStatus: "TIMED_OUT",
			ErrorCode: "WAIT_TIMEOUT", ErrorMessage: "no response before the wait's timeout"}},
	})
}

func (e *Engine) deadline(ctx context.Context, lease *Lease) error {
	row := lease.Row
	if driver.DeadlineHandled(row) || row.DeadlineAt == nil || e.cfg.Clock().Before(*row.DeadlineAt) {
		return lease.Release(ctx)
	}
	r := e.runner(row.Type)
	if r == nil {
		return lease.Release(ctx)
	}
	return r.Deadline(ctx, lease)
}

// Acquire leases one execution to this instance for an immediate operation (an async response,
// an operator action). It returns ErrBusy when another runner holds it.
func (e *Engine) Acquire(ctx context.Context, id uuid.UUID) (*Lease, error) {
	row, err := e.cfg.Exec.ExecutionAcquire(ctx, &driver.ExecutionAcquireParams{ID: id, Lease: e.cfg.Lease, WorkerID: e.cfg.WorkerID, Now: e.cfg.Now()})
	if errors.Is(err, driver.ErrConflict) {
		return nil, ErrBusy
	}
	if err != nil {
		return nil, err
	}
	return e.newLease(row), nil
}

// AcquireLoad is Acquire plus reading the log. Concurrent calls share one round trip: under load,
// the replies that resume executions are acquired in batches.
func (e *Engine) AcquireLoad(ctx context.Context, id uuid.UUID) (*Lease, error) {
	return e.acquirer.acquire(ctx, id)
}

// Insert creates executions. An id that exists already is skipped (the insert is idempotent):
// its lease is nil, so a caller never runs an execution it did not create. New executions with
// a Lease are returned leased to this instance (immediate start), in input order; new pending
// ones wake the pollers.
//
// Executions of capacity-limited types (SetCapacityLimited) need a tenant; they are never
// leased here: they are queued and, in the same transaction, admitted into their tenant's free
// slots, and the pollers run the admitted ones.
func (e *Engine) Insert(ctx context.Context, executions []*driver.ExecutionInsertParams) ([]*Lease, error) {
	StampStartTrace(ctx, executions)
	limited, err := e.prepareLimited(executions)
	if err != nil {
		return nil, err
	}
	now := e.cfg.Now()
	created := e.cfg.Clock()
	var started []*cbtype.LifecycleEvent
	if toOutbox, on := e.lifecycleOn(); on {
		// Each new execution's EXECUTION_STARTED is written in the insert's transaction.
		started = attachStarted(toOutbox, executions, nil, created)
	}
	var observed []*observation
	if e.observers != nil {
		for i, x := range executions {
			c := insertedObservation(x, created)
			if started != nil && e.lifecycleObserved {
				c.Events = started[i : i+1]
			}
			observed = append(observed, e.observers.reserve(c))
		}
	}
	inserted, err := e.insertQueued(ctx, e.cfg.Exec, executions, limited, now)
	if observed != nil {
		// Only executions this call created are observed (an id that existed is not), once.
		created := make(map[uuid.UUID]bool, len(inserted))
		for _, id := range inserted {
			created[id] = true
		}
		for i, ob := range observed {
			id := executions[i].ID
			ob.resolve(err == nil && created[id])
			created[id] = false
		}
	}
	if err != nil {
		return nil, err
	}
	isNew := make(map[uuid.UUID]bool, len(inserted))
	for _, id := range inserted {
		isNew[id] = true
	}
	leases := make([]*Lease, len(executions))
	pending := false
	for i, x := range executions {
		if !isNew[x.ID] {
			continue
		}
		isNew[x.ID] = false // an id given twice is created once
		if x.Lease <= 0 {
			pending = true
			continue
		}
		leases[i] = e.newLease(&driver.ExecutionRow{
			ID: x.ID, Model: x.Model, Type: x.Type, Domain: x.Domain, TenantID: x.TenantID,
			BusinessKey: x.BusinessKey, BatchID: x.BatchID, Status: driver.ExecutionExecuting,
			State: x.State, DeadlineAt: x.DeadlineAt, Fence: 1, WorkerID: e.cfg.WorkerID,
			CreatedAt: created, UpdatedAt: created, ClaimedFrom: driver.ExecutionPending,
			ParentID: x.ParentID, RootID: x.RootID, Traceparent: x.Traceparent,
		})
		if leases[i].Row.RootID == uuid.Nil && x.ParentID == uuid.Nil {
			leases[i].Row.RootID = x.ID
		}
		leases[i].nextSeq = len(x.Log) + 1
		leases[i].logKnown = len(x.Log) == 0 // a new execution's log is empty
		leases[i].unstarted = onlyLifecycleEntries(x.Log)
	}
	var topics []string
	if pending {
		topics = append(topics, WakeTopic)
	}
	if started != nil && len(inserted) > 0 && len(executions[0].Outbox) > 0 && (e.checkpointer.handoff.Load() == nil || len(limited) > 0) {
		topics = append(topics, OutboxTopic) // the relays, for the EXECUTION_STARTED events
	}
	if e.cfg.Signal != nil && slices.Contains(topics, OutboxTopic) {
		e.cfg.Signal(OutboxTopic) // this instance's relay at once
	}
	if pending {
		// The other instances. Without a pending execution there is no round trip: they hear
		// of a leased execution's EXECUTION_STARTED with its first checkpoint's notification.
		if err := e.cfg.Exec.Notify(ctx, topics); err != nil {
			e.cfg.Logger.Warn("waking the execution pollers and outbox relays failed; they will poll", "error", err)
		}
	}
	return leases, nil
}

// RecordResponse stores a response for an execution that another runner holds. That runner
// applies it before it lets go; one that lets go before the response is counted, or sees it only
// as it does, leaves the execution to a pending poller, so the pollers are woken now (and this
// instance's again when a lease it holds is released, see Lease.Checkpoint) rather than at their
// next poll.
func (e *Engine) RecordResponse(ctx context.Context, params *driver.ExecutionResponseInsertParams) (int64, error) {
	seq, err := e.cfg.Exec.ExecutionResponseInsert(ctx, params)
	if err != nil {
		return 0, err
	}
	e.wakeups.poke()
	e.Wake(ctx)
	return seq, nil
}

// Wake notifies the pending pollers of every instance.
func (e *Engine) Wake(ctx context.Context) {
	if err := e.cfg.Exec.Notify(ctx, []string{WakeTopic}); err != nil {
		e.cfg.Logger.Warn("waking the execution pollers failed; they will poll", "error", err)
	}
}

// RunLeased runs an execution this instance leased itself (immediate start, a response), in the
// caller's goroutine.
func (e *Engine) RunLeased(ctx context.Context, lease *Lease) error {
	r := e.runner(lease.Row.Type)
	if r == nil {
		_ = lease.Release(ctx)
		return fmt.Errorf("no runner registered for execution type %q", lease.Row.Type)
	}
	return r.Run(ctx, lease)
}
