// Package batching gathers concurrent requests into batches without a timer: while flushes are in
// flight, new requests queue, and the next flush takes them all. The execution engine's
// checkpoints, acquires and due timers and the client's brokered deliveries group-commit with it.
package batching

import (
	"sync"
)

// Group gathers requests and hands them to flush in batches. Batches form on their own: while
// concurrent flushes are in flight, new requests wait in a queue, and the next flush takes all of
// them (up to max); there is no timer. When a flush slot is free, the request is flushed at once
// in the caller's goroutine, so an idle system pays no hand-off between goroutines. A flush that
// finds requests queued behind it continues on a new goroutine, so its caller returns as soon as
// its own batch is written.
type Group[R any] struct {
	flush      func(batch []R)
	max        int
	concurrent int

	mu       sync.Mutex
	pending  []R
	inflight int
	idle     *sync.Cond // signalled when inflight drops to zero
}

// New returns a group that flushes at most max requests at once, with at most concurrent flushes
// in flight; flush must not keep the batch.
func New[R any](max, concurrent int, flush func(batch []R)) *Group[R] {
	g := &Group[R]{flush: flush, max: max, concurrent: concurrent}
	g.idle = sync.NewCond(&g.mu)
	return g
}

// Submit queues req, and flushes it (with whatever else is queued) in the caller's goroutine when
// a flush slot is free. Otherwise a flush in flight takes it when it finishes.
func (g *Group[R]) Submit(req R) {
	g.mu.Lock()
	g.pending = append(g.pending, req)
	if g.inflight >= g.concurrent {
		g.mu.Unlock()
		return
	}
	g.inflight++
	batch := g.take()
	g.mu.Unlock()
	g.run(batch)
}

// take removes up to max queued requests; g.mu is held.
func (g *Group[R]) take() []R {
	n := min(len(g.pending), g.max)
	batch := make([]R, n)
	copy(batch, g.pending)
	rest := copy(g.pending, g.pending[n:])
	clear(g.pending[rest:])
	g.pending = g.pending[:rest]
	return batch
}

// run flushes batch, then hands what queued up meanwhile to a new goroutine, or gives the flush
// slot back.
func (g *Group[R]) run(batch []R) {
	g.flush(batch)
	g.mu.Lock()
	if len(g.pending) == 0 {
		g.inflight--
		if g.inflight == 0 {
			g.idle.Broadcast()
		}
		g.mu.Unlock()
		return
	}
	next := g.take()
	g.mu.Unlock()
	go g.run(next)
}

// Wait returns when no flush is in flight and nothing is queued.
func (g *Group[R]) Wait() {
	g.mu.Lock()
	for g.inflight > 0 {
		g.idle.Wait()
	}
	g.mu.Unlock()
}
