package amqp

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/commandbus/commandbus/tracecontext"
)

// withDeliveryTrace returns ctx carrying the trace context of an inbound event's traceparent
// header, so the executions it starts continue the sender's trace.
func withDeliveryTrace(ctx context.Context, d amqp.Delivery) context.Context {
	if v, ok := d.Headers[tracecontext.Header].(string); ok {
		if sc, err := tracecontext.ParseTraceparent(v); err == nil {
			return tracecontext.ContextWith(ctx, sc)
		}
	}
	return ctx
}
