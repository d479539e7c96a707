package amqp_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
)

// TestDatabaseOutageStrandsNothing: PostgreSQL goes away while commands flow over RabbitMQ and
// comes back. Deliveries that fail meanwhile back off before they are given back; those that
// exhaust the backout threshold reach the backout queue, whose drain parks their command once the
// database is back. Afterwards every command is COMPLETED or IN_TSQ with a command_dlq row and its
// reason, none is left PENDING with its message gone, and none completed twice (one reply
// message each).
func TestDatabaseOutageStrandsNothing(t *testing.T) {
	const total = 40
	drv, outage := dbtest.PostgresWithOutage(t)
	p := newPlatform(t, platformOpts{drv: drv, lease: 2 * time.Second, requeueDelay: 50 * time.Millisecond})
	var mu sync.Mutex
	runs := map[string]int{}
	// The second half's handlers hold on until the outage began: their outcomes are written
	// into it, and the messages behind them are delivered during it.
	held, gate := make(chan struct{}, total), make(chan struct{})
	p.SetHandler(func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
		mu.Lock()
		runs[cmd.Args.PaymentID]++
		mu.Unlock()
		if cmd.Args.PaymentID >= "P-20" {
			held <- struct{}{}
			<-gate
		}
		return map[string]string{"contract": "FX-" + cmd.Args.PaymentID}, nil
	})
	ctx := context.Background()
	ids := make([]uuid.UUID, 0, total)
	send := func(from, to int) {
		for i := from; i < to; i++ {
			res, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: fmt.Sprintf("P-%02d", i)}, &commandbus.SendOpts{ReplyTo: "payments"})
			require.NoError(t, err)
			ids = append(ids, res.ID)
		}
	}
	queue := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
	requeued := func() float64 { return brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(queue, "requeued")) }
	backedOut := func() float64 {
		return brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(queue, "backed_out"))
	}

	// Messages in flight: sent and published, some processed.
	send(0, total)
	brokertest.WaitFor(t, "the relay to publish every command", func() bool {
		rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusNew}, Transport: outbox.TransportAMQP, Topic: outbox.CommandQueueName(p.prefix, "fx", "BookFx")})
		require.NoError(t, err)
		return len(rows) == 0
	})
	// The outage: deliveries fail for a database reason and are given back after a backoff,
	// until enough failures were seen for some messages to reach the backout queue.
	<-held
	before := requeued()
	outage.Begin()
	close(gate)
	brokertest.WaitFor(t, "deliveries failing during the outage, and a message backed out", func() bool {
		return requeued() >= before+10 && backedOut() >= 1
	})
	outage.End()

	// Afterwards: every command terminal or parked, none stranded.
	statuses := map[commandbus.Status]int{}
	brokertest.WaitFor(t, "every command to be COMPLETED or IN_TSQ", func() bool {
		clear(statuses)
		for _, id := range ids {
			row, err := p.Client.GetCommand(ctx, id)
			if err != nil {
				return false // the pool reconnects
			}
			statuses[row.Status]++
		}
		return statuses[commandbus.StatusCompleted]+statuses[commandbus.StatusInTSQ] == total
	})
	t.Logf("after the outage: %v; deliveries given back: %.0f, backed out: %.0f", statuses, requeued(), backedOut())
	require.Positive(t, statuses[commandbus.StatusInTSQ], "the backed-out message's command is parked")
	parked, err := p.Client.DLQ().List(ctx, commandbus.DLQFilter{Domain: "fx"})
	require.NoError(t, err)
	require.Len(t, parked, statuses[commandbus.StatusInTSQ], "every parked command has its command_dlq row")
	for _, e := range parked {
		require.Contains(t, e.Error, commandbus.CodeBrokerBackout, "parked for its backed-out message, with the reason")
	}
	replies, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.ReplyQueueName(p.prefix), Limit: 1000})
	require.NoError(t, err)
	perCommand := map[uuid.UUID]int{}
	for _, r := range replies {
		env, err := outbox.Decode(r.Payload)
		require.NoError(t, err)
		perCommand[env.CommandID]++
	}
	for _, id := range ids {
		row, err := p.Client.GetCommand(ctx, id)
		require.NoError(t, err)
		if row.Status == commandbus.StatusCompleted {
			require.Equalf(t, 1, perCommand[id], "command %s completed once", id)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	again := 0
	for _, n := range runs {
		if n > 1 {
			again++
		}
	}
	// A handler runs again only when the outage swallowed the outcome of its run (at least once
	// delivery); the inbox and the fenced completion still record one outcome.
	t.Logf("handlers run for %d commands, %d of them again after the outage swallowed an outcome", len(runs), again)
}
