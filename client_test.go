package commandbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

type testArgs struct {
	N int `json:"n"`
}

func (testArgs) Kind() string { return "Test" }

type otherArgs struct{}

func (otherArgs) Kind() string { return "Other" }

// testLogger routes client logs to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

var _ io.Writer = testWriter{}

// fastDomain is a domain config with quick retries for tests.
func fastDomain(concurrency, maxAttempts int) *DomainConfig {
	noJitter := 0.0
	return &DomainConfig{
		ConcurrentMessages: concurrency,
		MaxAttempts:        maxAttempts,
		Retry:              RetryPolicy{InitialDelay: Duration(10 * time.Millisecond), MaxDelay: Duration(50 * time.Millisecond), Jitter: &noJitter},
	}
}

func newTestClient(t *testing.T, drv driver.Driver, cfg *Config) *Client {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.FetchPollInterval == 0 {
		cfg.FetchPollInterval = Duration(50 * time.Millisecond)
	}
	client, err := NewClient(drv, cfg)
	require.NoError(t, err)
	return client
}

func startClient(t *testing.T, client *Client) {
	t.Helper()
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// replyCollector records replies arriving on a domain's reply queue.
type replyCollector struct {
	mu      sync.Mutex
	replies []Reply
	ch      chan Reply
}

func collectReplies(handlers *Handlers, domain string) *replyCollector {
	rc := &replyCollector{ch: make(chan Reply, 1000)}
	AddReplyHandler(handlers, domain, "", func(ctx context.Context, msg *ReplyMessage) error {
		rc.mu.Lock()
		rc.replies = append(rc.replies, msg.Reply)
		rc.mu.Unlock()
		rc.ch <- msg.Reply
		return nil
	})
	return rc
}

func (rc *replyCollector) next(t *testing.T) Reply {
	t.Helper()
	select {
	case r := <-rc.ch:
		return r
	case <-time.After(15 * time.Second):
		t.Fatal("timed out waiting for a reply")
		return Reply{}
	}
}

func (rc *replyCollector) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.replies)
}

func commandStatus(t *testing.T, client *Client, id uuid.UUID) Status {
	t.Helper()
	row, err := client.GetCommand(context.Background(), id)
	require.NoError(t, err)
	return row.Status
}

func waitStatus(t *testing.T, client *Client, id uuid.UUID, want Status) *CommandRow {
	t.Helper()
	var row *CommandRow
	eventually(t, 15*time.Second, fmt.Sprintf("command %s to be %s", id, want), func() bool {
		var err error
		row, err = client.GetCommand(context.Background(), id)
		require.NoError(t, err)
		return row.Status == want
	})
	return row
}

func auditEvents(row *CommandRow) []string {
	events := make([]string, len(row.Audit))
	for i, e := range row.Audit {
		events[i] = e.Event
	}
	return events
}

func TestHappyPathWithReply(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			return map[string]int{"doubled": cmd.Args.N * 2}, nil
		}))
		replies := collectReplies(handlers, "payments")
		client := newTestClient(t, drv, &Config{Handlers: handlers})
		startClient(t, client)

		correlation := uuid.New()
		res, err := client.Send(context.Background(), "fx", testArgs{N: 21}, &SendOpts{ReplyTo: "payments", CorrelationID: correlation, TenantID: "acme"})
		require.NoError(t, err)
		require.False(t, res.Duplicate)

		reply := replies.next(t)
		require.Equal(t, res.ID, reply.CommandID)
		require.Equal(t, correlation, reply.CorrelationID)
		require.Equal(t, OutcomeSuccess, reply.Outcome)
		require.Equal(t, "Test", reply.CommandType)
		require.JSONEq(t, `{"doubled":42}`, string(reply.Result))

		row := waitStatus(t, client, res.ID, StatusCompleted)
		require.Equal(t, 1, row.Attempt)
		require.Equal(t, "acme", row.TenantID)
		require.JSONEq(t, `{"doubled":42}`, string(row.Result))
		require.Equal(t, []string{"SENT", "CLAIMED", "COMPLETED"}, auditEvents(row))
		require.NotNil(t, row.CompletedAt)

		replyRows, err := client.ListCommands(context.Background(), &ListParams{Kind: driver.CommandKindReply, CorrelationID: correlation})
		require.NoError(t, err)
		require.Len(t, replyRows, 1)
		require.Equal(t, ReplyQueue("payments"), replyRows[0].Queue)
		require.Equal(t, res.ID, replyRows[0].CausationID)
		waitStatus(t, client, replyRows[0].ID, StatusCompleted)
	})
}

func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		var calls atomic.Int32
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			if calls.Add(1) < 3 {
				return nil, Transient(errors.New("fx provider unavailable"))
			}
			return nil, nil
		}))
		replies := collectReplies(handlers, "payments")
		client := newTestClient(t, drv, &Config{Handlers: handlers, Domains: map[string]*DomainConfig{"fx": fastDomain(2, 3)}})
		startClient(t, client)

		res, err := client.Send(context.Background(), "fx", testArgs{}, &SendOpts{ReplyTo: "payments"})
		require.NoError(t, err)
		require.Equal(t, OutcomeSuccess, replies.next(t).Outcome)
		row := waitStatus(t, client, res.ID, StatusCompleted)
		require.Equal(t, 3, row.Attempt)
		require.Equal(t, int32(3), calls.Load())
		require.Equal(t, []string{"SENT", "CLAIMED", "RETRY_SCHEDULED", "CLAIMED", "RETRY_SCHEDULED", "CLAIMED", "COMPLETED"}, auditEvents(row))
		require.Equal(t, CodeTransientFailure, row.Audit[2].ErrorCode)
		require.Equal(t, "fx provider unavailable", row.Audit[2].ErrorMessage)
	})
}

func TestRetriesExhaustedGoToTSQ(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		var calls atomic.Int32
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			calls.Add(1)
			return nil, errors.New("connection reset") // unclassified: transient
		}))
		replies := collectReplies(handlers, "payments")
		client := newTestClient(t, drv, &Config{Handlers: handlers, Domains: map[string]*DomainConfig{"fx": fastDomain(2, 2)}})
		startClient(t, client)

		res, err := client.Send(context.Background(), "fx", testArgs{}, &SendOpts{ReplyTo: "payments"})
		require.NoError(t, err)
		row := waitStatus(t, client, res.ID, StatusInTSQ)
		require.Equal(t, CodeRetriesExhausted, row.ErrorCode)
		require.Contains(t, row.ErrorMessage, "connection reset")
		require.Equal(t, int32(2), calls.Load())
		require.Equal(t, "MOVED_TO_TSQ", row.Audit[len(row.Audit)-1].Event)
		require.Zero(t, replies.count(), "a command in the TSQ has no reply until an operator acts")

		tsq, err := client.TSQ().List(context.Background(), TSQFilter{Domain: "fx"})
		require.NoError(t, err)
		require.Len(t, tsq, 1)
		require.Equal(t, res.ID, tsq[0].ID)
	})
}

func TestPermanentFailureGoesToTSQAtOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		var calls atomic.Int32
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			calls.Add(1)
			return nil, Permanent("INVALID_CURRENCY", errors.New("currency XXX is not tradeable"))
		}))
		client := newTestClient(t, drv, &Config{Handlers: handlers, Domains: map[string]*DomainConfig{"fx": fastDomain(2, 5)}})
		startClient(t, client)

		res, err := client.Send(context.Background(), "fx", testArgs{}, nil)
		require.NoError(t, err)
		row := waitStatus(t, client, res.ID, StatusInTSQ)
		require.Equal(t, "INVALID_CURRENCY", row.ErrorCode)
		require.Equal(t, "currency XXX is not tradeable", row.ErrorMessage)
		require.Equal(t, 1, row.Attempt)
		require.Equal(t, int32(1), calls.Load())
	})
}

func TestBusinessFailureReply(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		handlers := NewHandlers()
		AddHandler(handlers, "accounts", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			return nil, &BusinessRuleError{Code: "INSUFFICIENT_FUNDS", Message: "balance 10.00 < 25.00", Details: map[string]string{"available": "10.00"}}
		}))
		replies := collectReplies(handlers, "payments")
		client := newTestClient(t, drv, &Config{Handlers: handlers})
		startClient(t, client)

		res, err := client.Send(context.Background(), "accounts", testArgs{}, &SendOpts{ReplyTo: "payments__replies"})
		require.NoError(t, err)
		reply := replies.next(t)
		require.Equal(t, OutcomeFailed, reply.Outcome)
		require.Equal(t, "INSUFFICIENT_FUNDS", reply.ErrorCode)
		require.Equal(t, "balance 10.00 < 25.00", reply.ErrorMessage)
		require.JSONEq(t, `{"available":"10.00"}`, string(reply.Result))
		row := waitStatus(t, client, res.ID, StatusFailed)
		require.Equal(t, 1, row.Attempt)
	})
}

func TestUnknownCommandTypeGoesToTSQ(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) { return nil, nil }))
		client := newTestClient(t, drv, &Config{Handlers: handlers})
		startClient(t, client)

		res, err := client.Send(context.Background(), "fx", otherArgs{}, nil)
		require.NoError(t, err)
		row := waitStatus(t, client, res.ID, StatusInTSQ)
		require.Equal(t, CodeUnknownCommandType, row.ErrorCode)
		require.Contains(t, row.ErrorMessage, `"Other"`)
		require.ErrorIs(t, &Error{Code: row.ErrorCode}, ErrUnknownCommandType)
	})
}

func TestInvalidDataGoesToTSQ(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) { return nil, nil }))
		client := newTestClient(t, drv, &Config{Handlers: handlers})
		startClient(t, client)

		res, err := client.Send(context.Background(), "fx", RawArgs{Type: "Test", Data: json.RawMessage(`{"n":"not a number"}`)}, nil)
		require.NoError(t, err)
		row := waitStatus(t, client, res.ID, StatusInTSQ)
		require.Equal(t, CodeInvalidData, row.ErrorCode)
	})
}

func TestTSQOperatorActions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		var fail atomic.Bool
		fail.Store(true)
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			if fail.Load() {
				return nil, Permanent("DOWNSTREAM_REJECTED", errors.New("rejected"))
			}
			return map[string]string{"by": "handler"}, nil
		}))
		replies := collectReplies(handlers, "payments")
		client := newTestClient(t, drv, &Config{Handlers: handlers})
		startClient(t, client)
		ctx := context.Background()

		send := func() uuid.UUID {
			res, err := client.Send(ctx, "fx", testArgs{}, &SendOpts{ReplyTo: "payments"})
			require.NoError(t, err)
			waitStatus(t, client, res.ID, StatusInTSQ)
			return res.ID
		}
		retryID, cancelID, completeID := send(), send(), send()
		op := OperatorAction{Actor: "alice@ops", Reason: "downstream fixed"}

		// Bad input changes nothing.
		_, err := client.TSQ().Retry(ctx, retryID, OperatorAction{Actor: "alice@ops"})
		var verr *ValidationError
		require.ErrorAs(t, err, &verr)
		require.Equal(t, StatusInTSQ, commandStatus(t, client, retryID))
		_, err = client.TSQ().Retry(ctx, uuid.New(), op)
		require.ErrorIs(t, err, ErrNotFound)

		// Retry: runs again with a fresh attempt budget and succeeds.
		fail.Store(false)
		_, err = client.TSQ().Retry(ctx, retryID, op)
		require.NoError(t, err)
		row := waitStatus(t, client, retryID, StatusCompleted)
		require.Equal(t, 1, row.Attempt)
		retryEntry := row.Audit[len(row.Audit)-3]
		require.Equal(t, "TSQ_RETRY", retryEntry.Event)
		require.Equal(t, "alice@ops", retryEntry.Actor)
		require.Equal(t, "downstream fixed", retryEntry.Reason)
		require.Equal(t, OutcomeSuccess, replies.next(t).Outcome)

		// Retrying a completed command is refused.
		_, err = client.TSQ().Retry(ctx, retryID, op)
		require.ErrorIs(t, err, ErrInvalidState)

		// Cancel: CANCELLED with a CANCELLED reply.
		row, err = client.TSQ().Cancel(ctx, cancelID, OperatorAction{Actor: "bob@ops", Reason: "customer withdrew"})
		require.NoError(t, err)
		require.Equal(t, StatusCancelled, row.Status)
		reply := replies.next(t)
		require.Equal(t, cancelID, reply.CommandID)
		require.Equal(t, OutcomeCancelled, reply.Outcome)
		require.Contains(t, reply.ErrorMessage, "customer withdrew")

		// Complete: COMPLETED with the operator's result, replied as a success.
		row, err = client.TSQ().Complete(ctx, completeID, json.RawMessage(`{"contract":"FX-MANUAL-7"}`), OperatorAction{Actor: "carol@ops", Reason: "booked by phone"})
		require.NoError(t, err)
		require.Equal(t, StatusCompleted, row.Status)
		reply = replies.next(t)
		require.Equal(t, completeID, reply.CommandID)
		require.Equal(t, OutcomeSuccess, reply.Outcome)
		require.JSONEq(t, `{"contract":"FX-MANUAL-7"}`, string(reply.Result))
		row, err = client.GetCommand(ctx, completeID)
		require.NoError(t, err)
		last := row.Audit[len(row.Audit)-1]
		require.Equal(t, "TSQ_COMPLETE", last.Event)
		require.Equal(t, "carol@ops", last.Actor)
		require.Equal(t, "booked by phone", last.Reason)

		// The audit log has each action with actor and reason.
		log, err := client.AuditLog(ctx, nil)
		require.NoError(t, err)
		actions := map[string]string{}
		for _, entry := range log {
			actions[entry.Action] = entry.Actor + "|" + entry.Reason
		}
		// The engine's parks are audited too: every park and every resubmit leaves an entry.
		require.Contains(t, actions["DLQ_PARK"], "DOWNSTREAM_REJECTED: rejected")
		delete(actions, "DLQ_PARK")
		require.Equal(t, map[string]string{
			"TSQ_RETRY":    "alice@ops|downstream fixed",
			"TSQ_CANCEL":   "bob@ops|customer withdrew",
			"TSQ_COMPLETE": "carol@ops|booked by phone",
		}, actions)
	})
}

func TestIdempotencyKeyDedupe(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		var calls atomic.Int32
		handlers := NewHandlers()
		AddHandler(handlers, "payments", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			calls.Add(1)
			return nil, nil
		}))
		client := newTestClient(t, drv, &Config{Handlers: handlers})
		ctx := context.Background()

		first, err := client.Send(ctx, "payments", testArgs{N: 1}, &SendOpts{IdempotencyKey: "pay-123"})
		require.NoError(t, err)
		require.False(t, first.Duplicate)
		second, err := client.Send(ctx, "payments", testArgs{N: 2}, &SendOpts{IdempotencyKey: "pay-123"})
		require.NoError(t, err)
		require.True(t, second.Duplicate)
		require.Equal(t, first.ID, second.ID)

		// Within one batch, and across domains (the key is unique per domain).
		results, err := client.SendBatch(ctx, []SendParams{
			{Domain: "payments", Args: testArgs{}, Opts: &SendOpts{IdempotencyKey: "pay-456"}},
			{Domain: "payments", Args: testArgs{}, Opts: &SendOpts{IdempotencyKey: "pay-456"}},
			{Domain: "payments", Args: testArgs{}, Opts: &SendOpts{IdempotencyKey: "pay-123"}},
			{Domain: "fx", Args: testArgs{}, Opts: &SendOpts{IdempotencyKey: "pay-123"}},
		})
		require.NoError(t, err)
		require.False(t, results[0].Duplicate)
		require.True(t, results[1].Duplicate)
		require.Equal(t, results[0].ID, results[1].ID)
		require.True(t, results[2].Duplicate)
		require.Equal(t, first.ID, results[2].ID)
		require.False(t, results[3].Duplicate)

		startClient(t, client)
		waitStatus(t, client, first.ID, StatusCompleted)
		waitStatus(t, client, results[0].ID, StatusCompleted)
		rows, err := client.ListCommands(ctx, &ListParams{Domain: "payments"})
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.Equal(t, int32(2), calls.Load())
	})
}

func TestSendTxCommitsAndRollsBackWithCaller(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		client := newTestClient(t, drv, &Config{})
		ctx := context.Background()
		tx, err := drv.Executor().Begin(ctx)
		require.NoError(t, err)
		_, err = client.sendWithExecutor(ctx, tx, []SendParams{{Domain: "fx", Args: testArgs{}}})
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
		rows, err := client.ListCommands(ctx, &ListParams{Domain: "fx"})
		require.NoError(t, err)
		require.Empty(t, rows, "a rolled-back send leaves nothing")

		_, err = client.SendTx(ctx, "not a transaction", "fx", testArgs{}, nil)
		require.ErrorIs(t, err, driver.ErrWrongTxType)
	})
}

func TestSendValidation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		client := newTestClient(t, drv, &Config{})
		ctx := context.Background()
		_, err := client.SendBatch(ctx, []SendParams{
			{Domain: "fx", Args: testArgs{}},
			{Domain: "Bad Domain", Args: testArgs{}},
			{Domain: "fx", Args: testArgs{}, Opts: &SendOpts{ReplyTo: "no such/queue"}},
		})
		require.Error(t, err)
		require.Contains(t, err.Error(), "command 1: invalid domain")
		require.Contains(t, err.Error(), "command 2: invalid replyTo")
		rows, err := client.ListCommands(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, rows, "nothing is written when any command is invalid")
	})
}

func TestBatchCountsAndCompletion(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		handlers := NewHandlers()
		AddHandler(handlers, "payments", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			if cmd.Args.N%5 == 0 {
				return nil, BusinessRule("LIMIT_EXCEEDED", "daily limit")
			}
			return nil, nil
		}))
		client := newTestClient(t, drv, &Config{Handlers: handlers})
		ctx := context.Background()
		var commands []SendParams
		for i := 1; i <= 20; i++ {
			commands = append(commands, SendParams{Domain: "payments", Args: testArgs{N: i}})
		}
		batch, err := client.CreateBatch(ctx, BatchParams{Name: "2026-11-21 run", Commands: commands})
		require.NoError(t, err)
		require.Equal(t, int64(20), batch.Total)
		require.Equal(t, int64(20), batch.Counts[StatusPending])
		require.False(t, batch.Complete())

		startClient(t, client)
		eventually(t, 15*time.Second, "batch to complete", func() bool {
			batch, err = client.GetBatch(ctx, batch.ID)
			require.NoError(t, err)
			return batch.Complete()
		})
		require.Equal(t, int64(16), batch.Counts[StatusCompleted])
		require.Equal(t, int64(4), batch.Counts[StatusFailed])
		require.NotNil(t, batch.CompletedAt)

		listed, err := client.ListCommands(ctx, &ListParams{BatchID: batch.ID, Statuses: []Status{StatusFailed}})
		require.NoError(t, err)
		require.Len(t, listed, 4)
	})
}

func TestQueueDepthsAndStats(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) { return nil, nil }))
		client := newTestClient(t, drv, &Config{Handlers: handlers})
		ctx := context.Background()
		later := time.Now().Add(time.Hour)
		for i := 0; i < 3; i++ {
			_, err := client.Send(ctx, "fx", testArgs{}, nil)
			require.NoError(t, err)
		}
		_, err := client.Send(ctx, "fx", testArgs{}, &SendOpts{ScheduledAt: &later})
		require.NoError(t, err)
		depths, err := client.QueueDepths(ctx)
		require.NoError(t, err)
		require.Len(t, depths, 1)
		require.Equal(t, CommandQueue("fx"), depths[0].Queue)
		require.Equal(t, int64(3), depths[0].Ready)
		require.Equal(t, int64(1), depths[0].Scheduled)

		startClient(t, client)
		eventually(t, 15*time.Second, "ready commands to complete", func() bool {
			stats, err := client.CommandStats(ctx, time.Hour)
			require.NoError(t, err)
			return len(stats) == 1 && stats[0].Counts[StatusCompleted] == 3
		})
		stats, err := client.CommandStats(ctx, time.Hour)
		require.NoError(t, err)
		require.Equal(t, "fx", stats[0].Domain)
		require.Equal(t, "Test", stats[0].Type)
		require.Equal(t, int64(1), stats[0].Counts[StatusPending])
		require.Equal(t, int64(3), stats[0].Completed)
		require.Greater(t, stats[0].P99, time.Duration(0))
		require.GreaterOrEqual(t, stats[0].P99, stats[0].P50)
	})
}
