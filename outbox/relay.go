package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/startstop"
	"github.com/commandbus/commandbus/tracing"
)

// Publisher sends outbox messages to one broker.
type Publisher interface {
	// Transport is the transport whose messages it sends (TransportAMQP, TransportKafka).
	Transport() string
	// Publish sends msgs, keeping the order of messages of one key, and returns one error per
	// message: nil once the broker has durably accepted it. Wrap an error with Permanent when
	// retrying cannot help (the message is marked FAILED).
	Publish(ctx context.Context, msgs []*driver.OutboxRow) []error
}

// PermanentError marks a publication failure that retrying cannot fix.
type PermanentError struct{ Err error }

// Error returns the cause, marked permanent.
func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a PermanentError.
func Permanent(err error) error { return &PermanentError{Err: err} }

// ErrNotSent is the result a publisher gives a message it did not send because an earlier
// message of the same key failed in the same batch: the message waits for that one, and the
// claim does not count as one of its attempts.
var ErrNotSent = errors.New("outbox: not sent: an earlier message of its key failed")

// AttemptLimiter is implemented by publishers that give up on a message after a number of
// failed attempts of their own (a webhook's dead letter), whatever the relay's MaxAttempts.
type AttemptLimiter interface {
	MaxAttempts() int
}

// RelayConfig configures a Relay. Zero fields take the documented defaults.
type RelayConfig struct {
	// Publishers send the messages; the relay claims only the transports it has publishers for.
	// Required.
	Publishers []Publisher
	// RelayID names this relay in leases. Default: hostname-pid.
	RelayID string
	// BatchSize is the most messages claimed and published at once. Default: 500.
	BatchSize int
	// Workers is how many claim-publish loops run at once. Default: 2.
	Workers int
	// Lease is how long a claimed message is this relay's; a relay that dies mid-publication
	// loses its messages to another after it. Default: 30s.
	Lease time.Duration
	// PollInterval is the sweeper: how often the outbox is claimed without a wake-up. Default: 1s.
	PollInterval time.Duration
	// InitialBackoff is the delay after a message's first failed publication; it doubles with
	// every attempt up to MaxBackoff. Defaults: 500ms and 1m.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// MaxAttempts, when positive, marks a message FAILED after that many failed attempts. Default:
	// 0, retry forever (a message is never dropped; FAILED ones wait for an operator).
	MaxAttempts int
	// BacklogInterval is how often the backlog gauges are refreshed. Default: 10s.
	BacklogInterval time.Duration
	// ActivePollInterval is how often the relay looks again while messages are flowing (a
	// wake-up or a non-empty claim in the last ActiveWindow). On PostgreSQL a message committed
	// while an older transaction still runs becomes publishable only when that one ends, and no
	// notification says when: the short poll picks it up. Each empty claim in a row doubles the
	// wait, up to 32 × ActivePollInterval; a wake-up or a claimed message resets it. Defaults:
	// 5ms and 200ms.
	ActivePollInterval time.Duration
	ActiveWindow       time.Duration
	// Wake is signalled when messages were written (the fast path). Optional: Subscribe is the
	// usual source.
	Wake <-chan struct{}
	// Subscribe, when set, is called at Start for NotifyTopic (a commandbus client wakes it on Notify).
	Subscribe func(topic string) (<-chan struct{}, func())
	// OnPublished, when set, is told of every batch the broker acknowledged, before it is marked:
	// the messages as published (a packed row's one by one, see Pack).
	OnPublished func(msgs []*driver.OutboxRow, at time.Time)
	// Now returns the time passed to the driver (nil: the database clock).
	Now     func() *time.Time
	Metrics *Metrics
	Logger  *slog.Logger
	// TracerProvider creates a span per published message, a child of the span that wrote it
	// (package tracing). Default: the global provider; a commandbus client passes its own.
	TracerProvider trace.TracerProvider
}

// Relay publishes the outbox. It is a commandbus.Service: start it with the client
// (client.AddService(relay)) or on its own.
type Relay struct {
	exec       driver.Executor
	cfg        RelayConfig
	publishers map[string]Publisher
	transports []string

	base   startstop.Base
	kick   chan struct{}
	tracer *tracing.Tracer

	// lag is how long the oldest message of the last claim had waited (nanoseconds), zero after a
	// claim that found nothing or whose publication failed; claimed is closed after each claim
	// and replaced (Pace waits on it).
	lag       atomic.Int64
	claimedMu sync.Mutex
	claimed   chan struct{}

	// handoff holds the messages handed over (Handoff) and its loops' state.
	handoff *handoff
}

// NewRelay returns a relay on exec (the driver's executor).
func NewRelay(exec driver.Executor, cfg RelayConfig) (*Relay, error) {
	if exec == nil {
		return nil, errors.New("outbox: NewRelay needs the driver's executor")
	}
	if len(cfg.Publishers) == 0 {
		return nil, errors.New("outbox: a relay needs at least one publisher (transport/amqp, transport/kafka)")
	}
	if cfg.RelayID == "" {
		host, _ := os.Hostname()
		cfg.RelayID = fmt.Sprintf("relay-%s-%d", host, os.Getpid())
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	if cfg.BacklogInterval <= 0 {
		cfg.BacklogInterval = 10 * time.Second
	}
	if cfg.ActivePollInterval <= 0 {
		cfg.ActivePollInterval = 5 * time.Millisecond
	}
	if cfg.ActiveWindow <= 0 {
		cfg.ActiveWindow = 200 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = func() *time.Time { return nil }
	}
	if cfg.Metrics == nil {
		cfg.Metrics = newDefaultMetrics()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Relay{exec: exec, cfg: cfg, publishers: map[string]Publisher{}, kick: make(chan struct{}, 1), tracer: tracing.New(cfg.TracerProvider),
		claimed: make(chan struct{})}
	for _, p := range cfg.Publishers {
		if _, dup := r.publishers[p.Transport()]; dup {
			return nil, fmt.Errorf("outbox: two publishers for transport %q", p.Transport())
		}
		r.publishers[p.Transport()] = p
		r.transports = append(r.transports, p.Transport())
	}
	r.handoff = newHandoff(cfg.RelayID, cfg.Workers)
	return r, nil
}

// Start runs the relay's loops until Stop. Starting a running relay does nothing; a stopped one
// can start again.
func (r *Relay) Start(ctx context.Context) error {
	stop, ok := r.base.StartInit()
	if !ok {
		return nil
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	wake := r.cfg.Wake
	var unsubscribe func()
	if r.cfg.Subscribe != nil {
		wake, unsubscribe = r.cfg.Subscribe(NotifyTopic)
	}
	r.base.Go(func() { // the run ends when Stop begins
		<-stop
		cancel()
		if unsubscribe != nil {
			unsubscribe()
		}
	})
	// One goroutine fans wake-ups out to the workers: each wake-up should start one claim, not
	// one per worker.
	signals := make(chan struct{}, r.cfg.Workers)
	r.base.Go(func() {
		backlog := time.NewTicker(r.cfg.BacklogInterval)
		defer backlog.Stop()
		r.refreshBacklog(runCtx)
		for {
			select {
			case <-runCtx.Done():
				return
			case <-wake:
			case <-r.kick:
			case <-backlog.C:
				r.refreshBacklog(runCtx)
				continue
			}
			select {
			case signals <- struct{}{}:
			default:
			}
		}
	})
	for i := 0; i < r.cfg.Workers; i++ {
		r.base.Go(func() { r.work(runCtx, signals) })
	}
	r.setHandoff(true)
	for _, s := range r.handoff.shards {
		r.base.Go(func() {
			r.handoffLoop(runCtx, s)
			r.markHandedOff(runCtx, s) // what its last batch published
		})
		r.base.Go(func() { r.handoffMarker(runCtx, s) })
	}
	r.base.Go(func() { r.releaseLoop(runCtx) })
	return nil
}

// Stop ends the loops, letting a publication in flight finish until ctx ends.
func (r *Relay) Stop(ctx context.Context) error {
	if !r.base.StopInit() {
		return nil
	}
	r.setHandoff(false) // what was handed over and not taken yet is the claims'
	defer r.setLag(0)   // a stopped relay holds nobody back
	done := r.base.Done()
	select {
	case <-done:
		r.release(ctx) // what the hand-off left after its release loop ended
		r.base.Stopped()
		return nil
	case <-ctx.Done():
		go func() { <-done; r.base.Stopped() }() // it may start again once the publication ends
		return ctx.Err()
	}
}

// Kick wakes the relay now, as a notification would.
func (r *Relay) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *Relay) work(ctx context.Context, signals <-chan struct{}) {
	poll := time.NewTicker(r.cfg.PollInterval)
	defer poll.Stop()
	var lastActive time.Time
	empty := 0 // claims in a row that found nothing since the last wake-up or claimed message
	// published are the messages the broker accepted, marked by the next claim: while messages
	// flow one comes within ActivePollInterval, and a mark then costs no statement of its own.
	var published []int64
	flush := func() {
		if err := r.markPublished(ctx, published); err != nil {
			r.cfg.Logger.Warn("outbox relay: marking failed", "error", err)
		}
		published = nil
	}
	defer flush()
	for {
		for {
			var n int
			var err error
			n, published, err = r.runOnce(ctx, published)
			if err != nil {
				if ctx.Err() == nil {
					r.cfg.Logger.Warn("outbox relay: claiming or marking failed; retrying at the next poll", "error", err)
				}
				lastActive = time.Time{}
				break
			}
			if n > 0 {
				lastActive, empty = time.Now(), 0
			} else {
				empty++
			}
			if n < r.cfg.BatchSize {
				break
			}
		}
		var active <-chan time.Time
		if time.Since(lastActive) < r.cfg.ActiveWindow {
			active = time.After(r.activeDelay(empty))
		} else if len(published) > 0 {
			flush() // no claim soon to carry the marks
		}
		select {
		case <-ctx.Done():
			return
		case <-signals:
			lastActive, empty = time.Now(), 0
		case <-poll.C:
		case <-active:
		}
	}
}

// activeDelay is the wait before the next look while messages flow: ActivePollInterval after a
// claim that found messages or a wake-up, doubling with each empty claim in a row up to 32 times
// that. A message held back by an older transaction (the horizon) is usually free within
// milliseconds, so the first looks come quickly; several relays that keep finding nothing (the
// others took it) stop costing a claim every few milliseconds each.
func (r *Relay) activeDelay(empty int) time.Duration {
	return r.cfg.ActivePollInterval << min(max(empty-1, 0), 5)
}

// RunOnce claims one batch, publishes it and records the outcome; it returns how many messages
// it claimed. Tests may call it; the loops mark what they published with their next claim.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	n, published, err := r.runOnce(ctx, nil)
	if err != nil {
		return n, err
	}
	return n, r.markPublished(ctx, published)
}

// recordContext is the context of recording a publication's outcome: a fresh one, since what
// the broker accepted or refused should be recorded even while the relay stops.
func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// markPublished records messages the broker accepted; unrecorded, they are published again.
func (r *Relay) markPublished(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	markCtx, cancel := recordContext(ctx)
	defer cancel()
	if _, err := r.exec.OutboxMarkPublished(markCtx, &driver.OutboxMarkPublishedParams{IDs: ids, Now: r.cfg.Now()}); err != nil {
		return fmt.Errorf("marking %d messages published (they will be published again): %w", len(ids), err)
	}
	return nil
}

// runOnce claims one batch, marking published in the same round trip, publishes the batch and
// defers its failures. It returns how many messages it claimed and the ids the broker accepted,
// still to be marked (by the next claim). When the claim fails, nothing was marked: it returns
// published again, still to be marked.
func (r *Relay) runOnce(ctx context.Context, published []int64) (int, []int64, error) {
	// Not cut short by a stop: the claim carries the marks, and a statement cancelled midway costs
	// its connection.
	claimCtx, cancel := recordContext(ctx)
	rows, err := r.exec.OutboxClaim(claimCtx, &driver.OutboxClaimParams{
		Transports: r.transports, Max: r.cfg.BatchSize, Lease: r.cfg.Lease, RelayID: r.cfg.RelayID, Now: r.cfg.Now(),
		Published: published, Below: r.handoffBelow(),
	})
	cancel()
	if err != nil {
		r.setLag(0)
		return 0, published, err
	}
	published = nil
	if len(rows) == 0 {
		r.setLag(0)
		r.cfg.Metrics.Claims.WithLabelValues("empty").Inc()
		return 0, nil, nil
	}
	lag := claimLag(rows, r.cfg.Lease)
	r.cfg.Metrics.Claims.WithLabelValues("claimed").Inc()
	published, failed, err := r.publish(ctx, rows, r.cfg.RelayID)
	if failed {
		r.setLag(0) // a failing broker is not a reason to hold the writers back
	} else {
		r.setLag(lag)
	}
	return len(rows), published, err
}

// publish publishes claimed rows, leased to relayID, and defers the failures. It returns the ids
// the broker accepted, still to be marked, and whether any publication failed.
func (r *Relay) publish(ctx context.Context, rows []*driver.OutboxRow, relayID string) ([]int64, bool, error) {
	var published []int64
	byTransport := map[string][]*driver.OutboxRow{}
	for _, row := range rows {
		byTransport[row.Transport] = append(byTransport[row.Transport], row)
	}
	var failures []*driver.OutboxFailure
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Publishing must finish within the lease, or another relay may take the messages over.
	pubCtx, cancel := context.WithTimeout(ctx, r.cfg.Lease*3/4)
	defer cancel()
	for transport, msgs := range byTransport {
		wg.Add(1)
		go func() {
			defer wg.Done()
			publisher := r.publishers[transport]
			maxAttempts := r.cfg.MaxAttempts
			if l, ok := publisher.(AttemptLimiter); ok && l.MaxAttempts() > 0 {
				maxAttempts = l.MaxAttempts()
			}
			// A packed row's messages are published one by one; the row's outcome is theirs.
			parts, owner, bad := unpack(msgs)
			started := time.Now()
			var partErrs []error
			if len(parts) > 0 {
				partErrs = publisher.Publish(pubCtx, parts)
				r.tracePublished(pubCtx, started, transport, parts, partErrs)
			}
			errs := rowErrors(len(msgs), owner, partErrs, bad)
			now := time.Now()
			var ok []*driver.OutboxRow
			mu.Lock()
			defer mu.Unlock()
			for i, msg := range msgs {
				err := errs[i]
				if err == nil {
					published = append(published, msg.ID)
					continue
				}
				if errors.Is(err, ErrNotSent) {
					failures = append(failures, &driver.OutboxFailure{ID: msg.ID, Error: err.Error(), Unattempted: true})
					continue
				}
				r.cfg.Metrics.PublishFailures.WithLabelValues(transport).Inc()
				var permanent *PermanentError
				giveUp := errors.As(err, &permanent) || (maxAttempts > 0 && msg.Attempts >= maxAttempts)
				failures = append(failures, &driver.OutboxFailure{ID: msg.ID, Error: err.Error(), RetryDelay: r.backoff(msg.Attempts), GiveUp: giveUp})
			}
			for i, part := range parts {
				if errs[owner[i]] != nil {
					continue
				}
				ok = append(ok, part)
				r.cfg.Metrics.Published.WithLabelValues(transport, string(part.Category)).Inc()
				r.cfg.Metrics.PublishLatency.WithLabelValues(transport).Observe(float64(now.Sub(part.CreatedAt).Microseconds()) / 1000)
			}
			if len(ok) > 0 && r.cfg.OnPublished != nil {
				r.cfg.OnPublished(ok, now)
			}
		}()
	}
	wg.Wait()
	if len(failures) == 0 {
		return published, false, nil
	}
	markCtx, markCancel := recordContext(ctx)
	defer markCancel()
	r.cfg.Logger.Warn("outbox relay: publications failed; deferred", "count", len(failures), "first_error", failures[0].Error)
	if _, err := r.exec.OutboxMarkFailed(markCtx, &driver.OutboxMarkFailedParams{Failures: failures, RelayID: relayID, Now: r.cfg.Now()}); err != nil {
		return published, true, fmt.Errorf("deferring %d failed messages: %w", len(failures), err)
	}
	return published, true, nil
}

// claimLag is how long the oldest of rows had waited when they were claimed, on the database's
// clock: a claimed row is leased until the claim's now plus lease.
func claimLag(rows []*driver.OutboxRow, lease time.Duration) time.Duration {
	var lag time.Duration
	for _, row := range rows {
		if row.LockedUntil == nil {
			continue
		}
		lag = max(lag, row.LockedUntil.Add(-lease).Sub(row.CreatedAt))
	}
	return lag
}

func (r *Relay) setLag(lag time.Duration) {
	r.lag.Store(int64(lag))
	r.progressed()
}

// progressed wakes the writers waiting in Pace: a claim or a hand-off batch ended.
func (r *Relay) progressed() {
	r.claimedMu.Lock()
	close(r.claimed)
	r.claimed = make(chan struct{})
	r.claimedMu.Unlock()
}

// Lag is how far behind the writers the relay is: how long the oldest message of its last claim
// had waited in the outbox when it was claimed, or, if longer, how long the oldest message handed
// over (Handoff) and not yet published has waited. The claims' part is zero after a claim that
// found nothing, one whose publication failed in part (a broker down is not the writers' doing),
// and when the relay is stopped; the hand-off's part, while its last publication failed.
func (r *Relay) Lag() time.Duration { return max(time.Duration(r.lag.Load()), r.handoffLag()) }

// Pace waits while the relay lags more than maxLag (Lag): until one of its claims finds the
// outbox caught up and the hand-off has published what waited longer, for at most limit, or
// until ctx ends. Writers that call it before each write of messages (the orchestration
// runtime's checkpoints, see orchestration.Runtime.PaceEvents) write no faster than the relay
// publishes, so a message waits about maxLag at most instead of a backlog growing while the CPU
// is short. limit bounds the wait: a writer is slowed, never stopped.
func (r *Relay) Pace(ctx context.Context, maxLag, limit time.Duration) {
	if r.Lag() <= maxLag {
		return
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		r.claimedMu.Lock()
		claimed := r.claimed
		r.claimedMu.Unlock()
		if r.Lag() <= maxLag {
			return
		}
		select {
		case <-claimed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// backoff is InitialBackoff × 2^(attempts-1), capped at MaxBackoff.
func (r *Relay) backoff(attempts int) time.Duration {
	d := float64(r.cfg.InitialBackoff) * math.Pow(2, float64(max(attempts-1, 0)))
	return time.Duration(math.Min(d, float64(r.cfg.MaxBackoff)))
}

func (r *Relay) refreshBacklog(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	backlog, err := r.exec.OutboxBacklog(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Warn("outbox relay: reading the backlog failed", "error", err)
		}
		return
	}
	now := time.Now()
	r.cfg.Metrics.SetBacklog(backlog, func(b *driver.OutboxBacklog) float64 { return now.Sub(*b.OldestNew).Seconds() })
}
