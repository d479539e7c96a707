package outbox

import (
	"context"
	"slices"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// maxHandedOff is how many handed-over messages, in batches of BatchSize, may wait for the
// hand-off loop; beyond that they are left to the claims.
const maxHandedOff = 4

// A hand-off batch (claim and publication) that takes longer than handoffSlow means the loop,
// which publishes one batch at a time, falls behind the writers: it then stands aside for
// handoffRest and the claims, which run in parallel (Workers), publish everything meanwhile.
const (
	handoffSlow = 25 * time.Millisecond
	handoffRest = time.Second
)

// Handoff gives the relay the ids of outbox messages whose transaction has just committed, so
// that it publishes them at once instead of at its next claim: no wait for a poll, for older
// transactions to end (the horizon) or for a claim reading the outbox. The writers that hand
// their messages over (an execution's checkpoints, see orchestration.Runtime.HandOffEvents) must
// write each key's messages under a lock all of that key's writers take, so that their commit
// order is their id order.
//
// It never blocks and never loses a message: a message the relay does not take this way (it is
// stopped, too many wait, another relay claimed it, an earlier message of its key is not
// published yet, or its transport is not the relay's) stays in the outbox for the claims, and the
// relay is woken to claim. Messages taken this way keep their key's order: they are leased to the
// relay's hand-off loop, which publishes batch after batch, and a message whose key has an
// unpublished message before it that the loop does not hold is left to the claims, which publish
// a key's messages one after the other (driver.OutboxClaimWrittenParams). A relay that dies
// holding them loses them to the claims when their lease ends.
func (r *Relay) Handoff(ids []int64) {
	if len(ids) == 0 {
		return
	}
	r.handoffMu.Lock()
	taken := r.handoffOn && len(r.handedOff)+len(ids) <= maxHandedOff*r.cfg.BatchSize &&
		time.Now().UnixNano() >= r.handoffPausedUntil.Load()
	if taken {
		r.handedOff = append(r.handedOff, ids...)
	}
	r.handoffMu.Unlock()
	if !taken {
		r.Kick()
		return
	}
	select {
	case r.handoffSignal <- struct{}{}:
	default:
	}
}

// handoffID is the lease holder of the messages the hand-off loop publishes: not RelayID, whose
// claims run at the same time and would otherwise count as the loop's.
func (r *Relay) handoffID() string { return r.cfg.RelayID + "/handoff" }

// takeHandedOff returns up to BatchSize of the ids handed over, oldest first. They count as
// handed over (handoffBelow) until claimed.
func (r *Relay) takeHandedOff() []int64 {
	r.handoffMu.Lock()
	defer r.handoffMu.Unlock()
	n := min(len(r.handedOff), r.cfg.BatchSize)
	ids := make([]int64, n)
	copy(ids, r.handedOff)
	r.handedOff = r.handedOff[n:]
	if len(r.handedOff) == 0 {
		r.handedOff = nil
	}
	r.claiming = 0
	if n > 0 {
		r.claiming = slices.Min(ids)
	}
	return ids
}

// claimed records that the ids last taken were claimed (or left to the claims).
func (r *Relay) claimedHandedOff() {
	r.handoffMu.Lock()
	r.claiming = 0
	r.handoffMu.Unlock()
}

// handoffBelow is the smallest id handed over and not claimed yet, 0 when there is none: the
// relay's claims take only messages below it (driver.OutboxClaimParams.Below), so that they do
// not take what the hand-off is about to, which would leave the rest of those keys waiting
// behind them. Messages of other writers above it wait for the hand-off to move past them, a
// few milliseconds while it keeps up.
func (r *Relay) handoffBelow() int64 {
	r.handoffMu.Lock()
	defer r.handoffMu.Unlock()
	below := r.claiming
	for _, id := range r.handedOff {
		if below == 0 || id < below {
			below = id
		}
	}
	return below
}

// setHandoff turns the hand-off on or off; off, what waits is left to the claims.
func (r *Relay) setHandoff(on bool) {
	r.handoffMu.Lock()
	r.handoffOn = on
	left := len(r.handedOff) > 0
	if !on {
		r.handedOff, r.claiming = nil, 0
	}
	r.handoffMu.Unlock()
	if left && !on {
		r.Kick()
	}
}

// handoffLoop publishes what is handed over, one batch at a time: a key's messages of one batch
// are published before those of the next. It marks what it published with its next claim, or
// after ActiveWindow without one.
func (r *Relay) handoffLoop(ctx context.Context) {
	var published []int64
	flush := func() {
		if err := r.markPublished(ctx, published); err != nil {
			r.cfg.Logger.Warn("outbox relay: marking handed-over messages failed", "error", err)
		}
		published = nil
	}
	defer flush()
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	pause := func(d time.Duration) time.Time {
		until := time.Now().Add(d)
		r.handoffPausedUntil.Store(until.UnixNano())
		return until
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-idle.C:
			flush()
			continue
		case <-r.handoffSignal:
		}
		for {
			ids := r.takeHandedOff()
			if len(ids) == 0 {
				break
			}
			if time.Now().UnixNano() < r.handoffPausedUntil.Load() {
				r.claimedHandedOff()
				r.Kick() // the claims take them
				continue
			}
			started := time.Now()
			// Not cut short by a stop: the claim carries the marks of what was published.
			claimCtx, cancel := recordContext(ctx)
			rows, err := r.exec.OutboxClaimWritten(claimCtx, &driver.OutboxClaimWrittenParams{IDs: ids, Transports: r.transports,
				Lease: r.cfg.Lease, RelayID: r.handoffID(), Now: r.cfg.Now(), Published: published})
			cancel()
			r.claimedHandedOff()
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
			published, failed, err = r.publish(ctx, rows, r.handoffID())
			if err != nil {
				// The failed messages are still leased to the loop: until the lease ends, a later
				// message of their key must not overtake them, so the loop stands aside.
				until := pause(r.cfg.Lease)
				r.cfg.Logger.Warn("outbox relay: recording failed publications failed; handing over paused", "until", until, "error", err)
			} else if failed {
				r.Kick() // the claims retry them when due
			}
			if took := time.Since(started); took > handoffSlow {
				until := pause(handoffRest)
				r.cfg.Metrics.HandoffPauses.Inc()
				r.cfg.Logger.Debug("outbox relay: the hand-off falls behind; the claims take over for a while",
					"took", took, "messages", len(rows), "until", until)
			}
		}
		idle.Reset(r.cfg.ActiveWindow)
	}
}
