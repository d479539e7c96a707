package bench

import (
	"context"
	"sync/atomic"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// benchTracing is the tracer provider of a benchmark run with tracing on: the OpenTelemetry SDK
// sampling every trace, with a batch processor whose exporter counts the spans and drops them.
// What it adds to a run is the cost of creating, recording and batching every span, not that of
// shipping them to a collector. A nil *benchTracing is tracing off (the global no-op provider).
type benchTracing struct {
	tp       *sdktrace.TracerProvider
	exporter *countingExporter
}

func newBenchTracing(on bool) *benchTracing {
	if !on {
		return nil
	}
	exporter := &countingExporter{}
	return &benchTracing{exporter: exporter, tp: sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(exporter))}
}

// provider is the TracerProvider to configure, or nil (the default no-op) when tracing is off.
func (b *benchTracing) provider() trace.TracerProvider {
	if b == nil {
		return nil
	}
	return b.tp
}

// spans flushes the batch processor and returns how many spans were exported so far.
func (b *benchTracing) spans(ctx context.Context) int64 {
	if b == nil {
		return 0
	}
	_ = b.tp.ForceFlush(ctx)
	return b.exporter.n.Load()
}

func (b *benchTracing) shutdown() {
	if b != nil {
		_ = b.tp.Shutdown(context.Background())
	}
}

// countingExporter counts the spans it is given and drops them.
type countingExporter struct{ n atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.n.Add(int64(len(spans)))
	return nil
}

func (e *countingExporter) Shutdown(context.Context) error { return nil }

// TracingLabel is how a benchmark's output states its tracing configuration.
func TracingLabel(on bool) string {
	if on {
		return "on (SDK, every trace sampled, batch processor, discarding exporter)"
	}
	return "off (no-op provider)"
}
