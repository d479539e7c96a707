package workflow_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/tracing"
	"github.com/commandbus/commandbus/workflow"
)

// TestTracingSignalLinksTheSender: a workflow waiting for a signal, sent under another request's
// span, resumes in a run whose span links to the sender's span (stored with the signal), while
// the run stays in the trace that started the execution. Both drivers.
func TestTracingSignalLinksTheSender(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		exporter := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		fake := clock.NewFake(testStart)
		client, rt := newRuntimeWith(t, drv, fake, tp)
		calls := &counter{}
		m, err := workflow.Register(rt, workflow.New("traced-approval", 1).
			WaitSignal("approve", "approved").
			Step("book", bookAfterApproval(calls), workflow.DependsOn("approve")))
		require.NoError(t, err)
		start(t, client)

		startCtx, starter := tp.Tracer("test").Start(context.Background(), "POST /payments")
		id, err := m.Start(startCtx, nil, workflow.Immediate())
		require.NoError(t, err)
		starter.End()
		waitStatus(t, m, id, driver.ExecutionWaitingForAsync)

		signalCtx, sender := tp.Tracer("test").Start(context.Background(), "POST /approvals")
		_, err = m.Signal(signalCtx, id, "approved", approval{By: "ada"}, "sig-1")
		require.NoError(t, err)
		sender.End()
		require.NotEqual(t, starter.SpanContext().TraceID(), sender.SpanContext().TraceID())
		waitStatus(t, m, id, driver.ExecutionCompleted)

		var linked tracetest.SpanStubs
		eventually(t, "a run span linking the signal's sender", func() bool {
			linked = nil
			for _, s := range exporter.GetSpans() {
				if s.Name == tracing.SpanExecutionRun && linksTo(s, sender.SpanContext()) {
					linked = append(linked, s)
				}
			}
			return len(linked) > 0
		})
		require.Len(t, linked, 1, "only the run that took the signal links its sender")
		for _, l := range linked[0].Links {
			if l.SpanContext.SpanID() == sender.SpanContext().SpanID() {
				attrs := attribute.NewSet(l.Attributes...)
				name, _ := attrs.Value("commandbus.signal.name")
				id, _ := attrs.Value("commandbus.signal.id")
				require.Equal(t, "approved", name.AsString())
				require.Equal(t, "sig-1", id.AsString())
			}
		}
		require.Equal(t, starter.SpanContext().TraceID(), linked[0].SpanContext.TraceID(), "the resumed run stays in the execution's trace")
		require.Equal(t, 1, calls.get("book"))
	})
}

// linksTo reports whether span s has a link to sc.
func linksTo(s tracetest.SpanStub, sc trace.SpanContext) bool {
	for _, l := range s.Links {
		if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() {
			return true
		}
	}
	return false
}
