package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/tracecontext"
	"github.com/commandbus/commandbus/tracing"
	"github.com/commandbus/commandbus/workflow"
)

// Every API request gets a server span named by its route pattern, the child of the caller's
// traceparent, with its method, route and status; what the handler does is the span's child
// (a signal sent through the API is linked from the run that applies it). Probes get no span,
// and a request no route takes is named by its method alone. Both drivers.
func TestRequestServerSpans(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		exporter := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		f := servertest.Setup(t, drv, servertest.Options{Tokens: testTokens, TracerProvider: tp})
		ctx := context.Background()
		id, err := f.Review.Start(ctx, map[string]string{"subject": "loan-7"}, workflow.Immediate())
		require.NoError(t, err)
		servertest.Eventually(t, 30*time.Second, "the review waits for its sign-off", func() bool {
			row, err := f.Client.Driver().Executor().ExecutionGet(ctx, id)
			require.NoError(t, err)
			return row.Status == driver.ExecutionWaitingForAsync && row.CurrentWait == "approve"
		})

		const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		parent, err := tracecontext.ParseTraceparent(caller)
		require.NoError(t, err)
		headers := bearer(operatorToken)
		headers[tracecontext.Header] = caller
		x := send(t, http.MethodPost, f.HTTP.URL+"/api/executions/"+id.String()+"/signals/approved",
			[]byte(`{"payload":{"by":"ops:ada"}}`), headers)
		require.Equal(t, http.StatusAccepted, x.resp.StatusCode, "%s", x.respBody)
		send(t, http.MethodGet, f.HTTP.URL+"/healthz", nil, nil)
		x = send(t, http.MethodGet, f.HTTP.URL+"/api/nothing-here", nil, bearer(operatorToken))
		require.Equal(t, http.StatusNotFound, x.resp.StatusCode)

		const route = "POST /api/executions/{id}/signals/{name}"
		var request, unmatched tracetest.SpanStub
		servertest.Eventually(t, 10*time.Second, "the requests' spans", func() bool {
			for _, s := range exporter.GetSpans() {
				switch s.Name {
				case route:
					request = s
				case http.MethodGet:
					unmatched = s
				}
			}
			return request.Name != "" && unmatched.Name != ""
		})
		require.Equal(t, trace.SpanKindServer, request.SpanKind)
		require.Equal(t, trace.TraceID(parent.TraceID), request.SpanContext.TraceID(), "the request continues the caller's trace")
		require.Equal(t, trace.SpanID(parent.SpanID), request.Parent.SpanID(), "the request's span is the caller's child")
		require.True(t, request.Parent.IsRemote())
		attrs := attribute.NewSet(request.Attributes...)
		for key, want := range map[attribute.Key]attribute.Value{
			"http.request.method":       attribute.StringValue("POST"),
			"http.route":                attribute.StringValue("/api/executions/{id}/signals/{name}"),
			"http.response.status_code": attribute.IntValue(http.StatusAccepted),
		} {
			got, ok := attrs.Value(key)
			require.True(t, ok, "attribute %s", key)
			require.Equal(t, want, got, "attribute %s", key)
		}
		unmatchedAttrs := attribute.NewSet(unmatched.Attributes...)
		got, _ := unmatchedAttrs.Value("http.response.status_code")
		require.Equal(t, int64(http.StatusNotFound), got.AsInt64())
		_, hasRoute := unmatchedAttrs.Value("http.route")
		require.False(t, hasRoute, "a request no route takes has no route")

		// The run that applies the signal links to the request that sent it.
		servertest.Eventually(t, 30*time.Second, "a run linked to the signal's request", func() bool {
			for _, s := range exporter.GetSpans() {
				if s.Name != tracing.SpanExecutionRun {
					continue
				}
				for _, l := range s.Links {
					if l.SpanContext.SpanID() == request.SpanContext.SpanID() && l.SpanContext.TraceID() == request.SpanContext.TraceID() {
						return true
					}
				}
			}
			return false
		})
		for _, s := range exporter.GetSpans() {
			require.NotEqual(t, "GET /healthz", s.Name, "probes have no span")
		}
	})
}
