// Package tracecontext carries W3C Trace Context (https://www.w3.org/TR/trace-context/) through
// commandbus: the trace id and span id of the code that sends a command travel in the command's
// headers, in every envelope, AMQP message and Kafka record it causes, and into the context of
// the handler that runs it, so one trace spans every bounded context a payment crosses.
//
// It depends on no tracing library. Put the sender's span in the context with ContextWith (an
// OpenTelemetry user passes span.SpanContext().TraceID() and SpanID()); read what arrived with
// FromContext. Package tracing builds OpenTelemetry spans on it: a span in the context (of either
// kind) is the parent of the spans commandbus creates, and each of those is put back in the
// context here, so the commands sent under it carry its traceparent.
package tracecontext

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
)

// Header is the name of the header that carries a traceparent, as W3C Trace Context names it.
const Header = "traceparent"

// TraceID identifies a trace: 16 bytes, not all zero.
type TraceID [16]byte

// SpanID identifies a span: 8 bytes, not all zero.
type SpanID [8]byte

// String returns the id as 32 lower-case hex digits.
func (t TraceID) String() string { return hex.EncodeToString(t[:]) }

// String returns the id as 16 lower-case hex digits.
func (s SpanID) String() string { return hex.EncodeToString(s[:]) }

// IsValid reports whether the id is not all zero.
func (t TraceID) IsValid() bool { return t != TraceID{} }

// IsValid reports whether the id is not all zero.
func (s SpanID) IsValid() bool { return s != SpanID{} }

// SpanContext is the part of a span that crosses process boundaries.
type SpanContext struct {
	TraceID TraceID
	SpanID  SpanID
	// Sampled is the sampled flag of the trace flags.
	Sampled bool
}

// IsValid reports whether both ids are set.
func (sc SpanContext) IsValid() bool { return sc.TraceID.IsValid() && sc.SpanID.IsValid() }

// Traceparent formats sc as a version-00 traceparent header value, or "" when sc is not valid.
func (sc SpanContext) Traceparent() string {
	if !sc.IsValid() {
		return ""
	}
	flags := "00"
	if sc.Sampled {
		flags = "01"
	}
	return "00-" + sc.TraceID.String() + "-" + sc.SpanID.String() + "-" + flags
}

// ErrInvalid is returned for a malformed trace id, span id or traceparent.
var ErrInvalid = errors.New("tracecontext: invalid")

// ParseTraceparent reads a traceparent header value. Versions above 00 are read as the
// specification asks: their first four fields as version 00's.
func ParseTraceparent(s string) (SpanContext, error) {
	var sc SpanContext
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return sc, fmt.Errorf("%w traceparent %q: want 00-<32 hex>-<16 hex>-<2 hex>", ErrInvalid, s)
	}
	version, err := hexByte(s[0:2])
	if err != nil || version == 0xff || (version == 0 && len(s) != 55) || (len(s) > 55 && s[55] != '-') {
		return sc, fmt.Errorf("%w traceparent %q: bad version or length", ErrInvalid, s)
	}
	if sc.TraceID, err = ParseTraceID(s[3:35]); err != nil {
		return SpanContext{}, err
	}
	if sc.SpanID, err = ParseSpanID(s[36:52]); err != nil {
		return SpanContext{}, err
	}
	flags, err := hexByte(s[53:55])
	if err != nil {
		return SpanContext{}, fmt.Errorf("%w traceparent %q: bad flags", ErrInvalid, s)
	}
	sc.Sampled = flags&1 == 1
	return sc, nil
}

// ParseTraceID reads 32 lower-case hex digits, not all zero.
func ParseTraceID(s string) (TraceID, error) {
	var t TraceID
	if err := decodeLowerHex(t[:], s); err != nil || !t.IsValid() {
		return TraceID{}, fmt.Errorf("%w trace id %q: want 32 lower-case hex digits, not all zero", ErrInvalid, s)
	}
	return t, nil
}

// ParseSpanID reads 16 lower-case hex digits, not all zero.
func ParseSpanID(s string) (SpanID, error) {
	var id SpanID
	if err := decodeLowerHex(id[:], s); err != nil || !id.IsValid() {
		return SpanID{}, fmt.Errorf("%w span id %q: want 16 lower-case hex digits, not all zero", ErrInvalid, s)
	}
	return id, nil
}

func decodeLowerHex(dst []byte, s string) error {
	if len(s) != 2*len(dst) {
		return ErrInvalid
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ErrInvalid
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err
}

func hexByte(s string) (byte, error) {
	var b [1]byte
	if err := decodeLowerHex(b[:], s); err != nil {
		return 0, err
	}
	return b[0], nil
}

type contextKey struct{}

// ContextWith returns a context carrying sc; commands sent with it carry its traceparent.
func ContextWith(ctx context.Context, sc SpanContext) context.Context {
	return context.WithValue(ctx, contextKey{}, sc)
}

// FromContext returns the span context ctx carries, and whether it carries a valid one.
func FromContext(ctx context.Context) (SpanContext, bool) {
	sc, ok := ctx.Value(contextKey{}).(SpanContext)
	return sc, ok && sc.IsValid()
}

// FromHeaders reads the traceparent of a command's or message's headers.
func FromHeaders(headers map[string]string) (SpanContext, bool) {
	v, ok := headers[Header]
	if !ok {
		return SpanContext{}, false
	}
	sc, err := ParseTraceparent(v)
	return sc, err == nil
}
