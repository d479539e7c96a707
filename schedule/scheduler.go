package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/startstop"
	"github.com/commandbus/commandbus/orchestration"
)

// Config tunes a Scheduler. Zero fields take the documented defaults.
type Config struct {
	// PollInterval is the longest the scheduler sleeps between looks at the schedules; it wakes
	// earlier for the next known tick and when a schedule is created or resumed here.
	// Default: 1s.
	PollInterval time.Duration
	// ClaimBatch is how many due schedules one claim takes. Default: 500.
	ClaimBatch int
	// Lease is how long a claim keeps other replicas off a schedule; a replica that dies while
	// firing is replaced after it. Default: 30s.
	Lease time.Duration
	// MisfireThreshold is how late a tick may be and still fire as on time; an older tick is
	// missed and follows the schedule's misfire policy. Default: 5s.
	MisfireThreshold time.Duration
	// StartConcurrency bounds the executions one replica starts at once. Default: 16.
	StartConcurrency int
	// Lead is how long before a tick the firing loop claims its schedule and creates the
	// tick's execution, runnable from the tick (a definition that cannot start in batches:
	// started at the tick by a timer), so neither the claim nor the insert makes the tick late
	// as long as a tick's starts take less than the lead. The schedule stays leased to this
	// replica meanwhile, and a pause or deletion within the lead no longer stops that tick. 0
	// takes the default, a negative value turns it off. Default: 1s.
	Lead time.Duration
	// Passive manages schedules (create, pause, list...) without firing any on this instance,
	// as on an API-only replica.
	Passive bool
	// Now is the clock. Default: the client's clock.
	Now func() time.Time
	// Holder names this replica in leases. Default: the client's worker id.
	Holder string
	// Logger default: the client's logger.
	Logger *slog.Logger
}

// Scheduler fires the durable schedules of a runtime and manages them. Every replica may run
// one: a schedule is claimed by one replica at a time (row lease and fence), and the execution
// of a tick has an id derived from the schedule and the tick, inserted idempotently, so a tick
// starts one execution however many replicas run and whatever crashes in between.
type Scheduler struct {
	rt     *orchestration.Runtime
	exec   driver.Executor
	cfg    Config
	logger *slog.Logger
	base   startstop.Base
	wake   chan struct{}
}

// New creates the scheduler of rt's client and registers it to start and stop with the client
// (create it before starting the client). Starting it creates or updates the schedules declared
// on the runtime (orchestration.Runtime.DeclareSchedule).
func New(rt *orchestration.Runtime, cfg Config) (*Scheduler, error) {
	if rt == nil {
		return nil, errors.New("schedule: New needs a runtime")
	}
	client := rt.Client()
	if client.Started() {
		return nil, errors.New("schedule: create the scheduler before starting the client")
	}
	var errs []error
	for field, v := range map[string]time.Duration{"PollInterval": cfg.PollInterval, "Lease": cfg.Lease, "MisfireThreshold": cfg.MisfireThreshold} {
		if v < 0 {
			errs = append(errs, &commandbus.ValidationError{Field: "schedule.Config." + field, Message: "must not be negative"})
		}
	}
	if cfg.ClaimBatch < 0 || cfg.StartConcurrency < 0 {
		errs = append(errs, &commandbus.ValidationError{Field: "schedule.Config", Message: "ClaimBatch and StartConcurrency must not be negative"})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.ClaimBatch == 0 {
		cfg.ClaimBatch = 500
	}
	if cfg.Lease == 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.MisfireThreshold == 0 {
		cfg.MisfireThreshold = 5 * time.Second
	}
	if cfg.StartConcurrency == 0 {
		cfg.StartConcurrency = 16
	}
	switch {
	case cfg.Lead == 0:
		cfg.Lead = DefaultLead
	case cfg.Lead < 0:
		cfg.Lead = 0
	}
	if cfg.Now == nil {
		cfg.Now = client.Now
	}
	if cfg.Holder == "" {
		cfg.Holder = client.Config().WorkerID
	}
	if cfg.Logger == nil {
		cfg.Logger = client.Logger()
	}
	s := &Scheduler{rt: rt, exec: client.Driver().Executor(), cfg: cfg, logger: cfg.Logger, wake: make(chan struct{}, 1)}
	client.AddService(s)
	return s, nil
}

// Runtime returns the runtime whose definitions the schedules start.
func (s *Scheduler) Runtime() *orchestration.Runtime { return s.rt }

// Start creates or updates the declared schedules, then (unless Passive) fires due schedules
// until Stop. A declared schedule that does not validate fails the start.
func (s *Scheduler) Start(ctx context.Context) error {
	if err := s.SyncDeclared(ctx); err != nil {
		return err
	}
	if s.cfg.Passive {
		return nil
	}
	stop, ok := s.base.StartInit()
	if !ok {
		return nil
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.base.Go(func() {
		<-stop
		cancel()
	})
	s.base.Go(func() { s.loop(runCtx) })
	return nil
}

// Stop ends the firing loop and waits for a pass in progress.
func (s *Scheduler) Stop(ctx context.Context) error {
	if !s.base.StopInit() {
		return nil
	}
	select {
	case <-s.base.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	s.base.Stopped()
	return nil
}

func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// DefaultLead is Config.Lead's default.
const DefaultLead = time.Second

func (s *Scheduler) loop(ctx context.Context) {
	for {
		if _, err := s.runDue(ctx, s.cfg.Lead); err != nil && ctx.Err() == nil {
			s.logger.Warn("schedules: a pass failed; retrying at the next poll", "error", err)
		}
		wait := s.cfg.PollInterval
		if next, err := s.exec.ScheduleNextDue(ctx); err == nil && next != nil {
			if d := next.Sub(s.cfg.Now()) - s.cfg.Lead; d < wait {
				wait = max(d, 0)
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-s.wake:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// RunDue does one pass at the scheduler's clock: it re-arms fixed-delay schedules whose
// execution ended, then claims due schedules batch by batch and starts their ticks' executions.
// It returns how many executions it started (an execution that existed already counts too). The
// loop calls it; tests with a controlled clock call it directly.
func (s *Scheduler) RunDue(ctx context.Context) (int, error) {
	return s.runDue(ctx, 0)
}

// runDue is RunDue claiming the schedules due up to lead from now: their ticks' executions
// are created now, runnable from the ticks (see startOnTime).
func (s *Scheduler) runDue(ctx context.Context, lead time.Duration) (int, error) {
	if _, err := s.exec.ScheduleRearm(ctx, &driver.ScheduleRearmParams{Now: s.cfg.Now()}); err != nil {
		return 0, fmt.Errorf("re-arming fixed-delay schedules: %w", err)
	}
	// Claims follow each other while earlier claims' executions are started, at most
	// claimsInFlight at once, so a large number of due schedules is not fired batch after batch.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		started int
		errs    []error
	)
	inFlight := make(chan struct{}, claimsInFlight)
	for {
		now := s.cfg.Now()
		rows, err := s.exec.ScheduleClaimDue(ctx, &driver.ScheduleClaimDueParams{Now: now.Add(lead), Limit: s.cfg.ClaimBatch, Lease: s.cfg.Lease, Holder: s.cfg.Holder})
		if err != nil {
			errs = append(errs, fmt.Errorf("claiming due schedules: %w", err))
			break
		}
		if len(rows) == 0 {
			break
		}
		inFlight <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-inFlight; wg.Done() }()
			n, err := s.fire(ctx, rows, now, now.Add(lead))
			mu.Lock()
			started += n
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		}()
		if len(rows) < s.cfg.ClaimBatch {
			break
		}
	}
	wg.Wait()
	return started, errors.Join(errs...)
}

// claimsInFlight bounds the claims of one pass whose executions are being started at once.
const claimsInFlight = 4

// TickExecutionID is the id of the execution a schedule starts for a tick: the same on every
// replica, so inserting it twice starts nothing new.
func TickExecutionID(scheduleID uuid.UUID, tick time.Time) uuid.UUID {
	return uuid.NewSHA1(scheduleID, []byte(tick.UTC().Format(time.RFC3339Nano)))
}

type tickStart struct {
	row  *driver.ScheduleRow
	out  *driver.ScheduleFired
	tick time.Time
	id   uuid.UUID
	err  error
}

// fire starts the executions of the claimed rows' ticks up to horizon and records each claim.
// A tick after now is runnable when its time comes.
func (s *Scheduler) fire(ctx context.Context, rows []*driver.ScheduleRow, now, horizon time.Time) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	fired := make([]*driver.ScheduleFired, 0, len(rows))
	var starts []*tickStart
	for _, row := range rows {
		out := &driver.ScheduleFired{ID: row.ID, Fence: row.Fence, NextFireAt: row.NextFireAt}
		fired = append(fired, out)
		trig, err := triggerOf(row)
		if err != nil {
			out.LastError = err.Error()
			out.NextFireAt = nil
			s.logger.Error("schedules: a stored schedule does not parse; it stays idle until it is updated", "schedule", row.Name, "schedule_id", row.ID, "error", err)
			continue
		}
		ticks, next := planAhead(trig, row, *row.NextFireAt, now, horizon, s.cfg.MisfireThreshold)
		out.NextFireAt = next
		if skipped := len(ticks) == 0; skipped {
			s.logger.Info("schedules: missed ticks skipped", "schedule", row.Name, "schedule_id", row.ID, "due", row.NextFireAt)
		}
		for _, tick := range ticks {
			starts = append(starts, &tickStart{row: row, out: out, tick: tick, id: TickExecutionID(row.ID, tick)})
		}
	}
	s.startOnTime(ctx, starts)
	started := 0
	for _, st := range starts {
		out := st.out
		switch {
		case st.err == nil:
			started++
			out.Fires++
			tick, id := st.tick, st.id
			if out.LastFireAt == nil || tick.After(*out.LastFireAt) {
				out.LastFireAt, out.LastExecutionID = &tick, &id
			}
			if st.row.Trigger == driver.TriggerFixedDelay {
				out.NextFireAt, out.WaitingExecutionID = nil, &id
			}
		case isPermanent(st.err):
			out.LastError = st.err.Error()
			s.logger.Warn("schedules: the execution of a tick was refused; the tick is skipped", "schedule", st.row.Name,
				"schedule_id", st.row.ID, "execution_id", st.id, "tick", st.tick, "error", st.err)
		default:
			// Retry the claim's ticks at the next pass: their ids make the starts that worked no-ops.
			out.LastError = st.err.Error()
			out.NextFireAt, out.WaitingExecutionID = st.row.NextFireAt, nil
			if ctx.Err() != nil {
				out.LastError = ""
				continue // stopping: the next pass, here or on another replica, starts them
			}
			s.logger.Warn("schedules: starting the execution of a tick failed; retrying", "schedule", st.row.Name,
				"schedule_id", st.row.ID, "execution_id", st.id, "tick", st.tick, "error", st.err)
		}
	}
	for _, out := range fired {
		if out.NextFireAt != nil && out.WaitingExecutionID != nil {
			out.WaitingExecutionID = nil // a retried fixed-delay tick waits for nothing yet
		}
	}
	// Recorded even when the run is stopping, so the ticks started are not started again.
	if _, err := s.exec.ScheduleFiredMany(context.WithoutCancel(ctx), &driver.ScheduleFiredManyParams{Fired: fired, Now: now}); err != nil {
		return started, fmt.Errorf("recording fired schedules: %w", err)
	}
	return started, nil
}

func isPermanent(err error) bool {
	var v *commandbus.ValidationError
	return errors.As(err, &v) || errors.Is(err, errNoDefinition)
}

var errNoDefinition = errors.New("no definition registered for the schedule's model and type on this replica")

// startOnTime starts the executions of starts, each runnable from its tick. The ticks of
// definitions that start in batches (orchestration.BatchStarter) are created at once, runnable
// from their ticks (StartRequest.NotBefore), so nothing is left to do at a tick but the pollers'
// claim; the others, and the ticks of a batch that was refused, start one by one when a timer
// says their tick has come (ticks of one time together).
func (s *Scheduler) startOnTime(ctx context.Context, starts []*tickStart) {
	alone := s.startAhead(ctx, starts)
	slices.SortStableFunc(alone, func(a, b *tickStart) int { return a.tick.Compare(b.tick) })
	for from := 0; from < len(alone); {
		tick := alone[from].tick
		if now := s.cfg.Now(); tick.Before(now) {
			tick = now // every tick due already starts at once
		}
		to := from + 1
		for to < len(alone) && !alone[to].tick.After(tick) {
			to++
		}
		if wait := tick.Sub(s.cfg.Now()); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				for _, st := range alone[from:] {
					st.err = ctx.Err()
				}
				return
			case <-timer.C:
			}
		}
		s.startAlone(ctx, alone[from:to])
		from = to
	}
}

// startBatch is the most ticks one batched start inserts.
const startBatch = 500

// startAhead creates the executions of the starts whose definition starts in batches, up to
// StartConcurrency batches at once, each runnable from its tick (a tick already due: at once). It
// returns the starts left to start alone at their ticks: those of other definitions and those of
// a batch that was refused (so each tick gets its own error).
func (s *Scheduler) startAhead(ctx context.Context, starts []*tickStart) (alone []*tickStart) {
	type group struct {
		key       orchestration.Key
		notBefore time.Time
	}
	groups := map[group][]*tickStart{}
	var keys []group
	now := s.cfg.Now()
	for _, st := range starts {
		k := orchestration.Key{Model: st.row.Model, Type: st.row.Type}
		if _, ok := s.rt.Operations(k.Model, k.Type).(orchestration.BatchStarter); !ok {
			alone = append(alone, st)
			continue
		}
		g := group{key: k}
		if st.tick.After(now) {
			g.notBefore = st.tick
		}
		if groups[g] == nil {
			keys = append(keys, g)
		}
		groups[g] = append(groups[g], st)
	}
	sem := make(chan struct{}, s.cfg.StartConcurrency)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused []*tickStart
	)
	for _, g := range keys {
		batcher := s.rt.Operations(g.key.Model, g.key.Type).(orchestration.BatchStarter)
		members := groups[g]
		for from := 0; from < len(members); from += startBatch {
			batch := members[from:min(from+startBatch, len(members))]
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				reqs := make([]orchestration.StartRequest, len(batch))
				for i, st := range batch {
					reqs[i] = startRequest(st.row, st.id)
					reqs[i].NotBefore = g.notBefore
				}
				_, err := batcher.StartManyJSON(ctx, reqs)
				switch {
				case err == nil:
				case isPermanent(err):
					mu.Lock()
					refused = append(refused, batch...) // find the request at fault: start each alone
					mu.Unlock()
				default:
					for _, st := range batch {
						st.err = err
					}
				}
			}()
		}
	}
	wg.Wait()
	return append(alone, refused...)
}

// startAlone starts the executions of starts one by one, StartConcurrency at a time.
func (s *Scheduler) startAlone(ctx context.Context, starts []*tickStart) {
	sem := make(chan struct{}, s.cfg.StartConcurrency)
	var wg sync.WaitGroup
	for _, st := range starts {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			st.err = s.start(ctx, st.row, st.id)
		}()
	}
	wg.Wait()
}

// startRequest is the start of a schedule's execution: its business key is the schedule's name
// (executions list --business-key finds them), its id is the tick's (TickExecutionID).
func startRequest(row *driver.ScheduleRow, id uuid.UUID) orchestration.StartRequest {
	return orchestration.StartRequest{ID: id, Input: row.Input, BusinessKey: row.Name}
}

func (s *Scheduler) start(ctx context.Context, row *driver.ScheduleRow, id uuid.UUID) error {
	starter, ok := s.rt.Operations(row.Model, row.Type).(orchestration.Starter)
	if !ok {
		return fmt.Errorf("%w: %s %q", errNoDefinition, row.Model, row.Type)
	}
	_, err := starter.StartJSON(ctx, startRequest(row, id))
	return err
}
