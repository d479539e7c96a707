package payments_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/internal/brokerlock"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/internal/rabbittest"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/transport/amqp10"
	"github.com/commandbus/commandbus/transport/kafka"
)

// brokerFixture is the payment platform with every bounded context's domain on RabbitMQ (AMQP
// 0-9-1): the process manager's commands and their replies travel through the outbox, the relay,
// the broker and the consumer; outcome events go to Kafka (kfake).
type brokerFixture struct {
	*fixture
	url, prefix string
	brokers     []string
	drv         driver.Driver
}

// eachBroker runs fn on the platform over RabbitMQ's AMQP 0-9-1 and AMQP 1.0 on PostgreSQL, and
// over AMQP 0-9-1 on SQLite.
func eachBroker(t *testing.T, fn func(t *testing.T, f *brokerFixture)) {
	for _, tc := range []struct {
		name, transport string
		drv             func(testing.TB) driver.Driver
	}{
		{"amqp/postgres", commandbus.TransportAMQP, func(t testing.TB) driver.Driver { return dbtest.Postgres(t) }},
		{"amqp10/postgres", commandbus.TransportAMQP10, func(t testing.TB) driver.Driver { return dbtest.Postgres(t) }},
		{"amqp/sqlite", commandbus.TransportAMQP, func(t testing.TB) driver.Driver { return dbtest.SQLite(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fn(t, setupBrokers(t, tc.drv(t), tc.transport))
		})
	}
}

func setupBrokers(t *testing.T, drv driver.Driver, transport string) *brokerFixture {
	t.Helper()
	brokerlock.Shared(t)
	url := os.Getenv("COMMANDBUS_TEST_AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	if conn, err := amqp091.Dial(url); err != nil {
		if os.Getenv("COMMANDBUS_REQUIRE_RABBITMQ") == "1" {
			t.Fatalf("RabbitMQ is required: %v", err)
		}
		t.Skipf("RabbitMQ unreachable at %s: %v", url, err)
	} else {
		_ = conn.Close()
	}
	if transport == commandbus.TransportAMQP10 {
		url = rabbittest.AMQP10(t)
	}
	prefix := "PAY" + uuid.NewString()[:8]
	brokerclean.Track(t, url, prefix)
	var topics []string
	for _, d := range payments.Domains {
		topics = append(topics, outbox.EventTopicName("events.", d))
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)

	noJitter := 0.0
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	domains := payments.DefaultDomainConfigs(8)
	for _, d := range domains {
		d.MaxAttempts = 3
		d.Transport = transport
		d.VisibilityTimeout = commandbus.Duration(10 * time.Second)
		d.Retry = commandbus.RetryPolicy{InitialDelay: ms(100), MaxDelay: ms(500), Jitter: &noJitter}
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger: logger, FetchPollInterval: ms(20), Domains: domains,
		AMQP:   commandbus.AMQPConfig{URL: url, Prefix: prefix, BackoutThreshold: 5},
		AMQP10: commandbus.AMQPConfig{URL: url, Prefix: prefix, BackoutThreshold: 5},
		Events: commandbus.EventsKafka, Kafka: commandbus.KafkaConfig{Brokers: cluster.ListenAddrs()[0]},
		WatchdogInterval: ms(200),
		Process: commandbus.ProcessConfig{
			PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20),
			DeadlineCheckInterval: ms(20), ExecutionLease: commandbus.Duration(30 * time.Second),
		},
	})
	require.NoError(t, err)
	p, err := payments.New(client, payments.Options{SimulatorPollInterval: 20 * time.Millisecond, CustomersPerCurrency: 3, BeneficiariesPerCurrency: 3})
	require.NoError(t, err)

	var (
		pub      outbox.Publisher
		consumer interface {
			commandbus.Service
			Queues() []string
			Ready() <-chan struct{}
		}
		deadEnds []string
	)
	if transport == commandbus.TransportAMQP10 {
		topology := amqp10.Topology{Prefix: prefix, BackoutThreshold: 5}
		p10, err := amqp10.NewPublisher(amqp10.PublisherConfig{URL: url, Topology: topology})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p10.Close() })
		c10, err := amqp10.NewConsumer(amqp10.ConsumerConfig{URL: url, Topology: topology, Client: client, Replies: true, Logger: logger,
			RequeueDelay: 20 * time.Millisecond, MaxRequeueDelay: time.Second})
		require.NoError(t, err)
		pub, consumer = p10, c10
		deadEnds = []string{topology.ReplyQueue(), topology.DeadLetterQueue(), topology.ParkingQueue()}
	} else {
		topology := amqp.Topology{Prefix: prefix, BackoutThreshold: 5}
		p091, err := amqp.NewPublisher(amqp.PublisherConfig{URL: url, Topology: topology})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p091.Close() })
		c091, err := amqp.NewConsumer(amqp.ConsumerConfig{URL: url, Topology: topology, Client: client, Replies: true, Logger: logger,
			RequeueDelay: 20 * time.Millisecond, MaxRequeueDelay: time.Second})
		require.NoError(t, err)
		pub, consumer = p091, c091
		deadEnds = []string{topology.ReplyQueue(), topology.DeadLetterQueue(), topology.ParkingQueue()}
	}
	kafkaPub, err := kafka.NewPublisher(kafka.Config{Brokers: cluster.ListenAddrs()})
	require.NoError(t, err)
	t.Cleanup(kafkaPub.Close)
	metrics := plumbing.MessagingMetrics(client)
	relay, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{
		Publishers: []outbox.Publisher{pub, kafkaPub}, Subscribe: plumbing.Subscriber(client), Metrics: metrics, Logger: logger,
		PollInterval: 50 * time.Millisecond, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, Lease: 2 * time.Second,
	})
	require.NoError(t, err)
	client.AddService(relay)
	client.AddService(consumer)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
		queues := append(consumer.Queues(), deadEnds...)
		for _, q := range consumer.Queues() {
			queues = append(queues, outbox.BackoutQueueName(q))
		}
		amqp.DeleteQueues(url, queues...)
	})
	select {
	case <-consumer.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the consumer did not connect")
	}
	return &brokerFixture{fixture: &fixture{t: t, fake: clock.NewFake(testStart), client: client, p: p},
		url: url, prefix: prefix, brokers: cluster.ListenAddrs(), drv: drv}
}

// commands lists the commands of the execution (not replies), by type.
func (f *brokerFixture) commands(execution uuid.UUID) map[string][]*commandbus.CommandRow {
	f.t.Helper()
	list, err := f.client.ListCommands(context.Background(), &commandbus.ListParams{CorrelationID: execution, Kind: driver.CommandKindCommand})
	require.NoError(f.t, err)
	out := map[string][]*commandbus.CommandRow{}
	for _, c := range list {
		out[c.Type] = append(out[c.Type], c)
	}
	return out
}

// published waits until the outbox row is marked published: the relay marks what the broker
// took with its next claim, a few milliseconds later.
func (f *brokerFixture) published(r *driver.OutboxRow) {
	f.t.Helper()
	if r.Status == driver.OutboxStatusPublished {
		return
	}
	require.Eventually(f.t, func() bool {
		row, err := f.drv.Executor().OutboxGet(context.Background(), r.ID)
		return err == nil && row.Status == driver.OutboxStatusPublished
	}, 10*time.Second, 10*time.Millisecond, "outbox row %d published", r.ID)
}

// brokered checks what the seed lists for a command that went over the broker: its
// CommandRequested was published to its command queue with the stable step key, and, when it
// ended, its reply went to the reply queue and its event to Kafka.
func (f *brokerFixture) brokered(cmd *commandbus.CommandRow, step string, events map[uuid.UUID][]string) {
	f.t.Helper()
	ctx := context.Background()
	requested, err := f.drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.CommandQueueName(f.prefix, cmd.Domain, cmd.Type), Limit: 1000})
	require.NoError(f.t, err)
	var sent bool
	for _, r := range requested {
		env, err := outbox.Decode(r.Payload)
		require.NoError(f.t, err)
		if env.CommandID == cmd.ID {
			sent = true
			f.published(r)
			require.Equal(f.t, cmd.CorrelationID.String()+":"+step, env.Headers.IdempotencyKey)
			require.Equal(f.t, cmd.CorrelationID, env.CorrelationID)
			require.Equal(f.t, cmd.CausationID, env.CausationID)
		}
	}
	require.Truef(f.t, sent, "%s %s went out through the outbox", cmd.Type, cmd.ID)
	if cmd.Status != commandbus.StatusCompleted && cmd.Status != commandbus.StatusFailed {
		return
	}
	replies, err := f.drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.ReplyQueueName(f.prefix), Limit: 1000})
	require.NoError(f.t, err)
	var replied int
	for _, r := range replies {
		env, err := outbox.Decode(r.Payload)
		require.NoError(f.t, err)
		if env.CommandID == cmd.ID {
			replied++
			f.published(r)
		}
	}
	require.Equalf(f.t, 1, replied, "one reply of %s on the MQ reply queue", cmd.Type)
	require.NotEmptyf(f.t, events[cmd.ID], "the event of %s on Kafka", cmd.Type)
}

// events reads every event on Kafka, by command id: their types.
func (f *brokerFixture) events(atLeast int) map[uuid.UUID][]string {
	f.t.Helper()
	var topics []string
	for _, d := range payments.Domains {
		topics = append(topics, outbox.EventTopicName("events.", d))
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(f.t, err)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[uuid.UUID][]string{}
	for n := 0; n < atLeast; {
		fetches := client.PollFetches(ctx)
		require.NoError(f.t, ctx.Err(), "waiting for %d events, got %d", atLeast, n)
		fetches.EachRecord(func(r *kgo.Record) {
			env, err := outbox.Decode(r.Value)
			require.NoError(f.t, err)
			out[env.CommandID] = append(out[env.CommandID], string(env.Type))
			n++
		})
	}
	return out
}

// Seed 004 scenario 1 over the brokers: the happy path with FX. Every step's command goes over
// RabbitMQ and its reply back; each outcome is an event on Kafka; the process completes with its
// log.
func TestBrokersHappyPathWithFX(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, f *brokerFixture) {
		ctx := context.Background()
		res := f.submit(crossCurrency(payments.TypePaymentManager))
		v := f.waitStatus(res.PaymentID, "COMPLETED")
		require.True(t, v.Fx.Required)
		require.NotEmpty(t, v.Fx.ContractID)
		require.NotEmpty(t, v.SubmissionRef)

		cmds := f.commands(res.ExecutionID)
		steps := map[string]string{"CheckBalance": payments.StepNameCheckBalance, "CheckDailyLimit": payments.StepNameCheckLimit,
			"BookFxContract": payments.StepNameBookFx, "SubmitPayment": payments.StepNameSubmitPayment}
		events := f.events(len(steps))
		for typ, step := range steps {
			require.Lenf(t, cmds[typ], 1, "one %s command", typ)
			require.Equal(t, commandbus.StatusCompleted, cmds[typ][0].Status)
			f.brokered(cmds[typ][0], step, events)
		}
		// Causation: the first command is caused by the process, each next one by the command
		// whose reply led to it.
		require.Equal(t, res.ExecutionID, cmds["CheckBalance"][0].CausationID)
		require.Equal(t, cmds["CheckBalance"][0].ID, cmds["CheckDailyLimit"][0].CausationID)
		require.Equal(t, cmds["CheckDailyLimit"][0].ID, cmds["BookFxContract"][0].CausationID)
		require.Equal(t, cmds["BookFxContract"][0].ID, cmds["SubmitPayment"][0].CausationID)
		inst, err := f.p.Runtime().Operations(process.Model, payments.TypePaymentManager).GetJSON(ctx, res.ExecutionID)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCompleted, inst.Status)
		require.NotEmpty(t, inst.Log)

		// A day's batch over the brokers: its items end completed and the batch succeeds.
		happy, _ := payments.Preset(payments.PresetHappy)
		batch, err := f.p.CreateBatch(ctx, 3, time.Now().UTC().Format(time.DateOnly), payments.TypePaymentManager, happy)
		require.NoError(t, err)
		eventually(t, 30*time.Second, "the batch to succeed", func() bool {
			b, err := f.p.GetBatch(ctx, batch.ID)
			require.NoError(t, err)
			return b.Status == payments.BatchSucceeded && b.Counts.Completed == 3
		})
		f.checkInvariants()
	})
}

// Seed 004 scenario 2 over the brokers: a retryable failure deduplicated on redelivery. The
// submission commits but its reply is lost; the bus redelivers the command through the broker
// and the payments context finds the submission by its step key: the money moves once.
func TestBrokersRetryableFailureDeduplicated(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, f *brokerFixture) {
		require.NoError(t, f.p.InjectFault(payments.Fault{Step: payments.StepSubmitPayment, Class: payments.FaultLostReply, Times: 1}))
		before := f.account("CUST-GBP-001").Balance
		res := f.submit(domestic(payments.TypePaymentManager))
		f.waitStatus(res.PaymentID, "COMPLETED")
		submit := f.commands(res.ExecutionID)["SubmitPayment"]
		require.Len(t, submit, 1)
		require.Equal(t, commandbus.StatusCompleted, submit[0].Status)
		require.Equal(t, 2, submit[0].Attempt, "the first attempt's reply was lost; the redelivery answered")
		requested, err := f.drv.Executor().OutboxList(context.Background(), &driver.OutboxListParams{Topic: outbox.CommandQueueName(f.prefix, payments.DomainPayments, "SubmitPayment"), Limit: 100})
		require.NoError(t, err)
		require.Len(t, requested, 2, "the retry went out as a second message")
		f.brokered(submit[0], payments.StepNameSubmitPayment, f.events(3))
		require.True(t, f.account("CUST-GBP-001").Balance.Equal(before.Sub(decimalOf("250.50"))), "debited once")
		f.checkInvariants()
	})
}

// Seed 004 scenario 3 over the brokers: a persistent failure parks the command (IN_TSQ, its
// command_dlq row); its PARKED reply parks the payment at once; the operator's resubmit sends the
// same command through the broker again and the payment completes.
func TestBrokersPersistentFailureDLQResubmit(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, f *brokerFixture) {
		ctx := context.Background()
		require.NoError(t, f.p.InjectFault(payments.Fault{Step: payments.StepCheckBalance, Class: payments.FaultPermanent, Times: 1}))
		res := f.submit(domestic(payments.TypePaymentManager))
		v := f.waitStatus(res.PaymentID, "IN_TSQ")
		require.Equal(t, process.CodeCommandParked, v.ErrorCode)
		check := f.commands(res.ExecutionID)["CheckBalance"]
		require.Len(t, check, 1)
		require.Equal(t, commandbus.StatusInTSQ, check[0].Status)
		entry, err := f.client.DLQ().Get(ctx, check[0].ID)
		require.NoError(t, err)
		require.NotEmpty(t, entry.Error)

		require.NoError(t, f.p.Resubmit(ctx, res.PaymentID, operator.actor, operator.reason))
		f.waitStatus(res.PaymentID, "COMPLETED")
		check = f.commands(res.ExecutionID)["CheckBalance"]
		require.Len(t, check, 1, "the resubmission retries the parked command: no second command")
		require.Equal(t, commandbus.StatusCompleted, check[0].Status)
		requested, err := f.drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.CommandQueueName(f.prefix, payments.DomainAccounts, "CheckBalance"), Limit: 100})
		require.NoError(t, err)
		require.Len(t, requested, 2, "the resubmitted command went out through the broker again")
		f.brokered(check[0], payments.StepNameCheckBalance, f.events(3))
		f.checkInvariants()
	})
}

// Seed 004 scenario 4 over the brokers: a timeout. The limits context keeps timing out; the bus
// gives up and parks the command, the payment parks with it at once (its policy), and the
// operator compensates and aborts: the hold is released.
func TestBrokersTimeoutPolicy(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, f *brokerFixture) {
		ctx := context.Background()
		require.NoError(t, f.p.InjectFault(payments.Fault{Step: payments.StepCheckDailyLimit, Class: payments.FaultTimeout, Times: 3}))
		res := f.submit(domestic(payments.TypePaymentManager))
		v := f.waitStatus(res.PaymentID, "IN_TSQ")
		require.Equal(t, process.CodeCommandParked, v.ErrorCode)
		require.Equal(t, payments.StepNameCheckLimit, v.Step)
		limit := f.commands(res.ExecutionID)["CheckDailyLimit"]
		require.Len(t, limit, 1)
		require.Equal(t, commandbus.StatusInTSQ, limit[0].Status)
		require.Equal(t, commandbus.CodeRetriesExhausted, limit[0].ErrorCode)
		require.True(t, f.account("CUST-GBP-001").Held.Equal(decimalOf("250.50")), "the hold is in place")

		require.NoError(t, f.p.CompensateAndAbort(ctx, res.PaymentID, operator.actor, operator.reason))
		f.waitStatus(res.PaymentID, "CANCELLED")
		eventually(t, 20*time.Second, "the hold to be released", func() bool { return f.account("CUST-GBP-001").Held.IsZero() })
		release := f.commands(res.ExecutionID)["ReleaseHold"]
		require.Len(t, release, 1, "the compensation's command")
		f.brokeredCompensation(release[0])
		f.checkInvariants()
	})
}

// Seed 004 scenario 5 over the brokers: a duplicate submission is refused at the API, and a
// duplicate SubmitPayment command for the same step key, delivered through the broker, returns
// the first submission and moves nothing.
func TestBrokersDuplicateSubmission(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, f *brokerFixture) {
		ctx := context.Background()
		req := domestic(payments.TypePaymentManager)
		req.IdempotencyKey = "client-key-1"
		res := f.submit(req)
		_, err := f.p.SubmitPayment(ctx, req)
		require.ErrorIs(t, err, payments.ErrDuplicatePayment)
		v := f.waitStatus(res.PaymentID, "COMPLETED")

		balance := f.account("CUST-GBP-001").Balance
		stepKey := res.ExecutionID.String() + ":" + payments.StepNameSubmitPayment
		sent, err := f.client.Send(ctx, payments.DomainPayments, payments.SubmitPayment{PaymentID: res.PaymentID, DebitAccount: "CUST-GBP-001",
			CreditAccount: "BENE-GBP-002", DebitAmount: decimalOf("250.50"), DebitCurrency: "GBP",
			CreditAmount: decimalOf("250.50"), CreditCurrency: "GBP", ValueDate: v.ValueDate},
			&commandbus.SendOpts{Headers: map[string]string{process.HeaderStepKey: stepKey}})
		require.NoError(t, err)
		var cmd *commandbus.CommandRow
		eventually(t, 20*time.Second, "the duplicate command to complete", func() bool {
			cmd, err = f.client.GetCommand(ctx, sent.ID)
			require.NoError(t, err)
			return cmd.Status == commandbus.StatusCompleted
		})
		require.Contains(t, string(cmd.Result), v.SubmissionRef, "the first submission is returned")
		require.True(t, balance.Equal(f.account("CUST-GBP-001").Balance), "nothing moved twice")
		requested, err := f.drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.CommandQueueName(f.prefix, payments.DomainPayments, "SubmitPayment"), Limit: 100})
		require.NoError(t, err)
		require.Len(t, requested, 2, "the duplicate went over the broker too")
		list, err := f.p.ListPayments(ctx, payments.PaymentFilter{})
		require.NoError(t, err)
		require.Len(t, list, 1, "the duplicate created nothing")
		f.checkInvariants()
	})
}

// brokeredCompensation checks that a compensation's command went out through the outbox.
func (f *brokerFixture) brokeredCompensation(cmd *commandbus.CommandRow) {
	f.t.Helper()
	requested, err := f.drv.Executor().OutboxList(context.Background(), &driver.OutboxListParams{Topic: outbox.CommandQueueName(f.prefix, cmd.Domain, cmd.Type), Limit: 100})
	require.NoError(f.t, err)
	require.NotEmptyf(f.t, requested, "the compensation %s went out through the outbox", cmd.Type)
}

func decimalOf(s string) decimal.Decimal { return decimal.RequireFromString(s) }
