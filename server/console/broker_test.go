package console_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/rabbittest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/server/console"
	"github.com/commandbus/commandbus/transport/amqp"
)

// brokerReader reads the broker's dead letters with the AMQP transport, as the serve command
// wires it.
func brokerReader(url string, topology amqp.Topology) console.BrokerDeadLetterReader {
	return func(ctx context.Context, limit int) (*console.BrokerDeadLetters, error) {
		report, err := amqp.ListDeadLetters(ctx, url, topology, limit)
		if err != nil {
			return nil, err
		}
		out := &console.BrokerDeadLetters{}
		for _, q := range []string{topology.DeadLetterQueue(), topology.ParkingQueue()} {
			out.Counts = append(out.Counts, console.BrokerQueueCount{Queue: q, Messages: report.Counts[q]})
		}
		for _, m := range report.Messages {
			out.Messages = append(out.Messages, console.BrokerDeadLetter{Queue: m.Queue, OriginalQueue: m.OriginalQueue,
				MessageID: m.MessageID, CommandID: m.CommandID, Type: m.Type, Error: m.Error})
		}
		return out, nil
	}
}

// The dead-letter page shows the broker's dead-letter and parking queues when the console reads
// them: their counts and messages with the reason and the queue they came from; a broker it
// cannot read is said so, and the page still answers.
func TestConsoleBrokerDeadLetters(t *testing.T) {
	t.Parallel()
	url, conn := rabbittest.Dial(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	topology := amqp.Topology{Prefix: "CON" + strings.ToUpper(hex.EncodeToString(b))}
	brokerclean.Track(t, url, topology.Prefix)
	_, err := amqp.ListDeadLetters(context.Background(), url, topology, 0) // declares the queues
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(context.Background(), "", topology.DeadLetterQueue(), true, false, amqp091.Publishing{
		MessageId: "dead-1", CorrelationId: "0190b8a4-0000-7000-8000-000000000002", Type: "CommandRequested", Body: []byte(`{}`),
		Headers: amqp091.Table{amqp.HeaderError: "commandbus: not found: the delivered command does not exist", amqp.HeaderOriginalQueue: "APP.CMD.FX.BookFx.Q"},
	}))

	serve := func(reader console.BrokerDeadLetterReader) *servertest.Browserless {
		client, err := commandbus.NewClient(dbtest.SQLite(t), &commandbus.Config{MetricsRegisterer: prometheus.NewRegistry()})
		require.NoError(t, err)
		c, err := console.New(console.Options{Client: client, Tokens: testTokens, Gatherer: prometheus.NewRegistry(), BrokerDeadLetters: reader})
		require.NoError(t, err)
		mux := http.NewServeMux()
		c.Register(mux)
		require.NoError(t, c.Start())
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		hs := httptest.NewServer(mux)
		t.Cleanup(hs.Close)
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		op := &servertest.Browserless{T: t, Base: hs.URL, Client: &http.Client{Jar: jar,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		op.Login(operatorToken)
		return op
	}

	op := serve(brokerReader(url, topology))
	var body string
	require.Eventually(t, func() bool {
		var resp *http.Response
		resp, body = op.Get("/dlq")
		return resp.StatusCode == http.StatusOK && strings.Contains(textOf(body), topology.DeadLetterQueue()+": 1 message")
	}, 10*time.Second, 50*time.Millisecond)
	text := textOf(body)
	require.Contains(t, text, topology.ParkingQueue()+": 0 messages")
	for _, want := range []string{"dead-1", "APP.CMD.FX.BookFx.Q", "0190b8a4-0000-7000-8000-000000000002", "the delivered command does not exist"} {
		require.Contains(t, text, want)
	}
	requireHTML(t, body, `id="dlq-empty"`)

	down := serve(brokerReader("amqp://guest:guest@127.0.0.1:1/", topology))
	resp, body := down.Get("/dlq")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	requireHTML(t, body, `id="broker-dead-letters-error"`)

	none := serve(nil)
	_, body = none.Get("/dlq")
	require.NotContains(t, body, "broker-dead-letters", "no broker section without a reader")
}
