package commandbus

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/tracecontext"
	"github.com/commandbus/commandbus/tracing"
)

// sendBatch is a send in its span: the commands it writes carry the span's traceparent, so the
// handlers that run them continue its trace.
func (c *Client) sendBatch(ctx context.Context, exec driver.Executor, inTx bool, params []SendParams) ([]SendResult, error) {
	ctx, span := c.tracer.Start(ctx, tracing.SpanSend, trace.WithSpanKind(trace.SpanKindProducer))
	results, err := c.sendBatchUntraced(ctx, exec, inTx, params)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int(tracing.AttrCount, len(params)))
		if len(params) == 1 {
			span.SetAttributes(attribute.String(tracing.AttrDomain, params[0].Domain))
			if params[0].Args != nil {
				span.SetAttributes(attribute.String(tracing.AttrCommandType, params[0].Args.Kind()))
			}
			if len(results) == 1 {
				span.SetAttributes(attribute.String(tracing.AttrCommandID, results[0].ID.String()))
			}
		}
	}
	tracing.End(span, err)
	return results, err
}

// startHandle starts the span of a handler run (SpanHandle, or SpanReply for a reply), a child of
// the span that sent the command. The context carries the command's trace context even when the
// span does not record, as the handler's own sends need it. It returns the row the command's
// reply, events and redelivery are built from: with the handler span's traceparent when the span
// records, so they continue from it.
func (c *Client) startHandle(ctx context.Context, row *driver.CommandRow) (context.Context, trace.Span, *driver.CommandRow) {
	if traceparent := row.Headers[tracecontext.Header]; traceparent != "" {
		if sc, err := tracecontext.ParseTraceparent(traceparent); err == nil {
			ctx = tracecontext.ContextWith(ctx, sc)
		}
	}
	name := tracing.SpanHandle
	if row.Kind == driver.CommandKindReply {
		name = tracing.SpanReply
	}
	// Start takes the command's trace context just put in ctx as the parent (a worker's and a
	// broker consumer's contexts carry no span of their own).
	ctx, span := c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer))
	if !span.IsRecording() {
		return ctx, span, row
	}
	span.SetAttributes(
		attribute.String(tracing.AttrCommandID, row.ID.String()),
		attribute.String(tracing.AttrDomain, row.Domain),
		attribute.String(tracing.AttrQueue, row.Queue),
		attribute.String(tracing.AttrCommandType, row.Type),
		attribute.Int(tracing.AttrAttempt, row.Attempt),
	)
	if row.CorrelationID != uuid.Nil {
		span.SetAttributes(attribute.String(tracing.AttrCorrelationID, row.CorrelationID.String()))
	}
	traced := *row
	traced.Headers = withHeader(row.Headers, tracecontext.Header, tracing.Traceparent(ctx))
	return ctx, span, &traced
}

// endHandle ends a handler's span with the command's outcome, and gives the reply row the
// command's completion inserts the handler span's traceparent, so its reply handler's span is a
// child of it.
func endHandle(span trace.Span, traced *driver.CommandRow, comp *driver.CommandCompletion) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if comp.Reply != nil {
		if _, set := comp.Reply.Headers[tracecontext.Header]; !set {
			comp.Reply.Headers = withHeader(comp.Reply.Headers, tracecontext.Header, traced.Headers[tracecontext.Header])
		}
	}
	span.SetAttributes(attribute.String(tracing.AttrStatus, string(comp.Status)))
	if comp.ErrorCode != "" {
		span.SetAttributes(attribute.String(tracing.AttrErrorCode, comp.ErrorCode))
	}
	var err error
	if comp.Status != driver.CommandStatusCompleted && comp.ErrorMessage != "" {
		err = &handlerError{code: comp.ErrorCode, message: comp.ErrorMessage}
	}
	tracing.End(span, err)
}

// handlerError is a failed handler's outcome as a span records it.
type handlerError struct{ code, message string }

func (e *handlerError) Error() string { return e.code + ": " + e.message }

// claimTraced claims a batch of commands. A claim that took some has a span of its own, linked
// to the trace of each command it took: it serves many traces, so it belongs to none.
func (c *Client) claimTraced(ctx context.Context, params *driver.CommandClaimParams) ([]*driver.CommandRow, error) {
	start := time.Now()
	rows, err := c.exec.CommandClaim(ctx, params)
	if len(rows) == 0 {
		return rows, err
	}
	_, span := c.tracer.StartRoot(ctx, tracing.SpanClaim, start)
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrQueue, params.Queue), attribute.Int(tracing.AttrCount, len(rows)))
		for _, row := range rows {
			tracing.AddLink(span, row.Headers[tracecontext.Header])
		}
	}
	tracing.End(span, err)
	return rows, err
}

// claimDelivered claims a delivered command by id unless the inbox shows its message was
// processed (ErrDuplicate), in the inbox check's span.
func (c *Client) claimDelivered(ctx context.Context, params *driver.CommandClaimByIDParams) (*CommandRow, error) {
	ctx, span := c.tracer.Start(ctx, tracing.SpanInboxDedupe)
	row, err := c.exec.CommandClaimByID(ctx, params)
	duplicate := errors.Is(err, driver.ErrDuplicate)
	if duplicate {
		c.inbox.Duplicate(params.Inbox.Handler)
	}
	spanErr := err
	if duplicate || errors.Is(err, driver.ErrConflict) {
		spanErr = nil // an answer, not a failure of the check
	}
	endInbox(span, params.Inbox.MessageID, params.Inbox.Handler, duplicate, spanErr)
	return row, err
}

// inboxRecord records a delivered reply message in the inbox, in its span.
func (c *Client) inboxRecord(ctx context.Context, tx driver.Executor, messageID, consumer string) (bool, error) {
	ctx, span := c.tracer.Start(ctx, tracing.SpanInboxDedupe)
	first, err := c.inbox.Record(ctx, tx, messageID, consumer)
	endInbox(span, messageID, consumer, !first && err == nil, err)
	return first, err
}

// inboxRecordWith records a delivered reply message in the inbox with the reply rows it files
// (driver.InboxExecutor.InboxInsertWithCommands), in its span.
func (c *Client) inboxRecordWith(ctx context.Context, messageID, consumer string, replies *driver.CommandInsertManyParams) (bool, error) {
	ctx, span := c.tracer.Start(ctx, tracing.SpanInboxDedupe)
	first, err := c.exec.InboxInsertWithCommands(ctx, &driver.InboxInsertParams{MessageID: messageID, Handler: consumer}, replies)
	if err == nil && !first {
		c.inbox.Duplicate(consumer)
	}
	endInbox(span, messageID, consumer, !first && err == nil, err)
	return first, err
}

func endInbox(span trace.Span, messageID, consumer string, duplicate bool, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrMessageID, messageID), attribute.String(tracing.AttrConsumer, consumer),
			attribute.Bool(tracing.AttrDuplicate, duplicate))
	}
	tracing.End(span, err)
}

// operatorAction is an operator's action on a command in the troubleshooting queue, in a span of
// the command's trace (linked to the operator's request, when it has a span).
func (c *Client) operatorAction(ctx context.Context, id uuid.UUID, action OperatorAction, event string, to driver.CommandStatus, result json.RawMessage, outcome Outcome) (*CommandRow, error) {
	start := time.Now()
	row, err := c.operatorActionUntraced(ctx, id, action, event, to, result, outcome)
	if row == nil {
		return row, err
	}
	_, span := c.tracer.StartFrom(ctx, row.Headers[tracecontext.Header], tracing.SpanOperatorAction, trace.WithTimestamp(start),
		trace.WithLinks(trace.LinkFromContext(ctx)))
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrCommandID, id.String()), attribute.String(tracing.AttrAction, event),
			attribute.String(tracing.AttrActor, action.Actor), attribute.String(tracing.AttrStatus, string(to)))
	}
	tracing.End(span, err)
	return row, err
}
