package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/tracecontext"
)

// The log attribute keys LogHandler adds.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// LogHandler wraps h so that every record logged with a context that carries a span (an
// OpenTelemetry span, or a tracecontext one: a command's traceparent) has the span's trace_id and
// span_id attributes, and a log line can be found from its trace and back.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(logHandler); ok {
		return h
	}
	return logHandler{h}
}

type logHandler struct{ next slog.Handler }

func (h logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
		} else if sc, ok := tracecontext.FromContext(ctx); ok {
			r.AddAttrs(slog.String(LogTraceID, sc.TraceID.String()), slog.String(LogSpanID, sc.SpanID.String()))
		}
	}
	return h.next.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.next.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.next.WithGroup(name)}
}
