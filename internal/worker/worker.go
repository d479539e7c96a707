// Package worker runs one queue: it claims commands in batches when woken (notification, poll
// tick, or a freed slot while work remains), runs each in its own goroutine, and never has more
// than Concurrency handlers running.
package worker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// Config configures a Worker.
type Config struct {
	Queue        string
	Concurrency  int
	FetchBatch   int
	Lease        time.Duration
	PollInterval time.Duration
	Cooldown     time.Duration
	// Claim claims up to max commands of the queue.
	Claim func(ctx context.Context, max int) ([]*driver.CommandRow, error)
	// Run handles one command and returns its outcome. ctx ends when the lease would.
	Run func(ctx context.Context, row *driver.CommandRow) *driver.CommandCompletion
	// Complete receives every outcome, including releases at shutdown.
	Complete func(*driver.CommandCompletion)
	// Wake is signalled when the queue may have new work.
	Wake <-chan struct{}
	// OnRunning is told the number of running handlers whenever it changes.
	OnRunning func(running int)
	Logger    *slog.Logger
}

// Worker runs one queue.
type Worker struct {
	cfg Config

	running   atomic.Int64
	slotFreed chan struct{}
	stop      chan struct{}
	loopDone  chan struct{}

	workCtx    context.Context
	workCancel context.CancelFunc

	mu       sync.Mutex
	inflight map[uuid.UUID]*run
	runsDone sync.WaitGroup

	// Handlers run on long-lived goroutines (at most Concurrency) so that a goroutine's stack,
	// once grown by a handler, is reused rather than grown again for every command.
	idle     chan *run
	runners  int
	runnerWG sync.WaitGroup
}

type run struct {
	row *driver.CommandRow
	// finalized is won by whoever reports the outcome: the handler's goroutine, or Stop releasing
	// a handler that would not return. Exactly one outcome is reported per claim.
	finalized atomic.Bool
	done      chan struct{}
}

// New returns a worker; Start begins claiming.
func New(cfg Config) *Worker {
	workCtx, workCancel := context.WithCancel(context.Background())
	return &Worker{
		cfg:        cfg,
		slotFreed:  make(chan struct{}, 1),
		stop:       make(chan struct{}),
		loopDone:   make(chan struct{}),
		workCtx:    workCtx,
		workCancel: workCancel,
		inflight:   map[uuid.UUID]*run{},
		idle:       make(chan *run),
	}
}

// Queue returns the queue name.
func (w *Worker) Queue() string { return w.cfg.Queue }

// Running returns how many handlers are running.
func (w *Worker) Running() int { return int(w.running.Load()) }

// Start runs the claim loop in a goroutine.
func (w *Worker) Start() { go w.loop() }

func (w *Worker) loop() {
	defer close(w.loopDone)
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	fetchNow := true // claim once at start-up
	moreWork := false
	var lastFetch time.Time
	for {
		if fetchNow && int(w.running.Load()) < w.cfg.Concurrency {
			if wait := w.cfg.Cooldown - time.Since(lastFetch); wait > 0 {
				select {
				case <-w.stop:
					return
				case <-time.After(wait):
				}
			}
			lastFetch = time.Now()
			want := min(w.cfg.Concurrency-int(w.running.Load()), w.cfg.FetchBatch)
			claimed, err := w.claim(want)
			if err != nil {
				if w.workCtx.Err() == nil {
					w.cfg.Logger.Warn("claiming commands failed; will retry at the next poll", "queue", w.cfg.Queue, "error", err)
				}
				fetchNow, moreWork = false, false
				continue
			}
			moreWork = claimed == want
			fetchNow = moreWork
			continue
		}
		select {
		case <-w.stop:
			return
		case <-w.cfg.Wake:
			fetchNow = true
		case <-poll.C:
			fetchNow = true
		case <-w.slotFreed:
			fetchNow = fetchNow || moreWork
		}
	}
}

func (w *Worker) claim(want int) (int, error) {
	ctx, cancel := context.WithTimeout(w.workCtx, 30*time.Second)
	defer cancel()
	rows, err := w.cfg.Claim(ctx, want)
	if err != nil {
		return 0, err
	}
	for _, row := range rows {
		w.start(row)
	}
	return len(rows), nil
}

func (w *Worker) start(row *driver.CommandRow) {
	r := &run{row: row, done: make(chan struct{})}
	w.mu.Lock()
	w.inflight[row.ID] = r
	w.mu.Unlock()
	w.runsDone.Add(1)
	w.setRunning(w.running.Add(1))
	select {
	case w.idle <- r: // an idle runner takes it
	default:
		// Every runner is busy; running < Concurrency, so there are fewer than Concurrency.
		w.runners++
		w.runnerWG.Add(1)
		go w.runner(r)
	}
}

// runner handles runs until the worker stops.
func (w *Worker) runner(first *run) {
	defer w.runnerWG.Done()
	w.execute(first)
	for r := range w.idle {
		w.execute(r)
	}
}

func (w *Worker) execute(r *run) {
	defer w.runsDone.Done()
	row := r.row
	ctx, cancel := context.WithTimeout(w.workCtx, w.cfg.Lease)
	completion := w.cfg.Run(ctx, row)
	cancel()
	w.mu.Lock()
	delete(w.inflight, row.ID)
	w.mu.Unlock()
	if r.finalized.CompareAndSwap(false, true) {
		if w.workCtx.Err() != nil && !completion.Status.Terminal() {
			// Shutdown interrupted the handler: give the command back untouched.
			completion = releaseCompletion(row)
		}
		w.cfg.Complete(completion)
	}
	close(r.done)
	w.setRunning(w.running.Add(-1))
	select {
	case w.slotFreed <- struct{}{}:
	default:
	}
}

func (w *Worker) setRunning(n int64) {
	if w.cfg.OnRunning != nil {
		w.cfg.OnRunning(int(n))
	}
}

func releaseCompletion(row *driver.CommandRow) *driver.CommandCompletion {
	return &driver.CommandCompletion{
		ID: row.ID, Fence: row.Fence, Status: driver.CommandStatusPending,
		Event: "RELEASED_ON_SHUTDOWN", Release: true,
	}
}

// Stop stops claiming and waits for running handlers until ctx ends. Then it cancels the
// handlers' contexts, waits up to grace for them to return, and releases the commands of those
// that did not, so another worker picks them up at once instead of after the lease.
func (w *Worker) Stop(ctx context.Context, grace time.Duration) {
	close(w.stop)
	select {
	case <-w.loopDone:
	case <-ctx.Done():
		// A claim is still in flight (a hung database): cancel it rather than overrun the deadline.
		w.workCancel()
		<-w.loopDone
	}
	close(w.idle) // no run starts after the loop ends; idle runners exit
	finished := make(chan struct{})
	go func() { w.runsDone.Wait(); close(finished) }()
	select {
	case <-finished:
		w.workCancel()
		return
	case <-ctx.Done():
	}
	w.workCancel()
	select {
	case <-finished:
		return
	case <-time.After(grace):
	}
	w.mu.Lock()
	stuck := make([]*run, 0, len(w.inflight))
	for _, r := range w.inflight {
		stuck = append(stuck, r)
	}
	w.mu.Unlock()
	for _, r := range stuck {
		if r.finalized.CompareAndSwap(false, true) {
			w.cfg.Logger.Warn("handler did not return after shutdown; releasing its command", "queue", w.cfg.Queue, "command_id", r.row.ID)
			w.cfg.Complete(releaseCompletion(r.row))
		}
	}
}
