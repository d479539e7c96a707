package amqp10_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	amqp "github.com/Azure/go-amqp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/internal/rabbittest"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/tracecontext"
	"github.com/commandbus/commandbus/transport/amqp10"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
)

func TestDetectAddressStyle(t *testing.T) {
	t.Parallel()
	require.Equal(t, amqp10.AddressRabbitMQ3, amqp10.DetectAddressStyle(map[string]any{"product": "RabbitMQ", "version": "3.10.8"}))
	require.Equal(t, amqp10.AddressRabbitMQ4, amqp10.DetectAddressStyle(map[string]any{"product": "RabbitMQ", "version": "4.1.0"}))
	require.Equal(t, amqp10.AddressPlain, amqp10.DetectAddressStyle(map[string]any{"product": "IBM MQ"}))
	require.Equal(t, amqp10.AddressPlain, amqp10.DetectAddressStyle(nil))
	require.Equal(t, "/amq/queue/APP.CMD.FX.BookFx.Q", amqp10.AddressRabbitMQ3.Address("APP.CMD.FX.BookFx.Q"))
	require.Equal(t, "/queues/APP.CMD.FX.BookFx.Q", amqp10.AddressRabbitMQ4.Address("APP.CMD.FX.BookFx.Q"))
	require.Equal(t, "/queues/a%2Fb", amqp10.AddressRabbitMQ4.Address("a/b"))
	require.Equal(t, "APP.CMD.FX.BookFx.Q", amqp10.AddressPlain.Address("APP.CMD.FX.BookFx.Q"))
}

// TestPublishConsumeRoundTrip: what the publisher sends arrives over AMQP 1.0 durable, with the
// message id, the command id as correlation id, the reply-to, the envelope type as subject, the
// envelope's transport headers as application properties, and the envelope as the body.
func TestPublishConsumeRoundTrip(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	topology := amqp10.Topology{Prefix: uniquePrefix(t, url), BackoutThreshold: 3}
	queue := brokertest.CommandQueue(t, url, topology.Prefix)
	commandID, correlation, causation := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	sc := tracecontext.SpanContext{TraceID: tracecontext.TraceID{9}, SpanID: tracecontext.SpanID{8}, Sampled: true}
	env := &outbox.Envelope{MessageID: uuid.Must(uuid.NewV7()), Type: outbox.TypeCommandRequested, Name: "BookFx", CommandID: commandID,
		CorrelationID: correlation, CausationID: causation, OccurredAt: time.Now(), Key: "payment-1",
		Headers: outbox.Headers{ReplyTo: topology.ReplyQueue(), TenantID: "acme", SchemaVersion: outbox.SchemaVersion,
			IdempotencyKey: "saga-1:BOOK_FX", TraceID: sc.TraceID.String(), SpanID: sc.SpanID.String()},
		Payload: json.RawMessage(`{"paymentId":"p-1"}`)}
	params, err := (&outbox.Message{Category: outbox.CategoryCommand, Transport: outbox.TransportAMQP10, Topic: queue, Envelope: env}).InsertParams()
	require.NoError(t, err)
	row := &driver.OutboxRow{ID: 1, Topic: queue, Type: params.Type, MessageID: params.MessageID, Payload: params.Payload, Headers: params.Headers}

	pub, err := amqp10.NewPublisher(amqp10.PublisherConfig{URL: url, Topology: topology})
	require.NoError(t, err)
	defer pub.Close()
	require.Equal(t, outbox.TransportAMQP10, pub.Transport())
	errs := pub.Publish(context.Background(), []*driver.OutboxRow{row})
	require.NoError(t, errs[0])

	msg := readQueue(t, url, queue, 1)[0]
	require.True(t, msg.Header.Durable, "persistent")
	require.Equal(t, env.MessageID.String(), msg.Properties.MessageID)
	require.Equal(t, commandID.String(), msg.Properties.CorrelationID)
	require.Equal(t, topology.ReplyQueue(), *msg.Properties.ReplyTo)
	require.Equal(t, "CommandRequested", *msg.Properties.Subject)
	require.Equal(t, "application/json", *msg.Properties.ContentType)
	require.Equal(t, correlation.String(), msg.ApplicationProperties[outbox.HeaderCorrelationID])
	require.Equal(t, causation.String(), msg.ApplicationProperties[outbox.HeaderCausationID])
	require.Equal(t, "acme", msg.ApplicationProperties[outbox.HeaderTenantID])
	require.Equal(t, sc.Traceparent(), msg.ApplicationProperties[outbox.HeaderTraceparent])
	got, err := outbox.Decode(msg.GetData())
	require.NoError(t, err)
	require.Equal(t, env.CommandID, got.CommandID)
	require.Equal(t, "saga-1:BOOK_FX", got.Headers.IdempotencyKey)
	require.Equal(t, topology.ReplyQueue(), got.Headers.ReplyTo)
	require.JSONEq(t, `{"paymentId":"p-1"}`, string(got.Payload))
}

// TestBackoutQueueAfterThreshold: a message given back more than BackoutThreshold times (a
// consumer that keeps failing on it) is moved to its queue's backout queue, durable, with its
// message id and correlation id.
func TestBackoutQueueAfterThreshold(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	topology := amqp10.Topology{Prefix: uniquePrefix(t, url), BackoutThreshold: 3}
	queue := brokertest.CommandQueue(t, url, topology.Prefix)
	pub, err := amqp10.NewPublisher(amqp10.PublisherConfig{URL: url, Topology: topology})
	require.NoError(t, err)
	defer pub.Close()
	brokertest.PublishPoison(t, pub, queue, "poison-10", "c-10")

	rcv := receiver(t, url, queue)
	deliveries := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		msg, err := rcv.Receive(ctx, nil)
		cancel()
		if err != nil {
			break // gone: backed out
		}
		deliveries++
		require.LessOrEqual(t, deliveries, 4, "the broker stops redelivering after the backout threshold")
		require.NoError(t, rcv.ReleaseMessage(context.Background(), msg))
	}
	require.Equal(t, 4, deliveries, "delivered threshold+1 times")
	backedOut := readQueue(t, url, topology.BackoutQueue(queue), 1)[0]
	require.Equal(t, "poison-10", backedOut.Properties.MessageID)
	require.Equal(t, "c-10", backedOut.Properties.CorrelationID)
	require.True(t, backedOut.Header.Durable)
}

type BookFx = brokertest.BookFx

// platform: PostgreSQL holds the commands and outbox; the relay publishes the fx domain's
// commands over AMQP 1.0, and a consumer runs the fx handler for what the broker delivers.
type platform struct {
	t        *testing.T
	url      string
	prefix   string
	drv      driver.Driver
	consumer *amqp10.Consumer
	metrics  *outbox.Metrics
	*brokertest.Fx
}

func newPlatform(t *testing.T, replies bool) *platform {
	t.Helper()
	return newPlatformOn(t, replies, dbtest.Postgres(t), nil, false)
}

// newPlatformOn is newPlatform on drv, with setup run on the client before it starts; with
// foreignFx the fx domain has no handler here (a service outside consumes its queue).
func newPlatformOn(t *testing.T, replies bool, drv driver.Driver, setup func(*commandbus.Client), foreignFx bool) *platform {
	t.Helper()
	url := brokerURL(t)
	p := &platform{t: t, url: url, prefix: uniquePrefix(t, url), drv: drv}
	p.Fx = brokertest.NewFx(t, 10, func(_ context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
		return map[string]string{"contract": "FX-" + cmd.Args.PaymentID}, nil
	})
	handlers := p.Handlers
	if foreignFx {
		handlers = commandbus.NewHandlers()
	}
	jitter := 0.0
	logger := brokertest.Logger(t)
	client, err := commandbus.NewClient(p.drv, &commandbus.Config{
		Handlers: handlers, Logger: logger,
		Domains: map[string]*commandbus.DomainConfig{
			"fx": {Transport: commandbus.TransportAMQP10, MaxAttempts: 3, VisibilityTimeout: commandbus.Duration(10 * time.Second),
				Retry: commandbus.RetryPolicy{InitialDelay: commandbus.Duration(100 * time.Millisecond), Jitter: &jitter}},
			"payments": {},
		},
		AMQP10:            commandbus.AMQPConfig{URL: url, Prefix: p.prefix, BackoutThreshold: 5},
		WatchdogInterval:  commandbus.Duration(200 * time.Millisecond),
		FetchPollInterval: commandbus.Duration(100 * time.Millisecond),
	})
	require.NoError(t, err)
	require.Equal(t, []string{"fx"}, plumbing.AMQP10Domains(client))
	require.Empty(t, plumbing.AMQPDomains(client))
	p.Client = client
	p.metrics = plumbing.MessagingMetrics(client)
	topology := amqp10.Topology{Prefix: p.prefix, BackoutThreshold: 5}
	pub, err := amqp10.NewPublisher(amqp10.PublisherConfig{URL: url, Topology: topology})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	relay, err := outbox.NewRelay(p.drv.Executor(), outbox.RelayConfig{
		Publishers: []outbox.Publisher{pub}, Subscribe: plumbing.Subscriber(client), Metrics: p.metrics, Logger: logger,
		PollInterval: 50 * time.Millisecond, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, Lease: 2 * time.Second,
	})
	require.NoError(t, err)
	client.AddService(relay)
	p.consumer, err = amqp10.NewConsumer(amqp10.ConsumerConfig{URL: url, Topology: topology, Client: client, Replies: replies, Logger: logger,
		RequeueDelay: 20 * time.Millisecond, MaxRequeueDelay: time.Second})
	require.NoError(t, err)
	if setup != nil {
		setup(client)
	}
	brokertest.Start(t, client, p.consumer, url, topology.ReplyQueue(), topology.BackoutQueue(topology.ReplyQueue()),
		topology.DeadLetterQueue(), topology.ParkingQueue())
	return p
}

// TestCommandThroughOutboxCompletes: a command sent to an amqp10 domain is written with its
// outbox row, published by the relay over AMQP 1.0, run by the consumer's worker on PostgreSQL,
// and ends COMPLETED; its reply goes out on the AMQP 1.0 reply queue with the command id as
// correlation id and the sender's envelope fields.
func TestCommandThroughOutboxCompletes(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, false)
	ctx := context.Background()
	correlation := uuid.Must(uuid.NewV7())
	res, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: "p-1"}, &commandbus.SendOpts{
		ReplyTo: "payments", Key: "payment-1", CorrelationID: correlation, TenantID: "acme", IdempotencyKey: "saga-1:STEP_BOOK_FX",
	})
	require.NoError(t, err)
	row := p.WaitStatus(res.ID, commandbus.StatusCompleted)
	require.JSONEq(t, `{"contract":"FX-p-1"}`, string(row.Result))
	require.Equal(t, int64(1), p.Calls.Load())

	published, err := p.drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Transport: outbox.TransportAMQP10, Topic: outbox.CommandQueueName(p.prefix, "fx", "BookFx")})
	require.NoError(t, err)
	require.Len(t, published, 1, "the command went out through the outbox on amqp10")
	require.Equal(t, outbox.ReplyQueueName(p.prefix), *amqp10.Message(published[0]).Properties.ReplyTo)

	reply := readQueue(t, p.url, outbox.ReplyQueueName(p.prefix), 1)[0]
	require.Equal(t, res.ID.String(), reply.Properties.CorrelationID)
	require.Equal(t, string(outbox.TypeCommandCompleted), *reply.Properties.Subject)
	require.True(t, reply.Header.Durable)
	env, err := outbox.Decode(reply.GetData())
	require.NoError(t, err)
	require.Equal(t, res.ID, env.CommandID)
	require.Equal(t, correlation, env.CorrelationID)
	require.Equal(t, "acme", env.Headers.TenantID)
	require.Equal(t, "saga-1:STEP_BOOK_FX", env.Headers.IdempotencyKey)
	var payload commandbus.Reply
	require.NoError(t, json.Unmarshal(env.Payload, &payload))
	require.Equal(t, commandbus.OutcomeSuccess, payload.Outcome)
}

// TestRepliesReachReplyHandlers: with the reply queue consumed over AMQP 1.0, the sender's reply
// handler gets the reply.
func TestRepliesReachReplyHandlers(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, true)
	res, err := p.Client.Send(context.Background(), "fx", BookFx{PaymentID: "p-2"}, &commandbus.SendOpts{ReplyTo: "payments"})
	require.NoError(t, err)
	require.Equal(t, commandbus.OutcomeSuccess, p.WaitReply(res.ID).Outcome)
}

// TestHandlerFailureRetried: a transient handler failure is retried through the broker (a new
// message after the retry delay) and the command completes on the second attempt.
func TestHandlerFailureRetried(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, false)
	p.SetHandler(func(_ context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
		if cmd.Attempt == 1 {
			return nil, commandbus.Transient(errors.New("fx provider timeout"))
		}
		return map[string]string{"contract": "FX-3"}, nil
	})
	res, err := p.Client.Send(context.Background(), "fx", BookFx{PaymentID: "p-3"}, nil)
	require.NoError(t, err)
	row := p.WaitStatus(res.ID, commandbus.StatusCompleted)
	require.Equal(t, 2, row.Attempt)
	require.Equal(t, int64(2), p.Calls.Load())
}

// TestRedeliveryOnDatabaseFailure: a delivery that fails in the database is given back after a
// backoff and redelivered; once the database recovers the command completes, once.
func TestRedeliveryOnDatabaseFailure(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, false)
	lift := brokertest.FailClaims(t, p.drv, "flaky")
	queue := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
	res, err := p.Client.Send(context.Background(), "fx", BookFx{PaymentID: "flaky"}, nil)
	require.NoError(t, err)
	brokertest.WaitFor(t, "two failed deliveries", func() bool {
		return brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(queue, "requeued")) >= 2
	})
	lift()
	row := p.WaitStatus(res.ID, commandbus.StatusCompleted)
	require.Equal(t, 1, row.Attempt)
	require.Equal(t, int64(1), p.Calls.Load())
	require.Equal(t, float64(0), brokertest.CounterValue(p.metrics.BrokerDeadLetters.WithLabelValues(queue, "parked")))
}

// TestBackoutParksCommand: a message whose processing keeps failing in the database is given
// back after a growing backoff, backed out to <queue>.BACKOUT after the threshold, and its
// command is parked: IN_TSQ with a command_dlq row naming the backout and the last error,
// audited and counted, never left PENDING with its message gone.
func TestBackoutParksCommand(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, false)
	brokertest.FailClaims(t, p.drv, "poison")
	ctx := context.Background()
	queue := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
	start := time.Now()
	res, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: "poison"}, nil)
	require.NoError(t, err)
	row := p.WaitStatus(res.ID, commandbus.StatusInTSQ)
	require.Equal(t, commandbus.CodeBrokerBackout, row.ErrorCode)
	require.Equal(t, int64(0), p.Calls.Load())
	// Six deliveries (threshold 5), each given back after 20ms × 2^(delivery-count) or, where
	// the broker hides the count (RabbitMQ 3.x), after at least 20ms: never a tight loop.
	require.Equal(t, float64(6), brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(queue, "requeued"))+
		brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(queue, "backed_out")))
	require.GreaterOrEqual(t, time.Since(start), 5*20*time.Millisecond)

	parked, err := p.Client.DLQ().Get(ctx, res.ID)
	require.NoError(t, err)
	require.Contains(t, parked.Error, commandbus.CodeBrokerBackout)
	require.Contains(t, parked.Error, "backed out of "+queue+" to "+queue+".BACKOUT")
	require.Contains(t, parked.Error, "simulated database failure claiming poison")
	require.Equal(t, float64(1), brokertest.CounterValue(p.metrics.BrokerDeadLetters.WithLabelValues(queue, "parked")))
	log, err := p.Client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "command", EntityID: res.ID.String()})
	require.NoError(t, err)
	require.Len(t, log, 1)
	require.Equal(t, "DLQ_PARK", log[0].Action)
	require.Equal(t, "amqp10:"+queue, log[0].Actor)

	// Resubmitted once the database is fixed, it completes through the broker.
	p.drv.(*pgdriver.Driver).Pool().Exec(ctx, "DROP TRIGGER fail_claim ON "+p.drv.(*pgdriver.Driver).Schema()+".command")
	_, err = p.Client.DLQ().Resubmit(ctx, res.ID, commandbus.OperatorAction{Actor: "alice@ops", Reason: "database fixed"})
	require.NoError(t, err)
	p.WaitStatus(res.ID, commandbus.StatusCompleted)
}

// TestUndecodableMessages: a message that is not an envelope goes to the dead-letter queue with
// the reason and its original queue; one of an unknown schema version is parked. Neither is
// dropped, and no handler runs.
func TestUndecodableMessages(t *testing.T) {
	t.Parallel()
	testUndecodable(t, false)
}

// TestUndecodableBackedOutMessages: what reaches a command queue's backout queue but is not a
// command is moved aside as on the command queue itself: an unknown schema version to
// APP.PARKED.Q, anything else to APP.DLQ, each counted as kept; no handler runs.
func TestUndecodableBackedOutMessages(t *testing.T) {
	t.Parallel()
	testUndecodable(t, true)
}

// testUndecodable sends a message that is not an envelope and one of an unknown schema version
// to the fx command queue, or its backout queue, and checks where they end.
func testUndecodable(t *testing.T, backedOut bool) {
	p := newPlatform(t, false)
	work := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
	queue := work
	if backedOut {
		queue = outbox.BackoutQueueName(work)
	}
	conn, err := rabbittest.DialAMQP10(p.url)
	require.NoError(t, err)
	defer conn.Close()
	ctx := context.Background()
	sess, err := conn.NewSession(ctx, nil)
	require.NoError(t, err)
	snd, err := sess.NewSender(ctx, amqp10.DetectAddressStyle(conn.Properties()).Address(queue), nil)
	require.NoError(t, err)
	garbage := amqp.NewMessage([]byte(`{"not":"an envelope"}`))
	garbage.Properties = &amqp.MessageProperties{MessageID: "garbage-10"}
	require.NoError(t, snd.Send(ctx, garbage, nil))
	v2 := amqp.NewMessage([]byte(`{"messageId":"0190b8a4-0000-7000-8000-000000000001","type":"CommandRequested","name":"BookFx","commandId":"0190b8a4-0000-7000-8000-000000000002","occurredAt":"2025-11-02T12:34:56Z","headers":{"schemaVersion":"2"},"payload":{}}`))
	v2.Properties = &amqp.MessageProperties{MessageID: "v2-10"}
	require.NoError(t, snd.Send(ctx, v2, nil))

	dead := readQueue(t, p.url, outbox.DeadLetterQueueName(p.prefix), 1)[0]
	require.Equal(t, "garbage-10", dead.Properties.MessageID)
	require.Contains(t, dead.ApplicationProperties[amqp10.HeaderError], outbox.CodeInvalidEnvelope)
	require.Equal(t, queue, dead.ApplicationProperties[amqp10.HeaderOriginalQueue])
	require.True(t, dead.Header.Durable)
	parked := readQueue(t, p.url, outbox.ParkingQueueName(p.prefix), 1)[0]
	require.Equal(t, "v2-10", parked.Properties.MessageID)
	require.Contains(t, parked.ApplicationProperties[amqp10.HeaderError], outbox.CodeUnknownSchemaVersion)
	require.Equal(t, queue, parked.ApplicationProperties[amqp10.HeaderOriginalQueue])
	if backedOut {
		require.Equal(t, 2.0, brokertest.CounterValue(p.metrics.BrokerDeadLetters.WithLabelValues(work, "kept")))
	}
	require.Equal(t, int64(0), p.Calls.Load())
}

// TestConsumerRestarts: a consumer stopped and started again (as a restarted client does)
// consumes again.
func TestConsumerRestarts(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, false)
	brokertest.Restart(t, p.consumer)
	res, err := p.Client.Send(context.Background(), "fx", BookFx{PaymentID: "again"}, nil)
	require.NoError(t, err)
	p.WaitStatus(res.ID, commandbus.StatusCompleted)
}
