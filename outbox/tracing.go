package outbox

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/tracing"
)

// tracePublished records a span per message of a publication, from started to now, a child of
// the span that wrote the message (its traceparent header).
func (r *Relay) tracePublished(ctx context.Context, started time.Time, transport string, msgs []*driver.OutboxRow, errs []error) {
	for i, msg := range msgs {
		_, span := r.tracer.StartFrom(ctx, msg.Headers[HeaderTraceparent], tracing.SpanOutboxPublish,
			trace.WithTimestamp(started), trace.WithSpanKind(trace.SpanKindProducer))
		if !span.IsRecording() {
			span.End() // not sampled, or tracing is off
			continue
		}
		span.SetAttributes(attribute.String(tracing.AttrMessageID, msg.MessageID), attribute.String(tracing.AttrTransport, transport),
			attribute.String(tracing.AttrTopic, msg.Topic), attribute.String("commandbus.message.type", msg.Type))
		err := errNoResult
		if i < len(errs) {
			err = errs[i]
		}
		tracing.End(span, err)
	}
}
