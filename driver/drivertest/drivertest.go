// Package drivertest is the conformance suite every commandbus driver must pass. Each driver's
// tests call Exercise with a constructor for a fresh, migrated database; the suite then checks
// every method of driver.Driver and driver.Executor for the same observable behaviour, so that
// the engine above can treat PostgreSQL and SQLite alike.
//
//	func TestDriver(t *testing.T) {
//		t.Parallel()
//		drivertest.Exercise(t, func(t *testing.T) driver.Driver { return dbtest.SQLite(t) })
//	}
//
// Where a result depends on time the suite passes params.Now with fixed times; the few methods
// that read the database clock (queue depths, running counts, batch completion) are checked
// with margins of hours.
package drivertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

// Exercise runs the conformance suite. newDriver must return a driver on a fresh, migrated
// database on every call; the subtests run in parallel, each on its own database.
func Exercise(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	t.Helper()
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		drv := newDriver(t)
		return &testBundle{drv: drv, exec: drv.Executor()}
	}
	suites := []struct {
		name string
		run  func(t *testing.T, setup setupFunc)
	}{
		{"Driver", exerciseDriver},
		{"Transaction", exerciseTransaction},
		{"Notify", exerciseNotify},
		{"Migration", exerciseMigration},
		{"CommandInsertMany", exerciseCommandInsertMany},
		{"CommandGet", exerciseCommandGet},
		{"CommandList", exerciseCommandList},
		{"CommandClaim", exerciseCommandClaim},
		{"CommandCompleteMany", exerciseCommandCompleteMany},
		{"CommandOperatorAction", exerciseCommandOperatorAction},
		{"CommandQueueDepths", exerciseCommandQueueDepths},
		{"CommandStats", exerciseCommandStats},
		{"CommandCountRunning", exerciseCommandCountRunning},
		{"Batch", exerciseBatch},
		{"AuditLog", exerciseAuditLog},
		{"ExecutionInsertMany", exerciseExecutionInsertMany},
		{"ExecutionGet", exerciseExecutionGet},
		{"ExecutionList", exerciseExecutionList},
		{"ExecutionClaim", exerciseExecutionClaim},
		{"ExecutionAcquire", exerciseExecutionAcquire},
		{"ExecutionAcquireLoadMany", exerciseExecutionAcquireLoadMany},
		{"ExecutionCheckpointMany", exerciseExecutionCheckpointMany},
		{"ExecutionLog", exerciseExecutionLog},
		{"ExecutionResponses", exerciseExecutionResponses},
		{"ExecutionListDue", exerciseExecutionListDue},
		{"ExecutionCountByStatus", exerciseExecutionCountByStatus},
		{"ExecutionChildren", exerciseExecutionChildren},
		{"ExecutionAttributes", exerciseExecutionAttributes},
		{"ExecutionDeleteExpired", exerciseExecutionDeleteExpired},
		{"ExecutionSignals", exerciseExecutionSignals},
		{"ExecutionTimers", exerciseExecutionTimers},
		{"ExecutionWaits", exerciseExecutionWaits},
		{"ExecutionSignalsEnded", exerciseExecutionSignalsEnded},
		{"ExecutionSuspend", exerciseExecutionSuspend},
		{"ExecutionEvents", exerciseExecutionEvents},
		{"ExecutionHeartbeat", exerciseExecutionHeartbeat},
		{"Outbox", exerciseOutbox},
		{"Inbox", exerciseInbox},
		{"DLQ", exerciseDLQ},
		{"TccBarrier", exerciseTccBarrier},
		{"CommandDelivery", exerciseCommandDelivery},
		{"Schedules", exerciseSchedules},
		{"Tenants", exerciseTenants},
		{"StaleClaims", exerciseStaleClaims},
		{"TenantContinueAsNew", exerciseTenantContinueAsNew},
		{"Metrics", exerciseMetrics},
		{"ConsoleSessions", exerciseConsoleSessions},
	}
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.run(t, setup)
		})
	}
}

// testBundle is what every subtest works with: a fresh driver and its pool executor.
type testBundle struct {
	drv  driver.Driver
	exec driver.Executor
}

type setupFunc func(t *testing.T) *testBundle

// t0 is the fixed clock of time-dependent tests, with the microsecond precision both drivers
// store.
var t0 = time.Date(2024, 6, 1, 10, 0, 0, 123456000, time.UTC)

func ptr[T any](v T) *T { return &v }

// newCommand returns insert params with the fields every command needs. Its id is a UUIDv7, as
// the engine generates them, so commands created later list first.
func newCommand(domain, queue, typ string) *driver.CommandInsertParams {
	return &driver.CommandInsertParams{
		ID:          uuid.Must(uuid.NewV7()),
		Domain:      domain,
		Queue:       queue,
		Type:        typ,
		Data:        json.RawMessage(`{"n":1}`),
		MaxAttempts: 3,
	}
}

// insert inserts commands at now (nil: the database clock) and requires every one inserted.
func insert(t *testing.T, exec driver.Executor, now *time.Time, cmds ...*driver.CommandInsertParams) {
	t.Helper()
	results, err := exec.CommandInsertMany(context.Background(), &driver.CommandInsertManyParams{Commands: cmds, Now: now})
	require.NoError(t, err)
	require.Len(t, results, len(cmds))
	for i, r := range results {
		require.Equal(t, driver.CommandInsertResult{ID: cmds[i].ID, Inserted: true}, r, "command %d", i)
	}
}

func get(t *testing.T, exec driver.Executor, id uuid.UUID) *driver.CommandRow {
	t.Helper()
	cmd, err := exec.CommandGetByID(context.Background(), id)
	require.NoError(t, err)
	return cmd
}

func requireNotFound(t *testing.T, exec driver.Executor, id uuid.UUID) {
	t.Helper()
	_, err := exec.CommandGetByID(context.Background(), id)
	require.ErrorIs(t, err, driver.ErrNotFound)
}

// claim claims up to max commands of queue at now with the given lease.
func claim(t *testing.T, exec driver.Executor, queue string, max int, lease time.Duration, now *time.Time) []*driver.CommandRow {
	t.Helper()
	rows, err := exec.CommandClaim(context.Background(), &driver.CommandClaimParams{
		Queue: queue, Max: max, Lease: lease, WorkerID: "worker-1", Now: now,
	})
	require.NoError(t, err)
	return rows
}

func complete(t *testing.T, exec driver.Executor, now *time.Time, completions ...*driver.CommandCompletion) []uuid.UUID {
	t.Helper()
	applied, err := exec.CommandCompleteMany(context.Background(), &driver.CommandCompleteManyParams{Completions: completions, Now: now})
	require.NoError(t, err)
	return applied
}

func ids(rows []*driver.CommandRow) []uuid.UUID {
	out := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// requireCommand compares two commands field by field: times by instant, JSON by value.
func requireCommand(t *testing.T, want, got *driver.CommandRow) {
	t.Helper()
	require.NotNil(t, got)
	require.JSONEq(t, string(want.Data), string(got.Data), "data")
	if len(want.Result) == 0 {
		require.Empty(t, got.Result, "result")
	} else {
		require.JSONEq(t, string(want.Result), string(got.Result), "result")
	}
	require.Equal(t, normalizeCommand(want), normalizeCommand(got))
}

func normalizeCommand(c *driver.CommandRow) driver.CommandRow {
	out := *c
	out.Data, out.Result = nil, nil
	out.VisibleAt = out.VisibleAt.UTC()
	out.CreatedAt = out.CreatedAt.UTC()
	out.UpdatedAt = out.UpdatedAt.UTC()
	out.LeaseUntil = utcPtr(out.LeaseUntil)
	out.DeadlineAt = utcPtr(out.DeadlineAt)
	out.ParkedAt = utcPtr(out.ParkedAt)
	out.StartedAt = utcPtr(out.StartedAt)
	out.CompletedAt = utcPtr(out.CompletedAt)
	if len(out.Headers) == 0 {
		out.Headers = nil
	}
	out.Audit = normalizeAudit(out.Audit)
	return out
}

func normalizeAudit(entries []driver.AuditEntry) []driver.AuditEntry {
	if entries == nil {
		return nil
	}
	out := make([]driver.AuditEntry, len(entries))
	for i, e := range entries {
		e.At = e.At.UTC()
		out[i] = e
	}
	return out
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// claimedEntry is the CLAIMED audit entry of a claim made at at.
func claimedEntry(at time.Time, attempt int, worker string) driver.AuditEntry {
	return driver.AuditEntry{
		At: at, Event: "CLAIMED", From: driver.CommandStatusPending, To: driver.CommandStatusRunning,
		Attempt: attempt, Actor: worker,
	}
}

// requireAudit compares a command's whole audit trail as CommandGetByID returns it. Comparing
// the whole trail also shows that entries rebuilt from the columns are not stored as well: they
// would appear twice.
func requireAudit(t *testing.T, exec driver.Executor, id uuid.UUID, want ...driver.AuditEntry) {
	t.Helper()
	require.Equal(t, normalizeAudit(want), normalizeAudit(get(t, exec, id).Audit))
}

// lastAudit returns the newest audit entry of a command, normalized for comparison.
func lastAudit(t *testing.T, exec driver.Executor, id uuid.UUID) driver.AuditEntry {
	t.Helper()
	cmd := get(t, exec, id)
	require.NotEmpty(t, cmd.Audit)
	return normalizeAudit(cmd.Audit)[len(cmd.Audit)-1]
}

func requireTime(t *testing.T, want, got time.Time, what string) {
	t.Helper()
	require.Truef(t, want.Equal(got), "%s: want %s, got %s", what, want.UTC(), got.UTC())
}

func requireTimePtr(t *testing.T, want time.Time, got *time.Time, what string) {
	t.Helper()
	require.NotNilf(t, got, "%s", what)
	requireTime(t, want, *got, what)
}

// within is the margin for timestamps taken from a real clock (the database's or the
// process's).
const within = time.Minute
