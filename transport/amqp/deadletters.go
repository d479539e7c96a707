package amqp

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/commandbus/commandbus/transport/internal/broker"
)

// HeaderOriginalQueue is the header of a message the consumer dead-lettered or parked: the queue
// it came from, where a redrive puts it back.
const HeaderOriginalQueue = "x-commandbus-original-queue"

// DeadLetter is a message the consumers moved aside: to the dead-letter queue (not an envelope,
// or naming a command this database does not hold) or the parking queue (an envelope of a
// schema version no consumer reads yet). Its command, when it names one it could be read from,
// is not PENDING on its account: such messages never carried a command of this database.
type DeadLetter struct {
	// Queue holds it: the dead-letter or the parking queue.
	Queue string `json:"queue"`
	// OriginalQueue is the queue it was delivered from ("" when unknown).
	OriginalQueue string `json:"originalQueue,omitempty"`
	MessageID     string `json:"messageId,omitempty"`
	// CommandID is the AMQP correlation id: the command id, for messages this library published.
	CommandID string `json:"commandId,omitempty"`
	Type      string `json:"type,omitempty"`
	// Error says why it was moved aside.
	Error string `json:"error,omitempty"`
	// Redelivered is set when it was read before (listed, or a redrive gave up on it).
	Redelivered bool `json:"redelivered"`
}

// DeadLetterReport counts the dead-letter and parking queues' messages and shows up to a limit
// of each.
type DeadLetterReport struct {
	// Counts is the message count of each queue.
	Counts map[string]int `json:"counts"`
	// Messages are the messages read, oldest first per queue.
	Messages []*DeadLetter `json:"messages"`
}

// ListDeadLetters reads up to limit messages (0: counts only) of topology's dead-letter and
// parking queues without removing them: they are read unacknowledged and given back when the
// channel closes.
func ListDeadLetters(ctx context.Context, url string, topology Topology, limit int) (*DeadLetterReport, error) {
	conn, err := dial(url)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", topology.withDefaults().Prefix, err)
	}
	defer conn.Close()
	report := &DeadLetterReport{Counts: map[string]int{}}
	for _, queue := range []string{topology.DeadLetterQueue(), topology.ParkingQueue()} {
		ch, err := conn.Channel()
		if err != nil {
			return nil, err
		}
		if err := topology.DeclareDeadEnds(ch); err != nil {
			_ = ch.Close()
			return nil, err
		}
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		if err != nil {
			_ = ch.Close()
			return nil, fmt.Errorf("inspecting %s: %w", queue, err)
		}
		// A message another reader just gave back may not be counted as ready yet, yet be taken
		// by Get: the count is at least what was read.
		read := 0
		for ; read < limit && ctx.Err() == nil; read++ {
			d, ok, err := ch.Get(queue, false)
			if err != nil || !ok {
				break
			}
			report.Messages = append(report.Messages, deadLetterOf(queue, d))
		}
		report.Counts[queue] = max(q.Messages, read)
		_ = ch.Close() // gives back every message read
	}
	return report, ctx.Err()
}

func deadLetterOf(queue string, d amqp.Delivery) *DeadLetter {
	text := func(key string) string {
		s, _ := d.Headers[key].(string)
		return s
	}
	return &DeadLetter{Queue: queue, OriginalQueue: text(HeaderOriginalQueue), MessageID: d.MessageId,
		CommandID: d.CorrelationId, Type: d.Type, Error: text(HeaderError), Redelivered: d.Redelivered}
}

// RedriveDeadLetters moves up to max messages (0: all that are ready) of topology's dead-letter
// queue, or its parking queue when parked, back to the queues they came from, without the error
// header, so consumers process them again (after a fix was deployed: the missing command
// restored, a consumer that reads the schema version). Each move is published with a broker
// confirmation before the original is removed, so a failure midway loses nothing; a message that
// names no original queue stays. It returns the messages moved.
func RedriveDeadLetters(ctx context.Context, url string, topology Topology, parked bool, max int) (int, error) {
	queue := topology.DeadLetterQueue()
	if parked {
		queue = topology.ParkingQueue()
	}
	conn, err := dial(url)
	if err != nil {
		return 0, fmt.Errorf("connecting to the broker: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	if err := topology.DeclareDeadEnds(ch); err != nil {
		return 0, err
	}
	if err := ch.Confirm(false); err != nil {
		return 0, err
	}
	// Messages are taken until the queue has none ready: a message left in place stays
	// unacknowledged on this channel, so it is not taken twice; one just given back by a
	// listing (whose channel closed) is ready again, whatever a count read before said.
	declared, seen := map[string]bool{}, map[string]bool{}
	moved := 0
	for max <= 0 || moved < max {
		if err := ctx.Err(); err != nil {
			return moved, err
		}
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			return moved, err
		}
		if !ok {
			break
		}
		if d.MessageId != "" && seen[d.MessageId] {
			// Moved back once in this run and set aside again already (its cause is not fixed):
			// it stays, and the run ends rather than move it round in circles.
			break
		}
		target, _ := d.Headers[HeaderOriginalQueue].(string)
		if target == "" || target == queue {
			continue // left unacknowledged: given back when the channel closes
		}
		seen[d.MessageId] = true
		// The original is a work queue, or a backout queue: redriven to its work queue.
		target = broker.WorkQueue(target)
		if !declared[target] {
			if err := topology.DeclareWorkQueue(ch, target); err != nil {
				return moved, err
			}
			declared[target] = true
		}
		headers := amqp.Table{}
		for k, v := range d.Headers {
			if k != HeaderError && k != HeaderOriginalQueue && k != "x-death" && k != "x-delivery-count" && k != "x-first-death-exchange" &&
				k != "x-first-death-queue" && k != "x-first-death-reason" && k != "x-last-death-exchange" && k != "x-last-death-queue" && k != "x-last-death-reason" {
				headers[k] = v
			}
		}
		pubCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		confirm, err := ch.PublishWithDeferredConfirmWithContext(pubCtx, "", target, true, false, amqp.Publishing{
			ContentType: d.ContentType, DeliveryMode: amqp.Persistent, MessageId: d.MessageId, CorrelationId: d.CorrelationId,
			ReplyTo: d.ReplyTo, Type: d.Type, Timestamp: d.Timestamp, AppId: d.AppId, Headers: headers, Body: d.Body,
		})
		if err == nil {
			var acked bool
			if acked, err = confirm.WaitContext(pubCtx); err == nil && !acked {
				err = errors.New("the broker refused it")
			}
		}
		cancel()
		if err != nil {
			return moved, fmt.Errorf("moving message %s back to %s: %w", d.MessageId, target, err)
		}
		if err := d.Ack(false); err != nil {
			return moved, err
		}
		moved++
	}
	return moved, nil
}
