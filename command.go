package commandbus

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/commandbus/commandbus/driver"
)

// CommandArgs is the data of a command. Kind names its type and is persisted, so it must stay
// stable across renames of the Go type.
type CommandArgs interface {
	Kind() string
}

// RawArgs carries a command whose data is already JSON, for senders that do not have the Go type
// (the REST API, the CLI, other languages).
type RawArgs struct {
	Type string
	Data json.RawMessage
}

// Kind returns the command type.
func (r RawArgs) Kind() string { return r.Type }

// MarshalJSON returns the raw data.
func (r RawArgs) MarshalJSON() ([]byte, error) {
	if len(r.Data) == 0 {
		return []byte("{}"), nil
	}
	return r.Data, nil
}

// Command is a command delivered to a handler: its decoded arguments plus the stored row.
type Command[T CommandArgs] struct {
	*CommandRow
	Args T
}

// IdempotencyKey returns the key a handler should guard its side effect with: the sender's
// idempotency key when set, else the command id. It is stable across redeliveries.
func (c *Command[T]) IdempotencyKey() string {
	if c.CommandRow.IdempotencyKey != "" {
		return c.CommandRow.IdempotencyKey
	}
	return c.ID.String()
}

// CommandRow is a command as stored, with its status, attempts and audit trail.
type CommandRow = driver.CommandRow

// Status is a command's lifecycle status.
type Status = driver.CommandStatus

// The command statuses.
const (
	StatusPending   = driver.CommandStatusPending
	StatusRunning   = driver.CommandStatusRunning
	StatusCompleted = driver.CommandStatusCompleted
	StatusFailed    = driver.CommandStatusFailed
	StatusInTSQ     = driver.CommandStatusInTSQ
	StatusCancelled = driver.CommandStatusCancelled
	StatusTimedOut  = driver.CommandStatusTimedOut
)

// AuditEntry is one transition in a command's audit trail.
type AuditEntry = driver.AuditEntry

const (
	commandQueueSuffix = "__commands"
	replyQueueSuffix   = "__replies"
)

// CommandQueue is the queue holding a domain's commands.
func CommandQueue(domain string) string { return domain + commandQueueSuffix }

// ReplyQueue is the queue holding replies addressed to a domain.
func ReplyQueue(domain string) string { return domain + replyQueueSuffix }

// normalizeReplyTo accepts a domain ("payments") or its reply queue ("payments__replies") and
// returns the queue and its domain.
func normalizeReplyTo(replyTo string) (queue, domain string, err error) {
	if replyTo == "" {
		return "", "", nil
	}
	domain = strings.TrimSuffix(replyTo, replyQueueSuffix)
	if !validName(domain) {
		return "", "", &ValidationError{Field: "replyTo", Message: fmt.Sprintf("%q is neither a domain name nor a reply queue (<domain>__replies)", replyTo)}
	}
	return ReplyQueue(domain), domain, nil
}
