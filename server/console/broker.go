package console

import "context"

// BrokerDeadLetters is what a broker holds aside: messages its consumers could not process (not
// an envelope, naming a command the database does not hold) in the dead-letter queue, and those
// of a schema version no consumer reads yet in the parking queue. Unlike a parked command, none
// of them has a command row to resubmit: an operator fixes the cause and redrives them (commandbus
// dlq redrive).
type BrokerDeadLetters struct {
	// Counts are the queues' message counts, in the order to show.
	Counts []BrokerQueueCount
	// Messages are some of their messages, oldest first per queue.
	Messages []BrokerDeadLetter
}

// BrokerQueueCount is one dead-letter queue's depth.
type BrokerQueueCount struct {
	Queue    string
	Messages int
}

// BrokerDeadLetter is one message a consumer moved aside.
type BrokerDeadLetter struct {
	Queue, OriginalQueue, MessageID, CommandID, Type, Error string
}

// BrokerDeadLetterReader reads up to limit messages of the broker's dead-letter queues, without
// removing them (for AMQP 0-9-1: amqp.ListDeadLetters).
type BrokerDeadLetterReader func(ctx context.Context, limit int) (*BrokerDeadLetters, error)

// brokerDeadLetterLimit is how many broker dead letters the dead-letter page shows.
const brokerDeadLetterLimit = 20

// brokerSection is the dead-letter page's broker part: nil without a reader, Err when the broker
// could not be read (the page still shows the database's records).
type brokerSection struct {
	*BrokerDeadLetters
	Err string
}

func (c *Console) brokerDeadLetters(ctx context.Context) *brokerSection {
	if c.brokerReader == nil {
		return nil
	}
	report, err := c.brokerReader(ctx, brokerDeadLetterLimit)
	if err != nil {
		c.logger.Warn("console: reading the broker's dead letters failed", "error", err)
		return &brokerSection{Err: err.Error()}
	}
	return &brokerSection{BrokerDeadLetters: report}
}
