package notifier

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testWriter routes notifier logs to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// fakeListener is a channel-backed driver.Listener: the test pushes topics and errors.
type fakeListener struct {
	topics     chan string
	waitErrs   chan error
	connectErr chan error    // each value fails one Connect
	listenGate chan struct{} // when non-nil, Listen blocks until it is closed
	connected  chan struct{} // signalled after every successful Connect
	listening  chan struct{} // signalled after every successful Listen
	connects   atomic.Int64
	listens    atomic.Int64
	closes     atomic.Int64
	open       atomic.Bool // a connection is open (Connect succeeded and Close has not run since)
	closedOpen atomic.Int64
}

func newFakeListener() *fakeListener {
	return &fakeListener{
		topics:     make(chan string),
		waitErrs:   make(chan error),
		connectErr: make(chan error, 4),
		connected:  make(chan struct{}, 16),
		listening:  make(chan struct{}, 16),
	}
}

func (l *fakeListener) Connect(ctx context.Context) error {
	select {
	case err := <-l.connectErr:
		return err
	default:
	}
	l.connects.Add(1)
	l.open.Store(true)
	l.connected <- struct{}{}
	return nil
}

func (l *fakeListener) Listen(ctx context.Context) error {
	if l.listenGate != nil {
		select {
		case <-l.listenGate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.listens.Add(1)
	l.listening <- struct{}{}
	return nil
}

func (l *fakeListener) WaitForNotification(ctx context.Context) (string, error) {
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case topic := <-l.topics:
		return topic, nil
	case err := <-l.waitErrs:
		return "", err
	}
}

func (l *fakeListener) Close(ctx context.Context) error {
	l.closes.Add(1)
	if l.open.Swap(false) {
		l.closedOpen.Add(1)
	}
	return nil
}

// run starts n.Run and returns a function that cancels it and waits for it to return.
func run(t *testing.T, n *Notifier) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context was cancelled")
		}
	}
	t.Cleanup(stop)
	return stop
}

func setup(t *testing.T) (*Notifier, *fakeListener) {
	t.Helper()
	l := newFakeListener()
	return New(l, slog.New(slog.NewTextHandler(testWriter{t}, nil))), l
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func pending(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// notify delivers topics through the listener, then a sentinel on its own topic; once the
// sentinel's subscriber is signalled, every earlier topic has been fanned out.
func notify(t *testing.T, n *Notifier, l *fakeListener, topics ...string) {
	t.Helper()
	sentinel, unsubscribe := n.Subscribe("sentinel")
	defer unsubscribe()
	for _, topic := range append(topics, "sentinel") {
		select {
		case l.topics <- topic:
		case <-time.After(10 * time.Second):
			t.Fatalf("the notifier did not read notification %q", topic)
		}
	}
	waitFor(t, sentinel, "the sentinel notification")
}

// drain empties the subscriptions' pending wake-ups.
func drain(chs ...<-chan struct{}) {
	for _, ch := range chs {
		for pending(ch) {
		}
	}
}

func TestSubscribeReceivesOnlyItsTopic(t *testing.T) {
	t.Parallel()
	n, l := setup(t)
	a, _ := n.Subscribe("queue:a")
	a2, _ := n.Subscribe("queue:a")
	b, _ := n.Subscribe("queue:b")
	run(t, n)
	waitFor(t, n.Listening(), "Listening")
	drain(a, a2, b) // the catch-up wake-up after LISTEN

	notify(t, n, l, "queue:a")
	require.True(t, pending(a), "subscriber of queue:a is signalled")
	require.True(t, pending(a2), "every subscriber of the topic is signalled")
	require.False(t, pending(b), "subscriber of queue:b is not")

	notify(t, n, l, "queue:b", "queue:unknown")
	require.True(t, pending(b))
	require.False(t, pending(a))
}

func TestDuplicateSignalsCoalesce(t *testing.T) {
	t.Parallel()
	n, l := setup(t)
	a, _ := n.Subscribe("queue:a")
	run(t, n)
	waitFor(t, n.Listening(), "Listening")
	drain(a)

	notify(t, n, l, "queue:a", "queue:a", "queue:a")
	n.Signal("queue:a") // a local signal coalesces with notifications too
	require.True(t, pending(a))
	require.False(t, pending(a), "repeated signals leave one pending wake-up, not three")
}

func TestUnsubscribeStopsSignals(t *testing.T) {
	t.Parallel()
	n, l := setup(t)
	a, unsubscribe := n.Subscribe("queue:a")
	run(t, n)
	waitFor(t, n.Listening(), "Listening")
	drain(a)

	unsubscribe()
	notify(t, n, l, "queue:a")
	require.False(t, pending(a))
}

// A notification sent before LISTEN took effect never arrives: once listening, every subscriber
// is woken once so it looks for what it may have missed (an execution inserted while the
// instance started would otherwise wait for the next poll).
func TestListenWakesEverySubscriberOnce(t *testing.T) {
	t.Parallel()
	n, _ := setup(t)
	a, _ := n.Subscribe("queue:a")
	b, _ := n.Subscribe("queue:b")
	run(t, n)
	waitFor(t, n.Listening(), "Listening")
	require.True(t, pending(a), "queue:a woken after LISTEN")
	require.True(t, pending(b), "queue:b woken after LISTEN")
	require.False(t, pending(a), "once")
}

func TestSignalWithoutListener(t *testing.T) {
	t.Parallel()
	n, _ := setup(t)
	a, _ := n.Subscribe("queue:a")
	n.Signal("queue:a") // works before Run: local wake-ups need no connection
	require.True(t, pending(a))
}

func TestReconnectsAfterWaitError(t *testing.T) {
	t.Parallel()
	n, l := setup(t)
	a, _ := n.Subscribe("queue:a")
	run(t, n)
	waitFor(t, l.connected, "the first connection")
	waitFor(t, n.Listening(), "Listening")

	l.waitErrs <- errors.New("connection reset by peer")
	waitFor(t, l.connected, "a reconnection")
	waitFor(t, l.listening, "the first LISTEN")
	waitFor(t, l.listening, "LISTEN again after reconnecting")
	require.Equal(t, int64(2), l.connects.Load())
	require.Equal(t, int64(1), l.closedOpen.Load(), "the broken connection was closed before reconnecting")
	require.Eventually(t, func() bool { return pending(a) }, 5*time.Second, time.Millisecond,
		"after reconnecting, subscribers are woken once: notifications sent meanwhile were lost")

	notify(t, n, l, "queue:a")
	require.True(t, pending(a), "notifications flow again after reconnecting")
}

func TestRetriesFailedConnect(t *testing.T) {
	t.Parallel()
	n, l := setup(t)
	l.connectErr <- errors.New("connection refused")
	l.connectErr <- errors.New("connection refused")
	run(t, n)
	waitFor(t, l.connected, "a connection after two refusals")
	waitFor(t, n.Listening(), "Listening")
	require.Equal(t, int64(1), l.connects.Load())
	require.Empty(t, l.connectErr, "both failed attempts were made")
}

func TestListeningClosesAfterListen(t *testing.T) {
	t.Parallel()
	n, l := setup(t)
	l.listenGate = make(chan struct{})
	run(t, n)
	waitFor(t, l.connected, "the connection")
	require.False(t, pending(n.Listening()), "Listening stays open while LISTEN has not succeeded")
	close(l.listenGate)
	waitFor(t, n.Listening(), "Listening after LISTEN")
}

func TestRunReturnsWhenContextCancelled(t *testing.T) {
	t.Parallel()
	n, l := setup(t)
	stop := run(t, n)
	waitFor(t, n.Listening(), "Listening")
	stop()
	require.False(t, l.open.Load(), "the connection is closed when Run returns")
	require.Equal(t, int64(1), l.connects.Load(), "cancellation is not an error to reconnect after")
}

func TestRunReturnsWhenCancelledWhileReconnecting(t *testing.T) {
	t.Parallel()
	n, l := setup(t)
	for range cap(l.connectErr) {
		l.connectErr <- errors.New("connection refused")
	}
	stop := run(t, n)
	require.Eventually(t, func() bool { return len(l.connectErr) < cap(l.connectErr) }, 10*time.Second, time.Millisecond,
		"a first attempt failed")
	stop() // returns during the backoff, not after it
	require.False(t, pending(n.Listening()))
}
