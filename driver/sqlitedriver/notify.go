package sqlitedriver

import (
	"context"
	"errors"
	"sync"
)

// ErrListenerClosed is returned by WaitForNotification once the listener or its driver is
// closed.
var ErrListenerClosed = errors.New("sqlitedriver: listener closed")

// maxPendingTopics bounds what a listener that stopped reading can hold. Duplicates are
// coalesced, so this is a number of distinct topics; beyond it topics are dropped, which is safe
// because consumers also poll.
const maxPendingTopics = 1024

// broadcaster delivers every notified topic to every listening listener of one driver.
type broadcaster struct {
	mu        sync.Mutex
	listeners map[*listener]struct{}
	closed    bool
}

func newBroadcaster() *broadcaster {
	return &broadcaster{listeners: map[*listener]struct{}{}}
}

func (b *broadcaster) broadcast(topics []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for l := range b.listeners {
		l.deliver(topics)
	}
}

func (b *broadcaster) subscribe(l *listener) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrListenerClosed
	}
	b.listeners[l] = struct{}{}
	return nil
}

func (b *broadcaster) unsubscribe(l *listener) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.listeners, l)
}

// close closes every listener; later subscriptions fail.
func (b *broadcaster) close() {
	b.mu.Lock()
	listeners := b.listeners
	b.listeners = map[*listener]struct{}{}
	b.closed = true
	b.mu.Unlock()
	for l := range listeners {
		l.shutdown()
	}
}

// listener is one subscriber to the broadcast. It queues topics until WaitForNotification takes
// them, oldest first, holding each distinct topic at most once.
type listener struct {
	b *broadcaster

	mu       sync.Mutex
	pending  []string
	queued   map[string]struct{}
	wake     chan struct{} // capacity 1: "pending may have changed"
	closedCh chan struct{} // closed by shutdown
	closed   bool
}

func (l *listener) init() {
	if l.wake == nil {
		l.wake = make(chan struct{}, 1)
		l.closedCh = make(chan struct{})
		l.queued = map[string]struct{}{}
	}
}

// Connect prepares the listener. It needs no connection: notifications are in-process.
func (l *listener) Connect(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		// A closed listener may be connected again, like a PostgreSQL one.
		l.wake, l.closed = nil, false
	}
	l.init()
	return nil
}

// Listen subscribes the listener: it receives every topic notified from now on.
func (l *listener) Listen(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrListenerClosed
	}
	l.init()
	l.mu.Unlock()
	return l.b.subscribe(l)
}

func (l *listener) deliver(topics []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	for _, topic := range topics {
		if _, ok := l.queued[topic]; ok || len(l.pending) >= maxPendingTopics {
			continue
		}
		l.queued[topic] = struct{}{}
		l.pending = append(l.pending, topic)
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// WaitForNotification returns the oldest pending topic, waiting for one until ctx ends.
func (l *listener) WaitForNotification(ctx context.Context) (string, error) {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return "", ErrListenerClosed
		}
		l.init()
		if len(l.pending) > 0 {
			topic := l.pending[0]
			l.pending[0] = ""
			l.pending = l.pending[1:]
			delete(l.queued, topic)
			l.mu.Unlock()
			return topic, nil
		}
		wake, closedCh := l.wake, l.closedCh
		l.mu.Unlock()
		select {
		case <-wake:
		case <-closedCh:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// Close unsubscribes the listener and wakes its waiters with ErrListenerClosed.
func (l *listener) Close(ctx context.Context) error {
	l.b.unsubscribe(l)
	l.shutdown()
	return nil
}

func (l *listener) shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.init()
	l.closed = true
	l.pending, l.queued = nil, map[string]struct{}{}
	close(l.closedCh)
}
