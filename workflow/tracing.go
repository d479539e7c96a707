package workflow

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/tracing"
)

// tracedStep runs one attempt of a step in its span, a child of the execution's run.
func tracedStep(ctx context.Context, fn StepFunc, sc *StepContext) (any, error) {
	ctx, span := startStepSpan(ctx, tracing.SpanStep, sc)
	res, err := callStep(ctx, fn, sc)
	tracing.End(span, err)
	return res, err
}

// tracedCompensation runs one attempt of a step's compensation in its span.
func tracedCompensation(ctx context.Context, s *stepDef, sc *StepContext) error {
	ctx, span := startStepSpan(ctx, tracing.SpanCompensation, sc)
	err := callCompensation(ctx, s, sc)
	tracing.End(span, err)
	return err
}

func startStepSpan(ctx context.Context, name string, sc *StepContext) (context.Context, trace.Span) {
	ctx, span := tracing.FromContext(ctx).Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrExecutionID, sc.ExecutionID.String()), attribute.String(tracing.AttrStep, sc.Step),
			attribute.Int(tracing.AttrAttempt, sc.Attempt))
	}
	return ctx, span
}

// run drives a leased execution (see runUntraced) in its run span: every way a workflow or saga
// runs (started, claimed by the pollers, resumed, retried by an operator) has one.
func (m *Manager) run(ctx context.Context, lease *execution.Lease, extra []*driver.ExecutionLogEntry) error {
	ctx, span := lease.Engine().StartRun(ctx, lease)
	err := m.runUntraced(ctx, lease, extra)
	tracing.End(span, err)
	return err
}
