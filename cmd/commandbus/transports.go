package main

import (
	"fmt"
	"log/slog"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/transport/kafka"
)

// wireTransports adds the brokered transports the configuration chooses to client: an AMQP
// consumer of the amqp domains' command queues (and of the reply queue), and an outbox relay
// publishing to RabbitMQ and Kafka. It returns a function closing the publishers.
func wireTransports(client *commandbus.Client, logger *slog.Logger) (func(), error) {
	full := client.Config()
	var publishers []outbox.Publisher
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	topology := amqp.Topology{Prefix: full.AMQP.Prefix, BackoutThreshold: full.AMQP.BackoutThreshold}
	if len(client.AMQPDomains()) > 0 {
		pub, err := amqp.NewPublisher(amqp.PublisherConfig{URL: full.AMQP.URL, Topology: topology})
		if err != nil {
			return nil, err
		}
		publishers = append(publishers, pub)
		closers = append(closers, func() { _ = pub.Close() })
		consumer, err := amqp.NewConsumer(amqp.ConsumerConfig{URL: full.AMQP.URL, Topology: topology, Client: client,
			Replies: *full.Features.ReplyProcessing, Logger: logger})
		if err != nil {
			closeAll()
			return nil, err
		}
		client.AddService(consumer)
	}
	if brokers := full.Kafka.BrokerList(); len(brokers) > 0 {
		pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers})
		if err != nil {
			closeAll()
			return nil, err
		}
		publishers = append(publishers, pub)
		closers = append(closers, pub.Close)
	}
	if len(publishers) == 0 {
		return closeAll, nil
	}
	relay, err := outbox.NewRelay(client.Driver().Executor(), outbox.RelayConfig{
		Publishers: publishers, RelayID: full.WorkerID, BatchSize: full.Outbox.BatchSize,
		PollInterval: full.Outbox.PollInterval.Std(), MaxBackoff: full.Outbox.MaxBackoff.Std(),
		Subscribe: client.Subscribe, Metrics: client.MessagingMetrics(), Logger: logger, Now: client.DriverNow,
	})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("outbox relay: %w", err)
	}
	client.AddService(relay)
	return closeAll, nil
}
