package tracing_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/commandbus/commandbus/tracing"
)

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkHandleSpan is the cost of one handler span as the library makes it (parent from a
// traceparent header, attributes built only when recording): with the no-op provider, and with
// the SDK sampling everything into a batch processor that discards. Run:
// go test -run '^$' -bench HandleSpan -benchmem ./tracing
func BenchmarkHandleSpan(b *testing.B) {
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discard{}))
	b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name   string
		tracer *tracing.Tracer
	}{{"off", tracing.New(noop.NewTracerProvider())}, {"on", tracing.New(sdk)}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for range b.N {
				ctx, span := tc.tracer.StartFrom(ctx, traceparent, tracing.SpanHandle)
				if span.IsRecording() {
					span.SetAttributes(attribute.String(tracing.AttrCommandID, "0192d3a4-0000-7000-8000-000000000000"),
						attribute.String(tracing.AttrDomain, "fx"), attribute.Int(tracing.AttrAttempt, 1))
					_ = tracing.Traceparent(ctx)
				}
				tracing.End(span, nil)
			}
		})
	}
}
