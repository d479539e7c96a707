// Package plumbing gives the module's own packages (process models, orchestration, transports, the
// command-line tool, the examples) the Client plumbing that is not part of commandbus.Client's
// public API: typed wrappers over the hooks the root package sets in internal/clienthook.
package plumbing

import (
	"context"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clienthook"
	"github.com/commandbus/commandbus/outbox"
)

// Extension returns the value registered on client under key, creating it with create on first
// use. Packages built on the client keep one shared component per client with it; create runs at
// most once per key.
func Extension(client *commandbus.Client, key any, create func() any) any {
	return clienthook.Extension(client, key, create)
}

// Subscribe returns a channel signalled when topic is notified on client (see Client.Notify),
// and a function to unsubscribe. It works once the client is started.
func Subscribe(client *commandbus.Client, topic string) (<-chan struct{}, func()) {
	return clienthook.Subscribe(client, topic)
}

// Subscriber returns Subscribe bound to client, for configurations taking a subscribe function
// (outbox.RelayConfig.Subscribe).
func Subscriber(client *commandbus.Client) func(topic string) (<-chan struct{}, func()) {
	return func(topic string) (<-chan struct{}, func()) { return clienthook.Subscribe(client, topic) }
}

// SignalLocal wakes client's own subscribers of topics at once, as a notification would, without
// a round trip to the database; other instances hear only of what is notified (Client.Notify).
func SignalLocal(client *commandbus.Client, topics ...string) {
	clienthook.SignalLocal(client, topics)
}

// DriverNow returns the time to pass to driver params: nil (the database clock) unless a test
// clock is injected in client's Config, so one clock governs everything built on the client.
func DriverNow(client *commandbus.Client) *time.Time { return clienthook.DriverNow(client) }

// DriverClock returns DriverNow bound to client, for configurations taking a clock function.
func DriverClock(client *commandbus.Client) func() *time.Time {
	return func() *time.Time { return clienthook.DriverNow(client) }
}

// BuildCommand validates one command and returns the row a driver inserts, without writing it.
// Services that send commands atomically with their own writes (a process checkpoint) use it.
func BuildCommand(client *commandbus.Client, params commandbus.SendParams) (*driver.CommandInsertParams, error) {
	return clienthook.BuildCommand(client, params)
}

// ExecuteDelivered runs the command a broker delivered, as a worker runs a claimed one: it dedupes
// through the inbox, claims the command by id, runs its handler and commits the outcome with the
// inbox record and the outbox messages of its reply and event. An error means nothing was
// committed: the consumer should let the broker redeliver. A command that does not exist gives an
// error matching commandbus.ErrNotFound.
func ExecuteDelivered(ctx context.Context, client *commandbus.Client, d commandbus.Delivery) (commandbus.DeliveryOutcome, error) {
	outcome, err := clienthook.ExecuteDelivered(ctx, client, d)
	return commandbus.DeliveryOutcome(outcome), err
}

// DeliverReply files a reply a broker delivered as a reply row on the queue the command named as
// its replyTo, exactly once per consumer: the inbox record commits with it.
func DeliverReply(ctx context.Context, client *commandbus.Client, env *outbox.Envelope, consumer string) (commandbus.DeliveryOutcome, error) {
	outcome, err := clienthook.DeliverReply(ctx, client, env, consumer)
	return commandbus.DeliveryOutcome(outcome), err
}

// MessagingMetrics returns client's outbox, inbox and transport metric collectors, registered
// with Config.MetricsRegisterer. Relays and transports built for the client share them.
func MessagingMetrics(client *commandbus.Client) *outbox.Metrics {
	return clienthook.MessagingMetrics(client)
}

// AMQPDomains lists client's domains whose transport is amqp, sorted.
func AMQPDomains(client *commandbus.Client) []string { return clienthook.AMQPDomains(client) }

// AMQP10Domains lists client's domains whose transport is amqp10, sorted.
func AMQP10Domains(client *commandbus.Client) []string { return clienthook.AMQP10Domains(client) }

// CommandTypes lists the command types with handlers in domain on client, sorted.
func CommandTypes(client *commandbus.Client, domain string) []string {
	return clienthook.CommandTypes(client, domain)
}

// CheckpointOutbox returns the CommandRequested outbox messages of the commands of client's
// brokered domains among cmds (none for the others): an execution checkpoint writes them in the
// transaction that inserts cmds, as Send does.
func CheckpointOutbox(client *commandbus.Client, cmds []*driver.CommandInsertParams) ([]*driver.OutboxInsertParams, error) {
	return clienthook.CheckpointOutbox(client, cmds)
}
