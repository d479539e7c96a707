// Package brokertest holds what the broker transports' tests (transport/amqp, transport/amqp10)
// share: the RabbitMQ test broker's URL, isolated queue names and their cleanup, polling with a
// deadline, a database failure injected into PostgreSQL, the fx bounded context the end-to-end
// tests run, and starting a client with a consumer.
package brokertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
)

// LeakOptions are the goleak options of the transports' TestMain: the database pools' background
// goroutines are not leaks.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).triggerHealthCheck.func1"),
		// A pooled connection whose write was slow (a loaded machine) keeps its background
		// reader blocked in a read until the connection is next used: the shared test pool's.
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgconn/internal/bgreader.(*BGReader).bgRead"),
		// A pooled connection whose query was interrupted (a handler cancelled at Stop) is closed
		// in the background, draining the server's last bytes for up to 15s.
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgconn.(*PgConn).asyncClose.func1"),
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.NewWithConfig.func4"),
	}
}

// URL returns the test broker's URL (the environment variable env, or RabbitMQ on localhost)
// once probe connects to it; when it does not the test is skipped, or fails under
// COMMANDBUS_REQUIRE_RABBITMQ=1. hint says how to start the broker.
func URL(t testing.TB, env string, probe func(url string) error, hint string) string {
	t.Helper()
	url := os.Getenv(env)
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	if err := probe(url); err != nil {
		msg := fmt.Sprintf("RabbitMQ is unreachable at %s (%v); %s", url, err, hint)
		if os.Getenv("COMMANDBUS_REQUIRE_RABBITMQ") == "1" {
			t.Fatalf("RabbitMQ is required (COMMANDBUS_REQUIRE_RABBITMQ=1): %s", msg)
		}
		t.Skipf("skipping: %s", msg)
	}
	return url
}

// UniquePrefix is a queue-name prefix that isolates a test's queues: start and random letters.
func UniquePrefix(start string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return start + strings.ToUpper(hex.EncodeToString(b))
}

// Prefix is a unique queue-name prefix (see UniquePrefix) whose queues and exchanges, every one
// the transports declare under it in this process, are deleted from the broker at url when t
// ends. Call it before starting anything that declares with the prefix.
func Prefix(t testing.TB, url, start string) string {
	t.Helper()
	prefix := UniquePrefix(start)
	brokerclean.Track(t, url, prefix)
	return prefix
}

// DeleteQueues removes a test's queues (over AMQP 0-9-1, which AMQP 1.0 cannot do).
func DeleteQueues(t testing.TB, url string, queues ...string) {
	t.Helper()
	amqp.DeleteQueues(url, queues...)
}

// CommandQueue is the fx BookFx command queue under prefix; at cleanup it is deleted, with its
// backout queue and the prefix's dead-letter and parking queues.
func CommandQueue(t testing.TB, url, prefix string) string {
	t.Helper()
	queue := outbox.CommandQueueName(prefix, "fx", "BookFx")
	t.Cleanup(func() {
		DeleteQueues(t, url, queue, outbox.BackoutQueueName(queue), outbox.DeadLetterQueueName(prefix), outbox.ParkingQueueName(prefix))
	})
	return queue
}

// PublishPoison publishes, with pub, a command message to queue whose body is no envelope (so no
// consumer can process it), with the message id and the command id as correlation id.
func PublishPoison(t testing.TB, pub outbox.Publisher, queue, messageID, commandID string) {
	t.Helper()
	row := &driver.OutboxRow{ID: 1, Topic: queue, Type: "CommandRequested", MessageID: messageID,
		Payload: []byte(`{}`), Headers: map[string]string{outbox.HeaderCommandID: commandID}}
	require.NoError(t, pub.Publish(context.Background(), []*driver.OutboxRow{row})[0])
}

// WaitFor polls cond until it holds, failing the test after 45s.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling
	}
}

// CounterValue is a Prometheus counter's value.
func CounterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// FailClaims makes PostgreSQL refuse to claim the fx commands whose paymentId is paymentID: a
// real database error on every delivery of their messages, until the returned function lifts it.
func FailClaims(t testing.TB, drv driver.Driver, paymentID string) func() {
	t.Helper()
	pg := drv.(*pgdriver.Driver)
	schema := pg.Schema()
	ctx := context.Background()
	_, err := pg.Pool().Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION %[1]s.fail_claim() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.status = 'RUNNING' AND NEW.data->>'paymentId' = '%[2]s' THEN
				RAISE EXCEPTION 'simulated database failure claiming %[2]s';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER fail_claim BEFORE UPDATE ON %[1]s.command FOR EACH ROW EXECUTE FUNCTION %[1]s.fail_claim();`,
		schema, paymentID))
	require.NoError(t, err)
	var lifted atomic.Bool
	return func() {
		if lifted.CompareAndSwap(false, true) {
			_, err := pg.Pool().Exec(ctx, "DROP TRIGGER fail_claim ON "+schema+".command")
			require.NoError(t, err)
		}
	}
}

// BookFx is the fx bounded context's command in the end-to-end tests.
type BookFx struct {
	PaymentID string `json:"paymentId"`
}

// Kind names the command type.
func (BookFx) Kind() string { return "BookFx" }

// FxHandler runs a BookFx command.
type FxHandler func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error)

// Fx is the end-to-end tests' handlers: the fx domain's BookFx handler, which counts its calls
// and runs a function the test may swap, and the payments domain's reply handler, which hands
// each reply to Replies.
type Fx struct {
	t testing.TB
	// Handlers are the client's handlers.
	Handlers *commandbus.Handlers
	// Client is the client the test runs them with (set by the test), for WaitStatus.
	Client *commandbus.Client
	// Calls counts the BookFx handler's runs.
	Calls atomic.Int64
	// Replies receives the replies the payments reply handler was given.
	Replies chan commandbus.Reply
	handle  atomic.Pointer[FxHandler]
}

// NewFx returns the handlers, running ok for BookFx until SetHandler; Replies holds up to
// replies replies.
func NewFx(t testing.TB, replies int, ok FxHandler) *Fx {
	f := &Fx{t: t, Handlers: commandbus.NewHandlers(), Replies: make(chan commandbus.Reply, replies)}
	f.handle.Store(&ok)
	commandbus.AddHandler(f.Handlers, "fx", commandbus.HandlerFunc[BookFx](func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
		f.Calls.Add(1)
		return (*f.handle.Load())(ctx, cmd)
	}))
	commandbus.AddReplyHandler(f.Handlers, "payments", "", func(_ context.Context, msg *commandbus.ReplyMessage) error {
		f.Replies <- msg.Reply
		return nil
	})
	return f
}

// SetHandler swaps the BookFx handler's function.
func (f *Fx) SetHandler(fn FxHandler) { f.handle.Store(&fn) }

// WaitStatus waits until command id has status, and returns its row.
func (f *Fx) WaitStatus(id uuid.UUID, status commandbus.Status) *commandbus.CommandRow {
	f.t.Helper()
	var row *commandbus.CommandRow
	WaitFor(f.t, "command "+id.String()+" "+string(status), func() bool {
		var err error
		row, err = f.Client.GetCommand(context.Background(), id)
		require.NoError(f.t, err)
		return row.Status == status
	})
	return row
}

// WaitReply waits up to 30s for the reply handler to get a reply, which must be command id's.
func (f *Fx) WaitReply(id uuid.UUID) commandbus.Reply {
	f.t.Helper()
	select {
	case reply := <-f.Replies:
		require.Equal(f.t, id, reply.CommandID)
		return reply
	case <-time.After(30 * time.Second):
		f.t.Fatal("no reply reached the reply handler")
		return commandbus.Reply{}
	}
}

// Logger logs warnings and errors to the test's log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}

// Consumer is a transport's consumer.
type Consumer interface {
	commandbus.Service
	Queues() []string
	Ready() <-chan struct{}
}

// Start adds consumer to client, starts the client and waits until the consumer is ready. At
// cleanup it stops the client and deletes the consumer's queues and the others named.
func Start(t testing.TB, client *commandbus.Client, consumer Consumer, url string, queues ...string) {
	t.Helper()
	client.AddService(consumer)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
		DeleteQueues(t, url, append(consumer.Queues(), queues...)...)
	})
	waitReady(t, consumer, "the consumer did not connect")
}

// Restart stops consumer and starts it again (as a restarted client does), and waits until it is
// ready.
func Restart(t testing.TB, consumer Consumer) {
	t.Helper()
	ctx := context.Background()
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, consumer.Stop(stopCtx))
	require.NoError(t, consumer.Start(ctx))
	waitReady(t, consumer, "the restarted consumer did not connect")
}

func waitReady(t testing.TB, consumer Consumer, failure string) {
	t.Helper()
	select {
	case <-consumer.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal(failure)
	}
}
