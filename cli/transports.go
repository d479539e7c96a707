package cli

import (
	"fmt"
	"log/slog"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/transport/amqp10"
	"github.com/commandbus/commandbus/transport/kafka"
)

// wireTransports adds the brokered transports the configuration chooses to client: an AMQP
// 0-9-1 consumer of the amqp domains' command queues (and of the reply queue), an AMQP 1.0 one of
// the amqp10 domains', and an outbox relay publishing to RabbitMQ, the AMQP 1.0 broker and Kafka;
// and consumers of the inbound event sources (amqp.event-queues, kafka.event-topics) that start
// the executions of runtime the events trigger. It returns a function closing the publishers.
func wireTransports(client *commandbus.Client, runtime *orchestration.Runtime, logger *slog.Logger) (func(), error) {
	full := client.Config()
	var publishers []outbox.Publisher
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	topology := amqp.Topology{Prefix: full.AMQP.Prefix, BackoutThreshold: full.AMQP.BackoutThreshold}
	if len(plumbing.AMQPDomains(client)) > 0 {
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
		if full.MetricsRegisterer != nil {
			if err := full.MetricsRegisterer.Register(amqp.DeadLetterCollector(full.AMQP.URL, topology)); err != nil {
				closeAll()
				return nil, fmt.Errorf("registering the dead-letter gauge: %w", err)
			}
		}
	}
	if len(plumbing.AMQPDomains(client)) == 0 && full.LifecycleEvents == commandbus.EventsAMQP {
		// Only the lifecycle events go to RabbitMQ: a publisher, no command consumer.
		pub, err := amqp.NewPublisher(amqp.PublisherConfig{URL: full.AMQP.URL, Topology: topology})
		if err != nil {
			return nil, err
		}
		publishers = append(publishers, pub)
		closers = append(closers, func() { _ = pub.Close() })
	}
	if len(plumbing.AMQP10Domains(client)) == 0 && full.LifecycleEvents == commandbus.EventsAMQP10 {
		topology10 := amqp10.Topology{Prefix: full.AMQP10.Prefix, BackoutThreshold: full.AMQP10.BackoutThreshold}
		pub, err := amqp10.NewPublisher(amqp10.PublisherConfig{URL: full.AMQP10.URL, Topology: topology10})
		if err != nil {
			closeAll()
			return nil, err
		}
		publishers = append(publishers, pub)
		closers = append(closers, func() { _ = pub.Close() })
	}
	if len(plumbing.AMQP10Domains(client)) > 0 {
		topology10 := amqp10.Topology{Prefix: full.AMQP10.Prefix, BackoutThreshold: full.AMQP10.BackoutThreshold}
		pub, err := amqp10.NewPublisher(amqp10.PublisherConfig{URL: full.AMQP10.URL, Topology: topology10})
		if err != nil {
			closeAll()
			return nil, err
		}
		publishers = append(publishers, pub)
		closers = append(closers, func() { _ = pub.Close() })
		consumer, err := amqp10.NewConsumer(amqp10.ConsumerConfig{URL: full.AMQP10.URL, Topology: topology10, Client: client,
			Replies: *full.Features.ReplyProcessing, Logger: logger})
		if err != nil {
			closeAll()
			return nil, err
		}
		client.AddService(consumer)
	}
	if err := wireEventSources(client, runtime, logger); err != nil {
		closeAll()
		return nil, err
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
		Subscribe: plumbing.Subscriber(client), Metrics: plumbing.MessagingMetrics(client), Logger: logger, Now: plumbing.DriverClock(client),
		TracerProvider: client.Config().TracerProvider,
	})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("outbox relay: %w", err)
	}
	client.AddService(relay)
	if runtime != nil {
		runtime.PaceEvents(relay, full.Outbox.MaxLag.Std())
		if h := full.Outbox.Handoff; h == nil || *h {
			runtime.HandOffOutbox(relay)
		}
	}
	return closeAll, nil
}

// wireEventSources adds a consumer per configured inbound event source: the AMQP queues of
// amqp.event-queues and the Kafka topics of kafka.event-topics (in the group kafka.event-group).
func wireEventSources(client *commandbus.Client, runtime *orchestration.Runtime, logger *slog.Logger) error {
	full := client.Config()
	queues, topics := full.AMQP.EventQueueList(), full.Kafka.EventTopicList()
	if len(queues) == 0 && len(topics) == 0 {
		return nil
	}
	if runtime == nil {
		return fmt.Errorf("inbound event sources are configured (amqp.event-queues, kafka.event-topics) but the binary has no orchestration runtime")
	}
	if len(queues) > 0 {
		consumer, err := amqp.NewEventConsumer(amqp.EventConsumerConfig{URL: full.AMQP.URL, Queues: queues, Receiver: runtime,
			Topology: amqp.Topology{Prefix: full.AMQP.Prefix, BackoutThreshold: full.AMQP.BackoutThreshold}, Logger: logger})
		if err != nil {
			return err
		}
		client.AddService(consumer)
	}
	if len(topics) > 0 {
		consumer, err := kafka.NewEventConsumer(kafka.EventConsumerConfig{Brokers: full.Kafka.BrokerList(), Topics: topics,
			Group: full.Kafka.EventGroup, Receiver: runtime, Logger: logger})
		if err != nil {
			return err
		}
		client.AddService(consumer)
	}
	return nil
}
