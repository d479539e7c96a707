package outbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
)

// A relay's lag is the age of the oldest message of its last claim, on the database's clock; it
// holds a writer in Pace until a claim finds the outbox caught up, or for at most the limit. A
// claim that finds nothing, a failing broker and a stopped relay hold nobody back.
func TestRelayPace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		pub := newFakePublisher()
		var skew atomic.Int64 // the relay's clock runs this far ahead of the database's
		relay, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{Publishers: []outbox.Publisher{pub},
			Now: func() *time.Time { now := time.Now().Add(time.Duration(skew.Load())); return &now }})
		require.NoError(t, err)
		require.Zero(t, relay.Lag())

		// A message claimed an hour after it was written: the relay lags an hour.
		skew.Store(int64(time.Hour))
		require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), event("k")))
		claim(t, relay)
		require.InDelta(t, time.Hour.Seconds(), relay.Lag().Seconds(), 60)

		// Pace holds the writer while the relay lags...
		paced := make(chan struct{})
		go func() {
			relay.Pace(ctx, time.Minute, time.Hour)
			close(paced)
		}()
		select {
		case <-paced:
			t.Fatal("Pace returned while the relay lags an hour")
		case <-time.After(100 * time.Millisecond):
		}
		// ... until a claim finds nothing waiting.
		n, err := relay.RunOnce(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Zero(t, relay.Lag())
		select {
		case <-paced:
		case <-time.After(20 * time.Second):
			t.Fatal("Pace still waits after a claim found the outbox caught up")
		}

		// The limit bounds the wait.
		require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), event("k")))
		claim(t, relay)
		require.Greater(t, relay.Lag(), time.Minute)
		started := time.Now()
		relay.Pace(ctx, time.Minute, 50*time.Millisecond)
		require.GreaterOrEqual(t, time.Since(started), 50*time.Millisecond)

		// A failing broker holds nobody back: its messages wait for the broker, not the writers.
		pub.setFailing(errors.New("broker down"))
		require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), event("other")))
		claim(t, relay)
		require.Zero(t, relay.Lag())

		// Nor does a stopped relay.
		pub.setFailing(nil)
		require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), event("third")))
		claim(t, relay)
		require.Greater(t, relay.Lag(), time.Minute)
		require.NoError(t, relay.Start(ctx))
		require.NoError(t, relay.Stop(ctx))
		require.Zero(t, relay.Lag())
	})
}

// claim runs the relay once at a time until a claim finds a message: on PostgreSQL a message
// waits for every transaction older than its own (the relay's horizon), which may be another's.
func claim(t *testing.T, relay *outbox.Relay) {
	t.Helper()
	waitFor(t, "a claim that finds the message", func() bool {
		n, err := relay.RunOnce(context.Background())
		require.NoError(t, err)
		return n > 0
	})
}

// gatedPublisher publishes only once its gate is open (or has a token).
type gatedPublisher struct {
	*fakePublisher
	gate    chan struct{}
	blocked atomic.Int64 // since when a publication waits at the gate (unix ns), 0 if none
}

func (p *gatedPublisher) Publish(ctx context.Context, msgs []*driver.OutboxRow) []error {
	p.blocked.Store(time.Now().UnixNano())
	<-p.gate
	p.blocked.Store(0)
	return p.fakePublisher.Publish(ctx, msgs)
}

// waiting is how long the publication at the gate has waited, 0 if none waits.
func (p *gatedPublisher) waiting() time.Duration {
	if since := p.blocked.Load(); since != 0 {
		return time.Since(time.Unix(0, since))
	}
	return 0
}

// With the hand-off, the lag counts the oldest message handed over and not yet published, from
// when it was handed over: Pace holds the writers while it waits too long, and lets them go
// when its publication ends.
func TestRelayPaceHandedOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		pub := &gatedPublisher{fakePublisher: newFakePublisher(), gate: make(chan struct{})}
		relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, PollInterval: time.Hour})
		var open sync.Once
		t.Cleanup(func() { open.Do(func() { close(pub.gate) }) }) // before the relay stops, should the test fail
		relay.Handoff(writtenFor(t, drv, relay, event("paced")))
		waitFor(t, "the handed-over message to wait", func() bool { return relay.Lag() > 50*time.Millisecond })

		paced := make(chan struct{})
		go func() {
			relay.Pace(ctx, 20*time.Millisecond, time.Hour)
			close(paced)
		}()
		select {
		case <-paced:
			t.Fatal("Pace returned while a handed-over message waits")
		case <-time.After(100 * time.Millisecond):
		}
		open.Do(func() { close(pub.gate) })
		select {
		case <-paced:
		case <-time.After(20 * time.Second):
			t.Fatal("Pace still waits after the hand-off published")
		}
		require.Len(t, pub.messageIDs(), 1)
		require.Zero(t, relay.Lag())
	})
}

// A failing broker holds nobody back through the hand-off either: once a publication of the
// hand-off failed, what it sends next waits for the broker, and does not make the relay lag.
func TestRelayPaceHandedOffFailing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		pub := &gatedPublisher{fakePublisher: newFakePublisher(), gate: make(chan struct{}, 1)}
		pub.setFailing(errors.New("broker down"))
		relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, PollInterval: time.Hour, Workers: 1})
		var open sync.Once
		t.Cleanup(func() { open.Do(func() { close(pub.gate) }) }) // before the relay stops, should the test fail

		pub.gate <- struct{}{} // the first publication goes through, and fails
		relay.Handoff(writtenFor(t, drv, relay, event("first")))
		select {
		case <-pub.signal:
		case <-time.After(20 * time.Second):
			t.Fatal("the handed-over message was not published")
		}
		relay.Handoff(writtenFor(t, drv, relay, event("second")))
		waitFor(t, "the next publication to wait for the broker", func() bool { return pub.waiting() > 50*time.Millisecond })
		require.Zero(t, relay.Lag(), "a message waiting for a failing broker holds no writer back")
	})
}
