package outbox

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// maxHandedOff is how many handed-over messages, in batches of BatchSize, may wait for one
// hand-off loop; beyond that they are left to the claims.
const maxHandedOff = 4

// handoffShard is one hand-off loop: the messages of the keys that hash to it, published batch
// after batch, from memory, and marked published by a marker of its own.
type handoffShard struct {
	signal chan struct{} // something to publish
	marks  chan struct{} // something to mark
	markMu sync.Mutex    // one mark at a time

	mu sync.Mutex
	on bool
	// queue is what was taken and waits to be published, in the order handed over; sending is
	// the batch being published; marking what the broker accepted and is not marked yet.
	queue   []*driver.OutboxRow
	sending []*driver.OutboxRow
	// queuedAt are when the messages of queue were handed over; sendingSince when the oldest of
	// sending was.
	queuedAt     []time.Time
	sendingSince time.Time
	marking      []*driver.OutboxRow
	// failed is whether the last batch's publication failed in part: until one succeeds, what
	// waits in the loop waits for the broker, not for the writers to slow down (waiting).
	failed bool
	// chains are the keys with messages in the loop: a key's latest message taken, and the first
	// of its messages that went to the claims instead (after a failed publication), 0 if none.
	chains map[string]*chain
	swept  time.Time // when chains were last swept
}

// chain is what a hand-off loop knows of one key's messages in it.
type chain struct {
	last       int64
	brokenFrom int64
	// marked is when last was marked published, zero before. The chain is kept for chainKept
	// after that: a message written before the mark committed names last as its previous one.
	marked time.Time
}

// chainKept is how long a loop remembers a key after marking its latest message published.
const chainKept = 10 * time.Second

// handoff is the state of a relay's hand-off (Relay.Handoff).
type handoff struct {
	// holder is the lease holder of the messages written for the hand-off.
	holder string
	seed   maphash.Seed
	shards []*handoffShard

	// releasing are messages leased to holder that the hand-off leaves to the claims: their
	// lease is ended by the release loop (wake it with released).
	mu        sync.Mutex
	releasing []int64
	released  chan struct{}
}

func newHandoff(relayID string, shards int) *handoff {
	h := &handoff{holder: relayID + "/handoff", seed: maphash.MakeSeed(), released: make(chan struct{}, 1)}
	for range shards {
		h.shards = append(h.shards, &handoffShard{signal: make(chan struct{}, 1), marks: make(chan struct{}, 1), chains: map[string]*chain{}})
	}
	return h
}

// OutboxHandoff is what writers in this process need to hand their outbox messages to the relay
// (see Handoff): its lease holder, its Lease, and Handoff itself.
func (r *Relay) OutboxHandoff() *driver.OutboxHandoff {
	return &driver.OutboxHandoff{Holder: r.handoff.holder, Lease: r.cfg.Lease, Written: r.Handoff}
}

// leave ends the hand-off's lease of ids, so that the claims take them now (by the release loop,
// not to hold up the caller, or at once while the relay is stopped), and wakes the claims.
func (r *Relay) leave(ids []int64) {
	if len(ids) == 0 {
		return
	}
	r.cfg.Metrics.HandedOff.WithLabelValues("left").Add(float64(len(ids)))
	h := r.handoff
	h.mu.Lock()
	h.releasing = append(h.releasing, ids...)
	h.mu.Unlock()
	if !r.base.Running() { // no release loop: release them now
		r.release(context.Background())
		return
	}
	select {
	case h.released <- struct{}{}:
	default:
	}
}

// releaseLoop ends the lease of what the hand-off leaves to the claims, until ctx ends and
// nothing is left to release.
func (r *Relay) releaseLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			r.release(ctx)
			return
		case <-r.handoff.released:
			r.release(ctx)
		}
	}
}

func (r *Relay) release(ctx context.Context) {
	h := r.handoff
	h.mu.Lock()
	ids := h.releasing
	h.releasing = nil
	h.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	failures := make([]*driver.OutboxFailure, len(ids))
	for i, id := range ids {
		failures[i] = &driver.OutboxFailure{ID: id, Unattempted: true}
	}
	recordCtx, cancel := recordContext(ctx)
	defer cancel()
	if _, err := r.exec.OutboxMarkFailed(recordCtx, &driver.OutboxMarkFailedParams{Failures: failures, RelayID: h.holder, Now: r.cfg.Now()}); err != nil {
		r.cfg.Logger.Warn("outbox relay: releasing messages left to the claims failed; they wait for their lease to end",
			"count", len(ids), "error", err)
	}
	r.Kick()
}

// shard returns the loop of key: a key's messages always go to the same one.
func (h *handoff) shard(key string) int {
	if len(h.shards) == 1 {
		return 0
	}
	return int(maphash.String(h.seed, key) % uint64(len(h.shards)))
}

// Handoff gives the relay outbox messages whose transaction has just committed, as their writer
// reports them (driver.WrittenMessage), so that it publishes them at once, from memory: no claim,
// no wait for a poll or for older transactions to end (the horizon), no read of the outbox. The
// relay then marks them published. Writers hand their messages over in commit order (an
// execution's checkpoints, see orchestration.Runtime.HandOffOutbox).
//
// It never blocks and never loses a message: a message the relay does not take stays in the
// outbox for the claims, and the relay is woken to claim. It takes a message only when publishing
// it now keeps its key's order: its key had no unpublished message when it was written
// (WrittenMessage.Previous is 0), or the one before it is in the same hand-off loop and did not
// fail. A key's messages go to one of Workers loops, which publishes batch after batch. It leaves
// to the claims a message that is delayed, of a transport the relay has no publisher for, whose
// stored form the writer does not know, that waits behind a message the loop does not hold, or
// that finds its loop full or the relay stopped. A failed publication leaves the message, and the
// messages of its key taken after it, to the claims, which retry it with their backoff. A relay
// that dies before marking what it published publishes nothing twice in order, but the claims
// publish it again: consumers deduplicate by message id, as after any relay crash.
func (r *Relay) Handoff(written []driver.WrittenMessage) {
	if len(written) == 0 {
		return
	}
	h := r.handoff
	handed := make([][]driver.WrittenMessage, len(h.shards))
	var left []int64
	for _, w := range written {
		if !r.canHandOff(w) {
			left = append(left, w.ID)
			continue
		}
		i := h.shard(w.Key)
		handed[i] = append(handed[i], w)
	}
	taken := 0
	for i, msgs := range handed {
		if len(msgs) == 0 {
			continue
		}
		var n int
		n, left = h.shards[i].take(msgs, maxHandedOff*r.cfg.BatchSize, left)
		taken += n
		if n > 0 {
			select {
			case h.shards[i].signal <- struct{}{}:
			default:
			}
		}
	}
	if taken > 0 {
		r.cfg.Metrics.HandedOff.WithLabelValues("taken").Add(float64(taken))
	}
	r.leave(left)
}

// canHandOff reports whether w may be published from memory by this relay, whatever its key.
func (r *Relay) canHandOff(w driver.WrittenMessage) bool {
	m := w.Message
	if m == nil || m.NextAt != nil || m.Delay > 0 {
		return false
	}
	_, ok := r.publishers[m.Transport]
	return ok
}

// take queues the messages msgs (of this loop, in the order written) that keep their key's order,
// up to max waiting, and returns how many it took, and left with the ids of the others appended.
// Of one key's messages handed over together, each follows the one before it.
func (s *handoffShard) take(msgs []driver.WrittenMessage, max int, left []int64) (int, []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	taken := 0
	now := time.Now()
	for i, w := range msgs {
		if !s.on || len(s.queue) >= max {
			// What follows of a key may not overtake what is left: the rest goes to the claims.
			for _, l := range msgs[i:] {
				left = append(left, l.ID)
			}
			break
		}
		previous := w.Previous
		c := s.chains[w.Key]
		if w.Key != "" && c != nil && c.last > previous && c.last < w.ID {
			// Written by the same statement, after it. (Were previous the claims', c.last, written
			// after it, would not have been taken: its previous would have been previous.)
			previous = c.last
		}
		switch {
		case w.Key == "":
		case previous == 0:
			s.chains[w.Key] = &chain{last: w.ID}
		case c != nil && c.last == previous && c.brokenFrom == 0:
			c.last, c.marked = w.ID, time.Time{}
		default:
			left = append(left, w.ID) // an earlier message of its key is the claims'
			continue
		}
		m := w.Message
		s.queue = append(s.queue, &driver.OutboxRow{ID: w.ID, Category: m.Category, Transport: m.Transport, Topic: m.Topic,
			Key: m.Key, Type: m.Type, MessageID: m.MessageID, Payload: m.Payload, Headers: m.Headers,
			Status: driver.OutboxStatusNew, CreatedAt: w.CreatedAt, Packed: m.Packed})
		s.queuedAt = append(s.queuedAt, now)
		taken++
	}
	return taken, left
}

// next moves up to max queued messages to sending and returns them, less those that follow a
// message of their key that went to the claims (which it returns as left).
func (s *handoffShard) next(max int) (send, left []*driver.OutboxRow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(len(s.queue), max)
	batch := s.queue[:n:n]
	if n > 0 {
		s.sendingSince = s.queuedAt[0]
	}
	s.queue, s.queuedAt = s.queue[n:], s.queuedAt[n:]
	if len(s.queue) == 0 {
		s.queue, s.queuedAt = nil, nil
	}
	for _, row := range batch {
		if c := s.chains[row.Key]; row.Key != "" && c != nil && c.brokenFrom != 0 && c.brokenFrom < row.ID {
			left = append(left, row)
			s.forget(row)
			continue
		}
		send = append(send, row)
	}
	s.sending = send
	return send, left
}

// sent records the outcome of the batch being sent: the published ones wait to be marked; the
// others went to the claims, with the messages of their keys taken after them. It reports
// whether any failed.
func (s *handoffShard) sent(published []int64) (failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := make(map[int64]bool, len(published))
	for _, id := range published {
		ok[id] = true
	}
	for _, row := range s.sending {
		if ok[row.ID] {
			s.marking = append(s.marking, row)
			continue
		}
		failed = true
		if c := s.chains[row.Key]; row.Key != "" && c != nil && (c.brokenFrom == 0 || row.ID < c.brokenFrom) {
			c.brokenFrom = row.ID
		}
		s.forget(row)
	}
	s.sending, s.sendingSince, s.failed = nil, time.Time{}, failed
	return failed
}

// forget drops row's key from chains when row is its latest message in the loop: the key's next
// message finds none unpublished before it, or one the loop does not hold.
func (s *handoffShard) forget(row *driver.OutboxRow) {
	if c := s.chains[row.Key]; c != nil && c.last == row.ID {
		delete(s.chains, row.Key)
	}
}

// toMark returns what waits to be marked.
func (s *handoffShard) toMark() []*driver.OutboxRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows := s.marking
	return rows
}

// marked records that rows, the first of toMark's, were marked at now, and forgets the keys whose
// latest message was marked more than chainKept before.
func (s *handoffShard) marked(rows []*driver.OutboxRow, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marking = s.marking[len(rows):]
	if len(s.marking) == 0 {
		s.marking = nil
	}
	for _, row := range rows {
		if c := s.chains[row.Key]; c != nil && c.last == row.ID {
			c.marked = now
		}
	}
	if now.Sub(s.swept) < chainKept {
		return
	}
	s.swept = now
	for key, c := range s.chains {
		if !c.marked.IsZero() && now.Sub(c.marked) > chainKept {
			delete(s.chains, key)
		}
	}
}

// waiting is how long the oldest message handed to the loop and not yet published has waited;
// zero while its publications fail (a broker down is not the writers' doing: Pace must not hold
// them back for it).
func (s *handoffShard) waiting(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.failed:
		return 0
	case len(s.sending) > 0:
		return now.Sub(s.sendingSince)
	case len(s.queue) > 0:
		return now.Sub(s.queuedAt[0])
	}
	return 0
}

// handoffLag is how long the oldest message handed over and not yet published has waited.
func (r *Relay) handoffLag() time.Duration {
	now := time.Now()
	var lag time.Duration
	for _, s := range r.handoff.shards {
		lag = max(lag, s.waiting(now))
	}
	return lag
}

// below is the smallest id taken by the loop and not yet marked, 0 when there is none.
func (s *handoffShard) below() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var below int64
	low := func(id int64) {
		if below == 0 || id < below {
			below = id
		}
	}
	for _, row := range s.queue {
		low(row.ID)
	}
	for _, row := range s.sending {
		low(row.ID)
	}
	for _, row := range s.marking {
		low(row.ID)
	}
	return below
}

// handoffBelow is the smallest id handed over and not yet published and marked, 0 when there is
// none: the relay's claims take only messages below it (driver.OutboxClaimParams.Below), so that
// they do not publish again what the hand-off is publishing, or take a key's message the
// hand-off's next ones would have to wait for. Messages of other writers above it wait for the
// hand-off to move past them, a few milliseconds while it keeps up.
func (r *Relay) handoffBelow() int64 {
	var below int64
	for _, s := range r.handoff.shards {
		if b := s.below(); b > 0 && (below == 0 || b < below) {
			below = b
		}
	}
	return below
}

// setHandoff turns the hand-off on or off; off, what waits is left to the claims, and the loops
// forget their keys (a key's next message, after a restart, follows none of theirs).
func (r *Relay) setHandoff(on bool) {
	var left []int64
	for _, s := range r.handoff.shards {
		s.mu.Lock()
		s.on = on
		if !on {
			for _, row := range s.queue {
				left = append(left, row.ID)
			}
			s.queue, s.queuedAt = nil, nil
			s.chains = map[string]*chain{}
		}
		s.mu.Unlock()
	}
	r.leave(left)
}

// handoffLoop publishes what is handed over to shard s, one batch at a time: a key's messages of
// one batch are published before those of the next. Its marker marks them meanwhile.
func (r *Relay) handoffLoop(ctx context.Context, s *handoffShard) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.signal:
		}
		for {
			send, left := s.next(r.cfg.BatchSize)
			r.leave(ids(left))
			if len(send) == 0 {
				if len(left) == 0 {
					break
				}
				continue
			}
			// A failure is recorded as the claims' are (the messages are leased to the
			// hand-off's holder): the claims retry it when due.
			published, _, err := r.publish(ctx, send, r.handoff.holder)
			if err != nil {
				r.cfg.Logger.Warn("outbox relay: recording failed hand-off publications failed; they wait for their lease to end", "error", err)
			}
			if s.sent(published) {
				r.Kick() // the claims retry what failed when due
			}
			r.progressed() // pacing writers may go on
			select {
			case s.marks <- struct{}{}:
			default:
			}
		}
	}
}

// ids returns the ids of rows.
func ids(rows []*driver.OutboxRow) []int64 {
	out := make([]int64, len(rows))
	for i, row := range rows {
		out[i] = row.ID
	}
	return out
}

// handoffMarker marks published what shard s's loop published, a batch at a time, until ctx ends
// and nothing is left to mark. Until marked, the messages hold the claims back (handoffBelow).
func (r *Relay) handoffMarker(ctx context.Context, s *handoffShard) {
	for {
		select {
		case <-ctx.Done():
			r.markHandedOff(ctx, s)
			return
		case <-s.marks:
			r.markHandedOff(ctx, s)
		}
	}
}

// markHandedOff marks what shard s published and has not marked yet.
func (r *Relay) markHandedOff(ctx context.Context, s *handoffShard) {
	s.markMu.Lock()
	defer s.markMu.Unlock()
	rows := s.toMark()
	if len(rows) == 0 {
		return
	}
	if err := r.markPublished(ctx, ids(rows)); err != nil {
		// They were published; the claims publish them again once the hand-off moves past them.
		r.cfg.Logger.Warn("outbox relay: marking handed-over messages failed", "error", err)
	}
	s.marked(rows, time.Now())
}
