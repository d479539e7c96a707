package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/tracecontext"
)

// SchemaVersion is the envelope version this package writes and reads.
const SchemaVersion = "1"

// MaxEnvelopeSize bounds a message the decoder accepts.
const MaxEnvelopeSize = 4 << 20

// Type is what an envelope announces: a command request or a command's outcome.
type Type string

// The envelope types. A command's COMPLETED status is announced as CommandCompleted; FAILED as
// CommandFailed (also for an operator's cancellation); TIMED_OUT as CommandTimedOut.
const (
	TypeCommandRequested Type = "CommandRequested"
	TypeCommandCompleted Type = "CommandCompleted"
	TypeCommandFailed    Type = "CommandFailed"
	TypeCommandTimedOut  Type = "CommandTimedOut"
)

// Valid reports whether t is one of the four types.
func (t Type) Valid() bool {
	switch t {
	case TypeCommandRequested, TypeCommandCompleted, TypeCommandFailed, TypeCommandTimedOut:
		return true
	}
	return false
}

// Envelope is the message envelope, version 1: the same JSON for every transport and
// every language.
//
//	{
//	  "messageId": "uuid", "type": "CommandRequested", "name": "BookFx",
//	  "commandId": "uuid", "correlationId": "uuid", "causationId": "uuid",
//	  "occurredAt": "2025-11-02T12:34:56Z", "key": "paymentId",
//	  "headers": {"replyTo": "APP.CMD.REPLY.Q", "tenantId": "acme", "schemaVersion": "1",
//	              "idempotencyKey": "sagaId:STEP", "traceId": "...", "spanId": "..."},
//	  "payload": {...domain JSON...}
//	}
//
// The payload is written as a JSON object; the decoder also accepts it as a string holding a JSON
// object, a form other producers send.
type Envelope struct {
	MessageID     uuid.UUID
	Type          Type
	Name          string
	CommandID     uuid.UUID
	CorrelationID uuid.UUID // uuid.Nil when absent
	CausationID   uuid.UUID // uuid.Nil when absent
	OccurredAt    time.Time
	Key           string
	Headers       Headers
	Payload       json.RawMessage
}

// Headers are the envelope's headers.
type Headers struct {
	ReplyTo        string
	TenantID       string
	SchemaVersion  string
	IdempotencyKey string
	// TraceID and SpanID are W3C trace context ids (32 and 16 lower-case hex digits), or empty.
	TraceID string
	SpanID  string
}

// Trace returns the span context the headers carry.
func (h Headers) Trace() (tracecontext.SpanContext, bool) {
	traceID, err := tracecontext.ParseTraceID(h.TraceID)
	if err != nil {
		return tracecontext.SpanContext{}, false
	}
	spanID, err := tracecontext.ParseSpanID(h.SpanID)
	if err != nil {
		return tracecontext.SpanContext{}, false
	}
	return tracecontext.SpanContext{TraceID: traceID, SpanID: spanID, Sampled: true}, true
}

// wireEnvelope is the JSON form.
type wireEnvelope struct {
	MessageID     string          `json:"messageId"`
	Type          string          `json:"type"`
	Name          string          `json:"name"`
	CommandID     string          `json:"commandId"`
	CorrelationID string          `json:"correlationId,omitempty"`
	CausationID   string          `json:"causationId,omitempty"`
	OccurredAt    string          `json:"occurredAt"`
	Key           string          `json:"key,omitempty"`
	Headers       *wireHeaders    `json:"headers"`
	Payload       json.RawMessage `json:"payload"`
}

type wireHeaders struct {
	ReplyTo        string  `json:"replyTo,omitempty"`
	TenantID       string  `json:"tenantId,omitempty"`
	SchemaVersion  *string `json:"schemaVersion"`
	IdempotencyKey string  `json:"idempotencyKey,omitempty"`
	TraceID        string  `json:"traceId,omitempty"`
	SpanID         string  `json:"spanId,omitempty"`
}

// The decode error codes. An invalid envelope goes to the dead-letter queue; one of an unknown
// schema version is parked until a consumer that knows it is deployed.
const (
	CodeInvalidEnvelope      = "INVALID_ENVELOPE"
	CodeUnknownSchemaVersion = "UNKNOWN_SCHEMA_VERSION"
)

// DecodeError says why a message is not a valid envelope. Its code survives a trip through a
// header or a database: Is compares codes.
type DecodeError struct {
	Code string
	// Field is the JSON path of the offending field, when one is to blame.
	Field   string
	Message string
}

// Error returns the code, the field and the message.
func (e *DecodeError) Error() string {
	if e.Field == "" {
		return e.Code + ": " + e.Message
	}
	return e.Code + ": " + e.Field + ": " + e.Message
}

// Is reports whether target is a *DecodeError with the same code.
func (e *DecodeError) Is(target error) bool {
	var t *DecodeError
	return errors.As(target, &t) && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrInvalidEnvelope      = &DecodeError{Code: CodeInvalidEnvelope}
	ErrUnknownSchemaVersion = &DecodeError{Code: CodeUnknownSchemaVersion}
)

func invalid(field, format string, args ...any) error {
	return &DecodeError{Code: CodeInvalidEnvelope, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Encode writes e as JSON. It validates e first: what Encode writes, Decode reads back.
func (e *Envelope) Encode() ([]byte, error) {
	if err := e.validate(); err != nil {
		return nil, err
	}
	version := e.Headers.SchemaVersion
	w := wireEnvelope{
		MessageID: e.MessageID.String(), Type: string(e.Type), Name: e.Name, CommandID: e.CommandID.String(),
		OccurredAt: e.OccurredAt.UTC().Format(time.RFC3339Nano), Key: e.Key,
		Headers: &wireHeaders{ReplyTo: e.Headers.ReplyTo, TenantID: e.Headers.TenantID, SchemaVersion: &version,
			IdempotencyKey: e.Headers.IdempotencyKey, TraceID: e.Headers.TraceID, SpanID: e.Headers.SpanID},
	}
	if e.CorrelationID != uuid.Nil {
		w.CorrelationID = e.CorrelationID.String()
	}
	if e.CausationID != uuid.Nil {
		w.CausationID = e.CausationID.String()
	}
	var payload bytes.Buffer
	if err := json.Compact(&payload, e.Payload); err != nil {
		return nil, invalid("payload", "not JSON: %v", err)
	}
	w.Payload = payload.Bytes()
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&w); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// validate checks what Decode checks, on a value built in Go.
func (e *Envelope) validate() error {
	switch {
	case e.MessageID == uuid.Nil:
		return invalid("messageId", "required")
	case !e.Type.Valid():
		return invalid("type", "%q is not CommandRequested, CommandCompleted, CommandFailed or CommandTimedOut", e.Type)
	case e.Name == "":
		return invalid("name", "required")
	case e.CommandID == uuid.Nil:
		return invalid("commandId", "required")
	case e.OccurredAt.IsZero():
		return invalid("occurredAt", "required")
	case e.OccurredAt.Year() < 1 || e.OccurredAt.Year() > 9999:
		return invalid("occurredAt", "year out of range")
	case e.Headers.SchemaVersion != SchemaVersion:
		return &DecodeError{Code: CodeUnknownSchemaVersion, Field: "headers.schemaVersion", Message: fmt.Sprintf("%q; this version reads %q", e.Headers.SchemaVersion, SchemaVersion)}
	}
	if e.Headers.TraceID != "" {
		if _, err := tracecontext.ParseTraceID(e.Headers.TraceID); err != nil {
			return invalid("headers.traceId", "%v", err)
		}
	}
	if e.Headers.SpanID != "" {
		if _, err := tracecontext.ParseSpanID(e.Headers.SpanID); err != nil {
			return invalid("headers.spanId", "%v", err)
		}
	}
	if !isJSONObject(e.Payload) {
		return invalid("payload", "must be a JSON object")
	}
	return nil
}

func isJSONObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// Decode reads an envelope strictly: every required field present and well formed (UUIDs in
// their canonical form, occurredAt in RFC 3339, a known type, W3C trace ids), no unknown field, no
// trailing data. A message of another schema version gives an error matching
// ErrUnknownSchemaVersion (park it); any other problem one matching ErrInvalidEnvelope (dead-letter
// it). The error says which field is wrong.
func Decode(data []byte) (*Envelope, error) {
	if len(data) > MaxEnvelopeSize {
		return nil, invalid("", "%d bytes is more than the %d an envelope may have", len(data), MaxEnvelopeSize)
	}
	// The version decides which rules apply, so it is read first and leniently: a newer
	// version may well have fields this one does not know.
	var peek struct {
		Headers struct {
			SchemaVersion json.RawMessage `json:"schemaVersion"`
		} `json:"headers"`
	}
	if err := json.Unmarshal(data, &peek); err != nil {
		return nil, invalid("", "not a JSON object: %v", err)
	}
	if v := peek.Headers.SchemaVersion; len(v) > 0 && string(v) != "null" && string(v) != `"`+SchemaVersion+`"` {
		return nil, &DecodeError{Code: CodeUnknownSchemaVersion, Field: "headers.schemaVersion",
			Message: fmt.Sprintf("%s; this version reads %q", v, SchemaVersion)}
	}

	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireEnvelope
	if err := dec.Decode(&w); err != nil {
		return nil, invalid("", "%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("", "data after the envelope")
	}
	if w.Headers == nil {
		return nil, invalid("headers", "required")
	}
	if w.Headers.SchemaVersion == nil {
		return nil, invalid("headers.schemaVersion", "required")
	}
	e := &Envelope{
		Type: Type(w.Type), Name: w.Name, Key: w.Key,
		Headers: Headers{ReplyTo: w.Headers.ReplyTo, TenantID: w.Headers.TenantID, SchemaVersion: *w.Headers.SchemaVersion,
			IdempotencyKey: w.Headers.IdempotencyKey, TraceID: w.Headers.TraceID, SpanID: w.Headers.SpanID},
	}
	var err error
	if e.MessageID, err = parseUUID("messageId", w.MessageID, true); err != nil {
		return nil, err
	}
	if e.CommandID, err = parseUUID("commandId", w.CommandID, true); err != nil {
		return nil, err
	}
	if e.CorrelationID, err = parseUUID("correlationId", w.CorrelationID, false); err != nil {
		return nil, err
	}
	if e.CausationID, err = parseUUID("causationId", w.CausationID, false); err != nil {
		return nil, err
	}
	if w.OccurredAt == "" {
		return nil, invalid("occurredAt", "required")
	}
	if e.OccurredAt, err = time.Parse(time.RFC3339Nano, w.OccurredAt); err != nil {
		return nil, invalid("occurredAt", "want RFC 3339, got %q", w.OccurredAt)
	}
	if len(w.Payload) == 0 || string(w.Payload) == "null" {
		return nil, invalid("payload", "required")
	}
	e.Payload = w.Payload
	if w.Payload[0] == '"' {
		// The string form: a JSON object inside a JSON string.
		var inner string
		if err := json.Unmarshal(w.Payload, &inner); err != nil {
			return nil, invalid("payload", "%v", err)
		}
		e.Payload = json.RawMessage(inner)
	}
	if err := e.validate(); err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, e.Payload) // valid: checked by validate
	e.Payload = compact.Bytes()
	return e, nil
}

func parseUUID(field, s string, required bool) (uuid.UUID, error) {
	if s == "" {
		if required {
			return uuid.Nil, invalid(field, "required")
		}
		return uuid.Nil, nil
	}
	if len(s) != 36 {
		return uuid.Nil, invalid(field, "want a UUID (8-4-4-4-12 hex digits), got %q", s)
	}
	id, err := uuid.Parse(s)
	if err != nil || id == uuid.Nil {
		return uuid.Nil, invalid(field, "want a UUID (8-4-4-4-12 hex digits), got %q", s)
	}
	return id, nil
}
