package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/cbtype"
)

// The stable types of executions live in package cbtype; these aliases keep the driver's names.
type (
	// ExecutionStatus is cbtype.ExecutionStatus.
	ExecutionStatus = cbtype.ExecutionStatus
	// ExecutionRow is cbtype.ExecutionRow.
	ExecutionRow = cbtype.ExecutionRow
	// ExecutionLogEntry is cbtype.ExecutionLogEntry.
	ExecutionLogEntry = cbtype.ExecutionLogEntry
	// ExecutionResponseRow is cbtype.ExecutionResponseRow.
	ExecutionResponseRow = cbtype.ExecutionResponseRow
)

// The execution statuses (see cbtype.ExecutionStatus).
const (
	ExecutionPending         = cbtype.ExecutionPending
	ExecutionExecuting       = cbtype.ExecutionExecuting
	ExecutionWaitingForAsync = cbtype.ExecutionWaitingForAsync
	ExecutionWaitingForRetry = cbtype.ExecutionWaitingForRetry
	ExecutionWaitingForTSQ   = cbtype.ExecutionWaitingForTSQ
	ExecutionCompensating    = cbtype.ExecutionCompensating
	ExecutionCompensated     = cbtype.ExecutionCompensated
	ExecutionCompleted       = cbtype.ExecutionCompleted
	ExecutionCancelled       = cbtype.ExecutionCancelled
	ExecutionFailed          = cbtype.ExecutionFailed
	ExecutionSuspended       = cbtype.ExecutionSuspended
	ExecutionQueued          = cbtype.ExecutionQueued
)

// ExecutionInsertParams creates an execution. When Lease is set the execution is created
// EXECUTING and leased to WorkerID with fence 1 (immediate start); otherwise it is PENDING and
// woken at once. An id that exists already is not inserted again (no error, nothing changes).
type ExecutionInsertParams struct {
	ID          uuid.UUID
	Model       string
	Type        string
	Domain      string
	TenantID    string
	BusinessKey string
	BatchID     uuid.UUID
	State       json.RawMessage
	DeadlineAt  *time.Time
	// NotBefore keeps a pending execution from being taken up before it: the execution exists
	// (and its id is taken) from the insert, and its wake-up time is NotBefore. Nil or a time
	// already past: at once. A leased insert (Lease) ignores it.
	NotBefore *time.Time
	Lease     time.Duration
	WorkerID  string
	Log       []*ExecutionLogEntry // written with the execution (Seq starting at 1)
	// ParentID and RootID place the execution in a tree; zero RootID means the parent's root, or
	// the execution's own id when it has no parent. A checkpoint's Children get the checkpointing
	// execution as parent and its root whatever these say.
	ParentID uuid.UUID
	RootID   uuid.UUID
	// Traceparent is the W3C trace context of the starting request. A child or successor
	// inserted by a checkpoint inherits the checkpointing execution's when it is empty.
	Traceparent string
	// Attributes are custom search attributes (see ValidateAttribute); one with an empty value
	// is not stored.
	Attributes map[string]string
	// Outbox messages (the execution's EXECUTION_STARTED lifecycle event) are written in the
	// insert's transaction when this execution is inserted; an insert that finds the id taken
	// writes none.
	Outbox []*OutboxInsertParams
}

// ExecutionInsertManyParams inserts executions in one round trip. Executions whose id exists
// already are skipped: the insert is idempotent. An id given twice is inserted once, as its first
// occurrence.
type ExecutionInsertManyParams struct {
	Executions []*ExecutionInsertParams
	Now        *time.Time
	// OutboxHandoff, when set, hands the outbox messages written with the executions inserted
	// (their Outbox) to a relay in this process: see OutboxHandoff. Ignored inside a caller's
	// transaction.
	OutboxHandoff *OutboxHandoff
}

// ExecutionClaimKind names what a claim looks for.
type ExecutionClaimKind string

// The claim kinds: the pending poller takes new executions, executions with unapplied
// responses and executions whose runner's lease expired; the retry poller takes due retries.
const (
	ClaimPending ExecutionClaimKind = "pending"
	ClaimRetry   ExecutionClaimKind = "retry"
)

// ExecutionClaimParams claims up to Max runnable executions, leasing them to WorkerID. A claimed
// execution's fence grows by one and its status becomes EXECUTING (COMPENSATING stays).
type ExecutionClaimParams struct {
	Kind     ExecutionClaimKind
	Types    []string // only these types (the ones this instance can run)
	Max      int
	Lease    time.Duration
	WorkerID string
	Now      *time.Time
}

// ExecutionAcquireParams leases one execution if no live lease holds it.
type ExecutionAcquireParams struct {
	ID       uuid.UUID
	Lease    time.Duration
	WorkerID string
	Now      *time.Time
}

// ExecutionAcquireManyParams leases each of several executions that no live lease holds.
type ExecutionAcquireManyParams struct {
	IDs []uuid.UUID
	// LogAfterSeq, when set, pairs with IDs: only log entries above LogAfterSeq[i] are read for
	// IDs[i] (the caller holds the earlier ones; the log is append-only). Nil reads whole logs.
	LogAfterSeq []int64
	Lease       time.Duration
	WorkerID    string
	Now         *time.Time
}

// Validate checks that the parallel slices pair up.
func (p *ExecutionAcquireManyParams) Validate() error {
	if p.LogAfterSeq != nil && len(p.LogAfterSeq) != len(p.IDs) {
		return fmt.Errorf("ExecutionAcquireLoadMany: %d ids but %d log sequences", len(p.IDs), len(p.LogAfterSeq))
	}
	return nil
}

// ExecutionAcquired is an execution leased by ExecutionAcquireLoadMany, with its log.
type ExecutionAcquired struct {
	Row    *ExecutionRow
	Loaded *ExecutionLoaded
}

// ExecutionLoadManyParams names the executions whose logs and responses to read. AfterSeq[i] is
// the last response sequence IDs[i] has applied: only later responses are read.
type ExecutionLoadManyParams struct {
	IDs      []uuid.UUID
	AfterSeq []int64
	// LogAfterSeq, when set, pairs with IDs: only log entries above LogAfterSeq[i] are read.
	LogAfterSeq []int64
}

// Validate checks that the parallel slices pair up.
func (p *ExecutionLoadManyParams) Validate() error {
	if len(p.AfterSeq) != len(p.IDs) || p.LogAfterSeq != nil && len(p.LogAfterSeq) != len(p.IDs) {
		return fmt.Errorf("ExecutionLoadMany: %d ids but %d response and %d log sequences", len(p.IDs), len(p.AfterSeq), len(p.LogAfterSeq))
	}
	return nil
}

// LogAfter returns logAfterSeq[i], or 0 (the whole log) when logAfterSeq is nil.
func LogAfter(logAfterSeq []int64, i int) int64 {
	if logAfterSeq == nil {
		return 0
	}
	return logAfterSeq[i]
}

// ExecutionLoaded is what a runner reads before it replays: the log, and the responses not yet
// applied.
type ExecutionLoaded struct {
	Log       []*ExecutionLogEntry
	Responses []*ExecutionResponseRow
}

// ExecutionCheckpoint is one fenced write of an execution's progress. It applies only while the
// execution's fence is still Fence: a runner that lost its lease cannot write.
type ExecutionCheckpoint struct {
	ID                uuid.UUID
	Fence             int64
	Status            ExecutionStatus
	State             json.RawMessage // nil keeps the stored state
	Step              string
	CurrentWait       string
	NextRetryAt       *time.Time
	NextWaitTimeoutAt *time.Time
	// RetryDelay, when positive, sets NextRetryAt to the database's now plus the delay.
	RetryDelay time.Duration
	// WaitTimeout, when positive, sets NextWaitTimeoutAt to now plus the timeout.
	WaitTimeout time.Duration
	// DeadlineAt replaces the deadline when set.
	DeadlineAt *time.Time
	Retries    int
	// Lease, when positive, renews the lease for this long from now. Release ends it instead
	// (the runner is done for now); with neither the lease is left as it is. A released
	// execution is woken again at once if responses arrived that the runner did not apply or,
	// unless it ended, signals arrived while it held the lease; otherwise at the earliest of
	// WakeAt, its pending timers and its open waits' timeouts.
	Lease   time.Duration
	Release bool
	WakeAt  *time.Time
	// ResponsesApplied is the highest response sequence the runner has applied.
	ResponsesApplied int64
	ErrorCode        string
	ErrorMessage     string
	Log              []*ExecutionLogEntry
	// Commands are sent atomically with the checkpoint (a command step's command).
	Commands []*CommandInsertParams
	// Outbox messages (a brokered command's envelope, a lifecycle event) are written in the
	// checkpoint's transaction, and only when the checkpoint applies: a fenced checkpoint writes
	// none, so a message is published exactly when the state that caused it committed.
	Outbox []*OutboxInsertParams
	// SuspendOutbox messages (the SUSPENDED lifecycle event) are written with the checkpoint
	// only when its release stores SUSPENDED for a pending suspend request (see
	// SuspendRequested), after Outbox; a JSON object payload gets the request's "actor" and
	// "reason".
	SuspendOutbox []*OutboxInsertParams
	// Attributes sets custom search attributes atomically with the checkpoint: each key is
	// inserted or overwritten, and a key with an empty value is removed. Keys not named keep
	// their values.
	Attributes map[string]string
	// Children are executions started by this one, inserted idempotently (an existing id is left
	// alone) with the checkpoint, PENDING, with this execution as parent and its root as root.
	// When a child ends, its parent receives the response ChildResponseName(child) with a
	// ChildOutcome payload and is woken. What a child leaves empty (model, type, domain, tenant,
	// business key, traceparent) is its parent's. When an execution is cancelled, its
	// non-terminal descendants are cancelled with it, without running their compensations.
	Children []*ExecutionInsertParams
	// ContinueAsNew, when set, ends this execution (Status must be COMPLETED) and inserts its
	// successor in the same transaction, PENDING. Fields left empty are this execution's (model,
	// type, domain, tenant, business key, parent, root, traceparent); the successor's
	// ContinuedFrom is this execution and this execution's ContinuedAs the successor. A
	// LIFECYCLE entry CONTINUED_AS_NEW naming the successor is logged, and the async responses
	// this execution received above ResponsesApplied move to the successor.
	ContinueAsNew *ExecutionInsertParams

	// Timers are scheduled, CancelTimers cancelled and FireTimers marked fired (so never due
	// again) with the checkpoint; only pending timers change. On release the execution's wake_at
	// becomes the earliest of WakeAt, its pending timers and its open waits' timeouts.
	Timers       []*TimerParams
	CancelTimers []string
	FireTimers   []string
	// ConsumeSignals marks these pending signals consumed.
	ConsumeSignals []string
	// OpenWaits opens waits and CloseWaits closes them (closing an unknown id does nothing).
	OpenWaits  []*WaitParams
	CloseWaits []string
	// SuspendRequested is set by the driver, not read: true when the checkpoint applied while an
	// operator's suspend request was pending. A release with a non-terminal status then stored
	// SUSPENDED (with a LIFECYCLE SUSPENDED log entry after the checkpoint's own) instead of
	// Status; any other checkpoint leaves the request pending.
	SuspendRequested bool
}

// Validate reports what makes the checkpoint unwritable: a child or successor without an id or
// with a lease (they start PENDING, for the pollers), or a successor on a checkpoint that does
// not complete the execution.
func (cp *ExecutionCheckpoint) Validate() error {
	var errs []error
	seen := make(map[uuid.UUID]bool, len(cp.Children))
	for i, c := range cp.Children {
		if c == nil || c.ID == uuid.Nil {
			errs = append(errs, fmt.Errorf("child %d of execution %s has no id", i, cp.ID))
			continue
		}
		if seen[c.ID] {
			errs = append(errs, fmt.Errorf("child %s of execution %s is given twice", c.ID, cp.ID))
		}
		seen[c.ID] = true
		if c.ID == cp.ID {
			errs = append(errs, fmt.Errorf("execution %s cannot be its own child", cp.ID))
		}
		if c.Lease > 0 {
			errs = append(errs, fmt.Errorf("child %s of execution %s has a lease: children start pending", c.ID, cp.ID))
		}
	}
	if n := cp.ContinueAsNew; n != nil {
		switch {
		case n.ID == uuid.Nil:
			errs = append(errs, fmt.Errorf("the successor of execution %s has no id", cp.ID))
		case n.ID == cp.ID:
			errs = append(errs, fmt.Errorf("execution %s cannot continue as itself", cp.ID))
		}
		if n.Lease > 0 {
			errs = append(errs, fmt.Errorf("the successor of execution %s has a lease: it starts pending", cp.ID))
		}
		if cp.Status != ExecutionCompleted {
			errs = append(errs, fmt.Errorf("execution %s continues as new with status %s: it must be COMPLETED", cp.ID, cp.Status))
		}
	}
	return errors.Join(errs...)
}

// EntryContinuedAsNew names the LIFECYCLE log entry a continue-as-new checkpoint writes; its
// Response is {"successorId": "<id>"}.
const EntryContinuedAsNew = "CONTINUED_AS_NEW"

// EntryParentCancelled names the LIFECYCLE log entry written on each execution cancelled because
// an ancestor was cancelled; its Response is {"cancelledId": "<id>"}, the ancestor whose
// cancellation reached it.
const EntryParentCancelled = "PARENT_CANCELLED"

// CodeParentCancelled is the error code of an execution cancelled with its ancestor.
const CodeParentCancelled = "PARENT_CANCELLED"

// ChildResponseName is the name of the async response a parent receives when its child ends.
func ChildResponseName(childID uuid.UUID) string { return "child:" + childID.String() }

// ChildOutcome is the payload of the response a parent receives when a child execution reaches
// a terminal status in a checkpoint.
type ChildOutcome struct {
	ChildID      uuid.UUID       `json:"childId"`
	Type         string          `json:"type"`
	Status       ExecutionStatus `json:"status"`
	ErrorCode    string          `json:"errorCode,omitempty"`
	ErrorMessage string          `json:"errorMessage,omitempty"`
	State        json.RawMessage `json:"state,omitempty"`
}

// ExecutionCheckpointManyParams writes many checkpoints in one transaction.
type ExecutionCheckpointManyParams struct {
	Checkpoints []*ExecutionCheckpoint
	Now         *time.Time
	// OutboxHandoff, when set, hands the outbox messages the checkpoints write (their Outbox and
	// SuspendOutbox) to a relay in this process: see OutboxHandoff. Ignored inside a caller's
	// transaction.
	OutboxHandoff *OutboxHandoff
}

// ExecutionResponseInsertParams records an async response and wakes the execution.
type ExecutionResponseInsertParams struct {
	ExecutionID uuid.UUID
	Name        string
	Payload     json.RawMessage
	Now         *time.Time
}

// ExecutionListParams filters an execution listing; zero fields do not filter. Lists are newest
// first, in id order.
type ExecutionListParams struct {
	Statuses    []ExecutionStatus
	Model       string
	Type        string
	Domain      string
	TenantID    string
	BusinessKey string
	BatchID     uuid.UUID
	// ParentID lists the children of one execution.
	ParentID uuid.UUID
	// Attributes keeps executions that have every one of these attributes with exactly this
	// value (see ValidateAttributeSearch).
	Attributes map[string]string
	BeforeID   uuid.UUID
	Limit      int
}

// ExecutionDueKind names a time-based check.
type ExecutionDueKind string

// The time-based checks.
const (
	DueWaitTimeout ExecutionDueKind = "wait_timeout"
	DueDeadline    ExecutionDueKind = "deadline"
)

// DeadlineDueSQL is the condition, common to the drivers, on the status of an execution whose
// deadline passed for the deadline action to apply: any status but COMPENSATING (already
// unwinding), including parked in the troubleshooting queue, unless parked by the deadline
// action itself (DEADLINE_EXCEEDED) or by compensations that failed (COMPENSATION_FAILED). So
// the action applies once to a parked execution, and again only if an operator moves it on.
// A SUSPENDED execution is not due either: its deadline action applies after the resume.
const DeadlineDueSQL = `status NOT IN ('COMPENSATING', 'SUSPENDED') AND NOT (status = 'WAITING_FOR_TSQ' AND ` +
	`coalesce(error_code, '') IN ('DEADLINE_EXCEEDED', 'COMPENSATION_FAILED'))`

// DeadlineHandled reports whether an execution's deadline action has been applied, or must not
// apply, in its current status: the Go form of DeadlineDueSQL.
func DeadlineHandled(row *ExecutionRow) bool {
	return row.Status == ExecutionCompensating || row.Status == ExecutionSuspended || row.Status.Terminal() ||
		row.Status == ExecutionWaitingForTSQ && (row.ErrorCode == "DEADLINE_EXCEEDED" || row.ErrorCode == "COMPENSATION_FAILED")
}

// ExecutionListDueParams lists executions whose wait timed out, or whose deadline passed (and
// whose deadline action applies: see DeadlineDueSQL).
type ExecutionListDueParams struct {
	Kind  ExecutionDueKind
	Types []string
	Max   int
	Now   *time.Time
}

// ExecutionStatusCount counts executions of one type in one status.
type ExecutionStatusCount struct {
	Type   string
	Status ExecutionStatus
	Count  int64
}

// ExecutionExecutor holds the execution queries.
type ExecutionExecutor interface {
	// ExecutionInsertMany returns the ids it inserted, in input order: an id that existed is
	// skipped, not an error, and only the inserted ones are leased (Lease) or logged.
	ExecutionInsertMany(ctx context.Context, params *ExecutionInsertManyParams) ([]uuid.UUID, error)
	// ExecutionGet returns ErrNotFound.
	ExecutionGet(ctx context.Context, id uuid.UUID) (*ExecutionRow, error)
	ExecutionList(ctx context.Context, params *ExecutionListParams) ([]*ExecutionRow, error)
	ExecutionClaim(ctx context.Context, params *ExecutionClaimParams) ([]*ExecutionRow, error)
	// ExecutionAcquire returns ErrNotFound, or ErrConflict when a live lease holds it.
	ExecutionAcquire(ctx context.Context, params *ExecutionAcquireParams) (*ExecutionRow, error)
	// ExecutionAcquireLoadMany is ExecutionAcquire of many executions plus the logs of those it
	// acquired, in one round trip where the database allows. It returns only the acquired ones,
	// in no particular order; an id that is absent is held by a live lease or does not exist. Ids
	// must be distinct. Unapplied responses are not read (Loaded.Responses is empty): the row's
	// ResponsesReceived and ResponsesApplied tell whether there are any, and
	// ExecutionResponseList reads them.
	ExecutionAcquireLoadMany(ctx context.Context, params *ExecutionAcquireManyParams) ([]*ExecutionAcquired, error)
	// ExecutionLoadMany reads the logs and unapplied responses of many executions in one round
	// trip where the database allows. Every id gets an entry, empty for an unknown id.
	ExecutionLoadMany(ctx context.Context, params *ExecutionLoadManyParams) (map[uuid.UUID]*ExecutionLoaded, error)
	// ExecutionCheckpointMany returns the ids whose checkpoint applied (fence matched); their log
	// entries, commands, children and successors are written in the same transaction. In that
	// transaction too, an applied checkpoint that ends a child records the child's outcome on its
	// parent (a response) and wakes the parent, and one that cancels an execution cancels its
	// non-terminal descendants: status CANCELLED, fence bumped, lease cleared, a LIFECYCLE
	// PARENT_CANCELLED entry. The cascade runs no compensation of the descendants.
	ExecutionCheckpointMany(ctx context.Context, params *ExecutionCheckpointManyParams) ([]uuid.UUID, error)
	ExecutionLogList(ctx context.Context, id uuid.UUID) ([]*ExecutionLogEntry, error)
	// ExecutionResponseInsert returns the response's sequence number; ErrNotFound when the
	// execution does not exist.
	ExecutionResponseInsert(ctx context.Context, params *ExecutionResponseInsertParams) (int64, error)
	// ExecutionResponseList returns responses with a sequence above afterSeq, in order.
	ExecutionResponseList(ctx context.Context, id uuid.UUID, afterSeq int64) ([]*ExecutionResponseRow, error)
	ExecutionListDue(ctx context.Context, params *ExecutionListDueParams) ([]*ExecutionRow, error)
	ExecutionCountByStatus(ctx context.Context) ([]*ExecutionStatusCount, error)
	ExecutionAttributeExecutor
	// ExecutionSuspend suspends an execution, or asks its runner to (see ExecutionStatus), and
	// returns the row after. It writes the audit row (EXECUTION_SUSPEND) and, when the execution
	// is suspended at once, the LIFECYCLE SUSPENDED log entry, in the same transaction; asking
	// again while a request is pending changes nothing. ErrNotFound; ErrConflict when it is
	// terminal or already SUSPENDED.
	ExecutionSuspend(ctx context.Context, params *ExecutionSuspendParams) (*ExecutionRow, error)
	// ExecutionResume resumes a SUSPENDED execution (fencing out anyone who acquired it since,
	// with a LIFECYCLE RESUMED log entry), or cancels the pending suspend request of one a runner
	// holds, and returns the row after; the audit row (EXECUTION_RESUME) is written in the same
	// transaction. ErrNotFound; ErrConflict, naming the status, otherwise.
	ExecutionResume(ctx context.Context, params *ExecutionResumeParams) (*ExecutionRow, error)
	// ExecutionHeartbeat renews the lease of a running execution and reports whether a suspend
	// request is pending. ErrNotFound when the execution does not exist, its fence moved (another
	// runner took it) or it was released.
	ExecutionHeartbeat(ctx context.Context, params *ExecutionHeartbeatParams) (suspendRequested bool, err error)
}
