package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tenant"
	"github.com/commandbus/commandbus/workflow"
)

// DispatchConfig configures the dispatch (tenant admission) benchmark.
type DispatchConfig struct {
	// Tenants share the items, by a fixed tier mix: one in ten ENTERPRISE, three in ten PRO, the
	// rest FREE. Default: 100.
	Tenants int `json:"tenants"`
	// Items are the capacity-limited executions of the throughput phase, spread evenly over the
	// tenants. Default: 10000.
	Items int `json:"items"`
	// Backlog is the ENTERPRISE tenant's queue in the fairness phase. Default: 20000.
	Backlog int `json:"backlog"`
	// Replicas are the clients (engines) on the database. Default: 2.
	Replicas int `json:"replicas"`
	// Work is how long each execution's one step takes. Default: 2ms.
	Work time.Duration `json:"work_ns"`
	// Concurrency is the executions one replica runs at once. Default: 200.
	Concurrency int `json:"concurrency"`
	// StartBatch is how many executions one start inserts. Default: 100.
	StartBatch int          `json:"start_batch"`
	Logger     *slog.Logger `json:"-"`
	Progress   io.Writer    `json:"-"`
}

// DispatchResult is what the dispatch benchmark prints.
type DispatchResult struct {
	Driver  string `json:"driver"`
	Tenants int    `json:"tenants"`
	Items   int    `json:"items"`
	// Slots is the sum of the tenants' limits: at most this many run at once.
	Slots int `json:"slots"`
	// AdmittedPerS is the throughput phase's admitted starts per second: items that started
	// running, from the first enqueue to the last start.
	AdmittedPerS float64 `json:"admitted_per_s"`
	ElapsedS     float64 `json:"elapsed_s"`
	// FreeSlotP50Ms is enqueue to running for an execution whose tenant has a free slot (the
	// latency phase: one execution per tenant, one at a time).
	FreeSlotP50Ms float64 `json:"free_slot_p50_ms"`
	FreeSlotP99Ms float64 `json:"free_slot_p99_ms"`
	// Violations counts the times a tenant had more executions running than its limit: seen by
	// the steps themselves (StepViolations) and by a sampler of the database (SampledViolations,
	// Samples samples of every tenant's admitted, unfinished executions).
	StepViolations    int64 `json:"step_violations"`
	SampledViolations int64 `json:"sampled_violations"`
	Samples           int64 `json:"samples"`
	// FreeBehindBacklogMs is enqueue to running of a FREE tenant's first execution while an
	// ENTERPRISE tenant has Backlog executions queued.
	FreeBehindBacklogMs float64        `json:"free_behind_backlog_ms"`
	BacklogQueued       int            `json:"backlog_queued"`
	Config              DispatchConfig `json:"config"`
	GoMaxProcs          int            `json:"gomaxprocs"`
}

// WithDefaults fills unset fields.
func (c DispatchConfig) WithDefaults() DispatchConfig {
	if c.Tenants == 0 {
		c.Tenants = 100
	}
	if c.Items == 0 {
		c.Items = 10000
	}
	if c.Backlog == 0 {
		c.Backlog = 20000
	}
	if c.Replicas == 0 {
		c.Replicas = 2
	}
	if c.Work == 0 {
		c.Work = 2 * time.Millisecond
	}
	if c.Concurrency == 0 {
		c.Concurrency = 200
	}
	if c.StartBatch == 0 {
		c.StartBatch = 100
	}
	return c
}

// tierOf is the fixed tier mix: one in ten ENTERPRISE, three in ten PRO, the rest FREE.
func tierOf(i int) string {
	switch i % 10 {
	case 0:
		return tenant.TierEnterprise
	case 1, 2, 3:
		return tenant.TierPro
	}
	return tenant.TierFree
}

// dispatchProbe records when each execution was enqueued and when its step first ran, and
// counts the steps running per tenant.
type dispatchProbe struct {
	mu         sync.Mutex
	enqueued   map[uuid.UUID]time.Time
	running    map[uuid.UUID]time.Time
	runningNow map[string]int
	limits     map[string]int
	violations atomic.Int64
	started    chan uuid.UUID
}

func (p *dispatchProbe) enqueue(ids []uuid.UUID) {
	now := time.Now()
	p.mu.Lock()
	for _, id := range ids {
		p.enqueued[id] = now
	}
	p.mu.Unlock()
}

func (p *dispatchProbe) step(work time.Duration) workflow.StepFunc {
	return func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		var in struct{ Tenant string }
		if err := json.Unmarshal(sc.Input, &in); err != nil {
			return nil, err
		}
		now := time.Now()
		p.mu.Lock()
		first := false
		if _, seen := p.running[sc.ExecutionID]; !seen {
			p.running[sc.ExecutionID], first = now, true
		}
		p.runningNow[in.Tenant]++
		if p.runningNow[in.Tenant] > p.limits[in.Tenant] {
			p.violations.Add(1)
		}
		p.mu.Unlock()
		if first {
			select {
			case p.started <- sc.ExecutionID:
			default:
			}
		}
		time.Sleep(work) // the step's work
		p.mu.Lock()
		p.runningNow[in.Tenant]--
		p.mu.Unlock()
		return nil, nil
	}
}

// waitRunning waits until every id has started running (or ctx ends).
func (p *dispatchProbe) waitRunning(ctx context.Context, ids []uuid.UUID) error {
	pending := append([]uuid.UUID(nil), ids...)
	for {
		p.mu.Lock()
		left := pending[:0]
		for _, id := range pending {
			if _, ok := p.running[id]; !ok {
				left = append(left, id)
			}
		}
		pending = left
		p.mu.Unlock()
		missing := len(pending)
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d executions never ran: %w", missing, ctx.Err())
		case <-p.started:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *dispatchProbe) latency(id uuid.UUID) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running[id].Sub(p.enqueued[id])
}

// RunDispatch measures capacity-limited admission: cfg.Replicas clients on one database run a
// one-step workflow for cfg.Tenants tenants of a tier mix. It measures enqueue to running with a
// free slot, the admitted starts per second of cfg.Items executions, whether any tenant ever ran
// more than its limit (its steps count, and a sampler reads the database), and how long a FREE
// tenant's first execution waits while an ENTERPRISE tenant has cfg.Backlog queued.
func RunDispatch(ctx context.Context, drv driver.Driver, cfg DispatchConfig) (*DispatchResult, error) {
	cfg = cfg.WithDefaults()
	logger := orDiscard(cfg.Logger)
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	probe := &dispatchProbe{enqueued: map[uuid.UUID]time.Time{}, running: map[uuid.UUID]time.Time{},
		runningNow: map[string]int{}, limits: map[string]int{}, started: make(chan uuid.UUID, 1)}
	tenants := tenant.NewWithExecutor(drv.Executor(), nil)
	res := &DispatchResult{Driver: drv.Name(), Tenants: cfg.Tenants, Items: cfg.Items, Config: cfg, GoMaxProcs: runtime.GOMAXPROCS(0)}
	names := make([]string, cfg.Tenants)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%03d", i)
		t, err := tenants.Create(ctx, tenant.CreateRequest{ID: names[i], Tier: tierOf(i), Actor: "bench"})
		if err != nil {
			return nil, err
		}
		probe.limits[names[i]] = t.MaxActive
		res.Slots += t.MaxActive
	}

	var managers []*workflow.Manager
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	for i := range cfg.Replicas {
		client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: logger, WorkerID: fmt.Sprintf("bench-replica-%d", i),
			Process: commandbus.ProcessConfig{ConcurrentExecutions: cfg.Concurrency, PendingPollInterval: commandbus.Duration(time.Second)}})
		if err != nil {
			return nil, err
		}
		rt, err := orchestration.New(client, orchestration.Config{Admission: orchestration.AdmissionConfig{
			CapacityLimited: []string{"BenchDispatch"}, MaxTenantGauges: -1}})
		if err != nil {
			return nil, err
		}
		m, err := workflow.Register(rt, workflow.New("BenchDispatch", 1).Step("work", probe.step(cfg.Work)))
		if err != nil {
			return nil, err
		}
		stop, err := startClient(ctx, client)
		if err != nil {
			return nil, err
		}
		managers, stops = append(managers, m), append(stops, stop)
	}
	start := func(m *workflow.Manager, tenantID string, n int) ([]uuid.UUID, error) {
		ids := make([]uuid.UUID, n)
		inputs := make([]any, n)
		for i := range ids {
			ids[i] = uuid.Must(uuid.NewV7())
			inputs[i] = map[string]string{"tenant": tenantID}
		}
		probe.enqueue(ids)
		_, err := m.StartMany(ctx, inputs, workflow.WithTenant(tenantID), workflow.WithIDs(ids...))
		return ids, err
	}

	// The sampler: every tenant's admitted, unfinished executions, straight from the database.
	samplerCtx, stopSampler := context.WithCancel(ctx)
	defer stopSampler()
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		admitted := []driver.ExecutionStatus{driver.ExecutionPending, driver.ExecutionExecuting, driver.ExecutionWaitingForAsync,
			driver.ExecutionWaitingForRetry, driver.ExecutionWaitingForTSQ, driver.ExecutionCompensating, driver.ExecutionSuspended}
		for samplerCtx.Err() == nil {
			for _, name := range names {
				rows, err := drv.Executor().ExecutionList(samplerCtx, &driver.ExecutionListParams{TenantID: name, Statuses: admitted, Limit: 100})
				if err != nil {
					continue
				}
				if len(rows) > probe.limits[name] {
					res.SampledViolations++
				}
			}
			res.Samples++
			select { // a round every 100 ms, so the sampler does not compete much with the run
			case <-samplerCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	// Latency with a free slot: one execution per tenant, one at a time.
	fmt.Fprintf(progress, "latency: one execution per tenant with a free slot...\n")
	var free []time.Duration
	for i, name := range names {
		ids, err := start(managers[i%len(managers)], name, 1)
		if err != nil {
			return nil, err
		}
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = probe.waitRunning(waitCtx, ids)
		cancel()
		if err != nil {
			return nil, err
		}
		free = append(free, probe.latency(ids[0]))
	}
	sort.Slice(free, func(i, j int) bool { return free[i] < free[j] })
	res.FreeSlotP50Ms = round(float64(percentile(free, 0.50))/float64(time.Millisecond), 1)
	res.FreeSlotP99Ms = round(float64(percentile(free, 0.99))/float64(time.Millisecond), 1)

	// Throughput: cfg.Items spread over the tenants, started from every replica at once.
	fmt.Fprintf(progress, "throughput: %d executions over %d tenants (%d slots), %d replicas...\n", cfg.Items, cfg.Tenants, res.Slots, cfg.Replicas)
	began := time.Now()
	var all []uuid.UUID
	var allMu sync.Mutex
	errs := make(chan error, cfg.Tenants)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, name := range names {
		n := cfg.Items / cfg.Tenants
		if i < cfg.Items%cfg.Tenants {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := 0; from < n; from += cfg.StartBatch {
				sem <- struct{}{}
				ids, err := start(managers[i%len(managers)], name, min(cfg.StartBatch, n-from))
				<-sem
				if err != nil {
					errs <- err
					return
				}
				allMu.Lock()
				all = append(all, ids...)
				allMu.Unlock()
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	err := probe.waitRunning(waitCtx, all)
	cancel()
	if err != nil {
		return nil, err
	}
	var last time.Time
	probe.mu.Lock()
	for _, id := range all {
		last = maxTime(last, probe.running[id])
	}
	probe.mu.Unlock()
	elapsed := last.Sub(began)
	res.ElapsedS = round(elapsed.Seconds(), 2)
	res.AdmittedPerS = round(float64(len(all))/elapsed.Seconds(), 0)

	// Fairness: an ENTERPRISE tenant's backlog, then a new FREE tenant's first execution.
	fmt.Fprintf(progress, "fairness: a FREE tenant's first execution behind %d queued for an ENTERPRISE tenant...\n", cfg.Backlog)
	if _, err := tenants.Create(ctx, tenant.CreateRequest{ID: "backlog-enterprise", Tier: tenant.TierEnterprise, Actor: "bench"}); err != nil {
		return nil, err
	}
	if _, err := tenants.Create(ctx, tenant.CreateRequest{ID: "first-free", Tier: tenant.TierFree, Actor: "bench"}); err != nil {
		return nil, err
	}
	probe.mu.Lock()
	probe.limits["backlog-enterprise"], probe.limits["first-free"] = 20, 1
	probe.mu.Unlock()
	for from := 0; from < cfg.Backlog; from += 1000 {
		if _, err := start(managers[0], "backlog-enterprise", min(1000, cfg.Backlog-from)); err != nil {
			return nil, err
		}
	}
	ids, err := start(managers[len(managers)-1], "first-free", 1)
	if err != nil {
		return nil, err
	}
	waitCtx, cancel = context.WithTimeout(ctx, 60*time.Second)
	err = probe.waitRunning(waitCtx, ids)
	cancel()
	if err != nil {
		return nil, err
	}
	res.FreeBehindBacklogMs = round(float64(probe.latency(ids[0]))/float64(time.Millisecond), 1)
	if t, err := tenants.Get(ctx, "backlog-enterprise"); err == nil {
		res.BacklogQueued = t.Queued
	}
	stopSampler()
	<-samplerDone
	res.StepViolations = probe.violations.Load()
	return res, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
