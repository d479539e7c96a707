package process

import (
	"context"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/tracing"
)

// tracedStep runs one attempt of a step in its span, a child of the execution's run.
func tracedStep[R any](ctx context.Context, id uuid.UUID, name string, attempt int, fn func(context.Context) (R, error)) (R, error) {
	ctx, span := tracing.FromContext(ctx).Start(ctx, tracing.SpanStep)
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrExecutionID, id.String()), attribute.String(tracing.AttrStep, name),
			attribute.Int(tracing.AttrAttempt, attempt))
	}
	result, err := callStep(ctx, fn)
	tracing.End(span, err)
	return result, err
}

// tracedCompensation runs a step's compensation in its span; the execution's context is the
// span's while it runs.
func tracedCompensation[S any](x *Execution[S], step string, fn func(*Execution[S]) error) error {
	ctx, span := tracing.FromContext(x.ctx).Start(x.ctx, tracing.SpanCompensation)
	if !span.IsRecording() {
		span.End()
		return callCompensation(x, fn)
	}
	span.SetAttributes(attribute.String(tracing.AttrExecutionID, x.ID.String()), attribute.String(tracing.AttrStep, step))
	saved := x.ctx
	x.ctx = ctx
	err := callCompensation(x, fn)
	x.ctx = saved
	tracing.End(span, err)
	return err
}

// run drives a leased execution (see runUntraced) in its run span: every way a process runs
// (started, claimed by the pollers, resumed by a reply, retried by an operator) has one.
func (m *Manager[S]) run(ctx context.Context, lease *execution.Lease, extra []*driver.ExecutionLogEntry, injected []*driver.ExecutionResponseRow) error {
	ctx, span := lease.Engine().StartRun(ctx, lease)
	err := m.runUntraced(ctx, lease, extra, injected)
	tracing.End(span, err)
	return err
}
