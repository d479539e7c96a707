package commandbus

import (
	"encoding/json"
	"sort"
	"unicode/utf8"

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
	// OutcomeParked is not an end: the command moved to the troubleshooting queue and waits for
	// an operator. It is sent only for commands that ask for it (HeaderNotifyParked); the
	// command's final reply (SUCCESS after an operator retry or complete, CANCELLED after a
	// cancel) follows later. ErrorCode and ErrorMessage say why it was parked.
	OutcomeParked Outcome = "PARKED"
)

// HeaderNotifyParked, set to "true" on a command with a replyTo, asks for a PARKED reply when the
// command moves to the troubleshooting queue, written in the same transaction as the park, so
// the sender (a process's command step) learns at once that an operator must act instead of
// waiting for its reply timeout.
const HeaderNotifyParked = "commandbus-notify-parked"

// notifiesParked reports whether a command asked for a PARKED reply.
func notifiesParked(headers map[string]string) bool { return headers[HeaderNotifyParked] == "true" }

// ReplyType is the command type of reply messages on a reply queue.
const ReplyType = "CommandReply"

// Reply is sent to a command's replyTo queue when the command completes, fails on a business
// rule, is cancelled or completed by an operator, or times out.
type Reply struct {
	CommandID     uuid.UUID       `json:"commandId"`
	CorrelationID uuid.UUID       `json:"correlationId,omitzero"`
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

// encodeReply writes a reply as JSON without reflection: it is on the path of every command.
// The output is what json.Marshal(r) produces.
func encodeReply(r *Reply) json.RawMessage {
	b := make([]byte, 0, 160+len(r.Result)+len(r.ErrorMessage))
	b = append(b, `{"commandId":"`...)
	b = append(b, r.CommandID.String()...)
	b = append(b, '"')
	if r.CorrelationID != uuid.Nil {
		b = append(b, `,"correlationId":"`...)
		b = append(b, r.CorrelationID.String()...)
		b = append(b, '"')
	}
	b = appendField(b, "domain", r.Domain, false)
	b = appendField(b, "commandType", r.CommandType, false)
	b = appendField(b, "outcome", string(r.Outcome), false)
	if len(r.Result) > 0 {
		b = append(b, `,"result":`...)
		b = append(b, r.Result...)
	}
	b = appendField(b, "errorCode", r.ErrorCode, true)
	b = appendField(b, "errorMessage", r.ErrorMessage, true)
	if len(r.Headers) > 0 {
		keys := make([]string, 0, len(r.Headers))
		for k := range r.Headers {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, `,"headers":{`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, r.Headers[k])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendField(b []byte, name, value string, omitEmpty bool) []byte {
	if omitEmpty && value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, value)
}

// appendJSONString appends s as a JSON string, escaping as encoding/json does (including HTML
// characters) and replacing invalid UTF-8 with U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
