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
	"github.com/commandbus/commandbus/internal/startstop"
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
	// beat is when the claim loop last went round (Unix nanoseconds): at least every
	// PollInterval while it is healthy.
	beat atomic.Int64

	base startstop.Base
	cur  *session // the current run, set by Start

	mu       sync.Mutex
	inflight map[uuid.UUID]*run
}

// session is one run of a worker, from Start to Stop; a restarted worker gets a new one.
type session struct {
	stop     <-chan struct{} // closed when Stop begins: claim nothing more
	loopDone chan struct{}

	workCtx    context.Context // handlers' parent context, cancelled when Stop gives up waiting
	workCancel context.CancelFunc
	runsDone   sync.WaitGroup

	// Handlers run on long-lived goroutines (at most Concurrency) so that a goroutine's stack,
	// once grown by a handler, is reused rather than grown again for every command.
	idle chan *run
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
	return &Worker{
		cfg:       cfg,
		slotFreed: make(chan struct{}, 1),
		inflight:  map[uuid.UUID]*run{},
	}
}

// Queue returns the queue name.
func (w *Worker) Queue() string { return w.cfg.Queue }

// LastBeat is when the claim loop last went round (zero before Start). A healthy loop goes
// round at least every poll interval; a stuck one stops beating.
func (w *Worker) LastBeat() time.Time {
	if n := w.beat.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// PollInterval is the loop's longest wait between rounds.
func (w *Worker) PollInterval() time.Duration { return w.cfg.PollInterval }

// Running returns how many handlers are running.
func (w *Worker) Running() int { return int(w.running.Load()) }

// Start runs the claim loop in a goroutine. Starting a running worker does nothing; a stopped one
// can start again.
func (w *Worker) Start() {
	stop, ok := w.base.StartInit()
	if !ok {
		return
	}
	workCtx, workCancel := context.WithCancel(context.Background())
	s := &session{stop: stop, loopDone: make(chan struct{}), workCtx: workCtx, workCancel: workCancel, idle: make(chan *run)}
	w.mu.Lock()
	w.cur = s
	w.mu.Unlock()
	go w.loop(s)
}

func (w *Worker) loop(s *session) {
	defer close(s.loopDone)
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	fetchNow := true // claim once at start-up
	moreWork := false
	var lastFetch time.Time
	for {
		w.beat.Store(time.Now().UnixNano())
		if fetchNow && int(w.running.Load()) < w.cfg.Concurrency {
			if wait := w.cfg.Cooldown - time.Since(lastFetch); wait > 0 {
				select {
				case <-s.stop:
					return
				case <-time.After(wait):
				}
			}
			lastFetch = time.Now()
			want := min(w.cfg.Concurrency-int(w.running.Load()), w.cfg.FetchBatch)
			claimed, err := w.claim(s, want)
			if err != nil {
				if s.workCtx.Err() == nil {
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
		case <-s.stop:
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

func (w *Worker) claim(s *session, want int) (int, error) {
	ctx, cancel := context.WithTimeout(s.workCtx, 30*time.Second)
	defer cancel()
	rows, err := w.cfg.Claim(ctx, want)
	if err != nil {
		return 0, err
	}
	for _, row := range rows {
		w.start(s, row)
	}
	return len(rows), nil
}

func (w *Worker) start(s *session, row *driver.CommandRow) {
	r := &run{row: row, done: make(chan struct{})}
	w.mu.Lock()
	w.inflight[row.ID] = r
	w.mu.Unlock()
	s.runsDone.Add(1)
	w.setRunning(w.running.Add(1))
	select {
	case s.idle <- r: // an idle runner takes it
	default:
		// Every runner is busy; running < Concurrency, so there are fewer than Concurrency.
		go w.runner(s, r)
	}
}

// runner handles runs until the worker stops.
func (w *Worker) runner(s *session, first *run) {
	w.execute(s, first)
	for r := range s.idle {
		w.execute(s, r)
	}
}

func (w *Worker) execute(s *session, r *run) {
	defer s.runsDone.Done()
	row := r.row
	ctx, cancel := context.WithTimeout(s.workCtx, w.cfg.Lease)
	completion := w.cfg.Run(ctx, row)
	cancel()
	w.mu.Lock()
	delete(w.inflight, row.ID)
	w.mu.Unlock()
	if r.finalized.CompareAndSwap(false, true) {
		if s.workCtx.Err() != nil && !completion.Status.Terminal() {
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
	if !w.base.StopInit() {
		return
	}
	defer w.base.Stopped()
	w.mu.Lock()
	s := w.cur
	w.mu.Unlock()
	select {
	case <-s.loopDone:
	case <-ctx.Done():
		// A claim is still in flight (a hung database): cancel it rather than overrun the deadline.
		s.workCancel()
		<-s.loopDone
	}
	close(s.idle) // no run starts after the loop ends; idle runners exit
	finished := make(chan struct{})
	go func() { s.runsDone.Wait(); close(finished) }()
	select {
	case <-finished:
		s.workCancel()
		return
	case <-ctx.Done():
	}
	s.workCancel()
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
