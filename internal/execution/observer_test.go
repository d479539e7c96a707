package execution

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// threeStepRunner runs an execution through steps a and b, then completes it, one checkpoint each.
type threeStepRunner struct{}

func (threeStepRunner) Type() string { return "ThreeSteps" }

func (threeStepRunner) Run(ctx context.Context, lease *Lease) error {
	for _, step := range []string{"a", "b"} {
		cp := lease.Base()
		cp.Status, cp.Step = driver.ExecutionExecuting, step
		cp.Log = []*driver.ExecutionLogEntry{{EntryType: "STEP", Name: step, StepStatus: "COMPLETED"}}
		if err := lease.Checkpoint(ctx, cp); err != nil {
			return err
		}
	}
	cp := lease.Base()
	cp.Status, cp.Release = driver.ExecutionCompleted, true
	cp.Log = []*driver.ExecutionLogEntry{{EntryType: "LIFECYCLE", StepStatus: "COMPLETED"}}
	return lease.Checkpoint(ctx, cp)
}

func (threeStepRunner) Deadline(ctx context.Context, lease *Lease) error { return lease.Release(ctx) }

// recorder keeps what an observer was told, per execution, and signals every observation.
type recorder struct {
	mu   sync.Mutex
	seen map[uuid.UUID][]*Committed
	next chan *Committed
}

func newRecorder() *recorder {
	return &recorder{seen: map[uuid.UUID][]*Committed{}, next: make(chan *Committed, 1000)}
}

func (r *recorder) observe(c *Committed) {
	r.mu.Lock()
	r.seen[c.Row.ID] = append(r.seen[c.Row.ID], c)
	r.mu.Unlock()
	r.next <- c
}

func (r *recorder) of(id uuid.UUID) []*Committed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Committed(nil), r.seen[id]...)
}

// await returns the next observation of id, skipping others.
func (r *recorder) await(t *testing.T, id uuid.UUID) *Committed {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case c := <-r.next:
			if c.Row.ID == id {
				return c
			}
		case <-timeout:
			t.Fatalf("no observation of %s", id)
		}
	}
}

func testEngine(t *testing.T, exec driver.Executor, cfg Config) *Engine {
	t.Helper()
	cfg.Exec, cfg.WorkerID = exec, "w1"
	if cfg.Lease == 0 {
		cfg.Lease = time.Minute
	}
	cfg.PendingPollInterval, cfg.RetryPollInterval = 10*time.Millisecond, time.Hour
	cfg.TimeoutCheckInterval, cfg.DeadlineCheckInterval = time.Hour, time.Hour
	return New(cfg)
}

func newParams(typ string, lease time.Duration) *driver.ExecutionInsertParams {
	return &driver.ExecutionInsertParams{
		ID: uuid.Must(uuid.NewV7()), Model: "process", Type: typ, Domain: "d", State: json.RawMessage(`{}`),
		Lease: lease, WorkerID: "w1",
		Log: []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "LIFECYCLE", StepStatus: "PROCESS_CREATED"}},
	}
}

func newParamsWithID(id uuid.UUID) *driver.ExecutionInsertParams {
	p := newParams("T", 0)
	p.ID = id
	return p
}

// TestObserverSeesEveryCommitOnceInOrder runs executions through the pollers: the observer sees
// each one's insert, both steps and its completion, once each and in order.
func TestObserverSeesEveryCommitOnceInOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		rec := newRecorder()
		e := testEngine(t, drv.Executor(), Config{Observer: rec.observe, Concurrency: 4})
		require.NoError(t, e.Register(threeStepRunner{}))
		require.NoError(t, e.Start(ctx))
		t.Cleanup(func() { _ = e.Stop(context.Background()) })

		params := make([]*driver.ExecutionInsertParams, 10)
		for i := range params {
			params[i] = newParams("ThreeSteps", 0)
		}
		_, err := e.Insert(ctx, params)
		require.NoError(t, err)
		for _, p := range params {
			require.Eventually(t, func() bool {
				seen := rec.of(p.ID)
				return len(seen) > 0 && seen[len(seen)-1].Row.Status == driver.ExecutionCompleted
			}, 10*time.Second, 5*time.Millisecond)
		}
		require.NoError(t, e.Stop(ctx))

		type step struct {
			inserted bool
			status   driver.ExecutionStatus
			step     string
			log      []string
			seqs     []int
		}
		for _, p := range params {
			var got []step
			for _, c := range rec.of(p.ID) {
				require.Equal(t, p.ID, c.Row.ID)
				require.Equal(t, "process", c.Row.Model)
				require.Equal(t, "ThreeSteps", c.Row.Type)
				s := step{inserted: c.Inserted, status: c.Row.Status, step: c.Row.Step}
				for _, entry := range c.Log {
					require.Equal(t, p.ID, entry.ExecutionID)
					s.log = append(s.log, entry.EntryType+" "+entry.Name+" "+entry.StepStatus)
					s.seqs = append(s.seqs, entry.Seq)
				}
				got = append(got, s)
			}
			require.Equal(t, []step{
				{inserted: true, status: driver.ExecutionPending, log: []string{"LIFECYCLE  PROCESS_CREATED"}, seqs: []int{1}},
				{status: driver.ExecutionExecuting, step: "a", log: []string{"STEP a COMPLETED"}, seqs: []int{2}},
				{status: driver.ExecutionExecuting, step: "b", log: []string{"STEP b COMPLETED"}, seqs: []int{3}},
				{status: driver.ExecutionCompleted, step: "b", log: []string{"LIFECYCLE  COMPLETED"}, seqs: []int{4}},
			}, got, "execution %s", p.ID)
			require.NotNil(t, rec.of(p.ID)[3].Row.CompletedAt)
		}
	})
}

// TestObserverSkipsFencedCheckpoints checkpoints through a lease another runner took over: the
// checkpoint is fenced and the observer never hears of it, nor of an insert that failed.
func TestObserverSkipsFencedCheckpoints(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		exec := drv.Executor()
		rec := newRecorder()
		e := testEngine(t, exec, Config{Observer: rec.observe})
		p := newParams("T", time.Minute)
		leases, err := e.Insert(ctx, []*driver.ExecutionInsertParams{p})
		require.NoError(t, err)
		require.True(t, rec.await(t, p.ID).Inserted)

		// Another runner takes the execution over once the lease has expired.
		later := time.Now().Add(time.Hour)
		_, err = exec.ExecutionAcquire(ctx, &driver.ExecutionAcquireParams{ID: p.ID, Lease: time.Minute, WorkerID: "w2", Now: &later})
		require.NoError(t, err)

		cp := leases[0].Base()
		cp.Status, cp.Step = driver.ExecutionExecuting, "a"
		cp.Log = []*driver.ExecutionLogEntry{{EntryType: "STEP", Name: "a", StepStatus: "COMPLETED"}}
		require.ErrorIs(t, leases[0].Checkpoint(ctx, cp), ErrFenced)
		// An insert of an id that exists creates nothing, so it is not reported either.
		again, err := e.Insert(ctx, []*driver.ExecutionInsertParams{newParamsWithID(p.ID)})
		require.NoError(t, err, "inserts are idempotent")
		require.Nil(t, again[0], "no lease on an execution this call did not create")

		// Observations arrive in order on one goroutine: once a later insert is seen, a report of
		// the fenced checkpoint would have arrived before it.
		marker := newParams("T", 0)
		_, err = e.Insert(ctx, []*driver.ExecutionInsertParams{marker})
		require.NoError(t, err)
		rec.await(t, marker.ID)
		require.Len(t, rec.of(p.ID), 1, "only the first insert of the fenced execution is reported")
		e.observers.wait(ctx)
	})
}

// TestObserverPanicIsContained lets the observer panic on every insert: checkpoints still commit
// and are still reported.
func TestObserverPanicIsContained(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		rec := newRecorder()
		e := testEngine(t, drv.Executor(), Config{Observer: func(c *Committed) {
			if c.Inserted {
				panic("observer bug")
			}
			rec.observe(c)
		}})
		p := newParams("T", time.Minute)
		leases, err := e.Insert(ctx, []*driver.ExecutionInsertParams{p})
		require.NoError(t, err)
		cp := leases[0].Base()
		cp.Status, cp.Release = driver.ExecutionCompleted, true
		require.NoError(t, leases[0].Checkpoint(ctx, cp))
		c := rec.await(t, p.ID)
		require.Equal(t, driver.ExecutionCompleted, c.Row.Status)
		row, err := drv.Executor().ExecutionGet(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCompleted, row.Status)
		e.observers.wait(ctx)
	})
}

// TestSlowObserverDoesNotBlockCommits blocks the observer: commits go on, observations beyond the
// queue are dropped and counted, and the queued ones are delivered once the observer returns.
func TestSlowObserverDoesNotBlockCommits(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		release := make(chan struct{})
		started := make(chan struct{}, 100)
		var mu sync.Mutex
		var delivered []uuid.UUID
		e := testEngine(t, drv.Executor(), Config{ObserverQueue: 2, Observer: func(c *Committed) {
			started <- struct{}{}
			<-release
			mu.Lock()
			delivered = append(delivered, c.Row.ID)
			mu.Unlock()
		}})
		first := newParams("T", time.Minute)
		leases, err := e.Insert(ctx, []*driver.ExecutionInsertParams{first})
		require.NoError(t, err)
		<-started // the observer now blocks on the first observation; the queue is empty

		// Five checkpoints commit while the observer is blocked: two wait, three are dropped.
		for i := range 5 {
			cp := leases[0].Base()
			cp.Status, cp.Step = driver.ExecutionExecuting, "s"+string(rune('0'+i))
			require.NoError(t, leases[0].Checkpoint(ctx, cp))
		}
		require.Equal(t, int64(3), e.ObserverDropped())
		close(release)
		e.observers.wait(ctx)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, delivered, 3, "the first observation and the two queued")
	})
}
