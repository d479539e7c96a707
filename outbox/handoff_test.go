package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
)

// enqueued writes msgs and returns their outbox ids, in order.
func enqueued(t *testing.T, drv driver.Driver, msgs ...*outbox.Message) []int64 {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), msgs...))
	rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusNew}, Limit: 1000})
	require.NoError(t, err)
	byMessage := map[string]int64{}
	for _, r := range rows {
		byMessage[r.MessageID] = r.ID
	}
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = byMessage[m.Envelope.MessageID.String()]
		require.NotZero(t, ids[i], "message %d written", i)
	}
	return ids
}

// handedOver returns what a writer hands the relay for msgs written with ids.
func handedOver(ids []int64, msgs []*outbox.Message) []driver.WrittenMessage {
	out := make([]driver.WrittenMessage, len(ids))
	for i, id := range ids {
		out[i] = driver.WrittenMessage{ID: id, Key: msgs[i].Envelope.Key}
	}
	return out
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
		newRelay := func(t *testing.T, pub *fakePublisher, poll time.Duration, workers int) (*outbox.Relay, *outbox.Metrics) {
			metrics, err := outbox.NewMetrics(nil)
			require.NoError(t, err)
			relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, Workers: workers, PollInterval: poll,
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
			ids := enqueued(t, drv, msgs...)
			relay.Handoff(handedOver(ids[:2], msgs[:2]))
			relay.Handoff(handedOver(ids[2:], msgs[2:]))
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

		t.Run("LeavesWhatWaitsBehindToTheClaims", func(t *testing.T) {
			pub := newFakePublisher()
			relay, metrics := newRelay(t, pub, 50*time.Millisecond, 1)
			msgs := []*outbox.Message{event("w"), event("w"), event("w")}
			ids := enqueued(t, drv, msgs...)
			relay.Handoff(handedOver(ids[1:], msgs[1:])) // not the first: the claim the relay is woken for takes all three
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
			ids := enqueued(t, drv, msgs...)
			relay.Handoff(handedOver(ids[:1], msgs[:1]))
			waitFor(t, "the failure recorded", func() bool {
				row, err := drv.Executor().OutboxGet(ctx, ids[0])
				require.NoError(t, err)
				return row.LastError == "broker down" && row.LockedUntil == nil
			})
			relay.Handoff(handedOver(ids[1:], msgs[1:]))
			waitFor(t, "the second left to the claims", func() bool {
				return counterValue(t, metrics.HandedOff.WithLabelValues("left")) == 1
			})
			pub.setFailing(nil)
			waitFor(t, "both published", func() bool { return len(pub.messageIDs()) == 2 })
			require.Equal(t, []string{msgs[0].Envelope.MessageID.String(), msgs[1].Envelope.MessageID.String()}, pub.messageIDs())
			waitFor(t, "both marked", func() bool { return unpublished() == 0 })
		})

		t.Run("TwoRelaysKeepAKeysOrder", func(t *testing.T) {
			// An execution moved to another instance: its next rows are handed to another relay,
			// which leaves them to the claims while the first relay holds the earlier ones.
			pub := newFakePublisher()
			first, _ := newRelay(t, pub, 50*time.Millisecond, 1)
			second, metrics := newRelay(t, pub, 50*time.Millisecond, 1)
			var msgs []*outbox.Message
			for range 6 {
				msgs = append(msgs, event("moved"))
			}
			ids := enqueued(t, drv, msgs...)
			first.Handoff(handedOver(ids[:3], msgs[:3]))
			second.Handoff(handedOver(ids[3:], msgs[3:]))
			waitFor(t, "every message published", func() bool { return len(pub.messageIDs()) >= len(msgs) })
			want := make([]string, len(msgs))
			for i, m := range msgs {
				want[i] = m.Envelope.MessageID.String()
			}
			require.Equal(t, want, pub.messageIDs(), "once each, in the order written")
			require.Positive(t, counterValue(t, metrics.HandedOff.WithLabelValues("left"))+counterValue(t, metrics.HandedOff.WithLabelValues("taken")))
			waitFor(t, "every message marked", func() bool { return unpublished() == 0 })
		})

		t.Run("StoppedLeavesEverythingToTheClaims", func(t *testing.T) {
			pub := newFakePublisher()
			relay, metrics := newRelay(t, pub, 50*time.Millisecond, 1)
			require.NoError(t, relay.Stop(ctx))
			msg := event("s")
			ids := enqueued(t, drv, msg)
			relay.Handoff(handedOver(ids, []*outbox.Message{msg}))
			require.Zero(t, counterValue(t, metrics.HandedOff.WithLabelValues("taken")))
			require.NoError(t, relay.Start(ctx))
			relay.Kick()
			waitFor(t, "published by a claim", func() bool { return len(pub.messageIDs()) == 1 })
		})
	})
}
