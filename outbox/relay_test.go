package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

// fakePublisher records what it publishes and fails while failing is set.
type fakePublisher struct {
	mu        sync.Mutex
	published []*driver.OutboxRow
	failing   error
	signal    chan struct{}
}

func newFakePublisher() *fakePublisher { return &fakePublisher{signal: make(chan struct{}, 1)} }

func (p *fakePublisher) Transport() string { return outbox.TransportKafka }

func (p *fakePublisher) Publish(_ context.Context, msgs []*driver.OutboxRow) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if p.failing != nil {
			errs[i] = p.failing
			continue
		}
		p.published = append(p.published, m)
	}
	select {
	case p.signal <- struct{}{}:
	default:
	}
	return errs
}

func (p *fakePublisher) setFailing(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failing = err
}

func (p *fakePublisher) messageIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, len(p.published))
	for i, m := range p.published {
		out[i] = m.MessageID
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s%s", what, writersRunning())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writersRunning lists the PostgreSQL transactions that hold an xid, oldest first: on PostgreSQL
// the relay waits for every one of them (its horizon), so when a relay test times out they are
// the first suspects. Empty without a reachable server.
func writersRunning() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbtest.DatabaseURL())
	if err != nil {
		return ""
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT format('pid %s, %s, %s old, xid %s: %s', pid, state, now() - xact_start, backend_xid, left(query, 200))
		FROM pg_stat_activity WHERE backend_xid IS NOT NULL ORDER BY xact_start`)
	if err != nil {
		return ""
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(lines) == 0 {
		return ""
	}
	return "; writing transactions running on the server, oldest first:\n\t" + strings.Join(lines, "\n\t")
}

func envelope(key string) *outbox.Envelope {
	return &outbox.Envelope{
		MessageID: uuid.Must(uuid.NewV7()), Type: outbox.TypeCommandCompleted, Name: "BookFx",
		CommandID: uuid.Must(uuid.NewV7()), OccurredAt: time.Now(), Key: key,
		Headers: outbox.Headers{SchemaVersion: outbox.SchemaVersion}, Payload: json.RawMessage(`{"ok":true}`),
	}
}

func event(key string) *outbox.Message {
	return &outbox.Message{Category: outbox.CategoryEvent, Transport: outbox.TransportKafka, Topic: "events.Fx", Envelope: envelope(key)}
}

func startRelay(t *testing.T, drv driver.Driver, cfg outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	relay, err := outbox.NewRelay(drv.Executor(), cfg)
	require.NoError(t, err)
	require.NoError(t, relay.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, relay.Stop(context.Background())) })
	return relay
}

func TestRelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		t.Run("PublishesInKeyOrder", func(t *testing.T) {
			pub := newFakePublisher()
			var msgs []*outbox.Message
			for i := range 30 {
				msgs = append(msgs, event(fmt.Sprintf("k%d", i%3)))
			}
			require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), msgs...))
			relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, BatchSize: 7, PollInterval: 20 * time.Millisecond})
			relay.Kick()
			waitFor(t, "every message published", func() bool { return len(pub.messageIDs()) == len(msgs) })
			// Per key, the order written.
			byKey := map[string][]string{}
			for _, m := range msgs {
				byKey[m.Envelope.Key] = append(byKey[m.Envelope.Key], m.Envelope.MessageID.String())
			}
			got := map[string][]string{}
			pub.mu.Lock()
			for _, m := range pub.published {
				got[m.Key] = append(got[m.Key], m.MessageID)
				require.Equal(t, "events.Fx", m.Topic)
				require.Equal(t, m.MessageID, m.Headers[outbox.HeaderMessageID])
			}
			pub.mu.Unlock()
			require.Equal(t, byKey, got)
			waitFor(t, "every message marked", func() bool {
				rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusNew}})
				require.NoError(t, err)
				return len(rows) == 0
			})
		})

		t.Run("BacksOffAndRecovers", func(t *testing.T) {
			pub := newFakePublisher()
			pub.setFailing(errors.New("broker down"))
			require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), event("k"), event("k")))
			relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, PollInterval: 20 * time.Millisecond,
				InitialBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
			relay.Kick()
			waitFor(t, "a failed attempt recorded", func() bool {
				rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{})
				require.NoError(t, err)
				for _, r := range rows {
					if r.LastError == "broker down" && r.Attempts >= 2 {
						return true
					}
				}
				return false
			})
			require.Empty(t, pub.messageIDs())
			pub.setFailing(nil)
			waitFor(t, "the backlog drained", func() bool { return len(pub.messageIDs()) == 2 })
		})

		t.Run("PermanentFailureGivesUp", func(t *testing.T) {
			pub := newFakePublisher()
			pub.setFailing(outbox.Permanent(errors.New("message too large")))
			require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), event("")))
			relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, PollInterval: 20 * time.Millisecond})
			relay.Kick()
			waitFor(t, "the message FAILED", func() bool {
				rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusFailed}})
				require.NoError(t, err)
				return len(rows) == 1
			})
		})

		t.Run("StartsAgainAfterStop", func(t *testing.T) {
			pub := newFakePublisher()
			relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, PollInterval: 20 * time.Millisecond})
			for cycle := 1; cycle <= 2; cycle++ {
				require.NoError(t, relay.Stop(ctx))
				require.NoError(t, relay.Stop(ctx), "stopping a stopped relay does nothing")
				require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), event("restart")))
				require.NoError(t, relay.Start(ctx), "cycle %d: a stopped relay starts again", cycle)
				require.NoError(t, relay.Start(ctx), "starting a running relay does nothing")
				relay.Kick()
				waitFor(t, fmt.Sprintf("cycle %d's message published", cycle), func() bool { return len(pub.messageIDs()) == cycle })
			}
		})
	})
}

// TestRelayTwoRelays runs two relays over one outbox: every message is published, and the
// messages of one key in the order written.
func TestRelayTwoRelays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := dbtest.Postgres(t)
	first, second := newFakePublisher(), newFakePublisher()
	var order sync.Mutex
	var seen []*driver.OutboxRow
	record := func(msgs []*driver.OutboxRow, _ time.Time) {
		order.Lock()
		defer order.Unlock()
		seen = append(seen, msgs...)
	}
	startRelay(t, drv, outbox.RelayConfig{RelayID: "a", Publishers: []outbox.Publisher{first}, BatchSize: 5, PollInterval: 10 * time.Millisecond, OnPublished: record})
	startRelay(t, drv, outbox.RelayConfig{RelayID: "b", Publishers: []outbox.Publisher{second}, BatchSize: 5, PollInterval: 10 * time.Millisecond, OnPublished: record})
	var want []string
	byKey := map[string][]string{}
	for i := range 200 {
		m := event(fmt.Sprintf("k%d", i%7))
		want = append(want, m.Envelope.MessageID.String())
		byKey[m.Envelope.Key] = append(byKey[m.Envelope.Key], m.Envelope.MessageID.String())
		require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), m))
	}
	waitFor(t, "every message published", func() bool { return len(first.messageIDs())+len(second.messageIDs()) >= len(want) })
	require.ElementsMatch(t, want, append(first.messageIDs(), second.messageIDs()...), "each exactly once: no lease expired")
	require.NotEmpty(t, first.messageIDs())
	require.NotEmpty(t, second.messageIDs())
	order.Lock()
	got := map[string][]string{}
	for _, m := range seen {
		got[m.Key] = append(got[m.Key], m.MessageID)
	}
	order.Unlock()
	require.Equal(t, byKey, got, "a key's next message is published only after its previous one was acknowledged")
}

// TestRelayOverlappingTransactions writes two messages of one key in overlapping transactions
// that commit out of id order: the later id may not overtake the earlier, and nothing is skipped.
func TestRelayOverlappingTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := dbtest.Postgres(t)
	pub := newFakePublisher()
	relay, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{Publishers: []outbox.Publisher{pub}})
	require.NoError(t, err)

	txA, err := drv.Executor().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txA.Rollback(ctx) }()
	early := event("payment-1")
	require.NoError(t, outbox.Enqueue(ctx, txA, early)) // the smaller id, committed last
	txB, err := drv.Executor().Begin(ctx)
	require.NoError(t, err)
	late, other := event("payment-1"), event("payment-2")
	require.NoError(t, outbox.Enqueue(ctx, txB, late, other))
	require.NoError(t, txB.Commit(ctx))

	rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{})
	require.NoError(t, err)
	require.Len(t, rows, 2, "only B's rows are visible")
	// While A runs, B's rows are above the horizon: nothing is published, not even payment-2,
	// because what A writes may come first.
	n, err := relay.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, pub.messageIDs())

	require.NoError(t, txA.Commit(ctx))
	waitFor(t, "every message published", func() bool {
		_, err := relay.RunOnce(ctx)
		require.NoError(t, err)
		return len(pub.messageIDs()) == 3
	})
	ids := pub.messageIDs()
	indexOf := func(id string) int {
		for i, got := range ids {
			if got == id {
				return i
			}
		}
		return -1
	}
	require.Less(t, indexOf(early.Envelope.MessageID.String()), indexOf(late.Envelope.MessageID.String()), "A's message, written first, is published first")
	require.NotEqual(t, -1, indexOf(other.Envelope.MessageID.String()))
}

// failingMark is an executor whose marking fails: the relay "crashes" between publishing and
// marking.
type failingMark struct{ driver.Executor }

func (failingMark) OutboxMarkPublished(context.Context, *driver.OutboxMarkPublishedParams) (int64, error) {
	return 0, errors.New("relay crashed before marking")
}

// TestRelayCrashBetweenPublishAndMark: the message is published again after the lease, and the
// consumer's inbox absorbs the duplicate.
func TestRelayCrashBetweenPublishAndMark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		pub := newFakePublisher()
		require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), event("k")))
		crashed, err := outbox.NewRelay(failingMark{drv.Executor()}, outbox.RelayConfig{RelayID: "crashed", Publishers: []outbox.Publisher{pub}, Lease: 200 * time.Millisecond})
		require.NoError(t, err)
		waitFor(t, "the first publication", func() bool {
			_, err := crashed.RunOnce(ctx)
			return err != nil
		})
		survivor, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{RelayID: "survivor", Publishers: []outbox.Publisher{pub}, Lease: time.Second})
		require.NoError(t, err)
		waitFor(t, "the publication again after the lease", func() bool {
			_, err := survivor.RunOnce(ctx)
			require.NoError(t, err)
			return len(pub.messageIDs()) == 2
		})
		ids := pub.messageIDs()
		require.Equal(t, ids[0], ids[1], "the same message twice")

		inbox := outbox.NewInbox(nil)
		for i, id := range ids {
			first, err := inbox.Record(ctx, drv.Executor(), id, "consumer")
			require.NoError(t, err)
			require.Equal(t, i == 0, first, "the consumer processes it once")
		}
	})
}

// While messages flow the relay looks again quickly after a claim that found messages or a
// wake-up, and ever more slowly while its claims find nothing, so idle relays do not each cost a
// claim every few milliseconds. Its claims are counted by result.
func TestRelayClaimsBackOffAndAreCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := dbtest.SQLite(t)
	metrics, err := outbox.NewMetrics(nil)
	require.NoError(t, err)
	pub := newFakePublisher()
	relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, ActivePollInterval: 5 * time.Millisecond, Metrics: metrics})
	var delays []time.Duration
	for empty := range 8 {
		delays = append(delays, relay.ActiveDelay(empty))
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{5 * ms, 5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 160 * ms}, delays)

	require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), event("k")))
	relay.Kick()
	waitFor(t, "the message published", func() bool { return len(pub.messageIDs()) == 1 })
	count := func(result string) float64 {
		var m dto.Metric
		require.NoError(t, metrics.Claims.WithLabelValues(result).Write(&m))
		return m.GetCounter().GetValue()
	}
	require.Equal(t, 1.0, count("claimed"))
	waitFor(t, "an empty claim counted", func() bool { return count("empty") >= 1 })
}

// markCounter counts how the relay marks what it published: on their own or with a claim.
type markCounter struct {
	driver.Executor
	alone, withClaim atomic.Int64
}

func (e *markCounter) OutboxClaim(ctx context.Context, params *driver.OutboxClaimParams) ([]*driver.OutboxRow, error) {
	if len(params.Published) > 0 {
		e.withClaim.Add(1)
	}
	return e.Executor.OutboxClaim(ctx, params)
}

func (e *markCounter) OutboxMarkPublished(ctx context.Context, params *driver.OutboxMarkPublishedParams) (int64, error) {
	if len(params.IDs) > 0 {
		e.alone.Add(1)
	}
	return e.Executor.OutboxMarkPublished(ctx, params)
}

// While messages flow, the relay marks what it published with its next claim, which comes
// within ActivePollInterval: no statement of its own per batch. Every message ends PUBLISHED.
func TestRelayMarksWithItsNextClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		exec := &markCounter{Executor: drv.Executor()}
		pub := newFakePublisher()
		relay, err := outbox.NewRelay(exec, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, Workers: 1, PollInterval: time.Hour})
		require.NoError(t, err)
		require.NoError(t, relay.Start(ctx))
		t.Cleanup(func() { require.NoError(t, relay.Stop(context.Background())) })
		for i := range 3 {
			require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), event("k")))
			relay.Kick()
			waitFor(t, fmt.Sprintf("message %d published", i+1), func() bool { return len(pub.messageIDs()) == i+1 })
		}
		waitFor(t, "every message marked", func() bool {
			rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusNew}})
			require.NoError(t, err)
			return len(rows) == 0
		})
		require.Positive(t, exec.withClaim.Load())
		require.Zero(t, exec.alone.Load(), "no mark on its own while claims follow")
	})
}

// blockingPublisher holds each publication until released, and then accepts it.
type blockingPublisher struct {
	entered, release chan struct{}
}

func (p *blockingPublisher) Transport() string { return outbox.TransportKafka }

func (p *blockingPublisher) Publish(_ context.Context, msgs []*driver.OutboxRow) []error {
	p.entered <- struct{}{}
	<-p.release
	return make([]error, len(msgs))
}

// A relay stopped while it publishes lets the publication finish and marks what it published,
// although no claim follows to carry the mark.
func TestRelayStopMarksWhatItPublished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		pub := &blockingPublisher{entered: make(chan struct{}, 1), release: make(chan struct{})}
		relay, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, Workers: 1, PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, relay.Start(ctx))
		require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), event("k")))
		relay.Kick()
		select {
		case <-pub.entered:
		case <-time.After(20 * time.Second):
			t.Fatal("the relay never published")
		}
		stopped := make(chan error, 1)
		go func() { stopped <- relay.Stop(ctx) }()
		close(pub.release) // the broker accepts while the relay stops
		require.NoError(t, <-stopped)
		rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, driver.OutboxStatusPublished, rows[0].Status)
	})
}
