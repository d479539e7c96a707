package orchestrate

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	commandbus "github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/tracing"
)

// traceAction marks an accepted operator action in the execution's trace (the operator's request
// span, when there is one, is linked), so the payment's trace shows who acted on it and when.
func traceAction(ctx context.Context, engine *execution.Engine, row *driver.ExecutionRow, action commandbus.OperatorAction) {
	_, span := engine.Config().Tracer.StartFrom(ctx, row.Traceparent, tracing.SpanOperatorAction,
		trace.WithLinks(trace.LinkFromContext(ctx)))
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrExecutionID, row.ID.String()), attribute.String(tracing.AttrExecutionType, row.Type),
			attribute.String(tracing.AttrStatus, string(row.Status)), attribute.String(tracing.AttrActor, action.Actor),
			attribute.String("commandbus.operator.reason", action.Reason))
	}
	span.End()
}
