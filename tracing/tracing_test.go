package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/commandbus/commandbus/tracecontext"
	"github.com/commandbus/commandbus/tracing"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func recording(t *testing.T) (*tracing.Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp), exporter
}

// A span started under a command's trace context (tracecontext, no OpenTelemetry span) is its
// child, and the context it returns carries the new span as a tracecontext too, so commands sent
// under it carry its traceparent.
func TestStartContinuesTraceContext(t *testing.T) {
	t.Parallel()
	tracer, exporter := recording(t)
	sc, err := tracecontext.ParseTraceparent(traceparent)
	require.NoError(t, err)
	ctx, span := tracer.Start(tracecontext.ContextWith(context.Background(), sc), tracing.SpanHandle)
	tracing.End(span, errors.New("boom"))

	got := exporter.GetSpans()
	require.Len(t, got, 1)
	require.Equal(t, sc.TraceID.String(), got[0].SpanContext.TraceID().String())
	require.Equal(t, sc.SpanID.String(), got[0].Parent.SpanID().String())
	require.True(t, got[0].Parent.IsRemote())
	require.Equal(t, codes.Error, got[0].Status.Code)
	require.Len(t, got[0].Events, 1, "the error is recorded")

	carried, ok := tracecontext.FromContext(ctx)
	require.True(t, ok)
	require.Equal(t, got[0].SpanContext.SpanID().String(), carried.SpanID.String())
	require.Equal(t, carried.Traceparent(), tracing.Traceparent(ctx))
}

// StartFrom takes the traceparent as parent whatever ctx carries; StartRoot starts a new trace
// with links added afterwards; malformed traceparents are ignored.
func TestStartFromAndRoot(t *testing.T) {
	t.Parallel()
	tracer, exporter := recording(t)
	outer, outerSpan := tracer.Start(context.Background(), "outer")
	_, child := tracer.StartFrom(outer, traceparent, tracing.SpanOutboxPublish)
	child.End()
	_, fallback := tracer.StartFrom(outer, "garbage", tracing.SpanOutboxPublish)
	fallback.End()
	start := time.Now().Add(-time.Second)
	_, root := tracer.StartRoot(outer, tracing.SpanClaim, start)
	tracing.AddLink(root, traceparent)
	tracing.AddLink(root, "not-a-traceparent")
	root.End()
	outerSpan.End()

	spans := exporter.GetSpans()
	require.Len(t, spans, 4)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", spans[0].SpanContext.TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", spans[0].Parent.SpanID().String())
	require.Equal(t, outerSpan.SpanContext().SpanID(), spans[1].Parent.SpanID(), "a malformed traceparent falls back to ctx")
	require.False(t, spans[2].Parent.IsValid(), "a root")
	require.NotEqual(t, outerSpan.SpanContext().TraceID(), spans[2].SpanContext.TraceID())
	require.Len(t, spans[2].Links, 1)
	require.Equal(t, "00f067aa0ba902b7", spans[2].Links[0].SpanContext.SpanID().String())
	require.WithinDuration(t, start, spans[2].StartTime, time.Millisecond)
}

// A nil Tracer and the no-op provider start nothing: the context comes back as it was (no
// tracer in it, no tracecontext added), and FromContext of a plain context is nil.
func TestOffStartsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var none *tracing.Tracer
	got, span := none.Start(ctx, tracing.SpanStep)
	require.Equal(t, ctx, got)
	require.False(t, span.IsRecording())
	tracing.End(span, errors.New("ignored"))
	require.Nil(t, tracing.FromContext(ctx))

	off := tracing.New(noop.NewTracerProvider())
	got, span = off.StartFrom(ctx, traceparent, tracing.SpanHandle)
	require.False(t, span.IsRecording())
	_, carried := tracecontext.FromContext(got)
	require.False(t, carried, "a span that does not record is not stamped on commands")
}

// With tracing off, starting and ending a span with attributes guarded by IsRecording allocates
// nothing for a nil Tracer, and at most the context of the no-op span otherwise.
func TestOffAllocations(t *testing.T) {
	var none *tracing.Tracer
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		_, span := none.Start(ctx, tracing.SpanStep)
		if span.IsRecording() {
			t.Fatal("records")
		}
		tracing.End(span, nil)
	})
	require.Zero(t, allocs)

	off := tracing.New(noop.NewTracerProvider())
	allocs = testing.AllocsPerRun(100, func() {
		_, span := off.StartFrom(ctx, traceparent, tracing.SpanHandle)
		tracing.End(span, nil)
	})
	require.LessOrEqual(t, allocs, 3.0)
}

// Records logged with a span's context carry its trace and span ids; without one, none.
func TestLogHandlerAddsIDs(t *testing.T) {
	t.Parallel()
	tracer, _ := recording(t)
	var buf bytes.Buffer
	logger := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	ctx, span := tracer.Start(context.Background(), tracing.SpanHandle)
	logger.InfoContext(ctx, "inside")
	span.End()
	sc, _ := tracecontext.ParseTraceparent(traceparent)
	logger.InfoContext(tracecontext.ContextWith(context.Background(), sc), "from a traceparent")
	logger.Info("outside")

	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m))
		lines = append(lines, m)
	}
	require.Len(t, lines, 3)
	require.Equal(t, span.SpanContext().TraceID().String(), lines[0][tracing.LogTraceID])
	require.Equal(t, span.SpanContext().SpanID().String(), lines[0][tracing.LogSpanID])
	require.Equal(t, "test", lines[0]["component"])
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", lines[1][tracing.LogTraceID])
	require.NotContains(t, lines[2], tracing.LogTraceID)
}
