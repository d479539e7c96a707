package tenant_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tenant"
	"github.com/commandbus/commandbus/workflow"
)

// bundle is one replica: a client with its runtime and a capacity-limited workflow "job" that
// waits for the signal "go" (so an admitted execution holds its slot while it waits).
type bundle struct {
	client  *commandbus.Client
	rt      *orchestration.Runtime
	jobs    *workflow.Manager
	tenants *tenant.Service
	reg     *prometheus.Registry
}

type options struct {
	// poll is the pollers' interval (pending and admission): long, so a test that passes shows
	// that nothing waited for a poll.
	poll     time.Duration
	lease    time.Duration
	unknown  time.Duration
	steps    workflow.StepFunc
	register func(rt *orchestration.Runtime) error
}

func newBundle(t *testing.T, drv driver.Driver, o options) *bundle {
	t.Helper()
	if o.poll == 0 {
		o.poll = time.Hour
	}
	reg := prometheus.NewRegistry()
	cfg := &commandbus.Config{Logger: slog.New(slog.DiscardHandler), MetricsRegisterer: reg}
	cfg.Process.PendingPollInterval = commandbus.Duration(o.poll)
	cfg.Process.RetryPollInterval = commandbus.Duration(o.poll)
	if o.lease > 0 {
		cfg.Process.ExecutionLease = commandbus.Duration(o.lease)
	}
	client, err := commandbus.NewClient(drv, cfg)
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{Admission: orchestration.AdmissionConfig{
		CapacityLimited: []string{"job"}, PollInterval: o.poll, UnknownDefinitionCheckInterval: o.unknown,
	}})
	require.NoError(t, err)
	def := workflow.New("job", 1).WaitSignal("wait", "go")
	if o.steps != nil {
		def = workflow.New("job", 1).Step("work", o.steps)
	}
	jobs, err := workflow.Register(rt, def)
	require.NoError(t, err)
	if o.register != nil {
		require.NoError(t, o.register(rt))
	}
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	return &bundle{client: client, rt: rt, jobs: jobs, tenants: tenant.New(client), reg: reg}
}

func (b *bundle) create(t *testing.T, id, tier string) {
	t.Helper()
	_, err := b.tenants.Create(context.Background(), tenant.CreateRequest{ID: id, Tier: tier, Actor: "test"})
	require.NoError(t, err)
}

func (b *bundle) start(t *testing.T, tenantID string, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		id, err := b.jobs.Start(context.Background(), map[string]int{"n": i}, workflow.WithTenant(tenantID))
		require.NoError(t, err)
		ids[i] = id
	}
	return ids
}

func row(t *testing.T, drv driver.Driver, id uuid.UUID) *driver.ExecutionRow {
	t.Helper()
	x, err := drv.Executor().ExecutionGet(context.Background(), id)
	require.NoError(t, err)
	return x
}

// waitStatus polls, with a deadline, until the execution has status.
func waitStatus(t *testing.T, drv driver.Driver, id uuid.UUID, status driver.ExecutionStatus) *driver.ExecutionRow {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		x := row(t, drv, id)
		if x.Status == status {
			return x
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s never reached %s: %+v", id, status, x)
		}
		time.Sleep(5 * time.Millisecond) // polling the database with a deadline
	}
}

// An execution of a capacity-limited type runs only in a free slot of its tenant, keeps it while
// it waits for a signal, and hands it to the next queued one when it ends, with no poll delay.
func TestCapacityLimitedAdmission(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		b := newBundle(t, drv, options{})
		b.create(t, "free", tenant.TierFree)
		ids := b.start(t, "free", 3)

		first := waitStatus(t, drv, ids[0], driver.ExecutionWaitingForAsync)
		require.Equal(t, driver.ExecutionQueued, row(t, drv, ids[1]).Status, "FREE: one at a time")
		require.Equal(t, driver.ExecutionQueued, row(t, drv, ids[2]).Status)
		require.Equal(t, 0, first.Retries)
		got, err := b.tenants.Get(ctx, "free")
		require.NoError(t, err)
		require.Equal(t, 1, got.Active, "a waiting execution keeps its slot")
		require.Equal(t, 2, got.Queued)
		require.Equal(t, 1, got.MaxActive)

		// A signal to a queued execution is kept for it; it does not run it.
		_, err = b.jobs.Signal(ctx, ids[2], "go", nil, "")
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionQueued, row(t, drv, ids[2]).Status)

		// Ending the first admits the second at once: the pollers would wait an hour.
		_, err = b.jobs.Signal(ctx, ids[0], "go", nil, "")
		require.NoError(t, err)
		waitStatus(t, drv, ids[0], driver.ExecutionCompleted)
		second := waitStatus(t, drv, ids[1], driver.ExecutionWaitingForAsync)
		require.Equal(t, 0, second.Retries, "waiting for a slot is not an attempt")
		require.Equal(t, driver.ExecutionQueued, row(t, drv, ids[2]).Status)
		_, err = b.jobs.Signal(ctx, ids[1], "go", nil, "")
		require.NoError(t, err)
		waitStatus(t, drv, ids[2], driver.ExecutionCompleted) // its early signal was applied

		require.Equal(t, 2.0, testutil.ToFloat64(counter(t, b.reg, "commandbus_admission_at_capacity_total")),
			"the two deferrals at the start are counted")
		require.Equal(t, 1.0, testutil.ToFloat64(counter(t, b.reg, "commandbus_admission_dispatched_total")),
			"the admission at the start (hand-overs at a release are the trigger's)")
	})
}

// counter finds a registered counter by name.
func counter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return constCounter{value: f.GetMetric()[0].GetCounter().GetValue()}
		}
	}
	return constCounter{}
}

type constCounter struct{ value float64 }

func (c constCounter) Describe(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc("c", "c", nil, nil)
}

func (c constCounter) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("c", "c", nil, nil), prometheus.CounterValue, c.value)
}

// A tenant's status decides what happens to its queue; a missing tenant's executions fail;
// executions of a type no runner has fail; a raised limit admits at once; a start without a
// tenant is refused before anything is written.
func TestTenantStatusesAndFailures(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		b := newBundle(t, drv, options{unknown: 20 * time.Millisecond})
		b.create(t, "acme", tenant.TierFree)
		ids := b.start(t, "acme", 3)
		waitStatus(t, drv, ids[0], driver.ExecutionWaitingForAsync)

		// Suspended: queued executions are held; the running one keeps running.
		_, _, err := b.tenants.Update(ctx, "acme", tenant.UpdateRequest{Status: ptr(tenant.StatusSuspended), MaxActiveOverride: ptr(3), Actor: "op"})
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionQueued, row(t, drv, ids[1]).Status, "held while suspended")
		// Active again with a limit of 3: both admitted at once.
		_, admission, err := b.tenants.Update(ctx, "acme", tenant.UpdateRequest{Status: ptr(tenant.StatusActive), Actor: "op", Reason: "paid"})
		require.NoError(t, err)
		require.Equal(t, 2, admission.Admitted)
		waitStatus(t, drv, ids[2], driver.ExecutionWaitingForAsync)

		// Deleted: new executions end FAILED at once.
		_, _, err = b.tenants.Update(ctx, "acme", tenant.UpdateRequest{Status: ptr(tenant.StatusDeleted), Actor: "op"})
		require.NoError(t, err)
		late := b.start(t, "acme", 1)
		x := row(t, drv, late[0])
		require.Equal(t, driver.ExecutionFailed, x.Status)
		require.Equal(t, driver.CodeTenantDeleted, x.ErrorCode)

		missing := b.start(t, "nobody", 1)
		x = row(t, drv, missing[0])
		require.Equal(t, driver.ExecutionFailed, x.Status)
		require.Equal(t, driver.CodeTenantNotFound, x.ErrorCode)

		_, err = b.jobs.Start(ctx, nil)
		require.ErrorContains(t, err, "needs a tenant id", "refused before anything is written")

		// An unknown definition: a queued execution of a type no runner of this instance has.
		b.create(t, "ghosts", tenant.TierFree)
		ghost := &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7()), Model: "workflow", Type: "ghost", Domain: "d", TenantID: "ghosts"}
		other := &driver.ExecutionInsertParams{ID: uuid.Must(uuid.NewV7()), Model: "workflow", Type: "ghost", Domain: "d", TenantID: "ghosts"}
		require.NoError(t, driver.WithTx(ctx, drv.Executor(), func(tx driver.ExecutorTx) error {
			if _, err := tx.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{Executions: []*driver.ExecutionInsertParams{ghost, other}}); err != nil {
				return err
			}
			_, err := tx.ExecutionQueue(ctx, &driver.ExecutionQueueParams{IDs: []uuid.UUID{ghost.ID, other.ID}})
			return err
		}))
		for _, id := range []uuid.UUID{ghost.ID, other.ID} {
			x = waitStatus(t, drv, id, driver.ExecutionFailed)
			require.Equal(t, driver.CodeUnknownDefinition, x.ErrorCode)
		}
		g, err := b.tenants.Get(ctx, "ghosts")
		require.NoError(t, err)
		require.Equal(t, 0, g.Active, "the admitted ghost's slot was given back")

		audit, err := drv.Executor().AuditLogList(ctx, &driver.AuditLogListParams{EntityType: "tenant", EntityID: "acme"})
		require.NoError(t, err)
		require.Len(t, audit, 4, "create and three updates")
	})
}

// Bad input names the field and writes nothing.
func TestValidation(t *testing.T) {
	t.Parallel()
	drv := dbtest.SQLite(t)
	ctx := context.Background()
	s := tenant.NewWithExecutor(drv.Executor(), nil)
	field := func(err error) []string {
		var fields []string
		for _, e := range flatten(err) {
			var v *commandbus.ValidationError
			if errors.As(e, &v) {
				fields = append(fields, v.Field)
			}
		}
		return fields
	}
	_, err := s.Create(ctx, tenant.CreateRequest{ID: "", Tier: "free", MaxActiveOverride: ptr(-1)})
	require.Equal(t, []string{"id", "tier", "maxActiveOverride"}, field(err))
	_, err = s.Create(ctx, tenant.CreateRequest{ID: "a", Tier: "GOLD"})
	require.Equal(t, []string{"tier"}, field(err), "an unknown tier")
	_, err = s.Create(ctx, tenant.CreateRequest{ID: "a", Tier: tenant.TierPro})
	require.NoError(t, err)
	_, err = s.Create(ctx, tenant.CreateRequest{ID: "a", Tier: tenant.TierFree})
	require.Equal(t, []string{"id"}, field(err), "a duplicate id")
	_, _, err = s.Update(ctx, "a", tenant.UpdateRequest{MaxActiveOverride: ptr(-2), Status: ptr(tenant.Status("gone"))})
	require.Equal(t, []string{"status", "maxActiveOverride"}, field(err))
	_, _, err = s.Update(ctx, "missing", tenant.UpdateRequest{Tier: ptr(tenant.TierPro)})
	require.ErrorIs(t, err, commandbus.ErrNotFound)
	got, err := s.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, tenant.TierPro, got.Tier)
	require.Nil(t, got.MaxActiveOverride, "nothing was written")
	list, err := s.List(ctx, tenant.ListRequest{})
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func ptr[T any](v T) *T { return &v }

// One tenant's backlog does not delay another tenant's first execution: admission is per tenant,
// so the FREE tenant's first execution runs at once behind an ENTERPRISE backlog.
func TestFairAcrossTenants(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		b := newBundle(t, drv, options{})
		b.create(t, "big", tenant.TierEnterprise)
		b.create(t, "small", tenant.TierFree)
		const backlog = 500
		states := make([]any, backlog)
		for i := range states {
			states[i] = map[string]int{"n": i}
		}
		_, err := b.jobs.StartMany(ctx, states, workflow.WithTenant("big"))
		require.NoError(t, err)
		started := time.Now()
		small := b.start(t, "small", 1)
		waitStatus(t, drv, small[0], driver.ExecutionWaitingForAsync)
		waited := time.Since(started)
		big, err := b.tenants.Get(ctx, "big")
		require.NoError(t, err)
		require.Equal(t, 20, big.Active)
		require.Equal(t, backlog-20, big.Queued, "the backlog is still there")
		t.Logf("FREE tenant's first execution running %s after its start, behind %d queued", waited, big.Queued)
	})
}

// Several engines (replicas) on one PostgreSQL database start executions of several tenants at
// once; a tenant never has more executions running than its limit, as seen both by the steps
// themselves and by an independent sampler of the database.
func TestExactLimitAcrossReplicas(t *testing.T) {
	t.Parallel()
	drv := dbtest.Postgres(t)
	ctx := context.Background()
	limits := map[string]int{"t1": 1, "t2": 2, "t3": 3, "t4": 5}
	var mu sync.Mutex
	running, peak := map[string]int{}, map[string]int{}
	var violations atomic.Int64
	work := func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		var in struct{ Tenant string }
		if err := json.Unmarshal(sc.Input, &in); err != nil {
			return nil, err
		}
		tenantID := in.Tenant
		mu.Lock()
		running[tenantID]++
		peak[tenantID] = max(peak[tenantID], running[tenantID])
		if running[tenantID] > limits[tenantID] {
			violations.Add(1)
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // the step's work, so executions overlap
		mu.Lock()
		running[tenantID]--
		mu.Unlock()
		return nil, nil
	}
	const replicas = 4
	bundles := make([]*bundle, replicas)
	for i := range bundles {
		bundles[i] = newBundle(t, drv, options{steps: work, poll: 50 * time.Millisecond})
	}
	for id, limit := range limits {
		_, err := bundles[0].tenants.Create(ctx, tenant.CreateRequest{ID: id, Tier: tenant.TierFree, MaxActiveOverride: ptr(limit)})
		require.NoError(t, err)
	}

	// The independent sampler: executions holding a slot, and admitted executions not yet
	// ended, per tenant, straight from the database.
	stop := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		var bad error
		samples := 0
		defer func() { sampled <- bad }()
		for {
			select {
			case <-stop:
				if samples == 0 {
					bad = errors.New("no sample taken")
				}
				return
			default:
			}
			for id, limit := range limits {
				rows, err := drv.Executor().ExecutionList(ctx, &driver.ExecutionListParams{TenantID: id, Limit: 1000,
					Statuses: []driver.ExecutionStatus{driver.ExecutionPending, driver.ExecutionExecuting, driver.ExecutionWaitingForAsync,
						driver.ExecutionWaitingForRetry, driver.ExecutionWaitingForTSQ, driver.ExecutionCompensating, driver.ExecutionSuspended}})
				if err != nil {
					continue
				}
				if len(rows) > limit && bad == nil {
					bad = fmt.Errorf("tenant %s had %d admitted executions, limit %d", id, len(rows), limit)
				}
			}
			samples++
		}
	}()

	const perReplicaPerTenant = 15
	var wg sync.WaitGroup
	var all sync.Map
	for _, b := range bundles {
		for id := range limits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				states := make([]any, perReplicaPerTenant)
				for i := range states {
					states[i] = map[string]any{"n": i, "tenant": id}
				}
				ids, err := b.jobs.StartMany(ctx, states, workflow.WithTenant(id))
				if err != nil {
					t.Errorf("start: %v", err)
					return
				}
				for _, x := range ids {
					all.Store(x, true)
				}
			}()
		}
	}
	wg.Wait()
	all.Range(func(k, _ any) bool {
		waitStatus(t, drv, k.(uuid.UUID), driver.ExecutionCompleted)
		return true
	})
	close(stop)
	require.NoError(t, <-sampled)
	require.Zero(t, violations.Load(), "a tenant ran more executions at once than its limit")
	mu.Lock()
	t.Logf("peak running per tenant %v, limits %v", peak, limits)
	require.Equal(t, 2, peak["t2"], "the limit was reached: executions did overlap") // t1's 1 is trivially reached
	mu.Unlock()
	for id := range limits {
		got, err := bundles[0].tenants.Get(ctx, id)
		require.NoError(t, err)
		require.Zero(t, got.Active, "every slot was given back")
		require.Zero(t, got.Queued)
	}
}
