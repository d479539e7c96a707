package amqp_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/tracecontext"
	"github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
	"github.com/commandbus/commandbus/transport/kafka"
)

type BookFx = brokertest.BookFx

// platform is a whole brokered deployment in one test: PostgreSQL holds the commands, outbox and inbox;
// the relay publishes commands and replies to RabbitMQ and events to Kafka (kfake); a consumer
// runs the fx bounded context's handler for what RabbitMQ delivers.
type platform struct {
	t        *testing.T
	url      string
	prefix   string
	drv      driver.Driver
	relay    *outbox.Relay
	consumer *amqp.Consumer
	brokers  []string
	metrics  *outbox.Metrics
	*brokertest.Fx
}

type platformOpts struct {
	replies     bool // consume the reply queue and run the payments reply handler
	maxAttempts int
	lease       time.Duration
	relayExec   func(driver.Executor) driver.Executor
	// requeueDelay is the consumer's RequeueDelay (default 20ms: tests do not wait out the
	// production backoff).
	requeueDelay time.Duration
	// drv is the database (default: an isolated PostgreSQL schema).
	drv driver.Driver
	// foreignFx leaves the fx domain without a handler in this deployment: a service outside it
	// consumes fx's command queue.
	foreignFx bool
	// setup runs on the client before it starts (to register processes on it).
	setup func(client *commandbus.Client)
	// tracerProvider is the client's and the relay's (default: the global no-op).
	tracerProvider trace.TracerProvider
}

func newPlatform(t *testing.T, opts platformOpts) *platform {
	t.Helper()
	url := rabbitURL(t)
	drv := opts.drv
	if drv == nil {
		drv = dbtest.Postgres(t)
	}
	p := &platform{t: t, url: url, prefix: uniquePrefix(t, url), drv: drv}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events.Fx"))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	p.brokers = cluster.ListenAddrs()
	p.Fx = brokertest.NewFx(t, 100, func(context.Context, *commandbus.Command[BookFx]) (any, error) {
		return map[string]string{"contract": "FX-1"}, nil
	})
	if opts.foreignFx {
		p.Handlers = commandbus.NewHandlers()
		commandbus.AddReplyHandler(p.Handlers, "payments", "", func(_ context.Context, msg *commandbus.ReplyMessage) error {
			p.Replies <- msg.Reply
			return nil
		})
	}
	if opts.maxAttempts == 0 {
		opts.maxAttempts = 3
	}
	if opts.lease == 0 {
		opts.lease = 10 * time.Second
	}
	jitter := 0.0
	logger := brokertest.Logger(t)
	client, err := commandbus.NewClient(p.drv, &commandbus.Config{
		Handlers: p.Handlers,
		Logger:   logger,
		Domains: map[string]*commandbus.DomainConfig{
			"fx": {Transport: commandbus.TransportAMQP, Events: commandbus.EventsKafka, MaxAttempts: opts.maxAttempts,
				VisibilityTimeout: commandbus.Duration(opts.lease),
				Retry:             commandbus.RetryPolicy{InitialDelay: commandbus.Duration(100 * time.Millisecond), Jitter: &jitter}},
			"payments": {},
		},
		AMQP:              commandbus.AMQPConfig{URL: url, Prefix: p.prefix, BackoutThreshold: 5},
		Kafka:             commandbus.KafkaConfig{Brokers: p.brokers[0]},
		WatchdogInterval:  commandbus.Duration(200 * time.Millisecond),
		FetchPollInterval: commandbus.Duration(100 * time.Millisecond),
		TracerProvider:    opts.tracerProvider,
	})
	require.NoError(t, err)
	p.Client = client
	p.metrics = plumbing.MessagingMetrics(client)

	topology := amqp.Topology{Prefix: p.prefix, BackoutThreshold: 5}
	amqpPub, err := amqp.NewPublisher(amqp.PublisherConfig{URL: url, Topology: topology})
	require.NoError(t, err)
	t.Cleanup(func() { _ = amqpPub.Close() })
	kafkaPub, err := kafka.NewPublisher(kafka.Config{Brokers: p.brokers})
	require.NoError(t, err)
	t.Cleanup(kafkaPub.Close)
	exec := p.drv.Executor()
	if opts.relayExec != nil {
		exec = opts.relayExec(exec)
	}
	p.relay, err = outbox.NewRelay(exec, outbox.RelayConfig{
		Publishers: []outbox.Publisher{amqpPub, kafkaPub}, Subscribe: plumbing.Subscriber(client), Metrics: p.metrics, Logger: logger,
		PollInterval: 50 * time.Millisecond, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, Lease: 2 * time.Second,
		TracerProvider: opts.tracerProvider,
	})
	require.NoError(t, err)
	client.AddService(p.relay)
	if opts.requeueDelay == 0 {
		opts.requeueDelay = 20 * time.Millisecond
	}
	p.consumer, err = amqp.NewConsumer(amqp.ConsumerConfig{URL: url, Topology: topology, Client: client, Replies: opts.replies, Logger: logger,
		RequeueDelay: opts.requeueDelay, MaxRequeueDelay: time.Second})
	require.NoError(t, err)
	if opts.setup != nil {
		opts.setup(client)
	}
	brokertest.Start(t, client, p.consumer, url, topology.ReplyQueue(), topology.DeadLetterQueue(), topology.ParkingQueue())
	return p
}

func (p *platform) events(n int) []*kgo.Record {
	p.t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(p.brokers...), kgo.ConsumeTopics("events.Fx"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(p.t, err)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fetches := client.PollFetches(ctx)
		require.NoError(p.t, ctx.Err(), "waiting for %d events, got %d", n, len(out))
		fetches.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func (p *platform) dedupeHits() float64 {
	var total float64
	for _, q := range p.consumer.Queues() {
		total += brokertest.CounterValue(p.metrics.InboxDedupeHits.WithLabelValues("amqp:" + q))
	}
	return total
}

// TestHappyPath: the command row ends COMPLETED, its reply arrives on the
// AMQP reply queue with the command id as correlation id, and its event on Kafka, keyed by the
// business key, with correlation and trace headers.
func TestHappyPath(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{})
	sc := tracecontext.SpanContext{TraceID: tracecontext.TraceID{1, 2, 3}, SpanID: tracecontext.SpanID{4, 5}, Sampled: true}
	ctx := tracecontext.ContextWith(context.Background(), sc)
	var sawTrace atomic.Bool
	p.SetHandler(func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
		got, ok := tracecontext.FromContext(ctx)
		sawTrace.Store(ok && got.TraceID == sc.TraceID)
		return map[string]string{"contract": "FX-" + cmd.Args.PaymentID}, nil
	})
	correlation := uuid.Must(uuid.NewV7())
	res, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: "p-1"}, &commandbus.SendOpts{
		ReplyTo: "payments", Key: "payment-1", CorrelationID: correlation, TenantID: "acme", IdempotencyKey: "saga-1:STEP_BOOK_FX",
	})
	require.NoError(t, err)

	row := p.WaitStatus(res.ID, commandbus.StatusCompleted)
	require.JSONEq(t, `{"contract":"FX-p-1"}`, string(row.Result))
	require.True(t, sawTrace.Load(), "the handler runs in the sender's trace")

	// The reply, on AMQP.
	replies := readQueue(t, p.url, outbox.ReplyQueueName(p.prefix), 1)
	reply := replies[0]
	require.Equal(t, res.ID.String(), reply.CorrelationId)
	require.Equal(t, string(outbox.TypeCommandCompleted), reply.Type)
	require.Equal(t, uint8(amqp091.Persistent), reply.DeliveryMode)
	require.Equal(t, sc.Traceparent(), reply.Headers[outbox.HeaderTraceparent])
	env, err := outbox.Decode(reply.Body)
	require.NoError(t, err)
	require.Equal(t, outbox.TypeCommandCompleted, env.Type)
	require.Equal(t, res.ID, env.CommandID)
	require.Equal(t, res.ID, env.CausationID)
	require.Equal(t, correlation, env.CorrelationID)
	require.Equal(t, "payment-1", env.Key)
	require.Equal(t, "acme", env.Headers.TenantID)
	require.Equal(t, "saga-1:STEP_BOOK_FX", env.Headers.IdempotencyKey)
	require.Equal(t, sc.TraceID.String(), env.Headers.TraceID)
	var payload commandbus.Reply
	require.NoError(t, json.Unmarshal(env.Payload, &payload))
	require.Equal(t, commandbus.OutcomeSuccess, payload.Outcome)

	// The event, on Kafka.
	events := p.events(1)
	require.Equal(t, "payment-1", string(events[0].Key))
	require.Equal(t, correlation.String(), kafka.Header(events[0], outbox.HeaderCorrelationID))
	require.Equal(t, sc.Traceparent(), kafka.Header(events[0], outbox.HeaderTraceparent))
	event, err := outbox.Decode(events[0].Value)
	require.NoError(t, err)
	require.Equal(t, outbox.TypeCommandCompleted, event.Type)
	require.Equal(t, res.ID, event.CommandID)

	// The command went out on AMQP with reply-to = the reply queue.
	published, err := p.drv.Executor().OutboxList(context.Background(), &driver.OutboxListParams{Transport: outbox.TransportAMQP, Topic: outbox.CommandQueueName(p.prefix, "fx", "BookFx")})
	require.NoError(t, err)
	require.Len(t, published, 1)
	require.Equal(t, outbox.ReplyQueueName(p.prefix), amqp.Publishing(published[0]).ReplyTo)
	require.Equal(t, res.ID.String(), amqp.Publishing(published[0]).CorrelationId)
}

// TestRepliesReachReplyHandlers: with the reply queue consumed, the sender's reply handler gets
// the reply, once, however often the broker delivers it.
func TestRepliesReachReplyHandlers(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{replies: true})
	res, err := p.Client.Send(context.Background(), "fx", BookFx{PaymentID: "p-2"}, &commandbus.SendOpts{ReplyTo: "payments"})
	require.NoError(t, err)
	require.Equal(t, commandbus.OutcomeSuccess, p.WaitReply(res.ID).Outcome)
}

// TestRetryableFailureRedeliveryDeduped: the first attempt fails
// transiently and is retried through the broker; a redelivery of a message already processed is
// deduped by the inbox; the command ends COMPLETED with one successful effect.
func TestRetryableFailureRedeliveryDeduped(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{})
	var effects atomic.Int64
	p.SetHandler(func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
		if cmd.Attempt == 1 {
			return nil, commandbus.Transient(errors.New("fx provider timeout"))
		}
		effects.Add(1)
		return map[string]string{"contract": "FX-3"}, nil
	})
	res, err := p.Client.Send(context.Background(), "fx", BookFx{PaymentID: "p-3"}, nil)
	require.NoError(t, err)
	row := p.WaitStatus(res.ID, commandbus.StatusCompleted)
	require.Equal(t, 2, row.Attempt)
	require.Equal(t, int64(1), effects.Load())

	// The broker delivers the first message again (as after a lost ack).
	first, err := p.drv.Executor().OutboxList(context.Background(), &driver.OutboxListParams{Transport: outbox.TransportAMQP, Topic: outbox.CommandQueueName(p.prefix, "fx", "BookFx")})
	require.NoError(t, err)
	require.Len(t, first, 2, "the request and its retry")
	before := p.dedupeHits()
	publishRaw(t, p.url, amqp.Publishing(first[len(first)-1]), first[len(first)-1].Topic)
	publishRaw(t, p.url, amqp.Publishing(first[0]), first[0].Topic)
	brokertest.WaitFor(t, "both redeliveries deduped", func() bool { return p.dedupeHits()-before == 2 })
	require.Equal(t, int64(2), p.Calls.Load(), "the handler did not run again")
	require.Equal(t, int64(1), effects.Load())
}

func publishRaw(t testing.TB, url string, msg amqp091.Publishing, queue string) {
	t.Helper()
	conn, err := amqp091.Dial(url)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, false, false, msg)
	require.NoError(t, err)
	ok, err := dc.WaitContext(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
}

// TestPermanentFailureParkedThenResubmitted: a permanent failure parks the
// command in the DLQ with its error and attempts; an operator resubmits it with the same
// idempotency key, and it completes. Park and resubmit are audited.
func TestPermanentFailureParkedThenResubmitted(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{})
	var fixed atomic.Bool
	keys := make(chan string, 4)
	p.SetHandler(func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
		keys <- cmd.IdempotencyKey()
		if !fixed.Load() {
			return nil, commandbus.Permanent("ACCOUNT_BLOCKED", errors.New("beneficiary account blocked"))
		}
		return map[string]string{"contract": "FX-4"}, nil
	})
	ctx := context.Background()
	res, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: "p-4"}, &commandbus.SendOpts{IdempotencyKey: "payment-4:BOOK_FX", ReplyTo: "payments"})
	require.NoError(t, err)
	p.WaitStatus(res.ID, commandbus.StatusInTSQ)

	parked, err := p.Client.DLQ().List(ctx, commandbus.DLQFilter{Domain: "fx"})
	require.NoError(t, err)
	require.Len(t, parked, 1)
	require.Equal(t, res.ID, parked[0].CommandID)
	require.Equal(t, 1, parked[0].Attempts)
	require.Equal(t, "ACCOUNT_BLOCKED: beneficiary account blocked", parked[0].Error)

	fixed.Store(true)
	_, err = p.Client.DLQ().Resubmit(ctx, res.ID, commandbus.OperatorAction{Actor: "alice@ops", Reason: "account unblocked"})
	require.NoError(t, err)
	row := p.WaitStatus(res.ID, commandbus.StatusCompleted)
	require.Equal(t, "payment-4:BOOK_FX", row.IdempotencyKey)
	require.Equal(t, "payment-4:BOOK_FX", <-keys)
	require.Equal(t, "payment-4:BOOK_FX", <-keys, "the same idempotency key")
	_, err = p.Client.DLQ().Get(ctx, res.ID)
	require.ErrorIs(t, err, commandbus.ErrNotFound)

	log, err := p.Client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "command", EntityID: res.ID.String()})
	require.NoError(t, err)
	var actions []string
	for _, e := range log {
		actions = append(actions, e.Action)
	}
	require.ElementsMatch(t, []string{"DLQ_PARK", "DLQ_RESUBMIT"}, actions)
	_, err = p.Client.DLQ().Resubmit(ctx, res.ID, commandbus.OperatorAction{Actor: "alice@ops", Reason: "again"})
	require.ErrorIs(t, err, commandbus.ErrInvalidState)
}

// TestTimeoutCaughtByWatchdog: a handler hangs past its lease on the last
// attempt; the watchdog marks the command TIMED_OUT and emits its reply and event; the handler's
// late outcome is rejected by the fence.
func TestTimeoutCaughtByWatchdog(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{maxAttempts: 1, lease: time.Second})
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	p.SetHandler(func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
		<-release // a downstream that never answers, and ignores cancellation
		return map[string]string{"late": "yes"}, nil
	})
	res, err := p.Client.Send(context.Background(), "fx", BookFx{PaymentID: "p-5"}, &commandbus.SendOpts{ReplyTo: "payments"})
	require.NoError(t, err)
	row := p.WaitStatus(res.ID, commandbus.StatusTimedOut)
	require.Equal(t, commandbus.CodeLeaseExpired, row.ErrorCode)

	reply := readQueue(t, p.url, outbox.ReplyQueueName(p.prefix), 1)[0]
	require.Equal(t, string(outbox.TypeCommandTimedOut), reply.Type)
	require.Equal(t, res.ID.String(), reply.CorrelationId)
	event, err := outbox.Decode(p.events(1)[0].Value)
	require.NoError(t, err)
	require.Equal(t, outbox.TypeCommandTimedOut, event.Type)

	once.Do(func() { close(release) })
	// The late outcome is fenced out: once the delivery is settled, the command is still TIMED_OUT.
	queue := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
	brokertest.WaitFor(t, "the late delivery settled", func() bool {
		return brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(queue, string(commandbus.DeliveryProcessed))) == 1
	})
	row, err = p.Client.GetCommand(context.Background(), res.ID)
	require.NoError(t, err)
	require.Equal(t, commandbus.StatusTimedOut, row.Status)
}

// TestDuplicateSubmission: the same idempotency key sent twice creates one
// command, one message and one effect.
func TestDuplicateSubmission(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{})
	ctx := context.Background()
	first, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: "p-6"}, &commandbus.SendOpts{IdempotencyKey: "payment-6:BOOK_FX"})
	require.NoError(t, err)
	second, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: "p-6"}, &commandbus.SendOpts{IdempotencyKey: "payment-6:BOOK_FX"})
	require.NoError(t, err)
	require.True(t, second.Duplicate)
	require.Equal(t, first.ID, second.ID)
	p.WaitStatus(first.ID, commandbus.StatusCompleted)
	msgs, err := p.drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Transport: outbox.TransportAMQP, Topic: outbox.CommandQueueName(p.prefix, "fx", "BookFx")})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, int64(1), p.Calls.Load())
}

// crashingRelayExec loses the first mark of published messages, whether it comes with the next
// claim or on its own: the relay "crashes" between publishing and marking.
type crashingRelayExec struct {
	driver.Executor
	crashed atomic.Bool
}

func (e *crashingRelayExec) OutboxClaim(ctx context.Context, params *driver.OutboxClaimParams) ([]*driver.OutboxRow, error) {
	if len(params.Published) > 0 && e.crashed.CompareAndSwap(false, true) {
		lost := *params
		lost.Published = nil
		return e.Executor.OutboxClaim(ctx, &lost)
	}
	return e.Executor.OutboxClaim(ctx, params)
}

func (e *crashingRelayExec) OutboxMarkPublished(ctx context.Context, params *driver.OutboxMarkPublishedParams) (int64, error) {
	if len(params.IDs) > 0 && e.crashed.CompareAndSwap(false, true) {
		return 0, errors.New("relay crashed between publish and mark")
	}
	return e.Executor.OutboxMarkPublished(ctx, params)
}

// TestRelayCrashRepublishDeduped: the relay publishes the command, crashes before marking it,
// publishes it again after its lease; the consumer processes it once.
func TestRelayCrashRepublishDeduped(t *testing.T) {
	t.Parallel()
	var exec *crashingRelayExec
	p := newPlatform(t, platformOpts{relayExec: func(e driver.Executor) driver.Executor {
		exec = &crashingRelayExec{Executor: e}
		return exec
	}})
	res, err := p.Client.Send(context.Background(), "fx", BookFx{PaymentID: "p-7"}, nil)
	require.NoError(t, err)
	p.WaitStatus(res.ID, commandbus.StatusCompleted)
	require.True(t, exec.crashed.Load())
	brokertest.WaitFor(t, "the second publication deduped", func() bool { return p.dedupeHits() >= 1 })
	require.Equal(t, int64(1), p.Calls.Load())
}

// TestUndecodableMessages: a message that is not an envelope goes to the dead-letter queue with
// the reason; one of an unknown schema version is parked. Neither is dropped.
func TestUndecodableMessages(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{})
	queue := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
	publishRaw(t, p.url, amqp091.Publishing{MessageId: "garbage-1", Body: []byte(`{"not":"an envelope"}`)}, queue)
	v2 := `{"messageId":"0190b8a4-0000-7000-8000-000000000001","type":"CommandRequested","name":"BookFx","commandId":"0190b8a4-0000-7000-8000-000000000002","occurredAt":"2025-11-02T12:34:56Z","headers":{"schemaVersion":"2"},"payload":{}}`
	publishRaw(t, p.url, amqp091.Publishing{MessageId: "v2-1", Body: []byte(v2)}, queue)

	dead := readQueue(t, p.url, outbox.DeadLetterQueueName(p.prefix), 1)[0]
	require.Equal(t, "garbage-1", dead.MessageId)
	require.Contains(t, dead.Headers[amqp.HeaderError], outbox.CodeInvalidEnvelope)
	require.Equal(t, queue, dead.Headers["x-commandbus-original-queue"])
	parked := readQueue(t, p.url, outbox.ParkingQueueName(p.prefix), 1)[0]
	require.Equal(t, "v2-1", parked.MessageId)
	require.Contains(t, parked.Headers[amqp.HeaderError], outbox.CodeUnknownSchemaVersion)
}

// TestBrokerRestart stops RabbitMQ while commands are sent: the relay backs off, the consumer
// reconnects, and after the broker returns the backlog drains with nothing lost. It is not
// parallel: it stops the broker every other test here uses.
func TestBrokerRestart(t *testing.T) {
	p := newPlatform(t, platformOpts{})
	ctx := context.Background()
	warm, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: "warm"}, nil)
	require.NoError(t, err)
	p.WaitStatus(warm.ID, commandbus.StatusCompleted)

	start := stopBroker(t, p.url)
	const n = 20
	ids := make([]uuid.UUID, n)
	for i := range n {
		res, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: "during-outage"}, nil)
		require.NoError(t, err)
		ids[i] = res.ID
	}
	brokertest.WaitFor(t, "the relay failing to publish", func() bool {
		rows, err := p.drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusNew}, Transport: outbox.TransportAMQP})
		require.NoError(t, err)
		for _, r := range rows {
			if r.LastError != "" {
				return true
			}
		}
		return false
	})
	start()
	for _, id := range ids {
		p.WaitStatus(id, commandbus.StatusCompleted)
	}
	require.GreaterOrEqual(t, p.Calls.Load(), int64(n+1))
}

// TestConsumerRestarts: a consumer stopped and started again (as a restarted client does)
// consumes again.
func TestConsumerRestarts(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{})
	brokertest.Restart(t, p.consumer)
	res, err := p.Client.Send(context.Background(), "fx", BookFx{PaymentID: "again"}, nil)
	require.NoError(t, err)
	p.WaitStatus(res.ID, commandbus.StatusCompleted)
}
