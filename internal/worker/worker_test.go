package worker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/commandbus/commandbus/driver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testWriter routes worker logs to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// fakeQueue is an in-memory queue: Claim hands out its rows in order and records every request.
type fakeQueue struct {
	mu       sync.Mutex
	rows     []*driver.CommandRow
	requests []int // the max of every Claim call
	claimed  atomic.Int64
	claims   atomic.Int64
}

func (q *fakeQueue) add(n int) []*driver.CommandRow {
	q.mu.Lock()
	defer q.mu.Unlock()
	added := make([]*driver.CommandRow, n)
	for i := range added {
		added[i] = &driver.CommandRow{ID: uuid.New(), Fence: int64(i + 1), Status: driver.CommandStatusRunning}
	}
	q.rows = append(q.rows, added...)
	return added
}

func (q *fakeQueue) claim(ctx context.Context, maxRows int) ([]*driver.CommandRow, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.claims.Add(1)
	q.requests = append(q.requests, maxRows)
	n := min(maxRows, len(q.rows))
	out := q.rows[:n:n]
	q.rows = q.rows[n:]
	q.claimed.Add(int64(n))
	return out, nil
}

func (q *fakeQueue) claimRequests() []int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]int(nil), q.requests...)
}

// completions records what the worker reports.
type completions struct {
	mu   sync.Mutex
	list []*driver.CommandCompletion
}

func (c *completions) add(comp *driver.CommandCompletion) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, comp)
}

func (c *completions) snapshot() []*driver.CommandCompletion {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*driver.CommandCompletion(nil), c.list...)
}

func (c *completions) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.list)
}

type testBundle struct {
	queue       *fakeQueue
	completions *completions
}

// setup returns a config wired to a fake queue and completion recorder; the caller sets Run and
// adjusts the rest before New.
func setup(t *testing.T) (*Config, *testBundle) {
	t.Helper()
	bundle := &testBundle{queue: &fakeQueue{}, completions: &completions{}}
	cfg := &Config{
		Queue:        "test__commands",
		Concurrency:  4,
		FetchBatch:   10,
		Lease:        time.Minute,
		PollInterval: time.Hour, // tests that rely on polling set their own
		Claim:        bundle.queue.claim,
		Complete:     bundle.completions.add,
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	return cfg, bundle
}

func completed(row *driver.CommandRow) *driver.CommandCompletion {
	return &driver.CommandCompletion{ID: row.ID, Fence: row.Fence, Status: driver.CommandStatusCompleted, Event: "COMPLETED"}
}

// start starts a worker and stops it when the test ends, unless the test stopped it already.
func start(t *testing.T, cfg *Config) (*Worker, func(ctx context.Context, grace time.Duration)) {
	t.Helper()
	w := New(*cfg)
	w.Start()
	var once sync.Once
	stop := func(ctx context.Context, grace time.Duration) { once.Do(func() { w.Stop(ctx, grace) }) }
	t.Cleanup(func() {
		// Bounded, so that a failed test whose handlers are still blocked ends instead of hanging.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stop(ctx, 100*time.Millisecond)
	})
	return w, stop
}

// gate blocks handlers until opened; it opens when the test ends at the latest.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 2*time.Millisecond, what)
}

func TestNeverRunsMoreThanConcurrency(t *testing.T) {
	t.Parallel()
	cfg, bundle := setup(t)
	cfg.Concurrency = 3
	cfg.FetchBatch = 10
	const total = 20
	bundle.queue.add(total)

	var running, maxRunning atomic.Int64
	gate := newGate(t)
	cfg.Run = func(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion {
		n := running.Add(1)
		for {
			old := maxRunning.Load()
			if n <= old || maxRunning.CompareAndSwap(old, n) {
				break
			}
		}
		<-gate.ch
		running.Add(-1)
		return completed(row)
	}
	var reported atomic.Int64
	cfg.OnRunning = func(n int) {
		if int64(n) > reported.Load() {
			reported.Store(int64(n))
		}
	}
	w, _ := start(t, cfg)

	eventually(t, "3 handlers running", func() bool { return running.Load() == 3 })
	require.Equal(t, 3, w.Running())
	gate.open()
	eventually(t, "every command completed", func() bool { return bundle.completions.count() == total })

	require.Equal(t, int64(3), maxRunning.Load(), "never more than Concurrency handlers at once")
	require.LessOrEqual(t, reported.Load(), int64(3), "OnRunning never reported more than Concurrency")
	for _, asked := range bundle.queue.claimRequests() {
		require.LessOrEqual(t, asked, 3, "a claim never asks for more than the free slots")
	}
	seen := map[uuid.UUID]bool{}
	for _, c := range bundle.completions.snapshot() {
		require.False(t, seen[c.ID], "command %s reported twice", c.ID)
		seen[c.ID] = true
		require.Equal(t, driver.CommandStatusCompleted, c.Status)
	}
}

func TestClaimsInBatchesUpToFetchBatch(t *testing.T) {
	t.Parallel()
	cfg, bundle := setup(t)
	cfg.Concurrency = 10
	cfg.FetchBatch = 4
	bundle.queue.add(10)
	gate := newGate(t)
	var started atomic.Int64
	cfg.Run = func(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion {
		started.Add(1)
		<-gate.ch
		return completed(row)
	}
	start(t, cfg)

	// No wake and no poll (PollInterval is an hour): full batches alone make the worker claim
	// again until the free slots are filled.
	eventually(t, "10 handlers started", func() bool { return started.Load() == 10 })
	require.Equal(t, []int{4, 4, 2}, bundle.queue.claimRequests())
	gate.open()
	eventually(t, "every command completed", func() bool { return bundle.completions.count() == 10 })
}

func TestWakesOnWakeChannel(t *testing.T) {
	t.Parallel()
	cfg, bundle := setup(t)
	wake := make(chan struct{}, 1)
	cfg.Wake = wake
	cfg.Run = func(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion { return completed(row) }
	start(t, cfg)

	eventually(t, "the start-up claim", func() bool { return bundle.queue.claims.Load() == 1 })
	rows := bundle.queue.add(2)
	wake <- struct{}{}
	eventually(t, "the woken worker runs the new commands", func() bool { return bundle.completions.count() == 2 })
	got := bundle.completions.snapshot()
	require.ElementsMatch(t, []uuid.UUID{rows[0].ID, rows[1].ID}, []uuid.UUID{got[0].ID, got[1].ID})
}

func TestPollsWhenNoWakeArrives(t *testing.T) {
	t.Parallel()
	cfg, bundle := setup(t)
	cfg.PollInterval = 10 * time.Millisecond
	cfg.Run = func(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion { return completed(row) }
	start(t, cfg)

	eventually(t, "polling claims again without a wake", func() bool { return bundle.queue.claims.Load() >= 3 })
	bundle.queue.add(1)
	eventually(t, "a polled command runs", func() bool { return bundle.completions.count() == 1 })
}

func TestStopWaitsForRunningHandlers(t *testing.T) {
	t.Parallel()
	cfg, bundle := setup(t)
	rows := bundle.queue.add(2)
	gate := newGate(t)
	var started atomic.Int64
	var stopped, stoppedEarly, cancelled atomic.Bool
	cfg.Run = func(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion {
		started.Add(1)
		<-gate.ch
		if ctx.Err() != nil {
			cancelled.Store(true)
		}
		if stopped.Load() {
			stoppedEarly.Store(true)
		}
		return completed(row)
	}
	_, stop := start(t, cfg)
	eventually(t, "both handlers running", func() bool { return started.Load() == 2 })

	stopDone := make(chan struct{})
	go func() {
		stop(context.Background(), time.Second)
		stopped.Store(true)
		close(stopDone)
	}()
	require.Never(t, stopped.Load, 50*time.Millisecond, 5*time.Millisecond, "Stop must wait for running handlers")
	gate.open()
	select {
	case <-stopDone:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return after the handlers finished")
	}

	require.False(t, stoppedEarly.Load(), "Stop returned while a handler was running")
	require.False(t, cancelled.Load(), "a handler finishing within Stop's ctx is not cancelled")
	got := bundle.completions.snapshot()
	require.Len(t, got, 2)
	for _, c := range got {
		require.Equal(t, driver.CommandStatusCompleted, c.Status)
		require.False(t, c.Release)
	}
	require.ElementsMatch(t, []uuid.UUID{rows[0].ID, rows[1].ID}, []uuid.UUID{got[0].ID, got[1].ID})
	require.Equal(t, int64(2), bundle.queue.claimed.Load())
}

func TestStopDoesNotClaimAfterwards(t *testing.T) {
	t.Parallel()
	cfg, bundle := setup(t)
	wake := make(chan struct{}, 1)
	cfg.Wake = wake
	cfg.PollInterval = 5 * time.Millisecond
	cfg.Run = func(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion { return completed(row) }
	_, stop := start(t, cfg)
	eventually(t, "the start-up claim", func() bool { return bundle.queue.claims.Load() >= 1 })

	stop(context.Background(), time.Second)
	claims := bundle.queue.claims.Load()
	bundle.queue.add(1)
	wake <- struct{}{}
	require.Never(t, func() bool { return bundle.queue.claims.Load() != claims }, 50*time.Millisecond, 5*time.Millisecond,
		"a stopped worker claims nothing")
	require.Zero(t, bundle.completions.count())
}

func TestStopReleasesHandlerThatIgnoresCancellation(t *testing.T) {
	t.Parallel()
	cfg, bundle := setup(t)
	rows := bundle.queue.add(1)
	gate := newGate(t)
	started := make(chan struct{})
	cfg.Run = func(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion {
		close(started)
		<-gate.ch // ignores ctx
		return completed(row)
	}
	w, stop := start(t, cfg)
	<-started

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Stop's ctx has already ended: cancel the handlers and wait only the grace period
	const grace = 20 * time.Millisecond
	began := time.Now()
	stop(ctx, grace)
	require.GreaterOrEqual(t, time.Since(began), grace, "Stop waits the grace period for the handler")

	got := bundle.completions.snapshot()
	require.Len(t, got, 1, "the stuck handler's command is released at once")
	release := got[0]
	require.Equal(t, rows[0].ID, release.ID)
	require.Equal(t, rows[0].Fence, release.Fence)
	require.True(t, release.Release)
	require.Equal(t, driver.CommandStatusPending, release.Status)
	require.Equal(t, "RELEASED_ON_SHUTDOWN", release.Event)

	// The handler returns after the grace period: its outcome must not be reported, as the
	// command was already given back.
	gate.open()
	eventually(t, "the late handler returned", func() bool { return w.Running() == 0 })
	require.Len(t, bundle.completions.snapshot(), 1, "exactly one outcome per claim")
}

func TestStopReleasesNonTerminalOutcomeOfCancelledHandler(t *testing.T) {
	t.Parallel()
	cfg, bundle := setup(t)
	rows := bundle.queue.add(2)
	var started atomic.Int64
	cfg.Run = func(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion {
		started.Add(1)
		<-ctx.Done()
		if row.ID == rows[0].ID {
			// Cancelled mid-way: the handler asks for a retry, which shutdown turns into a release.
			return &driver.CommandCompletion{ID: row.ID, Fence: row.Fence, Status: driver.CommandStatusPending, RetryDelay: time.Second, Event: "RETRY"}
		}
		return completed(row) // it finished its work anyway: the outcome stands
	}
	_, stop := start(t, cfg)
	eventually(t, "both handlers running", func() bool { return started.Load() == 2 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	stop(ctx, 10*time.Second) // both return within the grace period once cancelled

	byID := map[uuid.UUID]*driver.CommandCompletion{}
	for _, c := range bundle.completions.snapshot() {
		require.NotContains(t, byID, c.ID, "one outcome per claim")
		byID[c.ID] = c
	}
	require.Len(t, byID, 2)
	require.True(t, byID[rows[0].ID].Release)
	require.Equal(t, driver.CommandStatusPending, byID[rows[0].ID].Status)
	require.Equal(t, "RELEASED_ON_SHUTDOWN", byID[rows[0].ID].Event)
	require.False(t, byID[rows[1].ID].Release)
	require.Equal(t, driver.CommandStatusCompleted, byID[rows[1].ID].Status)
}

func TestHandlerContextEndsWithLease(t *testing.T) {
	t.Parallel()
	cfg, bundle := setup(t)
	cfg.Lease = 20 * time.Millisecond
	bundle.queue.add(1)
	var deadline atomic.Value
	cfg.Run = func(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion {
		d, _ := ctx.Deadline() // zero when there is none, which fails the check below
		deadline.Store(d)
		<-ctx.Done()
		return &driver.CommandCompletion{ID: row.ID, Fence: row.Fence, Status: driver.CommandStatusPending, Event: "LEASE_EXPIRED"}
	}
	began := time.Now()
	start(t, cfg)
	eventually(t, "the handler's lease ended", func() bool { return bundle.completions.count() == 1 })
	d := deadline.Load().(time.Time)
	require.WithinDuration(t, began.Add(cfg.Lease), d, time.Second)
	// Outside shutdown, a non-terminal outcome is reported as the handler returned it.
	got := bundle.completions.snapshot()[0]
	require.False(t, got.Release)
	require.Equal(t, "LEASE_EXPIRED", got.Event)
}
