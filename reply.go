package commandbus

import (
	"encoding/json"

	"github.com/google/uuid"
)

// Outcome is how a command ended, as told by its reply.
type Outcome string

// The reply outcomes.
const (
	OutcomeSuccess   Outcome = "SUCCESS"
	OutcomeFailed    Outcome = "FAILED"
	OutcomeCancelled Outcome = "CANCELLED"
	OutcomeTimedOut  Outcome = "TIMED_OUT"
)

// ReplyType is the command type of reply messages on a reply queue.
const ReplyType = "CommandReply"

// Reply is sent to a command's replyTo queue when the command completes, fails on a business
// rule, is cancelled or completed by an operator, or times out.
type Reply struct {
	CommandID     uuid.UUID       `json:"commandId"`
	CorrelationID uuid.UUID       `json:"correlationId,omitempty"`
	Domain        string          `json:"domain"`
	CommandType   string          `json:"commandType"`
	Outcome       Outcome         `json:"outcome"`
	Result        json.RawMessage `json:"result,omitempty"`
	ErrorCode     string          `json:"errorCode,omitempty"`
	ErrorMessage  string          `json:"errorMessage,omitempty"`
	// Headers are the original command's headers, so a reply handler can find its context.
	Headers map[string]string `json:"headers,omitempty"`
}

// Succeeded reports whether the command succeeded.
func (r *Reply) Succeeded() bool { return r.Outcome == OutcomeSuccess }

// ReplyMessage is a reply delivered to a reply handler: the decoded reply plus its stored row.
type ReplyMessage struct {
	*CommandRow
	Reply Reply
}
