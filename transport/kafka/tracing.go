package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/commandbus/commandbus/tracecontext"
)

// withRecordTrace returns ctx carrying the trace context of an inbound event's traceparent
// header, so the executions it starts continue the sender's trace.
func withRecordTrace(ctx context.Context, r *kgo.Record) context.Context {
	for _, h := range r.Headers {
		if h.Key == tracecontext.Header {
			if sc, err := tracecontext.ParseTraceparent(string(h.Value)); err == nil {
				return tracecontext.ContextWith(ctx, sc)
			}
		}
	}
	return ctx
}
