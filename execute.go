package commandbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// runCommand handles one claimed command or reply and decides its outcome, with the messages a
// brokered transport sends for it.
func (c *Client) runCommand(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion {
	ctx, span, traced := c.startHandle(ctx, row)
	comp := c.decideOutcome(ctx, row)
	endHandle(span, traced, comp)
	c.routeCompletion(traced, comp)
	return comp
}

// decideOutcome runs the handler and classifies what it returned.
func (c *Client) decideOutcome(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion {
	start := time.Now()
	logger := commandLogger{c.logger, row, ctx}

	if row.Attempt > row.MaxAttempts {
		// Claimed again after its lease ran out on the last attempt: the handler never reported.
		logger.Warn("command timed out: lease expired on its last attempt")
		return c.timedOut(row, CodeLeaseExpired, fmt.Sprintf("lease expired on attempt %d of %d", row.MaxAttempts, row.MaxAttempts))
	}
	if row.DeadlineAt != nil && !c.Now().Before(*row.DeadlineAt) {
		logger.Warn("command timed out: deadline passed before it could run", "deadline", row.DeadlineAt)
		return c.timedOut(row, CodeDeadlineExceeded, "deadline "+row.DeadlineAt.UTC().Format(time.RFC3339)+" passed")
	}
	if row.DeadlineAt != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, *row.DeadlineAt)
		defer cancel()
	}
	ctx, cancelLease := withHandlerLease(ctx, c.config.Domain(row.Domain).VisibilityTimeout.Std())
	defer cancelLease()

	var result any
	var err error
	if row.Kind == driver.CommandKindReply {
		err = c.callReplyHandler(ctx, row)
	} else {
		entry := c.handlers.command(row.Domain, row.Type)
		if entry == nil {
			logger.Error("no handler for command type; moved to the troubleshooting queue")
			return c.toTSQ(row, CodeUnknownCommandType, fmt.Sprintf("no handler for command type %q in domain %q", row.Type, row.Domain))
		}
		result, err = callSafely(ctx, entry.handle, row)
	}
	c.metrics.handled(row, err, time.Since(start))

	if err == nil {
		return c.completed(row, result, logger)
	}
	class, code, message := classify(err)
	switch class {
	case ClassBusiness:
		logger.Info("command failed on a business rule", "error_code", code, "error", message)
		var details any
		var business *BusinessRuleError
		if errors.As(err, &business) {
			details = business.Details
		}
		return c.businessFailure(row, code, message, details)
	case ClassPermanent:
		logger.Error("command failed permanently; moved to the troubleshooting queue", "error_code", code, "error", message)
		return c.toTSQ(row, code, message)
	}
	if row.Attempt < row.MaxAttempts {
		delay := c.backoff(row)
		if window := c.config.Domain(row.Domain).MaxRetryWindow.Std(); window > 0 && c.Now().Add(delay).After(row.CreatedAt.Add(window)) {
			logger.Error("command failed and its next retry would fall outside its retry window; moved to the troubleshooting queue", "error", message, "window", window)
			return c.toTSQ(row, CodeRetryWindowExceeded, fmt.Sprintf("attempt %d of %d failed and the next would start past the %s retry window: %s: %s", row.Attempt, row.MaxAttempts, window, code, message))
		}
		logger.Warn("command failed; retry scheduled", "error", message, "retry_in", delay)
		return &driver.CommandCompletion{
			ID: row.ID, Fence: row.Fence, Status: driver.CommandStatusPending, RetryDelay: delay,
			ErrorCode: code, ErrorMessage: message, Event: "RETRY_SCHEDULED",
		}
	}
	logger.Error("command failed on its last attempt; moved to the troubleshooting queue", "error", message)
	return c.toTSQ(row, CodeRetriesExhausted, fmt.Sprintf("attempt %d of %d failed: %s: %s", row.Attempt, row.MaxAttempts, code, message))
}

// callSafely turns a handler panic into a transient error with the stack.
func callSafely(ctx context.Context, fn func(context.Context, *CommandRow) (any, error), row *CommandRow) (result any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &TransientError{Code: CodeHandlerPanic, Err: fmt.Errorf("panic: %v\n%s", r, debug.Stack())}
		}
	}()
	return fn(ctx, row)
}

func (c *Client) callReplyHandler(ctx context.Context, row *driver.CommandRow) error {
	handler := c.handlers.reply(row.Domain, row.Type)
	if handler == nil {
		return &PermanentError{Code: CodeNoReplyHandler, Err: fmt.Errorf("no reply handler for replies to %q on %q", row.Type, row.Queue)}
	}
	msg := &ReplyMessage{CommandRow: row}
	if err := json.Unmarshal(row.Data, &msg.Reply); err != nil {
		return &PermanentError{Code: CodeInvalidData, Err: fmt.Errorf("decoding reply: %w", err)}
	}
	_, err := callSafely(ctx, func(ctx context.Context, _ *CommandRow) (any, error) { return nil, handler(ctx, msg) }, row)
	return err
}

func (c *Client) completed(row *driver.CommandRow, result any, logger commandLogger) *driver.CommandCompletion {
	encoded, err := encodeResult(result)
	if err != nil {
		logger.Error("handler result cannot be encoded as JSON; moved to the troubleshooting queue", "error", err)
		return c.toTSQ(row, CodeInvalidData, "encoding handler result: "+err.Error())
	}
	return &driver.CommandCompletion{
		ID: row.ID, Fence: row.Fence, Status: driver.CommandStatusCompleted, Result: encoded,
		Event: "COMPLETED", Reply: c.replyFor(row, OutcomeSuccess, encoded, "", ""),
	}
}

func (c *Client) businessFailure(row *driver.CommandRow, code, message string, details any) *driver.CommandCompletion {
	encoded, err := encodeResult(details)
	if err != nil {
		encoded = nil
	}
	return &driver.CommandCompletion{
		ID: row.ID, Fence: row.Fence, Status: driver.CommandStatusFailed, Result: encoded,
		ErrorCode: code, ErrorMessage: message, Event: "FAILED",
		Reply: c.replyFor(row, OutcomeFailed, encoded, code, message),
	}
}

// toTSQ parks a command. A command that asked for it (HeaderNotifyParked) gets a PARKED reply in
// the same transaction.
func (c *Client) toTSQ(row *driver.CommandRow, code, message string) *driver.CommandCompletion {
	comp := &driver.CommandCompletion{
		ID: row.ID, Fence: row.Fence, Status: driver.CommandStatusInTSQ,
		ErrorCode: code, ErrorMessage: message, Event: "MOVED_TO_TSQ",
	}
	if notifiesParked(row.Headers) {
		comp.Reply = c.replyFor(row, OutcomeParked, nil, code, message)
	}
	return comp
}

func (c *Client) timedOut(row *driver.CommandRow, code, message string) *driver.CommandCompletion {
	return &driver.CommandCompletion{
		ID: row.ID, Fence: row.Fence, Status: driver.CommandStatusTimedOut,
		ErrorCode: code, ErrorMessage: message, Event: "TIMED_OUT",
		Reply: c.replyFor(row, OutcomeTimedOut, nil, code, message),
	}
}

func encodeResult(result any) (json.RawMessage, error) {
	switch r := result.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return r, nil
	}
	return json.Marshal(result)
}

// replyFor builds the reply of a command, or nil when it has no replyTo or is itself a reply.
func (c *Client) replyFor(row *driver.CommandRow, outcome Outcome, result json.RawMessage, code, message string) *driver.CommandInsertParams {
	if row.ReplyTo == "" || row.Kind == driver.CommandKindReply {
		return nil
	}
	data := encodeReply(&Reply{
		CommandID: row.ID, CorrelationID: row.CorrelationID, Domain: row.Domain,
		CommandType: row.Type, Outcome: outcome, Result: result, ErrorCode: code,
		ErrorMessage: message, Headers: row.Headers,
	})
	replyDomain := trimReplySuffix(row.ReplyTo)
	return &driver.CommandInsertParams{
		ID: uuid.Must(uuid.NewV7()), Kind: driver.CommandKindReply, Domain: replyDomain,
		Queue: row.ReplyTo, Type: row.Type, Data: data, CorrelationID: row.CorrelationID,
		CausationID: row.ID, MaxAttempts: c.config.Domain(replyDomain).MaxAttempts,
		TenantID: row.TenantID, Actor: c.config.WorkerID,
	}
}

func trimReplySuffix(queue string) string {
	if len(queue) > len(replyQueueSuffix) && queue[len(queue)-len(replyQueueSuffix):] == replyQueueSuffix {
		return queue[:len(queue)-len(replyQueueSuffix)]
	}
	return queue
}

// backoff is the delay before the next attempt: InitialDelay × Multiplier^(attempt-1), capped at
// MaxDelay, spread by ±Jitter.
func (c *Client) backoff(row *driver.CommandRow) time.Duration {
	policy := c.config.Domain(row.Domain).Retry
	delay := float64(policy.InitialDelay) * math.Pow(policy.Multiplier, float64(row.Attempt-1))
	delay = math.Min(delay, float64(policy.MaxDelay))
	if j := *policy.Jitter; j > 0 {
		c.randMu.Lock()
		spread := 2*c.config.Rand.Float64() - 1
		c.randMu.Unlock()
		delay *= 1 + j*spread
	}
	return time.Duration(delay)
}

// commandLogger logs with a command's ids as attributes. It builds them only when a line is
// actually written, so the hot path pays nothing for logging it does not do.
type commandLogger struct {
	l   *slog.Logger
	row *driver.CommandRow
	// ctx carries the handler's span: the log handler of package tracing adds its ids.
	ctx context.Context
}

func (cl commandLogger) log(level slog.Level, msg string, args ...any) {
	ctx := cl.ctx
	if !cl.l.Enabled(ctx, level) {
		return
	}
	attrs := []any{"command_id", cl.row.ID, "domain", cl.row.Domain, "type", cl.row.Type, "attempt", cl.row.Attempt}
	if cl.row.CorrelationID != uuid.Nil {
		attrs = append(attrs, "correlation_id", cl.row.CorrelationID)
	}
	attrs = append(attrs, args...)
	cl.l.Log(ctx, level, msg, attrs...)
}

func (cl commandLogger) Info(msg string, args ...any)  { cl.log(slog.LevelInfo, msg, args...) }
func (cl commandLogger) Warn(msg string, args ...any)  { cl.log(slog.LevelWarn, msg, args...) }
func (cl commandLogger) Error(msg string, args ...any) { cl.log(slog.LevelError, msg, args...) }
