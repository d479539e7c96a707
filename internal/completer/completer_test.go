package completer

import (
	"context"
	"errors"
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

// testWriter routes completer logs to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// fakeExecutor implements only CommandCompleteMany; any other method panics through the nil
// embedded interface, which would show the completer calling something it should not.
type fakeExecutor struct {
	driver.Executor

	mu      sync.Mutex
	batches [][]*driver.CommandCompletion // every call, failed ones included
	// failures is how many calls fail before the first success.
	failures int
	// rejectFence makes completions with this fence lose the fence check.
	rejectFence int64
	// gate, when set, blocks every call until it is closed.
	gate     chan struct{}
	inFlight atomic.Int64
	maxInFl  atomic.Int64
}

var errDatabaseDown = errors.New("database down")

func (f *fakeExecutor) CommandCompleteMany(ctx context.Context, params *driver.CommandCompleteManyParams) ([]uuid.UUID, error) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		old := f.maxInFl.Load()
		if n <= old || f.maxInFl.CompareAndSwap(old, n) {
			break
		}
	}
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, append([]*driver.CommandCompletion(nil), params.Completions...))
	if f.failures > 0 {
		f.failures--
		return nil, errDatabaseDown
	}
	var ids []uuid.UUID
	for _, c := range params.Completions {
		if f.rejectFence == 0 || c.Fence != f.rejectFence {
			ids = append(ids, c.ID)
		}
	}
	return ids, nil
}

func (f *fakeExecutor) calls() [][]*driver.CommandCompletion {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]*driver.CommandCompletion(nil), f.batches...)
}

// flushed records what OnFlushed receives.
type flushed struct {
	mu      sync.Mutex
	applied []map[uuid.UUID]bool
	batches [][]*driver.CommandCompletion
	at      []time.Time
}

func (f *flushed) record(applied map[uuid.UUID]bool, batch []*driver.CommandCompletion) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, applied)
	f.batches = append(f.batches, batch)
	f.at = append(f.at, time.Now())
}

func (f *flushed) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.batches)
}

func (f *flushed) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]int, len(f.batches))
	for i, b := range f.batches {
		out[i] = len(b)
	}
	return out
}

func (f *flushed) ids() []uuid.UUID {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []uuid.UUID
	for _, b := range f.batches {
		for _, c := range b {
			out = append(out, c.ID)
		}
	}
	return out
}

type testBundle struct {
	exec    *fakeExecutor
	flushed *flushed
}

func setup(t *testing.T, cfg Config) (*Completer, *testBundle) {
	t.Helper()
	bundle := &testBundle{exec: &fakeExecutor{}, flushed: &flushed{}}
	if cfg.Exec == nil {
		cfg.Exec = bundle.exec
	} else {
		bundle.exec = cfg.Exec.(*fakeExecutor)
	}
	cfg.OnFlushed = bundle.flushed.record
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	c := New(cfg)
	c.Start()
	return c, bundle
}

func newCompletions(n int, fence int64) []*driver.CommandCompletion {
	out := make([]*driver.CommandCompletion, n)
	for i := range out {
		out[i] = &driver.CommandCompletion{ID: uuid.New(), Fence: fence, Status: driver.CommandStatusCompleted, Event: "COMPLETED"}
	}
	return out
}

func idsOf(cs []*driver.CommandCompletion) []uuid.UUID {
	out := make([]uuid.UUID, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 2*time.Millisecond, what)
}

func TestBatchesUpToMaxBatchAndStopFlushesTheRest(t *testing.T) {
	t.Parallel()
	// MaxWait is long, so only a full batch (or Stop) can flush.
	c, bundle := setup(t, Config{MaxBatch: 3, MaxWait: time.Hour})
	all := newCompletions(7, 1)
	for _, comp := range all {
		c.Add(comp)
	}
	eventually(t, "two full batches flushed", func() bool { return bundle.flushed.count() == 2 })
	require.Equal(t, []int{3, 3}, bundle.flushed.sizes())

	c.Stop()
	require.Equal(t, []int{3, 3, 1}, bundle.flushed.sizes(), "Stop flushes the partial batch before returning")
	require.ElementsMatch(t, idsOf(all), bundle.flushed.ids(), "every outcome written exactly once")
	for _, b := range bundle.exec.calls() {
		require.LessOrEqual(t, len(b), 3)
	}
}

func TestFlushesAfterMaxWait(t *testing.T) {
	t.Parallel()
	const maxWait = 30 * time.Millisecond
	c, bundle := setup(t, Config{MaxBatch: 100, MaxWait: maxWait})
	defer c.Stop()

	added := time.Now()
	first := newCompletions(1, 1)
	c.Add(first[0])
	eventually(t, "a partial batch flushed after MaxWait", func() bool { return bundle.flushed.count() == 1 })
	bundle.flushed.mu.Lock()
	waited := bundle.flushed.at[0].Sub(added)
	bundle.flushed.mu.Unlock()
	require.GreaterOrEqual(t, waited, maxWait, "the first outcome waits MaxWait for company")
	require.Equal(t, []int{1}, bundle.flushed.sizes())

	// The next outcome starts a new batch with its own wait.
	c.Add(newCompletions(1, 1)[0])
	eventually(t, "the second batch flushed", func() bool { return bundle.flushed.count() == 2 })
}

func TestOutcomesAddedTogetherShareABatch(t *testing.T) {
	t.Parallel()
	c, bundle := setup(t, Config{MaxBatch: 100, MaxWait: 500 * time.Millisecond})
	all := newCompletions(5, 1)
	for _, comp := range all {
		c.Add(comp)
	}
	eventually(t, "the batch flushed", func() bool { return bundle.flushed.count() == 1 })
	c.Stop()
	require.Equal(t, []int{5}, bundle.flushed.sizes())
	require.Len(t, bundle.exec.calls(), 1, "one statement for the batch")
}

func TestOnFlushedReceivesAppliedIDs(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{rejectFence: 2}
	c, bundle := setup(t, Config{Exec: exec, MaxBatch: 4, MaxWait: time.Hour})
	won := newCompletions(2, 1)
	lost := newCompletions(2, 2) // their fence moved on: the database rejects them
	for _, comp := range []*driver.CommandCompletion{won[0], lost[0], won[1], lost[1]} {
		c.Add(comp)
	}
	c.Stop()

	require.Equal(t, 1, bundle.flushed.count())
	applied := bundle.flushed.applied[0]
	require.Equal(t, map[uuid.UUID]bool{won[0].ID: true, won[1].ID: true}, applied)
	require.ElementsMatch(t, append(idsOf(won), idsOf(lost)...), idsOf(bundle.flushed.batches[0]),
		"OnFlushed sees the whole batch, so it can count the rejected outcomes")
}

func TestRetriesFailingFlushThenSucceeds(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{failures: 2}
	c, bundle := setup(t, Config{Exec: exec, MaxBatch: 10, MaxWait: time.Millisecond})
	all := newCompletions(3, 1)
	for _, comp := range all {
		c.Add(comp)
	}
	c.Stop() // returns once the batch is written, retries included

	calls := exec.calls()
	require.Len(t, calls, 3, "two failures, then success")
	for _, call := range calls {
		require.ElementsMatch(t, idsOf(call), bundle.flushed.ids(), "every attempt writes the same batch")
	}
	require.Equal(t, 1, bundle.flushed.count(), "OnFlushed is told once, after the successful attempt")
	require.ElementsMatch(t, idsOf(all), bundle.flushed.ids())
	require.Len(t, bundle.flushed.applied[0], 3)
}

func TestGivesUpAfterRepeatedFailures(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{failures: 1000}
	c, bundle := setup(t, Config{Exec: exec, MaxBatch: 10, MaxWait: time.Millisecond})
	c.Add(newCompletions(1, 1)[0])
	c.Stop() // the outcome is dropped: its lease expires and the command is delivered again

	require.Len(t, exec.calls(), 6, "a bounded number of attempts")
	require.Zero(t, bundle.flushed.count(), "OnFlushed is not told about a batch that was not written")
}

func TestBoundsConcurrentFlushes(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{gate: make(chan struct{})}
	c, bundle := setup(t, Config{Exec: exec, MaxBatch: 1, MaxWait: time.Hour, MaxConcurrentFlushes: 2})
	all := newCompletions(6, 1)
	for _, comp := range all {
		c.Add(comp)
	}
	eventually(t, "two flushes in flight", func() bool { return exec.inFlight.Load() == 2 })
	require.Never(t, func() bool { return exec.inFlight.Load() > 2 }, 30*time.Millisecond, 2*time.Millisecond)
	close(exec.gate)
	c.Stop()

	require.Equal(t, int64(2), exec.maxInFl.Load(), "never more than MaxConcurrentFlushes statements in flight")
	require.ElementsMatch(t, idsOf(all), bundle.flushed.ids())
}

func TestNowIsPassedToTheDriver(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	exec := &nowRecorder{}
	c := New(Config{Exec: exec, Now: func() *time.Time { return &at }, MaxWait: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	c.Start()
	c.Add(newCompletions(1, 1)[0])
	c.Stop()
	require.Equal(t, []*time.Time{&at}, exec.nows())
}

type nowRecorder struct {
	driver.Executor
	mu  sync.Mutex
	got []*time.Time
}

func (r *nowRecorder) CommandCompleteMany(ctx context.Context, params *driver.CommandCompleteManyParams) ([]uuid.UUID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, params.Now)
	return nil, nil
}

func (r *nowRecorder) nows() []*time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}
