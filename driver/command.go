package driver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// CommandStatus is where a command is in its lifecycle.
//
//	PENDING ──claim──▶ RUNNING ──▶ COMPLETED | FAILED
//	   ▲                  │
//	   └──retry (backoff)─┤
//	                      └──▶ IN_TSQ ──operator──▶ PENDING | CANCELLED | COMPLETED
//
// A RUNNING command whose lease expired is claimable again (visibility-timeout semantics); the
// fence counter makes sure only the newest claim can write its outcome. A command claimed past
// its last attempt or past its deadline is not handled again: it ends TIMED_OUT, with a reply.
//
// A command that succeeds ends COMPLETED (announced as CommandCompleted). A parked command is
// IN_TSQ, and the statement that parks it also records it in the dead-letter table (command_dlq).
type CommandStatus string

// The command statuses.
const (
	CommandStatusPending   CommandStatus = "PENDING"
	CommandStatusRunning   CommandStatus = "RUNNING"
	CommandStatusCompleted CommandStatus = "COMPLETED"
	CommandStatusFailed    CommandStatus = "FAILED"
	CommandStatusInTSQ     CommandStatus = "IN_TSQ"
	CommandStatusCancelled CommandStatus = "CANCELLED"
	CommandStatusTimedOut  CommandStatus = "TIMED_OUT"
)

// Terminal reports whether no worker will touch a command in this status again.
func (s CommandStatus) Terminal() bool {
	switch s {
	case CommandStatusCompleted, CommandStatusFailed, CommandStatusCancelled, CommandStatusTimedOut:
		return true
	}
	return false
}

// Valid reports whether s is one of the known statuses.
func (s CommandStatus) Valid() bool {
	switch s {
	case CommandStatusPending, CommandStatusRunning, CommandStatusCompleted, CommandStatusFailed,
		CommandStatusInTSQ, CommandStatusCancelled, CommandStatusTimedOut:
		return true
	}
	return false
}

// CommandKind separates commands from replies; both travel through the same queue table.
type CommandKind string

// The message kinds.
const (
	CommandKindCommand CommandKind = "command"
	CommandKindReply   CommandKind = "reply"
)

// CommandRow is a command (or reply) as stored.
type CommandRow struct {
	ID             uuid.UUID         `json:"id"`
	Kind           CommandKind       `json:"kind"`
	Domain         string            `json:"domain,omitempty"`
	Queue          string            `json:"queue,omitempty"`
	Type           string            `json:"type,omitempty"`
	Data           json.RawMessage   `json:"data,omitempty"`
	CorrelationID  uuid.UUID         `json:"correlationId,omitzero"` // uuid.Nil when absent
	CausationID    uuid.UUID         `json:"causationId,omitzero"`   // uuid.Nil when absent
	ReplyTo        string            `json:"replyTo,omitempty"`
	Status         CommandStatus     `json:"status"`
	Attempt        int               `json:"attempt"`
	MaxAttempts    int               `json:"maxAttempts"`
	TenantID       string            `json:"tenantId,omitempty"`
	BatchID        uuid.UUID         `json:"batchId,omitzero"` // uuid.Nil when absent
	Headers        map[string]string `json:"headers,omitempty"`
	IdempotencyKey string            `json:"idempotencyKey,omitempty"`
	SentBy         string            `json:"sentBy,omitempty"`     // who sent the command (the SENT audit entry's actor)
	VisibleAt      time.Time         `json:"visibleAt"`            // when a PENDING command may next be claimed
	LeaseUntil     *time.Time        `json:"leaseUntil,omitempty"` // while RUNNING: when the claim expires and the command is claimable again
	Fence          int64             `json:"fence"`                // grows on every claim
	WorkerID       string            `json:"workerId,omitempty"`
	Result         json.RawMessage   `json:"result,omitempty"`
	ErrorCode      string            `json:"errorCode,omitempty"`
	ErrorMessage   string            `json:"errorMessage,omitempty"`
	DeadlineAt     *time.Time        `json:"deadlineAt,omitempty"`
	ParkedAt       *time.Time        `json:"parkedAt,omitempty"` // while IN_TSQ: since when
	CreatedAt      time.Time         `json:"createdAt"`
	UpdatedAt      time.Time         `json:"updatedAt"`
	StartedAt      *time.Time        `json:"startedAt,omitempty"`
	CompletedAt    *time.Time        `json:"completedAt,omitempty"`
	// Audit is the command's transition history, oldest first. It is only loaded by
	// CommandGetByID; list and claim queries leave it nil. A claim is recorded by the statement
	// that ends it (so that claiming stays a small HOT update); while a command is RUNNING its
	// current claim is appended from StartedAt/WorkerID/Attempt when read (see CurrentAudit).
	Audit []AuditEntry `json:"audit,omitempty"`
}

// AuditEntry is one transition of a command, stored with the row so it commits atomically with
// the transition it describes.
type AuditEntry struct {
	At           time.Time     `json:"at"`
	Event        string        `json:"event"`
	From         CommandStatus `json:"from,omitempty"`
	To           CommandStatus `json:"to,omitempty"`
	Attempt      int           `json:"attempt,omitempty"`
	Actor        string        `json:"actor,omitempty"`
	Reason       string        `json:"reason,omitempty"`
	ErrorCode    string        `json:"errorCode,omitempty"`
	ErrorMessage string        `json:"errorMessage,omitempty"`
}

// storedAuditEntry is an AuditEntry as the drivers keep it in the command row's audit column
// (the statements that change a command append it, with snake_case keys).
type storedAuditEntry struct {
	At           time.Time     `json:"at"`
	Event        string        `json:"event"`
	From         CommandStatus `json:"from"`
	To           CommandStatus `json:"to"`
	Attempt      int           `json:"attempt"`
	Actor        string        `json:"actor"`
	Reason       string        `json:"reason"`
	ErrorCode    string        `json:"error_code"`
	ErrorMessage string        `json:"error_message"`
}

// DecodeStoredAudit decodes a command row's audit column.
func DecodeStoredAudit(data []byte) ([]AuditEntry, error) {
	var stored []storedAuditEntry
	if err := json.Unmarshal(data, &stored); err != nil {
		return nil, err
	}
	out := make([]AuditEntry, len(stored))
	for i, e := range stored {
		out[i] = AuditEntry(e)
	}
	return out, nil
}

// CommandInsertParams is one command to insert. ID must be set by the caller.
type CommandInsertParams struct {
	ID             uuid.UUID
	Kind           CommandKind
	Domain         string
	Queue          string
	Type           string
	Data           json.RawMessage
	CorrelationID  uuid.UUID
	CausationID    uuid.UUID
	ReplyTo        string
	MaxAttempts    int
	TenantID       string
	BatchID        uuid.UUID
	Headers        map[string]string
	IdempotencyKey string
	VisibleAt      *time.Time // nil: now
	DeadlineAt     *time.Time
	Status         CommandStatus // "" means PENDING; replies to completed work may be inserted COMPLETED
	Actor          string        // who sends it, stored as SentBy
}

// CommandInsertManyParams inserts commands in one round trip. Commands whose (domain,
// idempotency key) already exists are not inserted; their result carries the existing id.
type CommandInsertManyParams struct {
	Commands []*CommandInsertParams
	Now      *time.Time
}

// CommandInsertResult tells what happened to one inserted command, in input order.
type CommandInsertResult struct {
	ID       uuid.UUID // the new id, or the existing command's id when deduplicated
	Inserted bool      // false when an existing command had the same idempotency key
}

// CommandClaimParams claims up to Max visible commands of one queue.
type CommandClaimParams struct {
	Queue    string
	Max      int
	Lease    time.Duration
	WorkerID string
	Now      *time.Time
}

// CommandCompletion is one outcome for a claimed command. It applies only when the row is still
// RUNNING with the same fence; otherwise the claim was lost and the outcome is discarded.
type CommandCompletion struct {
	ID           uuid.UUID
	Fence        int64
	Status       CommandStatus // COMPLETED, FAILED, IN_TSQ, TIMED_OUT, or PENDING to retry
	RetryDelay   time.Duration // when Status is PENDING: the next attempt is this long after now
	Result       json.RawMessage
	ErrorCode    string
	ErrorMessage string
	Event        string // audit event name
	// Release gives the attempt back (graceful shutdown): the command did not really run.
	Release bool
	// Reply is inserted in the same statement when the outcome applies, PENDING, with kind reply
	// and the completed command as its causation. Only ID, Domain, Queue, Type, Data,
	// CorrelationID, MaxAttempts, TenantID, Actor and Headers (its traceparent) are used.
	Reply *CommandInsertParams
	// Outbox messages (the reply and event of a brokered transport) are written in the same
	// transaction when the outcome applies, and not at all otherwise.
	Outbox []*OutboxInsertParams
	// Inbox records the delivered message that produced this outcome, in the same transaction,
	// when the outcome applies (first write wins).
	Inbox *InboxInsertParams
}

// CommandCompleteManyParams writes many outcomes in one round trip.
type CommandCompleteManyParams struct {
	Completions []*CommandCompletion
	Now         *time.Time
}

// CommandListParams filters a command listing. Zero fields do not filter.
type CommandListParams struct {
	Statuses      []CommandStatus
	Kind          CommandKind
	Domain        string
	Queue         string
	Type          string
	TenantID      string
	BatchID       uuid.UUID
	CorrelationID uuid.UUID
	// BeforeID pages backwards: lists are in id order, newest first (generated ids are UUIDv7,
	// so id order is creation order), and the next page starts before the last id seen.
	BeforeID uuid.UUID
	Limit    int
}

// CommandOperatorParams applies an operator (or watchdog) action to one command atomically: the
// status change, its audit entry and an optional reply.
type CommandOperatorParams struct {
	ID           uuid.UUID
	FromStatuses []CommandStatus // the action applies only in these statuses
	ToStatus     CommandStatus
	Event        string
	Actor        string
	Reason       string
	Result       json.RawMessage // set on COMPLETED by an operator
	ErrorCode    string
	ErrorMessage string
	// ResetAttempts gives a retried command a fresh attempt budget.
	ResetAttempts bool
	Reply         *CommandInsertParams
	// Outbox messages are written in the same transaction when the action applies.
	Outbox []*OutboxInsertParams
	Now    *time.Time
}

// QueueDepth counts a queue's commands by state.
type QueueDepth struct {
	Queue     string      `json:"queue,omitempty"`
	Domain    string      `json:"domain,omitempty"`
	Kind      CommandKind `json:"kind"`
	Ready     int64       `json:"ready"`     // PENDING and visible now
	Scheduled int64       `json:"scheduled"` // PENDING, visible later (retry backoff)
	Running   int64       `json:"running"`
	InTSQ     int64       `json:"inTsq"`
}

// CommandStatsParams restricts statistics to commands created since Since.
type CommandStatsParams struct {
	Since time.Time
}

// CommandStat summarises commands of one domain and type.
type CommandStat struct {
	Domain    string
	Type      string
	Counts    map[CommandStatus]int64
	P50       time.Duration // handling latency of completed commands (claim to completion)
	P99       time.Duration
	Completed int64
}

// CommandExecutor holds the command queries.
type CommandExecutor interface {
	CommandInsertMany(ctx context.Context, params *CommandInsertManyParams) ([]CommandInsertResult, error)
	CommandGetByID(ctx context.Context, id uuid.UUID) (*CommandRow, error)
	CommandGetByIdempotencyKey(ctx context.Context, domain, key string) (*CommandRow, error)
	CommandList(ctx context.Context, params *CommandListParams) ([]*CommandRow, error)
	CommandClaim(ctx context.Context, params *CommandClaimParams) ([]*CommandRow, error)
	// CommandCompleteMany returns the ids whose outcome applied.
	CommandCompleteMany(ctx context.Context, params *CommandCompleteManyParams) ([]uuid.UUID, error)
	// CommandOperatorAction returns ErrNotFound or ErrConflict (status not in FromStatuses).
	CommandOperatorAction(ctx context.Context, params *CommandOperatorParams) (*CommandRow, error)
	CommandQueueDepths(ctx context.Context) ([]*QueueDepth, error)
	CommandStats(ctx context.Context, params *CommandStatsParams) ([]*CommandStat, error)
	// CommandCountRunning counts RUNNING commands of a queue whose lease has not expired.
	CommandCountRunning(ctx context.Context, queue string) (int64, error)
}

// CurrentAudit returns a command's full audit trail from its stored entries and its columns.
//
// To keep the hot path cheap, the transitions whose every fact is already in the row are not
// stored as JSON: the send (CreatedAt, SentBy), the claim in progress (StartedAt, WorkerID,
// Attempt) and a handler's final COMPLETED or FAILED outcome (CompletedAt, ErrorCode,
// ErrorMessage) are rebuilt here. Every other transition (retries, the troubleshooting queue,
// lease expiry, releases, time-outs, operator actions) is stored with the row by the statement
// that makes it. Drivers call CurrentAudit after loading a row.
func CurrentAudit(row *CommandRow, stored []AuditEntry) []AuditEntry {
	out := make([]AuditEntry, 0, len(stored)+3)
	if row.StartedAt == nil && row.Status.Terminal() && len(stored) == 0 {
		// Inserted already finished (a record of work done elsewhere): one entry says it all.
		return append(out, AuditEntry{At: row.CreatedAt, Event: "SENT", To: row.Status, Actor: row.SentBy})
	}
	out = append(out, AuditEntry{At: row.CreatedAt, Event: "SENT", To: CommandStatusPending, Actor: row.SentBy})
	out = append(out, stored...)
	claim := func() {
		if row.StartedAt != nil {
			out = append(out, AuditEntry{
				At: *row.StartedAt, Event: "CLAIMED", From: CommandStatusPending, To: CommandStatusRunning,
				Attempt: row.Attempt, Actor: row.WorkerID,
			})
		}
	}
	lastEvent := ""
	if len(stored) > 0 {
		lastEvent = stored[len(stored)-1].Event
	}
	switch row.Status {
	case CommandStatusRunning:
		claim()
	case CommandStatusCompleted, CommandStatusFailed:
		if lastEvent == "TSQ_COMPLETE" || row.CompletedAt == nil {
			break // completed by an operator, whose entry is stored
		}
		claim()
		out = append(out, AuditEntry{
			At: *row.CompletedAt, Event: string(row.Status), From: CommandStatusRunning, To: row.Status,
			Attempt: row.Attempt, ErrorCode: row.ErrorCode, ErrorMessage: row.ErrorMessage,
		})
	}
	return out
}

// CommandClaimByIDParams claims one command by id: the command a broker delivered.
type CommandClaimByIDParams struct {
	ID       uuid.UUID
	Lease    time.Duration
	WorkerID string
	Now      *time.Time
	// Inbox, when set, names the delivered message and its consumer: the command is not claimed
	// when the inbox holds that message for that consumer, and the claim fails with ErrDuplicate.
	// Only MessageID and Handler are read.
	Inbox *InboxInsertParams
}

// CommandListExpiredParams lists, in the given queues, RUNNING commands whose lease expired and
// PENDING or RUNNING commands whose deadline passed: the watchdog's work for queues no worker
// claims.
type CommandListExpiredParams struct {
	Queues []string
	Max    int
	Now    *time.Time
	// LastAttempts lists only RUNNING commands whose lease expired on their last attempt
	// (attempt >= max_attempts): the watchdog's work in queues workers claim, since CommandClaim
	// does not claim those again.
	LastAttempts bool
}

// CommandDeliveryExecutor holds the command queries of brokered transports and the watchdog.
type CommandDeliveryExecutor interface {
	// CommandClaimByID claims the command like CommandClaim (attempt and fence grow, leased to
	// WorkerID) when it is PENDING and visible, or RUNNING with an expired lease. It returns
	// ErrNotFound, or ErrConflict when the command is not claimable (finished, parked, not yet
	// due, or held by a live lease).
	CommandClaimByID(ctx context.Context, params *CommandClaimByIDParams) (*CommandRow, error)
	CommandListExpired(ctx context.Context, params *CommandListExpiredParams) ([]*CommandRow, error)
}
