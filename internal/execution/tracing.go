package execution

import (
	"context"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/tracecontext"
	"github.com/commandbus/commandbus/tracing"
)

// StartRun starts the span of one run of a leased execution: a child of the span ctx carries
// (the reply handler or the request that woke it), else of the request that started the
// execution. An execution that was waiting for a response gets a SpanWaitResumed child. While
// the span records, the returned context also carries the engine's tracer, so the model's step
// and compensation spans (tracing.FromContext) nest under the run. End the span with
// tracing.End.
func (e *Engine) StartRun(ctx context.Context, lease *Lease) (context.Context, trace.Span) {
	t := e.cfg.Tracer
	if t == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	row := lease.Row
	var span trace.Span
	if _, ok := tracecontext.FromContext(ctx); ok || trace.SpanContextFromContext(ctx).IsValid() {
		ctx, span = t.Start(ctx, tracing.SpanExecutionRun)
	} else {
		ctx, span = t.StartFrom(ctx, row.Traceparent, tracing.SpanExecutionRun)
	}
	if !span.IsRecording() {
		return ctx, span
	}
	from := row.ClaimedFrom
	if from == "" {
		from = row.Status
	}
	span.SetAttributes(
		attribute.String(tracing.AttrExecutionID, row.ID.String()),
		attribute.String(tracing.AttrExecutionType, row.Type),
		attribute.String("commandbus.execution.model", string(row.Model)),
		attribute.String("commandbus.execution.from", string(from)),
		attribute.Int64("commandbus.execution.fence", row.Fence),
	)
	if row.TenantID != "" {
		span.SetAttributes(attribute.String(tracing.AttrTenantID, row.TenantID))
	}
	ctx = tracing.WithTracer(ctx, t)
	lease.runSpan = span
	if from == driver.ExecutionWaitingForAsync {
		_, resumed := t.Start(ctx, tracing.SpanWaitResumed)
		resumed.SetAttributes(attribute.String("commandbus.wait", row.CurrentWait),
			attribute.Int64("commandbus.responses.received", row.ResponsesReceived),
			attribute.Int64("commandbus.responses.applied", row.ResponsesApplied))
		resumed.End()
	}
	return ctx, span
}

// startCheckpoint starts the span of a checkpoint, a child of the run's.
func (l *Lease) startCheckpoint(ctx context.Context, cp *driver.ExecutionCheckpoint) (context.Context, trace.Span) {
	ctx, span := tracing.FromContext(ctx).Start(ctx, tracing.SpanCheckpoint)
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(tracing.AttrExecutionID, l.Row.ID.String()),
			attribute.String(tracing.AttrStatus, string(cp.Status)),
			attribute.Int("commandbus.checkpoint.log_entries", len(cp.Log)),
			attribute.Int("commandbus.checkpoint.commands", len(cp.Commands)),
			attribute.Bool("commandbus.checkpoint.release", cp.Release),
		)
	}
	return ctx, span
}

// traceparent is what the commands of a checkpoint carry: the checkpoint's span when it records
// (so their handlers' spans nest under the run that issued them), else the execution's.
func (l *Lease) traceparent(ctx context.Context) string {
	if trace.SpanFromContext(ctx).IsRecording() {
		return tracing.Traceparent(ctx)
	}
	return l.Row.Traceparent
}

// StampStartTrace gives the new top-level executions that carry no traceparent the one of the
// request that starts them (an OpenTelemetry span or a tracecontext one in ctx). Engine.Insert
// calls it; a model that inserts executions in a caller's transaction calls it itself.
func StampStartTrace(ctx context.Context, executions []*driver.ExecutionInsertParams) {
	var traceparent string
	for _, x := range executions {
		if x.Traceparent != "" || x.ParentID != uuid.Nil {
			continue
		}
		if traceparent == "" {
			if traceparent = tracing.Traceparent(ctx); traceparent == "" {
				return
			}
		}
		x.Traceparent = traceparent
	}
}

// TraceOperatorAction marks an operator's accepted action on the leased execution in the
// execution's trace (a SpanOperatorAction span, linked to the operator's request span when ctx
// has one), so a payment's trace shows who acted on it and when.
func (l *Lease) TraceOperatorAction(ctx context.Context, actor, reason string) {
	row := l.Row
	_, span := l.engine.cfg.Tracer.StartFrom(ctx, row.Traceparent, tracing.SpanOperatorAction,
		trace.WithLinks(trace.LinkFromContext(ctx)))
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrExecutionID, row.ID.String()), attribute.String(tracing.AttrExecutionType, row.Type),
			attribute.String(tracing.AttrStatus, string(row.Status)), attribute.String(tracing.AttrActor, actor),
			attribute.String("commandbus.operator.reason", reason))
	}
	span.End()
}
