package orchestration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/input"
)

// MaxInboundEventBytes bounds an inbound event's encoded envelope.
const MaxInboundEventBytes = 1 << 20

// InboundEvent is an event from another system that may start executions (see
// Runtime.Trigger). On the wire it is a JSON object shaped as a CloudEvents 1.0 event in
// structured mode, the same for every source (POST /api/events, an AMQP queue, a Kafka topic):
//
//	{"specversion": "1.0", "id": "evt-1", "type": "PaymentReceived", "source": "core-banking",
//	 "time": "2026-11-26T10:00:00Z", "tenant": "acme", "data": {"amount": "12.50"}}
//
// id, type and source are required; (source, id) identifies the event, so a redelivery of it
// starts nothing new. Other CloudEvents attributes (datacontenttype, subject, extensions) are
// accepted and ignored.
type InboundEvent struct {
	// ID identifies the event within its source. Required; at most 200 characters.
	ID string `json:"id"`
	// Type names what happened ("PaymentReceived"); triggers are looked up by it. Required.
	Type string `json:"type"`
	// Source names the system or context the event comes from ("core-banking"). Required.
	Source string `json:"source"`
	// Time is when it happened (RFC 3339), when the source says.
	Time *time.Time `json:"time,omitempty"`
	// Tenant is the tenant the started executions belong to, when any.
	Tenant string `json:"tenant,omitempty"`
	// Data is the event's payload, any JSON value; by default the started execution's input.
	Data json.RawMessage `json:"data,omitempty"`
}

// ErrMalformedEvent matches (errors.Is) every error about an inbound event that no redelivery
// can fix: not a JSON object, a required attribute missing, or data a trigger refuses. The
// transports dead-letter such an event with the error as its reason.
var ErrMalformedEvent = errors.New("malformed inbound event")

// MalformedEventError says what is wrong with an inbound event, one validation error per field
// (id, type, source, time, tenant, specversion, data, or body for the envelope as a whole). It
// matches ErrMalformedEvent.
type MalformedEventError struct {
	// EventID is the event's id when it could be read.
	EventID  string
	Problems []*commandbus.ValidationError
}

// Error lists the problems.
func (e *MalformedEventError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Field + ": " + p.Message
	}
	return ErrMalformedEvent.Error() + ": " + strings.Join(parts, "; ")
}

// Is matches ErrMalformedEvent.
func (e *MalformedEventError) Is(target error) bool { return target == ErrMalformedEvent }

// Unwrap returns the problems, so errors.As finds each *commandbus.ValidationError.
func (e *MalformedEventError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

func malformed(eventID string, problems ...*commandbus.ValidationError) error {
	return &MalformedEventError{EventID: eventID, Problems: problems}
}

// dataText is what strings in an event's data may hold: anything printable, several lines.
var dataText = input.Text{Multiline: true}

// ParseInboundEvent decodes and validates an event envelope. Every problem is reported at once,
// naming its field, in a *MalformedEventError.
func ParseInboundEvent(body []byte) (*InboundEvent, error) {
	if len(body) > MaxInboundEventBytes {
		return nil, malformed("", &commandbus.ValidationError{Field: "body", Message: fmt.Sprintf("is %d bytes long; at most %d are allowed", len(body), MaxInboundEventBytes)})
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil || fields == nil {
		msg := "must be a JSON object"
		if err != nil {
			msg += ": " + err.Error()
		}
		return nil, malformed("", &commandbus.ValidationError{Field: "body", Message: msg})
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, malformed("", &commandbus.ValidationError{Field: "body", Message: "has data after the JSON object; send exactly one event"})
	}
	ev := &InboundEvent{}
	var problems []*commandbus.ValidationError
	text := func(name string, required bool) string {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			if required {
				problems = append(problems, &commandbus.ValidationError{Field: name, Message: "is required"})
			}
			return ""
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			problems = append(problems, &commandbus.ValidationError{Field: name, Message: "must be a string"})
			return ""
		}
		switch msg := input.Identifier.Check(s); {
		case msg != "":
			problems = append(problems, &commandbus.ValidationError{Field: name, Message: msg})
		case s == "" && required:
			problems = append(problems, &commandbus.ValidationError{Field: name, Message: "must not be empty"})
		}
		return s
	}
	ev.ID = text("id", true)
	ev.Type = text("type", true)
	ev.Source = text("source", true)
	ev.Tenant = text("tenant", false)
	if v := text("specversion", false); v != "" && v != "1.0" {
		problems = append(problems, &commandbus.ValidationError{Field: "specversion", Message: "must be 1.0, got " + input.Quote(v)})
	}
	if at := text("time", false); at != "" {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			problems = append(problems, &commandbus.ValidationError{Field: "time", Message: "must be an RFC 3339 time such as 2026-11-26T10:00:00Z, got " + input.Quote(at)})
		} else {
			ev.Time = &t
		}
	}
	if raw, ok := fields["data"]; ok && string(raw) != "null" {
		if p := checkData(raw); p != nil {
			problems = append(problems, p)
		} else {
			ev.Data = raw
		}
	}
	if len(problems) > 0 {
		return nil, malformed(ev.ID, problems...)
	}
	return ev, nil
}

// checkData refuses data PostgreSQL cannot store (a NUL escape, control characters in keys).
func checkData(raw json.RawMessage) *commandbus.ValidationError {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return &commandbus.ValidationError{Field: "data", Message: "must be valid JSON"}
	}
	if p := dataText.CheckJSON(v); p != nil {
		field := "data"
		if p.Path != "" {
			field += "." + p.Path
		}
		return &commandbus.ValidationError{Field: field, Message: p.Message}
	}
	return nil
}

// validate checks an event built in code the way ParseInboundEvent checks a decoded one.
func (ev *InboundEvent) validate() error {
	var problems []*commandbus.ValidationError
	for _, f := range []struct {
		name, value string
		required    bool
	}{{"id", ev.ID, true}, {"type", ev.Type, true}, {"source", ev.Source, true}, {"tenant", ev.Tenant, false}} {
		switch msg := input.Identifier.Check(f.value); {
		case msg != "":
			problems = append(problems, &commandbus.ValidationError{Field: f.name, Message: msg})
		case f.value == "" && f.required:
			problems = append(problems, &commandbus.ValidationError{Field: f.name, Message: "is required"})
		}
	}
	if len(ev.Data) > 0 && string(ev.Data) != "null" {
		if p := checkData(ev.Data); p != nil {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return malformed(ev.ID, problems...)
	}
	return nil
}

// dedupeKey is the event's inbox key: its source and id, unambiguously joined.
func (ev *InboundEvent) dedupeKey() string {
	return "event:" + strconv.Itoa(len(ev.Source)) + ":" + ev.Source + ":" + ev.ID
}
