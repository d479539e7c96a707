package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
)

// enqueued writes msgs and returns their outbox rows, in order.
func enqueued(t *testing.T, drv driver.Driver, msgs ...*outbox.Message) []*driver.OutboxRow {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), msgs...))
	rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusNew}, Limit: 1000})
	require.NoError(t, err)
	byMessage := map[string]*driver.OutboxRow{}
	for _, r := range rows {
		byMessage[r.MessageID] = r
	}
	out := make([]*driver.OutboxRow, len(msgs))
	for i, m := range msgs {
		out[i] = byMessage[m.Envelope.MessageID.String()]
		require.NotNil(t, out[i], "message %d written", i)
	}
	return out
}

// handedOver returns what a writer hands the relay for rows, written in that order, each
// unpublished when the next of its key was written: its previous message is the one before it
// of its key, in all.
func handedOver(rows []*driver.OutboxRow, all []*driver.OutboxRow) []driver.WrittenMessage {
	out := make([]driver.WrittenMessage, len(rows))
	for i, r := range rows {
		var previous int64
		for _, o := range all {
			if o.Key == r.Key && o.ID < r.ID {
				previous = max(previous, o.ID)
			}
		}
		out[i] = driver.WrittenMessage{ID: r.ID, Key: r.Key, Previous: previous, CreatedAt: r.CreatedAt,
			Message: &driver.OutboxInsertParams{Category: r.Category, Transport: r.Transport, Topic: r.Topic, Key: r.Key,
				Type: r.Type, MessageID: r.MessageID, Payload: r.Payload, Headers: r.Headers}}
	}
	return out
}

// writtenFor writes msgs as the events of a new execution started for relay's hand-off
// (driver.OutboxHandoff: leased to it) and returns what the writer reports, without handing it
// over.
func writtenFor(t *testing.T, drv driver.Driver, relay *outbox.Relay, msgs ...*outbox.Message) []driver.WrittenMessage {
	t.Helper()
	var params []*driver.OutboxInsertParams
	for _, m := range msgs {
		p, err := m.InsertParams()
		require.NoError(t, err)
		params = append(params, p)
	}
	return writtenParamsFor(t, drv, relay, params...)
}

// writtenParamsFor is writtenFor for outbox rows as given.
func writtenParamsFor(t *testing.T, drv driver.Driver, relay *outbox.Relay, msgs ...*driver.OutboxInsertParams) []driver.WrittenMessage {
	t.Helper()
	x := &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7()), Model: "workflow", Type: "handoff-test", Outbox: msgs}
	handoff := relay.OutboxHandoff()
	var written []driver.WrittenMessage
	handoff.Written = func(w []driver.WrittenMessage) { written = append(written, w...) }
	_, err := drv.Executor().ExecutionInsertMany(context.Background(), &driver.ExecutionInsertManyParams{
		Executions: []*driver.ExecutionInsertParams{x}, OutboxHandoff: handoff})
	require.NoError(t, err)
	require.Len(t, written, len(msgs))
	return written
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

// A relay that never polls (PollInterval of an hour, no wake-ups) publishes what it is handed at
// once, per key in the order written, and marks it; it leaves to its claims what waits behind a
// message it was not handed, and after a failed publication the key's next messages wait for the
// failed one.
func TestRelayHandoff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		// newRelay starts a relay whose claims poll every poll (on PostgreSQL a claim may find
		// nothing while other tests' transactions hold the horizon).
		newRelay := func(t *testing.T, pub *fakePublisher, poll time.Duration, workers int, id ...string) (*outbox.Relay, *outbox.Metrics) {
			metrics, err := outbox.NewMetrics(nil)
			require.NoError(t, err)
			relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, Workers: workers, PollInterval: poll, RelayID: strings.Join(id, ""),
				ActiveWindow: 20 * time.Millisecond, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Metrics: metrics})
			// Its first claims, at the start, must not take the messages the test writes next.
			waitFor(t, "the relay's first claims", func() bool {
				return counterValue(t, metrics.Claims.WithLabelValues("empty"))+counterValue(t, metrics.Claims.WithLabelValues("claimed")) >= float64(workers)
			})
			return relay, metrics
		}
		unpublished := func() int {
			rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusNew}})
			require.NoError(t, err)
			return len(rows)
		}

		t.Run("PublishesAtOnceInKeyOrder", func(t *testing.T) {
			pub := newFakePublisher()
			relay, metrics := newRelay(t, pub, time.Hour, 2) // no claim but those it is woken for; two hand-off loops
			msgs := []*outbox.Message{event("h1"), event("h2"), event("h1"), event("h2"), event("h1"), event("")}
			rows := enqueued(t, drv, msgs...)
			relay.Handoff(handedOver(rows[:2], rows))
			relay.Handoff(handedOver(rows[2:], rows))
			waitFor(t, "every message published", func() bool { return len(pub.messageIDs()) == len(msgs) })
			want, got := map[string][]string{}, map[string][]string{}
			for _, m := range msgs {
				want[m.Envelope.Key] = append(want[m.Envelope.Key], m.Envelope.MessageID.String())
			}
			pub.mu.Lock()
			for _, m := range pub.published {
				got[m.Key] = append(got[m.Key], m.MessageID)
			}
			pub.mu.Unlock()
			require.Equal(t, want, got, "each key's in the order handed over")
			require.Equal(t, float64(len(msgs)), counterValue(t, metrics.HandedOff.WithLabelValues("taken")))
			require.Zero(t, counterValue(t, metrics.Claims.WithLabelValues("claimed")), "no claim took part")
			waitFor(t, "every message marked", func() bool { return unpublished() == 0 })
		})

		t.Run("OneStatementsMessagesFollowEachOther", func(t *testing.T) {
			// On PostgreSQL the messages of one key written by one statement all name the key's
			// unpublished message before the statement as their previous one: the relay chains
			// them in the order written.
			pub := newFakePublisher()
			relay, metrics := newRelay(t, pub, time.Hour, 1)
			msgs := []*outbox.Message{event("s1"), event("s1"), event("s1")}
			rows := enqueued(t, drv, msgs...)
			relay.Handoff(handedOver(rows[:1], rows))
			together := handedOver(rows[1:], rows)
			together[1].Previous = together[0].Previous
			relay.Handoff(together)
			waitFor(t, "every message published", func() bool { return len(pub.messageIDs()) == len(msgs) })
			require.Equal(t, []string{msgs[0].Envelope.MessageID.String(), msgs[1].Envelope.MessageID.String(), msgs[2].Envelope.MessageID.String()},
				pub.messageIDs())
			require.Equal(t, 3.0, counterValue(t, metrics.HandedOff.WithLabelValues("taken")))
			require.Zero(t, counterValue(t, metrics.HandedOff.WithLabelValues("left")))
		})

		t.Run("PublishesAPackedRowsMessagesAsWritten", func(t *testing.T) {
			// A packed row handed over is published message by message from the messages Pack
			// was given, without parsing the row's payload.
			pub := newFakePublisher()
			relay, _ := newRelay(t, pub, time.Hour, 1)
			var parts []*driver.OutboxInsertParams
			for _, m := range []*outbox.Message{event("pk"), event("pk"), event("pk")} {
				p, err := m.InsertParams()
				require.NoError(t, err)
				parts = append(parts, p)
			}
			packed, err := outbox.Pack(parts)
			require.NoError(t, err)
			require.Len(t, packed, 1)
			written := writtenParamsFor(t, drv, relay, packed...)
			written[0].Message.Payload = []byte("not the stored row") // never parsed
			relay.Handoff(written)
			waitFor(t, "every message published", func() bool { return len(pub.messageIDs()) == len(parts) })
			pub.mu.Lock()
			defer pub.mu.Unlock()
			for i, p := range parts {
				got := pub.published[i]
				require.Equal(t, p.MessageID, got.MessageID)
				require.Equal(t, p.Type, got.Type)
				require.JSONEq(t, string(p.Payload), string(got.Payload))
				require.Equal(t, p.Headers, got.Headers)
				require.Equal(t, written[0].ID, got.ID)
			}
		})

		t.Run("LeavesWhatWaitsBehindToTheClaims", func(t *testing.T) {
			pub := newFakePublisher()
			relay, metrics := newRelay(t, pub, 50*time.Millisecond, 1)
			msgs := []*outbox.Message{event("w"), event("w"), event("w")}
			rows := enqueued(t, drv, msgs...)
			relay.Handoff(handedOver(rows[1:], rows)) // not the first: the claim the relay is woken for takes all three
			waitFor(t, "every message published", func() bool { return len(pub.messageIDs()) == len(msgs) })
			require.Equal(t, []string{msgs[0].Envelope.MessageID.String(), msgs[1].Envelope.MessageID.String(), msgs[2].Envelope.MessageID.String()},
				pub.messageIDs())
			require.Equal(t, 2.0, counterValue(t, metrics.HandedOff.WithLabelValues("left")))
			require.Zero(t, counterValue(t, metrics.HandedOff.WithLabelValues("taken")))
			waitFor(t, "every message marked", func() bool { return unpublished() == 0 })
		})

		t.Run("AFailedMessageHoldsItsKeyBack", func(t *testing.T) {
			pub := newFakePublisher()
			pub.setFailing(errors.New("broker down"))
			relay, metrics := newRelay(t, pub, 50*time.Millisecond, 1)
			msgs := []*outbox.Message{event("f"), event("f")}
			written := writtenFor(t, drv, relay, msgs[0])
			relay.Handoff(written)
			// Its publication failed: recorded as a claim's would be, it is the claims' to retry.
			waitFor(t, "the failure recorded", func() bool {
				row, err := drv.Executor().OutboxGet(ctx, written[0].ID)
				require.NoError(t, err)
				return row.LastError == "broker down" && row.LockedUntil == nil
			})
			next := writtenFor(t, drv, relay, msgs[1])
			require.Equal(t, written[0].ID, next[0].Previous, "written after an unpublished message of its key")
			relay.Handoff(next)
			waitFor(t, "the second left to the claims", func() bool {
				return counterValue(t, metrics.HandedOff.WithLabelValues("left")) == 1
			})
			pub.setFailing(nil)
			waitFor(t, "both published", func() bool { return len(pub.messageIDs()) == 2 })
			require.Equal(t, []string{msgs[0].Envelope.MessageID.String(), msgs[1].Envelope.MessageID.String()}, pub.messageIDs())
			waitFor(t, "both marked", func() bool { return unpublished() == 0 })
		})

		t.Run("TwoRelaysKeepAKeysOrder", func(t *testing.T) {
			// An execution moved to another instance: its next messages are written for another
			// relay, which leaves them to the claims while the first relay holds the earlier ones.
			// Written leased to their relay, no claim takes a message a relay is publishing.
			pub := newFakePublisher()
			first, _ := newRelay(t, pub, 50*time.Millisecond, 1, "first")
			second, metrics := newRelay(t, pub, 50*time.Millisecond, 1, "second")
			var msgs []*outbox.Message
			for range 6 {
				msgs = append(msgs, event("moved"))
			}
			before := writtenFor(t, drv, first, msgs[:3]...)
			after := writtenFor(t, drv, second, msgs[3:]...)
			first.Handoff(before)
			second.Handoff(after)
			want := make([]string, len(msgs))
			for i, m := range msgs {
				want[i] = m.Envelope.MessageID.String()
			}
			waitFor(t, "every message published", func() bool { return len(pub.messageIDs()) >= len(msgs) })
			require.Equal(t, want, pub.messageIDs(), "once each, in the order written")
			require.Equal(t, 3.0, counterValue(t, metrics.HandedOff.WithLabelValues("left")), "the second relay's follow the first's")
			waitFor(t, "every message marked", func() bool { return unpublished() == 0 })
		})

		t.Run("StoppedLeavesEverythingToTheClaims", func(t *testing.T) {
			pub := newFakePublisher()
			relay, metrics := newRelay(t, pub, 50*time.Millisecond, 1)
			require.NoError(t, relay.Stop(ctx))
			msg := event("s")
			rows := enqueued(t, drv, msg)
			relay.Handoff(handedOver(rows, rows))
			require.Zero(t, counterValue(t, metrics.HandedOff.WithLabelValues("taken")))
			require.NoError(t, relay.Start(ctx))
			relay.Kick()
			waitFor(t, "published by a claim", func() bool { return len(pub.messageIDs()) == 1 })
		})
	})
}
