package server

import (
	"net/http"

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
