// Package notifier turns driver notifications into wake-up signals for queue workers and
// pollers. A lost notification only delays work until the next poll, so delivery is best effort:
// each subscriber has a one-slot buffer and repeated signals coalesce.
package notifier

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/startstop"
)

// Notifier listens on one connection and fans notifications out by topic.
type Notifier struct {
	listener driver.Listener
	logger   *slog.Logger

	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}

	listening chan struct{}
	once      sync.Once

	base startstop.Base
}

// New returns a notifier reading from listener.
func New(listener driver.Listener, logger *slog.Logger) *Notifier {
	return &Notifier{
		listener:  listener,
		logger:    logger,
		subs:      map[string]map[chan struct{}]struct{}{},
		listening: make(chan struct{}),
	}
}

// Subscribe returns a channel signalled when topic is notified, and a function to unsubscribe.
func (n *Notifier) Subscribe(topic string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs[topic] == nil {
		n.subs[topic] = map[chan struct{}]struct{}{}
	}
	n.subs[topic][ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs[topic], ch)
		n.mu.Unlock()
	}
}

// Listening is closed once the first LISTEN succeeded.
func (n *Notifier) Listening() <-chan struct{} { return n.listening }

// Signal wakes the subscribers of topic as if a notification had arrived.
func (n *Notifier) Signal(topic string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs[topic] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// signalAll wakes the subscribers of every topic.
func (n *Notifier) signalAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, subs := range n.subs {
		for ch := range subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Start listens in the background until Stop, reconnecting with backoff after errors. Starting a
// running notifier does nothing; a stopped one can start again.
func (n *Notifier) Start() {
	stop, ok := n.base.StartInit()
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.base.Go(func() {
		<-stop
		cancel()
	})
	n.base.Go(func() { n.Run(ctx) })
}

// Stop ends listening and waits until the connection is closed.
func (n *Notifier) Stop() {
	if !n.base.StopInit() {
		return
	}
	<-n.base.Done()
	n.base.Stopped()
}

// Run listens until ctx ends, reconnecting with backoff after errors. Start and Stop run it in the
// background.
func (n *Notifier) Run(ctx context.Context) {
	const initialBackoff = 100 * time.Millisecond
	backoff := initialBackoff
	for ctx.Err() == nil {
		started := time.Now()
		err := n.listenOnce(ctx)
		if time.Since(started) > 10*time.Second {
			backoff = initialBackoff // it was healthy for a while: this is a new incident
		}
		if ctx.Err() != nil {
			break
		}
		n.logger.Warn("notification listener failed; polling continues, reconnecting", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = n.listener.Close(closeCtx)
}

func (n *Notifier) listenOnce(ctx context.Context) error {
	if err := n.listener.Connect(ctx); err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = n.listener.Close(closeCtx)
	}()
	if err := n.listener.Listen(ctx); err != nil {
		return err
	}
	// A notification sent before this LISTEN took effect (at start, or while reconnecting after
	// an outage) was lost: wake every subscriber once, so each looks for what it may have missed
	// instead of waiting for its next poll.
	n.signalAll()
	n.once.Do(func() { close(n.listening) })
	for {
		topic, err := n.listener.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return ctx.Err()
			}
			return err
		}
		n.Signal(topic)
	}
}
