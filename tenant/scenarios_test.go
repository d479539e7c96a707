package tenant_test

// Seed 002's testing scenarios and the tests that cover them (a scenario the design replaces is
// tested through the mechanism that replaces it):
//
//   - claim 10 of 15, dispatch all, next cycle takes 5; empty queue: drivertest
//     Tenants/AdmitNextInBatches (both drivers); TestCapacityLimitedAdmission (the runs).
//   - workspace at capacity (released to pending, not an attempt, logged and counted):
//     TestCapacityLimitedAdmission, drivertest Tenants/AdmitsUpToTheLimitAndHandsTheSlotOn.
//   - queue item with its execution id set reuses it: TestStartWithIDReused.
//   - workspace deleted (FAILED), suspended (held), missing (FAILED): TestTenantStatusesAndFailures,
//     drivertest Tenants/TenantStatuses.
//   - workflow definition deleted (FAILED): TestTenantStatusesAndFailures (UNKNOWN_DEFINITION).
//   - lock unavailable: there is no global lock; a tenant row locked by another transaction is
//     skipped, counted and retried 10 ms later: TestLockedTenantRetriedSoon.
//   - start fails (Temporal down), retried then failed after 3 attempts: TestStartErrorRetriedThenParked
//     (retried with backoff, then parked for an operator with the error, keeping its slot).
//   - database connection lost during the claim: TestAdmissionSurvivesOutage.
//   - dispatcher crash while items are claimed (stale recovery): TestStaleClaimRecovered, drivertest
//     StaleClaims.
//   - transaction rollback of one item does not roll back the batch: each admission, insert and
//     checkpoint is its own transaction; drivertest Tenants (a refused update changes nothing).
//   - lock timeout after 4 minutes: replaced by leases with fences (a stale runner's writes are
//     fenced out): drivertest StaleClaims (the fence grows), the execution engine's lease tests.
//   - the limit is never exceeded across replicas: TestExactLimitAcrossReplicas.
//   - fairness behind a backlog: TestFairAcrossTenants.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/tenant"
	"github.com/commandbus/commandbus/workflow"
)

// gathered returns the value of a counter, 0 when it has no sample yet.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			total := 0.0
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
			return total
		}
	}
	return 0
}

// Seed scenario "dispatcher crash while items are claimed": the execution a dead runner held is
// claimed again when its lease runs out, and the recovery is counted.
func TestStaleClaimRecovered(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		b := newBundle(t, drv, options{poll: 20 * time.Millisecond})
		b.create(t, "acme", tenant.TierPro)
		id := b.start(t, "acme", 1)[0]
		waitStatus(t, drv, id, driver.ExecutionWaitingForAsync)
		// A runner takes it up (a response came) and dies: its lease runs out.
		_, err := drv.Executor().ExecutionAcquire(ctx, &driver.ExecutionAcquireParams{ID: id, Lease: 100 * time.Millisecond, WorkerID: "dead"})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return gathered(t, b.reg, "commandbus_admission_stale_recovered_total") == 1 },
			10*time.Second, 5*time.Millisecond, "the pending poller claims it again and counts the recovery")
		x := waitStatus(t, drv, id, driver.ExecutionWaitingForAsync)
		require.GreaterOrEqual(t, x.Fence, int64(3), "claimed again after the dead runner")
		got, err := b.tenants.Get(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, 1, got.Active, "it kept its slot through the recovery")
	})
}

// Seed scenario "lock unavailable": a slot freed while another transaction holds the tenant's
// row is not lost: the admission round skips the locked tenant (counted as a lock failure) and
// tries again shortly, not at the next poll.
func TestLockedTenantRetriedSoon(t *testing.T) {
	t.Parallel()
	drv := dbtest.Postgres(t)
	ctx := context.Background()
	b := newBundle(t, drv, options{})
	b.create(t, "acme", tenant.TierFree)
	ids := b.start(t, "acme", 2)
	waitStatus(t, drv, ids[0], driver.ExecutionWaitingForAsync)

	holder, err := drv.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `SELECT 1 FROM `+drv.Schema()+`.tenant WHERE id = 'acme' FOR UPDATE`)
	require.NoError(t, err)
	_, err = b.jobs.Signal(ctx, ids[0], "go", nil, "")
	require.NoError(t, err)
	waitStatus(t, drv, ids[0], driver.ExecutionCompleted)
	require.Eventually(t, func() bool { return gathered(t, b.reg, "commandbus_admission_lock_failures_total") > 0 },
		10*time.Second, 5*time.Millisecond, "the round found the tenant locked")
	require.Equal(t, driver.ExecutionQueued, row(t, drv, ids[1]).Status, "not admitted behind the lock")
	require.NoError(t, holder.Commit(ctx))
	waitStatus(t, drv, ids[1], driver.ExecutionWaitingForAsync) // the admission poll would wait an hour
}

// Seed scenario "queue item with an execution id set reuses it": a start that names its id is
// idempotent, so a retried start never creates a second execution or takes a second slot.
func TestStartWithIDReused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		b := newBundle(t, drv, options{})
		b.create(t, "acme", tenant.TierPro)
		id := uuid.Must(uuid.NewV7())
		for range 3 {
			got, err := b.jobs.Start(ctx, nil, workflow.WithID(id), workflow.WithTenant("acme"))
			require.NoError(t, err)
			require.Equal(t, id, got)
		}
		waitStatus(t, drv, id, driver.ExecutionWaitingForAsync)
		got, err := b.tenants.Get(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, 1, got.Active)
		require.Equal(t, 0, got.Queued)
	})
}

// Seed scenario "the start fails (Temporal down): retried, then FAILED after 3 attempts". Here a
// failing start is the first step failing: it is retried with backoff by its policy; after the
// third attempt the execution leaves the retry loop with the error recorded and parks for an
// operator (the troubleshooting queue, which replaces a silent FAILED in this design). It keeps
// its slot until an operator ends it, and the end hands the slot on.
func TestStartErrorRetriedThenParked(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		var attempts atomic.Int32
		var failing *workflow.Manager
		b := newBundle(t, drv, options{poll: 20 * time.Millisecond, register: func(rt *orchestration.Runtime) error {
			if err := rt.LimitCapacity("flaky"); err != nil {
				return err
			}
			var err error
			failing, err = workflow.Register(rt, workflow.New("flaky", 1).Step("start", func(context.Context, *workflow.StepContext) (any, error) {
				attempts.Add(1)
				return nil, errors.New("engine unavailable")
			}, workflow.Retry(workflow.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond,
				RetryOn: func(error) bool { return true }})))
			return err
		}})
		b.create(t, "acme", tenant.TierFree)
		id, err := failing.Start(ctx, nil, workflow.WithTenant("acme"))
		require.NoError(t, err)
		next := b.start(t, "acme", 1)
		x := waitStatus(t, drv, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, int32(3), attempts.Load())
		require.Contains(t, x.ErrorMessage, "engine unavailable")
		require.Equal(t, driver.ExecutionQueued, row(t, drv, next[0]).Status, "the parked execution keeps its slot")

		require.NoError(t, failing.CancelOverride(ctx, id, false, operator()))
		waitStatus(t, drv, id, driver.ExecutionCancelled)
		waitStatus(t, drv, next[0], driver.ExecutionWaitingForAsync)
	})
}

func operator() commandbus.OperatorAction {
	return commandbus.OperatorAction{Actor: "ops@example.com", Reason: "the engine will not come back today"}
}

// Seed scenario "database connection lost during the claim": the admission dispatcher's rounds
// fail while the database is away, change nothing, and the next round after it is back admits.
func TestAdmissionSurvivesOutage(t *testing.T) {
	t.Parallel()
	drv, outage := dbtest.PostgresWithOutage(t)
	ctx := context.Background()
	b := newBundle(t, drv, options{poll: 50 * time.Millisecond})
	b.create(t, "acme", tenant.TierFree)
	ids := b.start(t, "acme", 2)
	waitStatus(t, drv, ids[0], driver.ExecutionWaitingForAsync)

	outage.Begin()
	// A limit raised behind the service's back (another connection): only a dispatcher round
	// admits the queued execution.
	_, err := dbtest.Pool(t).Exec(ctx, `UPDATE `+drv.Schema()+`.tenant SET max_active_override = 2 WHERE id = 'acme'`)
	require.NoError(t, err)
	admitted := func() bool {
		var status string
		err := dbtest.Pool(t).QueryRow(ctx, `SELECT status FROM `+drv.Schema()+`.execution WHERE id = $1`, ids[1]).Scan(&status)
		require.NoError(t, err)
		return status != string(driver.ExecutionQueued)
	}
	require.Never(t, admitted, 300*time.Millisecond, 20*time.Millisecond, "nothing is admitted while the database is away")
	outage.End()
	waitStatus(t, drv, ids[1], driver.ExecutionWaitingForAsync)
}

type order struct{ N int }

type orderProcess struct{ gate chan struct{} }

func (orderProcess) Type() string   { return "order" }
func (orderProcess) Domain() string { return "orders" }
func (p orderProcess) Execute(x *process.Execution[order]) error {
	_, err := process.Step(x, "ship", func(ctx context.Context) (int, error) {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return x.State.N, nil
	})
	return err
}

// Capacity limits apply to any model: here a sequential process, whose immediate start becomes
// an admission (the pollers run it in its slot).
func TestCapacityLimitedProcess(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		gate := make(chan struct{})
		var orders *process.Manager[order]
		b := newBundle(t, drv, options{register: func(rt *orchestration.Runtime) error {
			if err := rt.LimitCapacity("order"); err != nil {
				return err
			}
			var err error
			orders, err = process.NewManager(rt, process.Process[order](orderProcess{gate: gate}))
			return err
		}})
		require.True(t, b.rt.CapacityLimited("order"))
		b.create(t, "acme", tenant.TierFree)
		first, err := orders.Start(ctx, order{N: 1}, process.WithTenant("acme"))
		require.NoError(t, err)
		second, err := orders.Start(ctx, order{N: 2}, process.WithTenant("acme"))
		require.NoError(t, err)
		waitStatus(t, drv, first, driver.ExecutionExecuting) // in its step, holding the slot
		require.Equal(t, driver.ExecutionQueued, row(t, drv, second).Status)
		close(gate)
		waitStatus(t, drv, first, driver.ExecutionCompleted)
		waitStatus(t, drv, second, driver.ExecutionCompleted)
	})
}
