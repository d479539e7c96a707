package saga_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/saga"
	"github.com/commandbus/commandbus/tracing"
)

// TestTracingSagaStepsAndCompensations: a saga started under a request's span records its steps
// and its compensations as children of the runs that ran them, all in the request's trace; the
// failed step's span carries the error.
func TestTracingSagaStepsAndCompensations(t *testing.T) {
	t.Parallel()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := testConfig(t, clock.NewFake(testStart))
	cfg.TracerProvider = tp
	client, rt := newRuntime(t, dbtest.SQLite(t), cfg)
	j := &journal{}
	m, err := saga.Register(rt, saga.New("traced", 1).
		Step("debit", okStep(j), saga.Compensate(undo(j))).
		Step("credit", failBusiness(j), saga.DependsOn("debit")))
	require.NoError(t, err)
	start(t, client)

	ctx, request := tp.Tracer("test").Start(context.Background(), "POST /transfers")
	id, err := m.Start(ctx, nil)
	require.NoError(t, err)
	request.End()
	waitStatus(t, m, id, driver.ExecutionCompensated)

	var spans tracetest.SpanStubs
	named := func(name string) tracetest.SpanStubs {
		var out tracetest.SpanStubs
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	eventually(t, "the compensation's run to end", func() bool {
		spans = exporter.GetSpans()
		return len(named(tracing.SpanCompensation)) == 1 && len(named(tracing.SpanExecutionRun)) >= 1 &&
			named(tracing.SpanExecutionRun)[len(named(tracing.SpanExecutionRun))-1].EndTime.After(named(tracing.SpanCompensation)[0].EndTime)
	})
	runs := map[trace.SpanID]bool{}
	for _, run := range named(tracing.SpanExecutionRun) {
		runs[run.SpanContext.SpanID()] = true
	}
	for _, s := range spans {
		require.Equal(t, request.SpanContext().TraceID(), s.SpanContext.TraceID(), "span %s belongs to the request's trace", s.Name)
	}
	steps := named(tracing.SpanStep)
	require.Len(t, steps, 2)
	for _, s := range append(steps, named(tracing.SpanCompensation)...) {
		require.True(t, runs[s.Parent.SpanID()], "%s is a child of a run", s.Name)
	}
	var failed bool
	for _, s := range steps {
		if s.Status.Code.String() == "Error" {
			failed = true
			require.Contains(t, s.Status.Description, "the account cannot cover it")
		}
	}
	require.True(t, failed, "the credit step's span records its failure")
}
