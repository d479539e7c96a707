package commandbus

import (
	"context"
	"errors"
	"github.com/google/uuid"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/tracecontext"
)

// TestRetryWindowParks: a command whose next retry would start past its domain's
// max-retry-window is parked at once, with its dead-letter record, and can be resubmitted.
func TestRetryWindowParks(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		var fail atomic.Bool
		fail.Store(true)
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			if fail.Load() {
				return nil, errors.New("downstream unavailable")
			}
			return nil, nil
		}))
		domain := fastDomain(2, 10)
		domain.Retry.InitialDelay, domain.Retry.MaxDelay = Duration(time.Hour), Duration(time.Hour)
		domain.MaxRetryWindow = Duration(time.Minute)
		client := newTestClient(t, drv, &Config{Handlers: handlers, Domains: map[string]*DomainConfig{"fx": domain}})
		startClient(t, client)
		ctx := context.Background()

		res, err := client.Send(ctx, "fx", testArgs{}, &SendOpts{IdempotencyKey: "k-1"})
		require.NoError(t, err)
		row := waitStatus(t, client, res.ID, StatusInTSQ)
		require.Equal(t, CodeRetryWindowExceeded, row.ErrorCode)
		require.Equal(t, 1, row.Attempt, "parked after one attempt of ten: the window, not the attempts, ran out")

		parked, err := client.DLQ().List(ctx, DLQFilter{Domain: "fx"})
		require.NoError(t, err)
		require.Len(t, parked, 1)
		require.Equal(t, res.ID, parked[0].CommandID)
		require.Equal(t, client.Config().WorkerID, parked[0].ParkedBy)
		require.Contains(t, parked[0].Error, CodeRetryWindowExceeded)
		depths, err := client.DLQ().Depths(ctx)
		require.NoError(t, err)
		require.Equal(t, []*driver.DLQDepth{{Domain: "fx", Count: 1}}, depths)

		fail.Store(false)
		_, err = client.DLQ().Resubmit(ctx, res.ID, OperatorAction{Actor: "ops", Reason: "downstream back"})
		require.NoError(t, err)
		row = waitStatus(t, client, res.ID, StatusCompleted)
		require.Equal(t, "k-1", row.IdempotencyKey)
		require.Contains(t, auditEvents(row), "DLQ_RESUBMIT")
		_, err = client.DLQ().Get(ctx, res.ID)
		require.ErrorIs(t, err, ErrNotFound)
	})
}

// TestEventsOnPostgresTransport: with events going to Kafka, a command on the PostgreSQL queue
// commits its outcome's event to the outbox in the same statement; its reply stays a command-table
// reply.
func TestEventsOnPostgresTransport(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			sc, ok := tracecontext.FromContext(ctx)
			require.True(t, ok, "the handler runs in the sender's trace")
			return map[string]string{"trace": sc.TraceID.String()}, nil
		}))
		replies := collectReplies(handlers, "payments")
		client := newTestClient(t, drv, &Config{Handlers: handlers, Domains: map[string]*DomainConfig{"fx": fastDomain(2, 3)},
			Events: EventsKafka, Kafka: KafkaConfig{Brokers: "127.0.0.1:1"}})
		startClient(t, client)
		sc := tracecontext.SpanContext{TraceID: tracecontext.TraceID{9}, SpanID: tracecontext.SpanID{8}, Sampled: true}
		ctx := tracecontext.ContextWith(context.Background(), sc)

		res, err := client.Send(ctx, "fx", testArgs{N: 1}, &SendOpts{ReplyTo: "payments", Key: "payment-9"})
		require.NoError(t, err)
		waitStatus(t, client, res.ID, StatusCompleted)
		reply := replies.next(t)
		require.Equal(t, res.ID, reply.CommandID)
		require.Equal(t, sc.Traceparent(), reply.Headers[tracecontext.Header])

		rows, err := drv.Executor().OutboxList(context.Background(), &driver.OutboxListParams{})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, driver.OutboxCategoryEvent, rows[0].Category)
		require.Equal(t, outbox.TransportKafka, rows[0].Transport)
		require.Equal(t, "events.Fx", rows[0].Topic)
		require.Equal(t, "payment-9", rows[0].Key)
		require.Equal(t, sc.Traceparent(), rows[0].Headers[outbox.HeaderTraceparent])
		env, err := outbox.Decode(rows[0].Payload)
		require.NoError(t, err)
		require.Equal(t, outbox.TypeCommandCompleted, env.Type)
		require.Equal(t, res.ID, env.CommandID)
	})
}

// TestNoBrokerNoOutbox: without a broker configured, nothing is written to the outbox.
func TestNoBrokerNoOutbox(t *testing.T) {
	t.Parallel()
	drv := dbtest.SQLite(t)
	handlers := NewHandlers()
	AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) { return nil, nil }))
	client := newTestClient(t, drv, &Config{Handlers: handlers, Domains: map[string]*DomainConfig{"fx": fastDomain(2, 3)}})
	startClient(t, client)
	res, err := client.Send(context.Background(), "fx", testArgs{}, nil)
	require.NoError(t, err)
	waitStatus(t, client, res.ID, StatusCompleted)
	rows, err := drv.Executor().OutboxList(context.Background(), &driver.OutboxListParams{})
	require.NoError(t, err)
	require.Empty(t, rows)
}

func TestTransportConfigValidation(t *testing.T) {
	t.Parallel()
	cfg := (&Config{Domains: map[string]*DomainConfig{
		"fx":   {Transport: "carrier-pigeon"},
		"risk": {Transport: TransportAMQP, Events: EventsKafka, MaxRetryWindow: Duration(-time.Second)},
	}, Events: "smoke-signals"}).WithDefaults()
	err := cfg.Validate()
	require.ErrorIs(t, err, ErrInvalidConfig)
	for _, want := range []string{
		`domains.fx.transport: must be postgres, amqp or amqp10, got "carrier-pigeon"`,
		"domains.risk.transport: amqp needs amqp.url",
		"domains.risk.events: kafka needs kafka.brokers",
		"domains.risk.max-retry-window: must not be negative",
		`events: must be none or kafka, got "smoke-signals"`,
	} {
		require.Contains(t, err.Error(), want)
	}
	require.Equal(t, []string{"a:9092", "b:9092"}, KafkaConfig{Brokers: " a:9092, b:9092,"}.BrokerList())
}

// TestDeliveredCommandRepliesToItsReplyTo: the reply of a command a broker delivered goes to the
// reply-to its message named, not to the configured reply queue; without one, to the configured
// queue.
func TestDeliveredCommandRepliesToItsReplyTo(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) { return nil, nil }))
		// Not started: the test plays the consumer.
		client := newTestClient(t, drv, &Config{Handlers: handlers, Domains: map[string]*DomainConfig{
			"fx": {Transport: TransportAMQP}, "payments": {}}, AMQP: AMQPConfig{URL: "amqp://127.0.0.1:1/", Prefix: "RT"}})
		ctx := context.Background()
		for _, tc := range []struct{ replyTo, want string }{
			{"OTHER.APP.REPLY.Q", "OTHER.APP.REPLY.Q"},
			{"", outbox.ReplyQueueName("RT")},
		} {
			res, err := client.Send(ctx, "fx", testArgs{}, &SendOpts{ReplyTo: "payments"})
			require.NoError(t, err)
			outcome, err := client.executeDelivered(ctx, Delivery{MessageID: res.ID.String(), Consumer: "test", CommandID: res.ID, Domain: "fx", ReplyTo: tc.replyTo})
			require.NoError(t, err)
			require.Equal(t, DeliveryProcessed, outcome)
			rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: tc.want})
			require.NoError(t, err)
			var found bool
			for _, r := range rows {
				env, err := outbox.Decode(r.Payload)
				require.NoError(t, err)
				found = found || env.CommandID == res.ID && r.Category == driver.OutboxCategoryReply
			}
			require.Truef(t, found, "the reply of %s is on %s", res.ID, tc.want)
		}
	})
}

// TestConcurrentDeliveriesAreGroupCommitted: deliveries whose handlers finish together are
// written in shared batches, and each still ends exactly as alone: its command COMPLETED, its
// inbox record and its reply written, and a redelivery of its message recognised as a duplicate.
func TestConcurrentDeliveriesAreGroupCommitted(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		const n = 24
		var arrived sync.WaitGroup
		arrived.Add(n)
		release := make(chan struct{})
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			arrived.Done()
			<-release // every handler finishes at once, so their outcomes queue behind each other
			return map[string]string{"ok": "yes"}, nil
		}))
		client := newTestClient(t, drv, &Config{Handlers: handlers, Domains: map[string]*DomainConfig{
			"fx": {Transport: TransportAMQP}, "payments": {}}, AMQP: AMQPConfig{URL: "amqp://127.0.0.1:1/", Prefix: "GC"}})
		ctx := context.Background()
		ids := make([]uuid.UUID, n)
		for i := range ids {
			res, err := client.Send(ctx, "fx", testArgs{}, &SendOpts{ReplyTo: "payments"})
			require.NoError(t, err)
			ids[i] = res.ID
		}
		outcomes := make([]DeliveryOutcome, n)
		errs := make([]error, n)
		var done sync.WaitGroup
		for i, id := range ids {
			done.Add(1)
			go func() {
				defer done.Done()
				outcomes[i], errs[i] = client.executeDelivered(ctx, Delivery{MessageID: "m-" + id.String(), Consumer: "gc", CommandID: id, Domain: "fx"})
			}()
		}
		arrived.Wait()
		close(release)
		done.Wait()
		for i, id := range ids {
			require.NoError(t, errs[i])
			require.Equal(t, DeliveryProcessed, outcomes[i])
			row, err := drv.Executor().CommandGetByID(ctx, id)
			require.NoError(t, err)
			require.Equal(t, driver.CommandStatusCompleted, row.Status, "command %s", id)
			seen, err := drv.Executor().InboxExists(ctx, "m-"+id.String(), "gc")
			require.NoError(t, err)
			require.True(t, seen, "the inbox record of %s committed with its outcome", id)
			again, err := client.executeDelivered(ctx, Delivery{MessageID: "m-" + id.String(), Consumer: "gc", CommandID: id, Domain: "fx"})
			require.NoError(t, err)
			require.Equal(t, DeliveryDuplicate, again)
		}
		replies, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.ReplyQueueName("GC")})
		require.NoError(t, err)
		replied := map[uuid.UUID]bool{}
		for _, r := range replies {
			env, err := outbox.Decode(r.Payload)
			require.NoError(t, err)
			replied[env.CommandID] = true
		}
		for _, id := range ids {
			require.True(t, replied[id], "the reply of %s is in the outbox", id)
		}
	})
}

func TestLifecycleEventsConfigValidation(t *testing.T) {
	t.Parallel()
	err := (&Config{LifecycleEvents: "smoke-signals"}).WithDefaults().Validate()
	require.ErrorContains(t, err, `lifecycle-events: must be none, kafka, amqp, amqp10 or webhook, got "smoke-signals"`)
	err = (&Config{LifecycleEvents: EventsKafka}).WithDefaults().Validate()
	require.ErrorContains(t, err, "lifecycle-events: kafka needs kafka.brokers")
	cfg := (&Config{}).WithDefaults()
	require.Equal(t, EventsNone, cfg.LifecycleEvents)
	require.NoError(t, (&Config{LifecycleEvents: EventsKafka, Kafka: KafkaConfig{Brokers: "k:9092"}}).WithDefaults().Validate())
}
