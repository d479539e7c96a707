package server

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/tracecontext"
	"github.com/commandbus/commandbus/tracing"
)

// withRequestTrace returns r with the trace context of its traceparent header (W3C Trace
// Context, as an API gateway or an instrumented client sends it) in its context, so the
// commands it sends, the executions it starts and the operator actions it takes continue the
// caller's trace. A request that already carries a span (an instrumenting middleware in front of
// the server) or a malformed header is left as it is.
func withRequestTrace(r *http.Request) *http.Request {
	v := r.Header.Get(tracecontext.Header)
	if v == "" {
		return r
	}
	if tracing.Traceparent(r.Context()) != "" {
		return r
	}
	sc, err := tracecontext.ParseTraceparent(v)
	if err != nil {
		return r
	}
	return r.WithContext(tracecontext.ContextWith(r.Context(), sc))
}

// startRequestSpan starts the server span of a request, named by its route pattern ("GET
// /api/executions/{id}"; the method alone for a request no route takes) as OpenTelemetry's HTTP
// conventions name it: a child of the span or traceparent the request's context carries (see
// withRequestTrace). The returned request carries the span, so what the handler does (the
// commands it sends, the executions it starts, its log lines) is the span's child.
func startRequestSpan(t *tracing.Tracer, r *http.Request, pattern string) (*http.Request, trace.Span) {
	name := pattern
	if name == "" {
		name = methodLabel(r.Method)
	}
	ctx, span := t.Start(r.Context(), name, trace.WithSpanKind(trace.SpanKindServer))
	if !span.IsRecording() {
		return r, span
	}
	span.SetAttributes(attribute.String("http.request.method", methodLabel(r.Method)), attribute.String("url.path", r.URL.Path))
	if pattern != "" {
		span.SetAttributes(attribute.String("http.route", routeLabel(pattern)))
	}
	return r.WithContext(ctx), span
}

// endRequestSpan ends a request's span with the status answered: a 5xx is an error.
func endRequestSpan(span trace.Span, status int) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	span.End()
}
