// Package tracing creates the OpenTelemetry spans of commandbus: sending a command, claiming it,
// handling it, its reply, the outbox relay's publication, the inbox's dedupe, an execution's
// run, its steps, checkpoints and compensations, a wait resumed and an operator's action.
//
// A span continues the trace of whatever caused it. The W3C traceparent a command carries in its
// headers (package tracecontext), the one an execution stores, and the one every broker envelope
// carries are the parents of the spans that handle them, so one payment reads as one trace across
// the process, its bounded contexts and the brokers. A span this package starts is also put in
// the context as a tracecontext.SpanContext: commands sent under it carry its traceparent.
//
// The library takes a trace.TracerProvider in commandbus.Config (default: the global one, a no-op
// until the application sets one with otel.SetTracerProvider). With a no-op provider a span is not
// recording and no attribute is built: tracing costs next to nothing when it is off.
//
// Other parts of the module (and applications) add their own spans with Tracer.Start and End,
// for example an admission span around the wait for a tenant's slot:
//
//	ctx, span := tracer.Start(ctx, tracing.SpanAdmission)
//	if span.IsRecording() {
//		span.SetAttributes(attribute.String(tracing.AttrTenantID, tenant))
//	}
//	err := admit(ctx)
//	tracing.End(span, err)
package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/commandbus/commandbus/tracecontext"
)

// InstrumentationName is the name of commandbus's tracer (its instrumentation scope).
const InstrumentationName = "github.com/commandbus/commandbus"

// The names of the spans commandbus creates.
const (
	// SpanSend is a Send, SendTx or SendBatch call: the commands it wrote carry its traceparent.
	SpanSend = "commandbus.send"
	// SpanClaim is a worker's claim of a batch of commands; it links to each claimed command's
	// trace (a claim serves many traces, so it belongs to none).
	SpanClaim = "commandbus.claim"
	// SpanHandle is a command handler run, a child of the span that sent the command.
	SpanHandle = "commandbus.handle"
	// SpanReply is a reply handler run, a child of the handler span that produced the reply.
	SpanReply = "commandbus.reply"
	// SpanOutboxPublish is the relay's publication of one outbox message to its broker, a child
	// of the span that wrote the message.
	SpanOutboxPublish = "commandbus.outbox.publish"
	// SpanInboxDedupe is the inbox check of a message a broker delivered; its
	// commandbus.inbox.duplicate attribute says whether the message had been processed already.
	SpanInboxDedupe = "commandbus.inbox.dedupe"
	// SpanExecutionRun is one run of an execution by its model's runner, from its lease to its
	// release: a child of what woke it (a reply handler, a start request), else of the request
	// that started the execution.
	SpanExecutionRun = "commandbus.execution.run"
	// SpanStep is one attempt of a step's function.
	SpanStep = "commandbus.step"
	// SpanCheckpoint is a durable write of an execution's progress.
	SpanCheckpoint = "commandbus.checkpoint"
	// SpanCompensation is one compensation function run.
	SpanCompensation = "commandbus.compensation"
	// SpanWaitResumed marks an execution resumed by the responses (replies, signals) it waited
	// for.
	SpanWaitResumed = "commandbus.wait.resumed"
	// SpanOperatorAction is an operator's action (retry, cancel, complete, skip, ...) on a
	// command or an execution.
	SpanOperatorAction = "commandbus.operator.action"
	// SpanAdmission is the wait for a tenant's capacity before an execution may start.
	SpanAdmission = "commandbus.admission"
)

// The attribute keys of commandbus spans. Ids are attributes of spans, never metric labels.
const (
	AttrCommandID     = "commandbus.command.id"
	AttrCommandType   = "commandbus.command.type"
	AttrDomain        = "commandbus.domain"
	AttrQueue         = "commandbus.queue"
	AttrAttempt       = "commandbus.attempt"
	AttrCorrelationID = "commandbus.correlation.id"
	AttrCount         = "commandbus.count"
	AttrStatus        = "commandbus.status"
	AttrErrorCode     = "commandbus.error.code"
	AttrExecutionID   = "commandbus.execution.id"
	AttrExecutionType = "commandbus.execution.type"
	AttrStep          = "commandbus.step"
	AttrMessageID     = "commandbus.message.id"
	AttrTransport     = "commandbus.transport"
	AttrTopic         = "commandbus.topic"
	AttrConsumer      = "commandbus.consumer"
	AttrDuplicate     = "commandbus.inbox.duplicate"
	AttrAction        = "commandbus.operator.action"
	AttrActor         = "commandbus.operator.actor"
	AttrTenantID      = "commandbus.tenant.id"
)

// Tracer starts commandbus spans. A nil *Tracer starts no span: every method then returns the
// context as it is and a non-recording span.
type Tracer struct {
	tracer trace.Tracer
}

// New returns a Tracer on tp, or on the global provider (otel.GetTracerProvider) when tp is nil.
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Tracer{tracer: tp.Tracer(InstrumentationName)}
}

// noopSpan is converted to the interface once, so returning it allocates nothing.
var noopSpan trace.Span = noop.Span{}

// Start starts a span named name, a child of the span ctx carries: an OpenTelemetry span, or
// else the W3C trace context that tracecontext.FromContext reads (a command's traceparent). The
// returned context carries the new span both ways. Check span.IsRecording() before building
// attributes.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noopSpan
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		if sc, ok := tracecontext.FromContext(ctx); ok {
			ctx = trace.ContextWithRemoteSpanContext(ctx, remote(sc))
		}
	}
	return t.start(ctx, name, opts)
}

// StartFrom starts a span named name whose parent is traceparent (a header value), whatever span
// ctx carries; with an empty or malformed traceparent it is Start.
func (t *Tracer) StartFrom(ctx context.Context, traceparent, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noopSpan
	}
	if traceparent != "" {
		if sc, err := tracecontext.ParseTraceparent(traceparent); err == nil {
			return t.start(trace.ContextWithRemoteSpanContext(ctx, remote(sc)), name, opts)
		}
	}
	return t.Start(ctx, name, opts...)
}

// StartRoot starts a root span named name, for work that serves many traces at once (a claim
// of a batch of commands): give it a link to each with AddLink. It starts at start when start is
// not zero.
func (t *Tracer) StartRoot(ctx context.Context, name string, start time.Time, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noopSpan
	}
	opts = append(opts, trace.WithNewRoot())
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	return t.start(ctx, name, opts)
}

// AddLink links span to the span traceparent names, when span records and traceparent is valid;
// attrs describe the link (which signal, which command).
func AddLink(span trace.Span, traceparent string, attrs ...attribute.KeyValue) {
	if traceparent == "" || !span.IsRecording() {
		return
	}
	if sc, err := tracecontext.ParseTraceparent(traceparent); err == nil {
		span.AddLink(trace.Link{SpanContext: remote(sc), Attributes: attrs})
	}
}

type tracerKey struct{}

// WithTracer returns a context carrying t, for code below that has no other way to reach the
// tracer (a model's step functions run under an execution's run). The engine puts its tracer in
// the context of a run only when the run's span records, so that with tracing off FromContext
// returns nil and every span below costs nothing.
func WithTracer(ctx context.Context, t *Tracer) context.Context {
	return context.WithValue(ctx, tracerKey{}, t)
}

// FromContext returns the tracer WithTracer put in ctx, or nil (which starts no span).
func FromContext(ctx context.Context) *Tracer {
	t, _ := ctx.Value(tracerKey{}).(*Tracer)
	return t
}

func (t *Tracer) start(ctx context.Context, name string, opts []trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, name, opts...)
	if span.IsRecording() {
		ctx = tracecontext.ContextWith(ctx, fromOTel(span.SpanContext()))
	}
	return ctx, span
}

// End ends span, recording err (when not nil) as its error and status.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Traceparent returns the traceparent of the span ctx carries (an OpenTelemetry span, else a
// tracecontext one), or "".
func Traceparent(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return fromOTel(sc).Traceparent()
	}
	if sc, ok := tracecontext.FromContext(ctx); ok {
		return sc.Traceparent()
	}
	return ""
}

// String is attribute.String, here so call sites need not import attribute for one key.
func String(key, value string) attribute.KeyValue { return attribute.String(key, value) }

func remote(sc tracecontext.SpanContext) trace.SpanContext {
	var flags trace.TraceFlags
	if sc.Sampled {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID(sc.TraceID), SpanID: trace.SpanID(sc.SpanID), TraceFlags: flags, Remote: true,
	})
}

func fromOTel(sc trace.SpanContext) tracecontext.SpanContext {
	return tracecontext.SpanContext{TraceID: tracecontext.TraceID(sc.TraceID()), SpanID: tracecontext.SpanID(sc.SpanID()), Sampled: sc.IsSampled()}
}
