package commandbus

import (
	"context"
	"time"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clienthook"
	"github.com/commandbus/commandbus/outbox"
)

// init hands the Client plumbing that only the module's own packages use to internal/clienthook,
// so it is not part of Client's public API.
func init() {
	clienthook.Extension = func(client any, key any, create func() any) any {
		return client.(*Client).extension(key, create)
	}
	clienthook.Subscribe = func(client any, topic string) (<-chan struct{}, func()) {
		return client.(*Client).subscribe(topic)
	}
	clienthook.SignalLocal = func(client any, topics []string) {
		n := client.(*Client).getNotifier()
		for _, topic := range topics {
			n.Signal(topic)
		}
	}
	clienthook.DriverNow = func(client any) *time.Time { return client.(*Client).now() }
	clienthook.BuildCommand = func(client any, params any) (*driver.CommandInsertParams, error) {
		return client.(*Client).buildInsert(params.(SendParams))
	}
	clienthook.ExecuteDelivered = func(ctx context.Context, client any, delivery any) (string, error) {
		outcome, err := client.(*Client).executeDelivered(ctx, delivery.(Delivery))
		return string(outcome), err
	}
	clienthook.DeliverReply = func(ctx context.Context, client any, env *outbox.Envelope, consumer string) (string, error) {
		outcome, err := client.(*Client).deliverReply(ctx, env, consumer)
		return string(outcome), err
	}
	clienthook.MessagingMetrics = func(client any) *outbox.Metrics { return client.(*Client).messaging }
	clienthook.AMQPDomains = func(client any) []string { return client.(*Client).amqpDomains() }
	clienthook.AMQP10Domains = func(client any) []string { return client.(*Client).amqp10Domains() }
	clienthook.CheckpointOutbox = func(client any, cmds []*driver.CommandInsertParams) ([]*driver.OutboxInsertParams, error) {
		return client.(*Client).checkpointOutbox(cmds)
	}
	clienthook.CommandTypes = func(client any, domain string) []string {
		return client.(*Client).commandTypes(domain)
	}
}
