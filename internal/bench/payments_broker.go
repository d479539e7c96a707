package bench

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
)

// paymentsBroker carries the benchmark's brokered domains over RabbitMQ (AMQP 0-9-1): it
// configures their transport, wires each instance's outbox relay and consumer, samples the depth
// of their queues, and deletes them at the end.
type paymentsBroker struct {
	url      string
	topology amqp.Topology
	domains  []string
	queues   map[string]bool
	conn     *amqp091.Connection
	metrics  []*outbox.Metrics // the instances' relays count their claims here
}

func newPaymentsBroker(url string, domains []string) (*paymentsBroker, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	conn, err := amqp091.Dial(url)
	if err != nil {
		return nil, err
	}
	return &paymentsBroker{url: url, topology: amqp.Topology{Prefix: "BENCH" + strings.ToUpper(hex.EncodeToString(b))},
		domains: domains, queues: map[string]bool{}, conn: conn}, nil
}

// configure routes the brokered domains' commands over AMQP in cfg.
func (b *paymentsBroker) configure(cfg *commandbus.Config) {
	for _, d := range b.domains {
		if dc := cfg.Domains[d]; dc != nil {
			dc.Transport = commandbus.TransportAMQP
		}
	}
	cfg.AMQP = commandbus.AMQPConfig{URL: b.url, Prefix: b.topology.Prefix}
}

// wire adds the relay that publishes client's outbox and the consumer of its brokered domains'
// queues and of the reply queue, and returns the relay.
func (b *paymentsBroker) wire(client *commandbus.Client, logger *slog.Logger) (*outbox.Relay, error) {
	pub, err := amqp.NewPublisher(amqp.PublisherConfig{URL: b.url, Topology: b.topology})
	if err != nil {
		return nil, err
	}
	metrics := plumbing.MessagingMetrics(client)
	b.metrics = append(b.metrics, metrics)
	relay, err := outbox.NewRelay(client.Driver().Executor(), outbox.RelayConfig{
		Publishers: []outbox.Publisher{pub}, Subscribe: plumbing.Subscriber(client),
		Metrics: metrics, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	consumer, err := amqp.NewConsumer(amqp.ConsumerConfig{URL: b.url, Topology: b.topology, Client: client, Replies: true, Logger: logger})
	if err != nil {
		return nil, err
	}
	client.AddService(relay)
	client.AddService(consumer)
	for _, q := range consumer.Queues() {
		b.queues[q] = true
	}
	return relay, nil
}

// depth is the number of messages waiting in the brokered queues (-1 when it cannot be read).
func (b *paymentsBroker) depth() int64 {
	ch, err := b.conn.Channel()
	if err != nil {
		return -1
	}
	defer ch.Close()
	var n int64
	for q := range b.queues {
		info, err := ch.QueueDeclarePassive(q, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
		if err != nil {
			return -1
		}
		n += int64(info.Messages)
	}
	return n
}

// close deletes the benchmark's queues.
func (b *paymentsBroker) close() {
	_ = b.conn.Close()
	queues := []string{b.topology.DeadLetterQueue(), b.topology.ParkingQueue()}
	for q := range b.queues {
		queues = append(queues, q, outbox.BackoutQueueName(q))
	}
	amqp.DeleteQueues(b.url, queues...)
}
