package execution

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
)

// LifecycleOutbox turns the lifecycle events of one commit into the outbox messages written in
// that commit's transaction (the event sink's and the webhook callbacks'). row is the execution
// as the commit leaves it.
type LifecycleOutbox func(row *driver.ExecutionRow, events []*cbtype.LifecycleEvent) []*driver.OutboxInsertParams

// SetLifecycle turns lifecycle events on: outbox, when set, gets the events of every checkpoint to
// write them durably with it; observed attaches them to the observations (Committed.Events).
// Call it before Start. With neither, no event is derived and checkpoints cost nothing more.
func (e *Engine) SetLifecycle(outbox LifecycleOutbox, observed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lifecycleOutbox, e.lifecycleObserved = outbox, observed
}

// SetObserver replaces the observer (see Config.Observer). Call it before Start.
func (e *Engine) SetObserver(fn Observer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if fn == nil {
		e.observers = nil
	} else {
		e.observers = newObservers(fn, e.cfg.ObserverQueue, e.cfg.Logger)
	}
	e.checkpointer.observers = e.observers
}

// lifecycleOn reports whether checkpoints derive lifecycle events.
func (e *Engine) lifecycleOn() (LifecycleOutbox, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.lifecycleOutbox, e.lifecycleOutbox != nil || (e.lifecycleObserved && e.observers != nil)
}

// eventID derives an event's id from its execution, the fence of the commit, its position, its
// type and its subject: the same commit written again yields the same ids.
func eventID(execution uuid.UUID, fence, position int64, typ cbtype.LifecycleEventType, subject string) uuid.UUID {
	var buf [96]byte // the name, "lifecycle:<fence>:<position>:<type>:<subject>", on the stack when short
	name := strconv.AppendInt(append(buf[:0], "lifecycle:"...), fence, 10)
	name = strconv.AppendInt(append(name, ':'), position, 10)
	name = append(append(append(append(name, ':'), typ...), ':'), subject...)
	return uuid.NewSHA1(execution, name)
}

// onlyLifecycleEntries reports whether entries hold nothing but LIFECYCLE entries (the creation,
// a suspension before the first run): the execution has not started.
func onlyLifecycleEntries(entries []*driver.ExecutionLogEntry) bool {
	for _, e := range entries {
		if e.EntryType != driver.LogEntryLifecycle {
			return false
		}
	}
	return true
}

// deriveLifecycle returns the events checkpoint cp causes for an execution that was prev and is
// after once it commits at now. Entries of cp carry their sequence numbers already. The
// execution's EXECUTION_STARTED is not among them: it is written with the insert.
func deriveLifecycle(prev, after *driver.ExecutionRow, cp *driver.ExecutionCheckpoint, lastSeq int, now time.Time) []*cbtype.LifecycleEvent {
	var events []*cbtype.LifecycleEvent
	add := func(typ cbtype.LifecycleEventType, position int64, subject string) *cbtype.LifecycleEvent {
		ev := &cbtype.LifecycleEvent{
			ID: eventID(after.ID, cp.Fence, position, typ, subject), Type: typ, ExecutionID: after.ID,
			Model: after.Model, ExecutionType: after.Type, TenantID: after.TenantID, BusinessKey: after.BusinessKey,
			Position: position, Status: after.Status, StepID: subject, At: now,
		}
		events = append(events, ev)
		return ev
	}
	if len(cp.Log) > 0 {
		lastSeq = cp.Log[len(cp.Log)-1].Seq
	}
	for _, entry := range cp.Log {
		rank := int64(1)
		for _, typ := range entryEventTypes(entry) {
			ev := add(typ, int64(entry.Seq)*16+rank, entry.Name)
			rank++
			ev.Attempt, ev.ErrorCode, ev.ErrorMessage = entry.Attempt, entry.ErrorCode, entry.ErrorMessage
			ev.Actor, ev.Reason = entry.Actor, entry.Reason
			if !entry.At.IsZero() {
				ev.At = entry.At
			}
			switch {
			case typ == cbtype.EventStepStarted && entry.StartedAt != nil:
				ev.At, ev.ErrorCode, ev.ErrorMessage = *entry.StartedAt, "", ""
			case entry.StartedAt != nil:
				ev.LatencyMs = ev.At.Sub(*entry.StartedAt).Milliseconds()
			}
			if typ != cbtype.EventStepStarted {
				ev.Payload = entry.Response
				if len(ev.Payload) == 0 {
					ev.Payload = entry.Request
				}
			}
		}
	}
	// What the checkpoint does beyond its log, after the entries.
	position := int64(lastSeq)*16 + 8
	next := func() int64 { position++; return position }
	for _, id := range cp.ConsumeSignals {
		add(cbtype.EventSignalDelivered, next(), id)
	}
	for _, id := range cp.FireTimers {
		add(cbtype.EventTimerFired, next(), id)
	}
	for _, child := range cp.Children {
		add(cbtype.EventChildStarted, next(), child.Type).RelatedID = child.ID
	}
	if n := cp.ContinueAsNew; n != nil {
		add(cbtype.EventContinuedAsNew, next(), "").RelatedID = n.ID
	}
	if prev.Status != after.Status {
		switch {
		case after.Status == driver.ExecutionWaitingForTSQ:
			ev := add(cbtype.EventDeadLettered, next(), after.Step)
			ev.ErrorCode, ev.ErrorMessage = after.ErrorCode, after.ErrorMessage
		case after.Status == driver.ExecutionSuspended:
			add(cbtype.EventSuspended, next(), after.Step)
		case prev.Status == driver.ExecutionSuspended:
			add(cbtype.EventResumed, next(), after.Step)
		}
	}
	if after.Status.Terminal() && !prev.Status.Terminal() {
		ev := add(cbtype.EventExecutionCompleted, next(), after.Step)
		ev.Success, ev.ErrorCode, ev.ErrorMessage = after.Status == driver.ExecutionCompleted, after.ErrorCode, after.ErrorMessage
		if !after.CreatedAt.IsZero() {
			ev.LatencyMs = now.Sub(after.CreatedAt).Milliseconds()
		}
		if after.ParentID != uuid.Nil {
			// The parent's history: keyed, ordered and identified as the parent's.
			child := &cbtype.LifecycleEvent{
				ID:   eventID(after.ParentID, 0, 0, cbtype.EventChildCompleted, after.ID.String()),
				Type: cbtype.EventChildCompleted, ExecutionID: after.ParentID, Model: after.Model, ExecutionType: after.Type,
				TenantID: after.TenantID, BusinessKey: after.BusinessKey, Status: after.Status, RelatedID: after.ID,
				Success: ev.Success, ErrorCode: ev.ErrorCode, ErrorMessage: ev.ErrorMessage, At: now,
			}
			events = append(events, child)
		}
	}
	return events
}

// entryEventTypes maps a log entry onto lifecycle events. Entries the core does not know become
// "<ENTRY TYPE>_<STEP STATUS>", so a model's own entries (TCC phases and participants, saga
// specifics) flow as events without the core knowing them.
func entryEventTypes(e *driver.ExecutionLogEntry) []cbtype.LifecycleEventType {
	withStart := func(typ cbtype.LifecycleEventType) []cbtype.LifecycleEventType {
		if e.StartedAt != nil {
			return []cbtype.LifecycleEventType{cbtype.EventStepStarted, typ}
		}
		return []cbtype.LifecycleEventType{typ}
	}
	one := func(typ cbtype.LifecycleEventType) []cbtype.LifecycleEventType {
		return []cbtype.LifecycleEventType{typ}
	}
	switch e.EntryType {
	case "STEP":
		switch e.StepStatus {
		case "STARTED":
			return one(cbtype.EventStepStarted)
		case "COMPLETED":
			return withStart(cbtype.EventStepSucceeded)
		case "FAILED", "REPLY_FAILED":
			return withStart(cbtype.EventStepFailed)
		case "SKIPPED", "SKIPPED_IDEMPOTENT":
			return one(cbtype.EventStepSkipped)
		case "RETRY_SCHEDULED", "WAITING_RETRY":
			return withStart(cbtype.EventStepRetryScheduled)
		case "WAITING":
			return one(cbtype.EventStepWaiting)
		}
	case "COMMAND":
		if e.StepStatus == "SENT" {
			return one(cbtype.EventStepStarted)
		}
	case "COMPENSATION":
		switch e.StepStatus {
		case "COMPLETED", "COMPENSATION_SUCCESS":
			return one(cbtype.EventStepCompensated)
		case "FAILED", "COMPENSATION_FAILED":
			return one(cbtype.EventStepCompensationFailed)
		}
	case driver.LogEntryLifecycle:
		switch {
		case e.StepStatus == string(driver.ExecutionCompensating):
			return one(cbtype.EventCompensationStarted)
		case e.Name == "deadline":
			return one(cbtype.EventDeadlineReached)
		}
		// The rest (creation, the troubleshooting queue, continue-as-new) are derived from
		// the checkpoint itself; suspend and resume from the operator's action.
		return nil
	case "WAIT":
		if e.StepStatus == "TIMED_OUT" {
			return one(cbtype.EventWaitTimedOut)
		}
	case "ASYNC_RESPONSE":
		return nil // the step outcome the response leads to is its own entry
	}
	if strings.HasPrefix(e.EntryType, "TSQ_") {
		return one(cbtype.EventOperatorAction)
	}
	name := e.EntryType
	if e.StepStatus != "" {
		name += "_" + e.StepStatus
	}
	return one(cbtype.LifecycleEventType(strings.ToUpper(name)))
}

// suspendedOnRelease is the SUSPENDED event of a release that the driver stores SUSPENDED for
// an operator's pending request: placed as the LIFECYCLE entry the driver logs after the
// checkpoint's own entries.
func suspendedOnRelease(after *driver.ExecutionRow, cp *driver.ExecutionCheckpoint, lastSeq int, now time.Time) *cbtype.LifecycleEvent {
	if len(cp.Log) > 0 {
		lastSeq = cp.Log[len(cp.Log)-1].Seq
	}
	position := int64(lastSeq+1)*16 + 1
	return &cbtype.LifecycleEvent{
		ID: eventID(after.ID, cp.Fence, position, cbtype.EventSuspended, after.Step), Type: cbtype.EventSuspended,
		ExecutionID: after.ID, Model: after.Model, ExecutionType: after.Type, TenantID: after.TenantID,
		BusinessKey: after.BusinessKey, Position: position, Status: driver.ExecutionSuspended, StepID: after.Step,
		Reason: "suspend requested while running", At: now,
	}
}

// startedEvent is the EXECUTION_STARTED event of the execution x creates at now; parent, when
// set, is the execution whose checkpoint inserts x as a child or successor, whose model, type,
// tenant and business key x inherits where it names none.
func startedEvent(x *driver.ExecutionInsertParams, parent *driver.ExecutionRow, now time.Time) *cbtype.LifecycleEvent {
	model, typ, tenant, key := x.Model, x.Type, x.TenantID, x.BusinessKey
	if parent != nil {
		model, typ = orParent(model, parent.Model), orParent(typ, parent.Type)
		tenant, key = orParent(tenant, parent.TenantID), orParent(key, parent.BusinessKey)
	}
	status := driver.ExecutionPending
	if x.Lease > 0 {
		status = driver.ExecutionExecuting
	}
	return &cbtype.LifecycleEvent{
		ID: eventID(x.ID, 0, 0, cbtype.EventExecutionStarted, ""), Type: cbtype.EventExecutionStarted, ExecutionID: x.ID,
		Model: model, ExecutionType: typ, TenantID: tenant, BusinessKey: key, Status: status, At: now,
	}
}

func orParent(own, parent string) string {
	if own == "" {
		return parent
	}
	return own
}

// attachStarted gives each execution of executions its EXECUTION_STARTED event's outbox
// messages, written by the driver in the insert's transaction only when the execution is
// inserted (an idempotent insert of an existing id writes none). It returns the events, for the
// observers. parent is the inserting execution of a checkpoint's children and successor.
func attachStarted(toOutbox LifecycleOutbox, executions []*driver.ExecutionInsertParams, parent *driver.ExecutionRow, now time.Time) []*cbtype.LifecycleEvent {
	events := make([]*cbtype.LifecycleEvent, len(executions))
	for i, x := range executions {
		ev := startedEvent(x, parent, now)
		events[i] = ev
		if toOutbox == nil {
			continue
		}
		row := driver.ExecutionRow{ID: x.ID, Model: ev.Model, Type: ev.ExecutionType, TenantID: ev.TenantID, BusinessKey: ev.BusinessKey, Status: ev.Status}
		// Assigned, not appended: a retried insert or checkpoint derives them again.
		x.Outbox = toOutbox(&row, []*cbtype.LifecycleEvent{ev})
	}
	return events
}

// PrepareInsert attaches to executions the outbox messages of their EXECUTION_STARTED events
// when lifecycle events are on, for a caller that inserts them through its own transaction
// (Insert does it itself).
func (e *Engine) PrepareInsert(executions []*driver.ExecutionInsertParams) {
	if toOutbox, _ := e.lifecycleOn(); toOutbox != nil {
		attachStarted(toOutbox, executions, nil, e.cfg.Clock())
	}
}

// changeOutbox returns what writes the lifecycle event of an operator's status change (suspend,
// resume) in the change's transaction, or nil when lifecycle events go to no outbox. The event's
// position is that of the LIFECYCLE entry the change logs, and its id derives from the execution,
// the fence the change left and that position, so a change written again yields the same id.
func (e *Engine) changeOutbox(typ cbtype.LifecycleEventType, actor, reason string, written *bool) driver.OutboxOfChange {
	toOutbox, _ := e.lifecycleOn()
	if toOutbox == nil {
		return nil
	}
	return func(after *driver.ExecutionRow, logSeq int) ([]*driver.OutboxInsertParams, error) {
		at := after.UpdatedAt
		if at.IsZero() {
			at = e.cfg.Clock()
		}
		position := int64(logSeq)*16 + 1
		ev := &cbtype.LifecycleEvent{
			ID: eventID(after.ID, after.Fence, position, typ, after.Step), Type: typ, ExecutionID: after.ID,
			Model: after.Model, ExecutionType: after.Type, TenantID: after.TenantID, BusinessKey: after.BusinessKey,
			Position: position, Status: after.Status, StepID: after.Step, Actor: actor, Reason: reason, At: at,
		}
		msgs := toOutbox(after, []*cbtype.LifecycleEvent{ev})
		*written = len(msgs) > 0
		return msgs, nil
	}
}

// notifyOutbox wakes the outbox relays after a commit that wrote outbox messages: this
// instance's at once, the others through the database.
func (e *Engine) notifyOutbox(ctx context.Context) {
	if e.cfg.Signal != nil {
		e.cfg.Signal(OutboxTopic)
	}
	if err := e.cfg.Exec.Notify(ctx, []string{OutboxTopic}); err != nil {
		e.cfg.Logger.Warn("waking the outbox relays failed; they will poll", "error", err)
	}
}
