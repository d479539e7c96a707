package process

import (
	"context"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"

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
