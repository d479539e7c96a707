package amqp_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
)

// TestPostgresStoppedWhileMessagesFlow stops a real PostgreSQL server (a private cluster this test
// owns, crashed with pg_ctl stop -m immediate) while commands flow over RabbitMQ, and restarts it.
// Half of the handlers are running when it stops: their outcomes cannot be written. Afterwards
// every command is COMPLETED or IN_TSQ (with its command_dlq row), none is left PENDING with its
// message gone; each completed command has one reply message and one effect; and no handler ran
// for a command whose outcome was already recorded (a handler runs again only when the crash
// swallowed the outcome of its earlier run).
//
// The handler's effect is a row in a side table, written in the handler's own transaction after
// checking that the command has none yet (the idempotent handler the bus expects; there is no
// unique constraint, so two runs of one command at the same time would both write it). Its runs
// are counted in memory, which the crash does not reach.
func TestPostgresStoppedWhileMessagesFlow(t *testing.T) {
	const total = 40
	began := time.Now()
	cluster := dbtest.PrivatePostgres(t)
	t.Logf("private PostgreSQL cluster up in %s", time.Since(began).Round(time.Millisecond))
	drv := cluster.Driver()
	ctx := context.Background()
	effectsCfg, err := pgxpool.ParseConfig(cluster.URL())
	require.NoError(t, err)
	effectsCfg.MaxConns = 4
	effectsCfg.ConnConfig.ConnectTimeout = 2 * time.Second
	effects, err := pgxpool.NewWithConfig(ctx, effectsCfg)
	require.NoError(t, err)
	t.Cleanup(effects.Close)
	_, err = effects.Exec(ctx, `CREATE TABLE booking_effect (id BIGSERIAL PRIMARY KEY, command_id UUID NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT now())`)
	require.NoError(t, err)

	p := newPlatform(t, platformOpts{drv: drv, lease: 2 * time.Second, requeueDelay: 50 * time.Millisecond})
	var mu sync.Mutex
	runs := map[uuid.UUID][]time.Time{} // when each run of a command's handler started
	held, gate := make(chan struct{}, total), make(chan struct{})
	p.SetHandler(func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
		mu.Lock()
		runs[cmd.ID] = append(runs[cmd.ID], time.Now())
		mu.Unlock()
		if cmd.Args.PaymentID >= "P-20" {
			// Running when the server stops: the outcome of this run is written into the outage.
			held <- struct{}{}
			<-gate
		}
		tx, err := effects.Begin(ctx)
		if err != nil {
			return nil, commandbus.Transient(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		var booked int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM booking_effect WHERE command_id = $1`, cmd.ID).Scan(&booked); err != nil {
			return nil, commandbus.Transient(err)
		}
		if booked == 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO booking_effect (command_id) VALUES ($1)`, cmd.ID); err != nil {
				return nil, commandbus.Transient(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, commandbus.Transient(err)
		}
		return map[string]string{"contract": "FX-" + cmd.Args.PaymentID}, nil
	})

	ids := make([]uuid.UUID, 0, total)
	for i := range total {
		res, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: fmt.Sprintf("P-%02d", i)}, &commandbus.SendOpts{ReplyTo: "payments"})
		require.NoError(t, err)
		ids = append(ids, res.ID)
	}
	queue := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
	requeued := func() float64 { return brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(queue, "requeued")) }
	brokertest.WaitFor(t, "the relay to publish every command", func() bool {
		rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusNew}, Transport: outbox.TransportAMQP, Topic: queue})
		require.NoError(t, err)
		return len(rows) == 0
	})

	// The crash, with handlers running and messages waiting in the queue.
	<-held
	before := requeued()
	crashed := time.Now()
	cluster.Crash()
	close(gate)
	brokertest.WaitFor(t, "deliveries to fail while the server is down", func() bool { return requeued() >= before+10 })
	cluster.Start()
	restarted := time.Now()
	t.Logf("PostgreSQL was down for %s", restarted.Sub(crashed).Round(time.Millisecond))

	statuses := map[commandbus.Status]int{}
	rows := map[uuid.UUID]*commandbus.CommandRow{}
	brokertest.WaitFor(t, "every command to be COMPLETED or IN_TSQ", func() bool {
		clear(statuses)
		for _, id := range ids {
			row, err := p.Client.GetCommand(ctx, id)
			if err != nil {
				return false // the pool reconnects
			}
			rows[id] = row
			statuses[row.Status]++
		}
		return statuses[commandbus.StatusCompleted]+statuses[commandbus.StatusInTSQ] == total
	})
	t.Logf("%s after the restart: %v; deliveries given back: %.0f", time.Since(restarted).Round(time.Millisecond), statuses, requeued())

	parked, err := p.Client.DLQ().List(ctx, commandbus.DLQFilter{Domain: "fx"})
	require.NoError(t, err)
	require.Len(t, parked, statuses[commandbus.StatusInTSQ], "every parked command has its command_dlq row")

	replies, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.ReplyQueueName(p.prefix), Limit: 1000})
	require.NoError(t, err)
	repliesPer := map[uuid.UUID]int{}
	for _, r := range replies {
		env, err := outbox.Decode(r.Payload)
		require.NoError(t, err)
		repliesPer[env.CommandID]++
	}
	effectsPer := map[uuid.UUID]int{}
	effectRows, err := effects.Query(ctx, `SELECT command_id FROM booking_effect`)
	require.NoError(t, err)
	for effectRows.Next() {
		var id uuid.UUID
		require.NoError(t, effectRows.Scan(&id))
		effectsPer[id]++
	}
	require.NoError(t, effectRows.Err())

	mu.Lock()
	defer mu.Unlock()
	again := 0
	for _, id := range ids {
		row := rows[id]
		if len(runs[id]) > 1 {
			again++
		}
		switch row.Status {
		case commandbus.StatusCompleted:
			require.Equalf(t, 1, repliesPer[id], "command %s completed once: one reply", id)
			require.Equalf(t, 1, effectsPer[id], "command %s has one effect", id)
			require.NotNil(t, row.CompletedAt)
			for _, started := range runs[id] {
				require.Truef(t, started.Before(*row.CompletedAt), "command %s: no run after its outcome was recorded (run at %s, completed at %s)",
					id, started.Format(time.RFC3339Nano), row.CompletedAt.Format(time.RFC3339Nano))
			}
		case commandbus.StatusInTSQ:
			require.LessOrEqualf(t, effectsPer[id], 1, "command %s has at most one effect", id)
		}
	}
	t.Logf("handlers ran for %d commands, %d of them again after the crash swallowed an outcome", len(runs), again)
}
