// Package clienthook carries the plumbing of commandbus.Client that only the module's own packages
// use (process models, the outbox relay wiring, transports). The root package sets every variable
// in its init, binding it to an unexported Client method; this package cannot import the root, so
// the client and the root's parameter types travel as any and the root asserts them. Callers use
// the typed wrappers of internal/plumbing, not these variables.
package clienthook

import (
	"context"
	"time"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/outbox"
)

// Each variable takes a *commandbus.Client as client; passing anything else panics.
var (
	// Extension returns the value registered under key, creating it with create on first use.
	Extension func(client any, key any, create func() any) any
	// Subscribe returns a channel signalled when topic is notified, and a function to unsubscribe.
	Subscribe func(client any, topic string) (<-chan struct{}, func())
	// SignalLocal wakes this client's subscribers of topics at once, without a notification
	// through the database (the other instances hear of it only from Notify).
	SignalLocal func(client any, topics []string)
	// DriverNow returns the time to pass to driver params: nil unless a test clock is injected.
	DriverNow func(client any) *time.Time
	// BuildCommand validates params (a commandbus.SendParams) and returns the row a driver inserts.
	BuildCommand func(client any, params any) (*driver.CommandInsertParams, error)
	// ExecuteDelivered runs a delivered command (delivery is a commandbus.Delivery) and returns
	// the commandbus.DeliveryOutcome as a string.
	ExecuteDelivered func(ctx context.Context, client any, delivery any) (string, error)
	// DeliverReply files a delivered reply and returns the commandbus.DeliveryOutcome as a string.
	DeliverReply func(ctx context.Context, client any, env *outbox.Envelope, consumer string) (string, error)
	// MessagingMetrics returns the client's outbox, inbox and transport metric collectors.
	MessagingMetrics func(client any) *outbox.Metrics
	// AMQPDomains lists the domains whose transport is amqp, sorted.
	AMQPDomains func(client any) []string
	// AMQP10Domains lists the domains whose transport is amqp10, sorted.
	AMQP10Domains func(client any) []string
	// CheckpointOutbox returns the CommandRequested outbox messages of the commands of brokered
	// domains among cmds, for the execution checkpoint that inserts them.
	CheckpointOutbox func(client any, cmds []*driver.CommandInsertParams) ([]*driver.OutboxInsertParams, error)
	// CommandTypes lists the command types with handlers in domain, sorted.
	CommandTypes func(client any, domain string) []string
)
