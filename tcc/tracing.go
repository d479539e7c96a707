package tcc

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/tracing"
)

// tracedPhase runs one attempt of a participant's phase in its span, a child of the
// transaction's run: a cancel is a compensation, a try or a confirm a step.
func tracedPhase(ctx context.Context, part *participant, p Phase, timeout time.Duration, c *Context) (json.RawMessage, error) {
	name := tracing.SpanStep
	if p == PhaseCancel {
		name = tracing.SpanCompensation
	}
	ctx, span := tracing.FromContext(ctx).Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrExecutionID, c.ExecutionID.String()), attribute.String(tracing.AttrStep, part.id),
			attribute.String("commandbus.tcc.phase", string(p)), attribute.Int(tracing.AttrAttempt, c.Attempt))
	}
	result, err := callPhase(ctx, part, p, timeout, c)
	tracing.End(span, err)
	return result, err
}

// run drives a leased transaction (see runUntraced) in its run span.
func (m *Manager) run(ctx context.Context, lease *execution.Lease, extra []*driver.ExecutionLogEntry) error {
	ctx, span := lease.Engine().StartRun(ctx, lease)
	err := m.runUntraced(ctx, lease, extra)
	tracing.End(span, err)
	return err
}
