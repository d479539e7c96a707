package execution

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/tracing"
)

// ErrTenantRequired means an execution of a capacity-limited type was started without a tenant.
var ErrTenantRequired = errors.New("execution: a capacity-limited type needs a tenant id")

// AdmissionRecorder is told what capacity-limited admission did, for metrics. Every method may
// be called from several goroutines.
type AdmissionRecorder interface {
	// Admitted counts executions that got a slot of tenant, at their start or later.
	Admitted(tenant string, n int)
	// AtCapacity counts executions that stayed QUEUED at their start because tenant had no
	// free slot (a deferral, not an attempt).
	AtCapacity(tenant string, n int)
	// Failed counts executions the admission ended FAILED, by error code.
	Failed(code string, n int)
	// Cycle reports one round of the admission dispatcher: tenants served and its duration.
	Cycle(tenants int, took time.Duration)
	// LockFailures counts tenants a round skipped because another transaction held their row.
	LockFailures(n int)
	// StaleRecovered counts executions claimed from a runner whose lease had expired.
	StaleRecovered(n int)
}

type noAdmissionRecorder struct{}

func (noAdmissionRecorder) Admitted(string, int)     {}
func (noAdmissionRecorder) AtCapacity(string, int)   {}
func (noAdmissionRecorder) Failed(string, int)       {}
func (noAdmissionRecorder) Cycle(int, time.Duration) {}
func (noAdmissionRecorder) LockFailures(int)         {}
func (noAdmissionRecorder) StaleRecovered(int)       {}
func (e *Engine) recorder() AdmissionRecorder        { return e.cfg.Admission }
func (e *Engine) hasLimited() bool                   { e.mu.RLock(); defer e.mu.RUnlock(); return len(e.limited) > 0 }
func (e *Engine) isLimited(typ string) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.limited[typ]
}

// SetCapacityLimited marks execution types as capacity-limited: their executions start QUEUED
// and run only while their tenant holds fewer slots than its limit (see package tenant). Call it
// before Start.
func (e *Engine) SetCapacityLimited(types ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.limited == nil {
		e.limited = map[string]bool{}
	}
	for _, t := range types {
		e.limited[t] = true
	}
}

// CapacityLimited reports whether typ is capacity-limited.
func (e *Engine) CapacityLimited(typ string) bool { return e.isLimited(typ) }

// prepareLimited returns the executions of capacity-limited types, which it makes pending (no
// immediate start: a slot decides when they run). It fails, before anything is written, when one
// has no tenant.
func (e *Engine) prepareLimited(executions []*driver.ExecutionInsertParams) ([]*driver.ExecutionInsertParams, error) {
	if !e.hasLimited() {
		return nil, nil
	}
	var limited []*driver.ExecutionInsertParams
	for _, x := range executions {
		if !e.isLimited(x.Type) {
			continue
		}
		if x.TenantID == "" {
			return nil, fmt.Errorf("%w (type %q)", ErrTenantRequired, x.Type)
		}
		x.Lease = 0
		limited = append(limited, x)
	}
	return limited, nil
}

// InsertIn creates executions through exec (the caller's transaction, or the pool) as Insert
// does, without leasing any: the ones of capacity-limited types are queued and admitted in the
// same transaction. The caller wakes the pollers after its commit (Wake).
func (e *Engine) InsertIn(ctx context.Context, exec driver.Executor, executions []*driver.ExecutionInsertParams) ([]uuid.UUID, error) {
	limited, err := e.prepareLimited(executions)
	if err != nil {
		return nil, err
	}
	return e.insertQueued(ctx, exec, executions, limited, e.cfg.Now())
}

// insertQueued inserts executions and queues the limited ones among those it inserted, in one
// transaction (a savepoint of exec's when exec is one).
func (e *Engine) insertQueued(ctx context.Context, exec driver.Executor, executions, limited []*driver.ExecutionInsertParams, now *time.Time) ([]uuid.UUID, error) {
	if len(limited) == 0 {
		params := &driver.ExecutionInsertManyParams{Executions: executions, Now: now}
		params.OutboxHandoff = e.checkpointer.handoff.Load() // the EXECUTION_STARTED events, to this instance's relay
		return exec.ExecutionInsertMany(ctx, params)
	}
	ctx, end := e.admissionSpan(ctx, "enqueue")
	defer end()
	var inserted []uuid.UUID
	var admissions []*driver.TenantAdmission
	perTenant := map[string]int{}
	err := driver.WithTx(ctx, exec, func(tx driver.ExecutorTx) error {
		var err error
		if inserted, err = tx.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{Executions: executions, Now: now}); err != nil {
			return err
		}
		isNew := make(map[uuid.UUID]bool, len(inserted))
		for _, id := range inserted {
			isNew[id] = true
		}
		var queue []uuid.UUID
		clear(perTenant)
		for _, x := range limited {
			if isNew[x.ID] {
				isNew[x.ID] = false
				queue = append(queue, x.ID)
				perTenant[x.TenantID]++
			}
		}
		admissions, err = tx.ExecutionQueue(ctx, &driver.ExecutionQueueParams{IDs: queue, Now: now})
		return err
	})
	if err != nil {
		return nil, err
	}
	e.recordEnqueued(admissions, perTenant)
	return inserted, nil
}

// recordEnqueued logs and counts what the admission at insert did: executions that waited for a
// slot (a deferral, never an attempt), admitted, or failed.
func (e *Engine) recordEnqueued(admissions []*driver.TenantAdmission, perTenant map[string]int) {
	rec := e.recorder()
	for _, a := range admissions {
		if a.Admitted > 0 {
			rec.Admitted(a.TenantID, a.Admitted)
		}
		if a.Failed > 0 {
			code := driver.CodeTenantNotFound
			if a.Status == driver.TenantDeleted {
				code = driver.CodeTenantDeleted
			}
			rec.Failed(code, a.Failed)
			e.cfg.Logger.Warn("executions of a missing or deleted tenant ended FAILED", "tenant_id", a.TenantID, "failed", a.Failed, "error_code", code)
		}
		waiting := perTenant[a.TenantID] - a.Admitted - a.Failed
		if waiting <= 0 {
			continue
		}
		switch a.Status {
		case driver.TenantSuspended:
			e.cfg.Logger.Info("tenant suspended; executions held in the queue", "tenant_id", a.TenantID, "queued", waiting)
		default:
			rec.AtCapacity(a.TenantID, waiting)
			e.cfg.Logger.Info("tenant at capacity; executions queued", "tenant_id", a.TenantID,
				"active", a.Held, "limit", a.MaxActive, "queued", waiting)
		}
	}
}

// admissionSpan starts the tracing span of an admission step: "enqueue" (queuing and admitting
// new executions, a child of the caller's span) or "round" (one dispatcher round). It returns the
// context to use inside the step and the function that ends the span.
func (e *Engine) admissionSpan(ctx context.Context, step string) (context.Context, func()) {
	ctx, span := e.cfg.Tracer.Start(ctx, tracing.SpanAdmission)
	if span.IsRecording() {
		span.SetAttributes(tracing.String("commandbus.admission.step", step))
	}
	return ctx, func() { span.End() }
}

// admissionLockRetry is how soon a round runs again after it found tenants locked.
const admissionLockRetry = 10 * time.Millisecond

// admitRound is one round of the admission dispatcher: tenants with queued executions and a
// free slot, served longest ago first. It reports whether the round was full (more may wait).
func (e *Engine) admitRound(ctx context.Context) bool {
	ctx, end := e.admissionSpan(ctx, "round")
	defer end()
	started := time.Now()
	batch := e.cfg.AdmissionBatch
	round, err := e.cfg.Exec.TenantAdmitNext(ctx, &driver.TenantAdmitNextParams{
		MaxTenants: batch, MaxPerTenant: e.cfg.AdmissionPerTenant, Now: e.cfg.Now(),
	})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("admission round failed; will retry at the next poll", "error", err)
		}
		return false
	}
	rec := e.recorder()
	rec.Cycle(len(round), time.Since(started))
	admitted, locked := 0, 0
	for _, a := range round {
		if a.Locked {
			locked++
			continue
		}
		if a.Admitted > 0 {
			admitted += a.Admitted
			rec.Admitted(a.TenantID, a.Admitted)
		}
	}
	if locked > 0 {
		// Another transaction holds those tenants' rows (an admission at a start, an update):
		// try them again shortly rather than at the next poll, since a slot freed meanwhile may
		// be waiting for exactly this round.
		rec.LockFailures(locked)
		time.AfterFunc(admissionLockRetry, func() {
			select {
			case e.admissionRetry <- struct{}{}:
			default:
			}
		})
	}
	if len(round) > 0 {
		e.cfg.Logger.Debug("admission round", "tenants", len(round), "admitted", admitted, "locked", locked)
	}
	if admitted > 0 {
		e.wakeups.poke()
	}
	return len(round) == batch && admitted > 0
}

// failUnknown ends FAILED the queued (and admitted, never run) executions whose type no runner
// of this engine has.
func (e *Engine) failUnknown(ctx context.Context) {
	types := e.types()
	if len(types) == 0 {
		return
	}
	ids, err := e.cfg.Exec.ExecutionFailUnknown(ctx, &driver.ExecutionFailUnknownParams{KnownTypes: types, Now: e.cfg.Now()})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("failing executions of unknown definitions failed", "error", err)
		}
		return
	}
	if len(ids) > 0 {
		e.recorder().Failed(driver.CodeUnknownDefinition, len(ids))
		sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
		e.cfg.Logger.Warn("queued executions of an unknown definition ended FAILED", "executions", len(ids), "execution_ids", ids)
		e.wakeups.poke()
	}
}

// recordStale counts and logs the claimed executions whose previous runner's lease had expired.
func (e *Engine) recordStale(rows []*driver.ExecutionRow) {
	n := 0
	for _, r := range rows {
		if r.StaleLease {
			n++
		}
	}
	if n == 0 {
		return
	}
	e.recorder().StaleRecovered(n)
	ids := make([]uuid.UUID, 0, n)
	for _, r := range rows {
		if r.StaleLease {
			ids = append(ids, r.ID)
		}
	}
	e.cfg.Logger.Info("recovered stale executions (their runner's lease expired)", "recovered", n, "execution_ids", ids)
}

// CancelQueued cancels an execution of model and typ that is still QUEUED (waiting for a slot of
// its tenant) for an operator: no runner can hold it, so no lease is taken. In one transaction
// it ends CANCELLED with an action entry in its log (named "cancel", details as request), its
// EXECUTION_COMPLETED lifecycle event and the audit row. The update is conditioned on QUEUED,
// so an admission racing it either comes first (CancelQueued then returns driver.ErrConflict and
// the caller takes the running path) or finds the execution gone: a cancelled queued execution
// never held a slot. Errors: driver.ErrNotFound, driver.ErrConflict when it is not a queued
// execution of model and typ.
func (e *Engine) CancelQueued(ctx context.Context, id uuid.UUID, model, typ, action, actor, reason string, details []byte) (*driver.ExecutionRow, error) {
	var events bool
	row, err := e.cfg.Exec.ExecutionCancelQueued(ctx, &driver.ExecutionCancelQueuedParams{
		ID: id, Model: model, Type: typ, Action: action, Actor: actor, Reason: reason, Details: details, Now: e.cfg.Now(),
		Outbox: e.changeOutbox(cbtype.EventExecutionCompleted, actor, reason, &events),
	})
	if err != nil {
		return nil, err
	}
	if events {
		e.notifyOutbox(ctx)
	}
	e.logs.forget(id) // the log grew outside a lease
	if m := e.cfg.Metrics; m != nil {
		m.Checkpointed(driver.ExecutionQueued, row, nil, false, e.cfg.Clock()) // counted as ended
	}
	e.cfg.Logger.Info("queued execution cancelled; it never held a slot", "execution_id", id, "tenant_id", row.TenantID,
		"type", typ, "actor", actor)
	return row, nil
}
