package outbox

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// maxHandedOff is how many handed-over messages, in batches of BatchSize, may wait for one
// hand-off loop; beyond that they are left to the claims.
const maxHandedOff = 4

// A hand-off batch (claim and publication) that takes longer than handoffSlow means its loop,
// which publishes one batch at a time, falls behind the writers: the hand-off then stands aside
// for handoffRest and the claims publish everything meanwhile.
const (
	handoffSlow = 25 * time.Millisecond
	handoffRest = time.Second
)

// handoffShard is one hand-off loop: the messages of the keys that hash to it, published batch
// after batch under a lease holder of its own.
type handoffShard struct {
	holder string
	signal chan struct{}

	mu        sync.Mutex
	on        bool
	handedOff []int64
	claiming  int64 // the smallest id the loop is claiming, 0 when none
}

// handoff is the state of a relay's hand-off (Relay.Handoff).
type handoff struct {
	seed        maphash.Seed
	shards      []*handoffShard
	pausedUntil atomic.Int64 // Unix nanoseconds: when the hand-off takes messages again
}

func newHandoff(relayID string, shards int) *handoff {
	h := &handoff{seed: maphash.MakeSeed()}
	for i := range shards {
		h.shards = append(h.shards, &handoffShard{holder: fmt.Sprintf("%s/handoff-%d", relayID, i), signal: make(chan struct{}, 1)})
	}
	return h
}

// paused reports whether the hand-off stands aside for now (pauseHandoff).
func (h *handoff) paused() bool { return time.Now().UnixNano() < h.pausedUntil.Load() }

// shard returns the loop of key: a key's messages always go to the same one.
func (h *handoff) shard(key string) int {
	if len(h.shards) == 1 {
		return 0
	}
	return int(maphash.String(h.seed, key) % uint64(len(h.shards)))
}

// Handoff gives the relay outbox messages whose transaction has just committed (their ids and
// keys), so that it publishes them at once instead of at its next claim: no wait for a poll, for
// older transactions to end (the horizon) or for a claim reading the outbox. The writers that
// hand their messages over (an execution's checkpoints, see orchestration.Runtime.HandOffOutbox)
// must write each key's messages under a lock all of that key's writers take, so that their
// commit order is their id order.
//
// It never blocks and never loses a message: a message the relay does not take this way (it is
// stopped, too many wait, another relay claimed it, an earlier message of its key is not
// published yet, or its transport is not the relay's) stays in the outbox for the claims, and the
// relay is woken to claim. Messages taken this way keep their key's order: a key's messages go to
// one of Workers hand-off loops, which leases them (driver.OutboxClaimWrittenParams) and
// publishes batch after batch; a message whose key has an unpublished message before it that the
// loop does not hold is left to the claims, which publish a key's messages one after the other.
// A relay that dies holding them loses them to the claims when their lease ends.
func (r *Relay) Handoff(written []driver.WrittenMessage) {
	if len(written) == 0 {
		return
	}
	h := r.handoff
	if h.paused() {
		r.Kick()
		return
	}
	byShard := make([][]int64, len(h.shards))
	for _, m := range written {
		i := h.shard(m.Key)
		byShard[i] = append(byShard[i], m.ID)
	}
	refused := false
	for i, ids := range byShard {
		if len(ids) == 0 {
			continue
		}
		s := h.shards[i]
		s.mu.Lock()
		taken := s.on && len(s.handedOff)+len(ids) <= maxHandedOff*r.cfg.BatchSize
		if taken {
			s.handedOff = append(s.handedOff, ids...)
		}
		s.mu.Unlock()
		if !taken {
			refused = true
			continue
		}
		select {
		case s.signal <- struct{}{}:
		default:
		}
	}
	if refused {
		r.Kick()
	}
}

// take returns up to max of the ids handed over, oldest first. They count as handed over (below)
// until claimed.
func (s *handoffShard) take(max int) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(len(s.handedOff), max)
	ids := make([]int64, n)
	copy(ids, s.handedOff)
	s.handedOff = s.handedOff[n:]
	if len(s.handedOff) == 0 {
		s.handedOff = nil
	}
	s.claiming = 0
	for _, id := range ids {
		if s.claiming == 0 || id < s.claiming {
			s.claiming = id
		}
	}
	return ids
}

// claimed records that the ids last taken were claimed (or left to the claims).
func (s *handoffShard) claimed() {
	s.mu.Lock()
	s.claiming = 0
	s.mu.Unlock()
}

// below is the smallest id handed over to the shard and not claimed yet, 0 when there is none.
func (s *handoffShard) below() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	below := s.claiming
	for _, id := range s.handedOff {
		if below == 0 || id < below {
			below = id
		}
	}
	return below
}

// handoffBelow is the smallest id handed over and not claimed yet, 0 when there is none: the
// relay's claims take only messages below it (driver.OutboxClaimParams.Below), so that they do
// not take what the hand-off is about to, which would leave the rest of those keys waiting
// behind them. Messages of other writers above it wait for the hand-off to move past them, a
// few milliseconds while it keeps up.
func (r *Relay) handoffBelow() int64 {
	var below int64
	for _, s := range r.handoff.shards {
		if b := s.below(); b > 0 && (below == 0 || b < below) {
			below = b
		}
	}
	return below
}

// setHandoff turns the hand-off on or off; off, what waits is left to the claims.
func (r *Relay) setHandoff(on bool) {
	left := false
	for _, s := range r.handoff.shards {
		s.mu.Lock()
		s.on = on
		if !on {
			left = left || len(s.handedOff) > 0
			s.handedOff, s.claiming = nil, 0
		}
		s.mu.Unlock()
	}
	if left {
		r.Kick()
	}
}

// pauseHandoff leaves every message to the claims for d.
func (r *Relay) pauseHandoff(d time.Duration) time.Time {
	until := time.Now().Add(d)
	r.handoff.pausedUntil.Store(until.UnixNano())
	return until
}

// handoffLoop publishes what is handed over to shard s, one batch at a time: a key's messages of
// one batch are published before those of the next. It marks what it published with its next
// claim, or after ActiveWindow without one.
func (r *Relay) handoffLoop(ctx context.Context, s *handoffShard) {
	var published []int64
	flush := r.marker(ctx, &published)
	defer flush()
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-idle.C:
			flush()
			continue
		case <-s.signal:
		}
		for {
			ids := s.take(r.cfg.BatchSize)
			if len(ids) == 0 {
				break
			}
			if r.handoff.paused() {
				s.claimed()
				r.Kick() // the claims take them
				continue
			}
			started := time.Now()
			// Not cut short by a stop: the claim carries the marks of what was published.
			claimCtx, cancel := recordContext(ctx)
			rows, err := r.exec.OutboxClaimWritten(claimCtx, &driver.OutboxClaimWrittenParams{IDs: ids, Transports: r.transports,
				Lease: r.cfg.Lease, RelayID: s.holder, Now: r.cfg.Now(), Published: published})
			cancel()
			s.claimed()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				r.cfg.Logger.Warn("outbox relay: claiming handed-over messages failed; the claims take them", "count", len(ids), "error", err)
				r.Kick()
				continue
			}
			published = nil
			r.cfg.Metrics.HandedOff.WithLabelValues("taken").Add(float64(len(rows)))
			if len(rows) < len(ids) {
				r.cfg.Metrics.HandedOff.WithLabelValues("left").Add(float64(len(ids) - len(rows)))
				r.Kick()
			}
			if len(rows) == 0 {
				continue
			}
			var failed bool
			published, failed, err = r.publish(ctx, rows, s.holder)
			if err != nil {
				// The failed messages are still leased to the loop: until the lease ends, a later
				// message of their key must not overtake them, so the hand-off stands aside.
				until := r.pauseHandoff(r.cfg.Lease)
				r.cfg.Logger.Warn("outbox relay: recording failed publications failed; handing over paused", "until", until, "error", err)
			} else if failed {
				r.Kick() // the claims retry them when due
			}
			if took := time.Since(started); took > handoffSlow {
				until := r.pauseHandoff(handoffRest)
				r.cfg.Metrics.HandoffPauses.Inc()
				r.cfg.Logger.Debug("outbox relay: the hand-off falls behind; the claims take over for a while",
					"took", took, "messages", len(rows), "until", until)
			}
		}
		idle.Reset(r.cfg.ActiveWindow)
	}
}
