package batching

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGroupBatchesBehindAFlushInFlight: the first request flushes alone in its caller's
// goroutine; the requests that arrive while it is in flight are flushed together after it, on
// another goroutine; every request is flushed exactly once, and wait returns when all are.
func TestGroupBatchesBehindAFlushInFlight(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var mu sync.Mutex
	var batches [][]int
	g := New(100, 1, func(batch []int) {
		mu.Lock()
		batches = append(batches, batch)
		first := len(batches) == 1
		mu.Unlock()
		if first {
			entered <- struct{}{}
			<-release
		}
	})

	firstDone := make(chan struct{})
	go func() { g.Submit(0); close(firstDone) }()
	<-entered // the first flush is in flight and holds the only slot
	const queued = 50
	var wg sync.WaitGroup
	for i := 1; i <= queued; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); g.Submit(i) }()
	}
	wg.Wait() // every later submit returned at once: queued, not flushed
	mu.Lock()
	require.Len(t, batches, 1)
	mu.Unlock()

	close(release)
	<-firstDone
	g.Wait()
	require.Len(t, batches, 2, "the queued requests are flushed as one batch")
	require.Equal(t, []int{0}, batches[0])
	require.ElementsMatch(t, seq(1, queued), batches[1])
}

// TestGroupRespectsMax splits a long queue into batches of at most max.
func TestGroupRespectsMax(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var mu sync.Mutex
	var sizes []int
	var seen []int
	g := New(4, 1, func(batch []int) {
		mu.Lock()
		sizes = append(sizes, len(batch))
		seen = append(seen, batch...)
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			entered <- struct{}{}
			<-release
		}
	})
	go g.Submit(0)
	<-entered
	for i := 1; i <= 10; i++ {
		g.Submit(i)
	}
	close(release)
	g.Wait()
	require.Equal(t, []int{1, 4, 4, 2}, sizes)
	require.ElementsMatch(t, seq(0, 10), seen)
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}
