package driver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// OutboxCategory is what an outbox message carries: a command to a bounded context, a
// reply to a command's sender, or an event for whoever listens.
type OutboxCategory string

// The outbox categories.
const (
	OutboxCategoryCommand OutboxCategory = "command"
	OutboxCategoryReply   OutboxCategory = "reply"
	OutboxCategoryEvent   OutboxCategory = "event"
)

// OutboxStatus is where an outbox message is in its publication:
//
//	NEW ──relay publishes──▶ PUBLISHED
//	 │ ▲
//	 └─┘ publish failed: attempts+1, next_at = now + backoff;  too many attempts ──▶ FAILED
type OutboxStatus string

// The outbox statuses.
const (
	OutboxStatusNew       OutboxStatus = "NEW"
	OutboxStatusPublished OutboxStatus = "PUBLISHED"
	OutboxStatusFailed    OutboxStatus = "FAILED"
)

// OutboxInsertParams is one message to publish after the enclosing transaction commits.
type OutboxInsertParams struct {
	Category OutboxCategory
	// Transport names the publisher that sends it: "amqp" or "kafka".
	Transport string
	// Topic is the AMQP queue or the Kafka topic.
	Topic string
	// Key orders messages: messages of one key are published in the order they were written.
	// Empty: no ordering with other messages.
	Key string
	// Type is the envelope type (CommandRequested, CommandCompleted, ...).
	Type      string
	MessageID string
	// Payload is the message body (an encoded envelope): a JSON document.
	Payload json.RawMessage
	// Headers are transport headers (correlation id, reply-to, traceparent, ...).
	Headers map[string]string
	// NextAt delays the first publication (a scheduled command). Nil: at once.
	NextAt *time.Time
	// Delay, when positive and NextAt is nil, delays the first publication by this long from the
	// database's now: a retry's backoff, due exactly when the command is.
	Delay time.Duration
	// Packed are the messages a packed row carries (outbox.Pack sets it; it is not stored): a
	// relay handed the row (outbox.Relay.Handoff) publishes them without parsing Payload.
	Packed []*OutboxInsertParams
}

// OutboxInsertManyParams writes messages in one round trip.
type OutboxInsertManyParams struct {
	Messages []*OutboxInsertParams
	Now      *time.Time
}

// OutboxRow is an outbox message as stored.
type OutboxRow struct {
	ID          int64
	Category    OutboxCategory
	Transport   string
	Topic       string
	Key         string
	Type        string
	MessageID   string
	Payload     json.RawMessage
	Headers     map[string]string
	Status      OutboxStatus
	Attempts    int
	NextAt      *time.Time
	LockedUntil *time.Time
	LockedBy    string
	LastError   string
	CreatedAt   time.Time
	PublishedAt *time.Time
	// Packed are the messages of a packed row when they are known in memory (a row handed to the
	// relay, see OutboxInsertParams.Packed); nil for a row read from the outbox.
	Packed []*OutboxInsertParams
}

// OutboxClaimParams leases up to Max publishable messages to a relay. A message is publishable
// when it is NEW, due (next_at passed), not leased by a live relay, and either the first
// unpublished message of its key or one of the consecutive publishable messages that follow that
// first one (the claim takes a key's run of due messages together, up to the first that is not
// due or not this relay's transport), so that messages of one key are published one after the
// other in the order they were written, whichever relay publishes them. The relay's publisher
// keeps the order within a claimed run (a failed message fails those after it). On PostgreSQL only messages written by
// transactions older than every transaction still running are taken: a transaction that commits
// late can hold messages back, never be overtaken or skipped.
type OutboxClaimParams struct {
	// Transports restricts the claim to messages this relay can publish.
	Transports []string
	Max        int
	Lease      time.Duration
	RelayID    string
	Now        *time.Time
	// Published are messages this relay published since its last claim: the claim marks them
	// published first (as OutboxMarkPublished does), in the claim's transaction, and their keys'
	// next messages may be claimed with it. A relay saves a round trip per batch this way.
	Published []int64
	// Below, when positive, restricts the claim to messages with a smaller id: a key's run stops
	// at its first message at or above it. A relay sets it to the smallest id handed over to it
	// and not yet published and marked (see WrittenMessage), so that its claims do not publish
	// again what its hand-off is publishing.
	Below int64
}

// OutboxHandoff hands the outbox messages a write commits to a relay in the same process
// (outbox.Relay.Handoff), which publishes them at once, from memory. The messages are written
// leased to Holder for Lease, so that no relay's claim takes them meanwhile: the relay publishes
// and marks them, or releases those it leaves to the claims. Should it die, the claims take
// them when the lease ends. Written is called after the commit with the messages written, in id
// order; not when there are none. With an empty Holder the messages are only reported: not
// leased, and without their Previous (0).
type OutboxHandoff struct {
	// Holder is the lease holder the messages are written leased to (the relay's hand-off).
	Holder string
	// Lease is how long they are leased from their write.
	Lease time.Duration
	// Written is called after the commit with the messages written.
	Written func(written []WrittenMessage)
}

// WrittenMessage is an outbox message just written, as a writer reports it after the commit
// (OutboxHandoff): enough for a relay in the same process to publish it at once, from memory.
type WrittenMessage struct {
	// ID is the message's row id.
	ID int64
	// Key is the message's key, empty when it has none.
	Key string
	// Previous is the id of the latest unpublished message of Key that the writing transaction saw
	// before its own (0: none; always 0 without a key). The earlier messages of a key are
	// published first, so a message whose Previous is 0, or was published, may be published at
	// once without breaking its key's order. Two messages of one key written together: the
	// second's Previous is the first.
	Previous int64
	// CreatedAt is the message's created_at.
	CreatedAt time.Time
	// Message is the message as stored, or nil when the stored one differs from what the writer
	// gave (a suspension's message gets the operator's actor and reason in the statement).
	Message *OutboxInsertParams
}

// OutboxMarkPublishedParams marks messages published.
type OutboxMarkPublishedParams struct {
	IDs []int64
	Now *time.Time
}

// OutboxFailure is one message whose publication failed.
type OutboxFailure struct {
	ID    int64
	Error string
	// RetryDelay is the backoff before the next attempt.
	RetryDelay time.Duration
	// GiveUp marks the message FAILED: the relay stops trying.
	GiveUp bool
	// Unattempted means the message was not sent at all (an earlier message of its key failed):
	// its claim does not count as an attempt.
	Unattempted bool
}

// OutboxResendParams puts FAILED messages back to NEW, due at once, with their attempts reset.
type OutboxResendParams struct {
	IDs []int64
	Now *time.Time
}

// OutboxMarkFailedParams records failed publications of messages still leased to RelayID.
type OutboxMarkFailedParams struct {
	Failures []*OutboxFailure
	RelayID  string
	Now      *time.Time
}

// OutboxListParams filters an outbox listing, newest first; zero fields do not filter.
type OutboxListParams struct {
	Statuses  []OutboxStatus
	Transport string
	Topic     string
	// BeforeID pages backwards: messages are listed newest (highest id) first, and the next page
	// starts below the last id seen. Zero: the first page.
	BeforeID int64
	Limit    int
}

// OutboxBacklog counts the unpublished messages of one transport and category.
type OutboxBacklog struct {
	Transport string
	Category  OutboxCategory
	New       int64
	Failed    int64
	// OldestNew is when the oldest NEW message was written (nil when none).
	OldestNew *time.Time
}

// OutboxExecutor holds the outbox queries.
type OutboxExecutor interface {
	// OutboxInsertMany returns the new ids in input order.
	OutboxInsertMany(ctx context.Context, params *OutboxInsertManyParams) ([]int64, error)
	// OutboxClaim returns the claimed messages in publication order, attempts incremented.
	OutboxClaim(ctx context.Context, params *OutboxClaimParams) ([]*OutboxRow, error)
	// OutboxMarkPublished returns how many NEW messages it marked.
	OutboxMarkPublished(ctx context.Context, params *OutboxMarkPublishedParams) (int64, error)
	// OutboxMarkFailed returns how many messages it updated (those still leased to the relay).
	OutboxMarkFailed(ctx context.Context, params *OutboxMarkFailedParams) (int64, error)
	OutboxList(ctx context.Context, params *OutboxListParams) ([]*OutboxRow, error)
	OutboxBacklog(ctx context.Context) ([]*OutboxBacklog, error)
	// OutboxDeletePublished deletes up to max messages published before before.
	OutboxDeletePublished(ctx context.Context, before time.Time, max int) (int64, error)
	// OutboxGet returns one message, or ErrNotFound.
	OutboxGet(ctx context.Context, id int64) (*OutboxRow, error)
	// OutboxResend puts the FAILED messages among params.IDs back to NEW (attempts 0, due now)
	// and returns their ids; messages in another status are left alone.
	OutboxResend(ctx context.Context, params *OutboxResendParams) ([]int64, error)
}

// InboxInsertParams records that handler processed message MessageID.
type InboxInsertParams struct {
	MessageID string
	Handler   string
	Now       *time.Time
}

// InboxExecutor holds the inbox (idempotent receiver) queries.
type InboxExecutor interface {
	// InboxInsert records the message for the handler and reports whether this was the first
	// write; false means a duplicate delivery, and nothing was written.
	InboxInsert(ctx context.Context, params *InboxInsertParams) (bool, error)
	// InboxInsertWithCommands records the message for the handler and, only when this is the
	// first time, inserts commands with it, atomically (one statement on PostgreSQL). It reports
	// whether this was the first time. A broker's reply is filed this way: its reply row exists
	// exactly when its inbox record does.
	InboxInsertWithCommands(ctx context.Context, params *InboxInsertParams, commands *CommandInsertManyParams) (bool, error)
	// InboxExists reports whether the handler already processed the message.
	InboxExists(ctx context.Context, messageID, handler string) (bool, error)
	// InboxDeleteBefore deletes up to max entries processed before before.
	InboxDeleteBefore(ctx context.Context, before time.Time, max int) (int64, error)
}

// DLQRow is a command parked in the troubleshooting queue, as the dead-letter table (command_dlq)
// records it, with the command itself.
type DLQRow struct {
	CommandID uuid.UUID   `json:"commandId,omitzero"`
	ParkedAt  time.Time   `json:"parkedAt"`
	ParkedBy  string      `json:"parkedBy,omitempty"`
	Attempts  int         `json:"attempts"`
	Error     string      `json:"error,omitempty"`
	Command   *CommandRow `json:"command,omitempty"`
}

// DLQListParams filters the dead-letter listing, most recently parked first; zero fields do not
// filter.
type DLQListParams struct {
	Domain   string
	Type     string
	TenantID string
	// After pages backwards: entries are listed most recently parked first (parked_at, then
	// command id, descending), and the next page starts after the last entry seen. Nil: the
	// first page.
	After *DLQCursor
	Limit int
}

// DLQCursor is the key of a dead-letter entry in listing order: when it was parked and its
// command id (which breaks ties between entries parked at the same instant).
type DLQCursor struct {
	ParkedAt  time.Time
	CommandID uuid.UUID
}

// DLQDepth counts the parked commands of one domain.
type DLQDepth struct {
	Domain string `json:"domain,omitempty"`
	Count  int64  `json:"count"`
}

// DLQExecutor holds the dead-letter queries. Rows are written and removed by the command
// statements that move a command into and out of IN_TSQ (CommandCompleteMany,
// CommandOperatorAction), never on their own.
type DLQExecutor interface {
	DLQList(ctx context.Context, params *DLQListParams) ([]*DLQRow, error)
	// DLQGet returns ErrNotFound when the command is not parked.
	DLQGet(ctx context.Context, commandID uuid.UUID) (*DLQRow, error)
	DLQDepths(ctx context.Context) ([]*DLQDepth, error)
}
