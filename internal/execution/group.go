package execution

import (
	"sync"
	"sync/atomic"
)

// group gathers requests and hands them to flush in batches. Batches form on their own: while
// flushes are in flight the next requests queue up, and the next flush takes all of them (up to
// max); there is no artificial delay. At most concurrent flushes run at once. Before start and
// after stop, each request is flushed alone in the caller's goroutine.
type group[R any] struct {
	flush func(batch []R)
	max   int

	in      chan R
	sem     chan struct{}
	wg      sync.WaitGroup
	done    chan struct{}
	once    sync.Once
	running atomic.Bool
}

func newGroup[R any](max, concurrent int, flush func(batch []R)) *group[R] {
	return &group[R]{
		flush: flush, max: max,
		in:   make(chan R, max*4),
		sem:  make(chan struct{}, concurrent),
		done: make(chan struct{}),
	}
}

func (g *group[R]) start() {
	g.running.Store(true)
	go g.loop()
}

// submit queues req for the next batch, or flushes it alone when the group is not running.
func (g *group[R]) submit(req R) {
	if !g.running.Load() {
		g.flush([]R{req})
		return
	}
	select {
	case g.in <- req:
	case <-g.done:
		g.flush([]R{req})
	}
}

func (g *group[R]) loop() {
	for {
		var first R
		select {
		case first = <-g.in:
		case <-g.done:
			return
		}
		g.sem <- struct{}{} // wait for a flush slot; requests pile up meanwhile
		batch := []R{first}
	drain:
		for len(batch) < g.max {
			select {
			case req := <-g.in:
				batch = append(batch, req)
			default:
				break drain
			}
		}
		g.wg.Add(1)
		go func() {
			defer func() { <-g.sem; g.wg.Done() }()
			g.flush(batch)
		}()
	}
}

// stop ends the loop, waits for the flushes in flight and flushes what is still queued; later
// requests are flushed alone.
func (g *group[R]) stop() {
	g.running.Store(false)
	g.once.Do(func() { close(g.done) })
	g.wg.Wait()
	for {
		select {
		case req := <-g.in:
			g.flush([]R{req})
		default:
			return
		}
	}
}
