package server

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/tracecontext"
)

// A request's traceparent header becomes the trace context of its handling; a malformed one is
// ignored, and one already in the context (an instrumenting middleware's) wins.
func TestRequestTraceFromHeader(t *testing.T) {
	t.Parallel()
	const header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := httptest.NewRequest("POST", "/api/executions", nil)
	r.Header.Set(tracecontext.Header, header)
	sc, ok := tracecontext.FromContext(withRequestTrace(r).Context())
	require.True(t, ok)
	require.Equal(t, header, sc.Traceparent())

	r.Header.Set(tracecontext.Header, "00-garbage")
	_, ok = tracecontext.FromContext(withRequestTrace(r).Context())
	require.False(t, ok)

	upstream, _ := tracecontext.ParseTraceparent("00-11111111111111111111111111111111-2222222222222222-01")
	r = httptest.NewRequest("POST", "/api/executions", nil).WithContext(tracecontext.ContextWith(r.Context(), upstream))
	r.Header.Set(tracecontext.Header, header)
	sc, _ = tracecontext.FromContext(withRequestTrace(r).Context())
	require.Equal(t, upstream, sc)
}
