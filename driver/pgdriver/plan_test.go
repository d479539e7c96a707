package pgdriver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/migrate"
)

// planRecorder stands in for the pool: instead of running a statement it EXPLAINs it and keeps
// the plan, so the test checks the plans of the exact statements the driver sends.
type planRecorder struct {
	pool *pgxpool.Pool
	plan string
	// analyze runs the statement instead (EXPLAIN ANALYZE, with buffers, as JSON, in a transaction
	// rolled back), with the planner's own choices.
	analyze bool
}

var errExplained = errors.New("explained, not run")

func (r *planRecorder) explain(ctx context.Context, sql string, args ...any) error {
	return r.explainAfter(ctx, nil, sql, args...)
}

// explainAfter explains sql after running before (statements of the same transaction).
func (r *planRecorder) explainAfter(ctx context.Context, before []*pgx.QueuedQuery, sql string, args ...any) error {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range before {
		if _, err := tx.Exec(ctx, q.SQL, q.Arguments...); err != nil {
			return err
		}
	}
	explain := "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
	if !r.analyze {
		// With sequential scans priced out, the planner uses an index whenever one matches the
		// query; a query that still scans the table has no index that fits.
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		explain = "EXPLAIN "
	}
	rows, err := tx.Query(ctx, explain+sql, args...)
	if err != nil {
		return err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	r.plan = strings.Join(lines, "\n")
	return errExplained
}

func (r *planRecorder) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, r.explain(ctx, sql, args...)
}

func (r *planRecorder) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return nil, r.explain(ctx, sql, args...)
}

func (r *planRecorder) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return errRow{r.explain(ctx, sql, args...)}
}

func (r *planRecorder) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errExplained
}

func (r *planRecorder) Begin(context.Context) (pgx.Tx, error) { return nil, errExplained }

// SendBatch explains the batch's last statement, after running the statements before it in the
// same transaction (BEGIN and COMMIT excepted: explain runs in a transaction of its own).
func (r *planRecorder) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	var before []*pgx.QueuedQuery
	for _, q := range b.QueuedQueries {
		if q.SQL != "BEGIN" && q.SQL != "COMMIT" {
			before = append(before, q)
		}
	}
	if len(before) == 0 {
		return errBatch{errExplained}
	}
	last := before[len(before)-1]
	return errBatch{r.explainAfter(ctx, before[:len(before)-1], last.SQL, last.Arguments...)}
}

// errBatch is batch results that all fail with err.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow{b.err} }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// planSchema returns a pool and a driver on a freshly migrated schema of its own, dropped when
// the test ends.
func planSchema(t *testing.T) (*pgxpool.Pool, *Driver) {
	t.Helper()
	url := os.Getenv("COMMANDBUS_TEST_DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test"
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if os.Getenv("COMMANDBUS_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("PostgreSQL is required but unreachable: %v", err)
		}
		t.Skipf("skipping: PostgreSQL unreachable at %s: %v", url, err)
	}
	t.Cleanup(pool.Close)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "cbplan_" + hex.EncodeToString(b[:])
	drv, err := New(pool, &Config{Schema: schema})
	require.NoError(t, err)
	_, err = migrate.New(drv, nil).Up(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	return pool, drv
}

// TestPollerQueryPlans checks that every poller and claim query is served by its index.
func TestPollerQueryPlans(t *testing.T) {
	ctx := context.Background()
	pool, drv := planSchema(t)

	rec := &planRecorder{pool: pool}
	exec := &executor{d: drv, db: rec}
	now := time.Now()
	for _, tc := range []struct {
		name  string
		run   func() error
		index string
	}{
		{"command claim", func() error {
			_, err := exec.CommandClaim(ctx, &driver.CommandClaimParams{Queue: "fx__commands", Max: 10, Lease: time.Second, WorkerID: "w"})
			return err
		}, "command_claim_idx"},
		{"troubleshooting queue", func() error {
			_, err := exec.CommandList(ctx, &driver.CommandListParams{Statuses: []driver.CommandStatus{driver.CommandStatusInTSQ}, Domain: "fx"})
			return err
		}, "command_tsq_idx"},
		{"pending poller", func() error {
			_, err := exec.ExecutionClaim(ctx, &driver.ExecutionClaimParams{Kind: driver.ClaimPending, Max: 10, Lease: time.Second, WorkerID: "w"})
			return err
		}, "execution_wake_idx"},
		{"retry poller", func() error {
			_, err := exec.ExecutionClaim(ctx, &driver.ExecutionClaimParams{Kind: driver.ClaimRetry, Max: 10, Lease: time.Second, WorkerID: "w"})
			return err
		}, "execution_retry_idx"},
		{"wait-timeout checker", func() error {
			_, err := exec.ExecutionListDue(ctx, &driver.ExecutionListDueParams{Kind: driver.DueWaitTimeout, Max: 10, Now: &now})
			return err
		}, "execution_wait_timeout_idx"},
		{"deadline checker", func() error {
			_, err := exec.ExecutionListDue(ctx, &driver.ExecutionListDueParams{Kind: driver.DueDeadline, Max: 10, Now: &now})
			return err
		}, "execution_deadline_idx"},
		{"process troubleshooting queue", func() error {
			_, err := exec.ExecutionList(ctx, &driver.ExecutionListParams{Statuses: []driver.ExecutionStatus{driver.ExecutionWaitingForTSQ}, Domain: "payments"})
			return err
		}, "execution_tsq_idx"},
		{"execution retention", func() error {
			_, err := exec.ExecutionDeleteExpired(ctx, &driver.ExecutionDeleteExpiredParams{Before: now, Limit: 500})
			return err
		}, "execution_completed_idx"},
		{"attribute search", func() error {
			_, err := exec.ExecutionList(ctx, &driver.ExecutionListParams{Attributes: map[string]string{"customer": "c-1"}})
			return err
		}, "execution_attribute_search_idx"},
	} {
		rec.plan = ""
		require.ErrorIs(t, tc.run(), errExplained, tc.name)
		require.Contains(t, rec.plan, tc.index, "%s should use %s; plan:\n%s", tc.name, tc.index, rec.plan)
		require.NotContains(t, rec.plan, "Seq Scan on command ", tc.name)
		require.NotContains(t, rec.plan, "Seq Scan on execution ", tc.name)
		t.Logf("%s:\n%s", tc.name, rec.plan)
	}
}

// TestOutboxClaimReadsLinearly claims from a fresh outbox (no statistics, as after a migration
// on a server without autovacuum) holding a backlog of 8,000 messages over 100 keys, and checks
// the claim reads a number of pages proportional to what it claims (26–30 per message; the
// plan that joined on key read 190). A plan that joined heads and
// followers on key scanned every unpublished row per head and per follower: such a claim took 30
// s during a burst of lifecycle events.
func TestOutboxClaimReadsLinearly(t *testing.T) {
	ctx := context.Background()
	pool, drv := planSchema(t)

	var msgs []*driver.OutboxInsertParams
	for i := range 8000 {
		msgs = append(msgs, &driver.OutboxInsertParams{Category: driver.OutboxCategoryEvent, Transport: "kafka", Topic: "t",
			Key: fmt.Sprintf("k%d", i%100), Type: "E", MessageID: fmt.Sprint(i), Payload: []byte(`{}`)})
	}
	exec := drv.Executor()
	for from := 0; from < len(msgs); from += 500 {
		_, err := exec.OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: msgs[from : from+500]})
		require.NoError(t, err)
	}

	// The claim as the driver sends it, EXPLAIN ANALYZEd in a transaction rolled back.
	rows, pages, _ := explainClaim(t, pool, drv, &driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 2000,
		Lease: time.Minute, RelayID: "r"})
	require.EqualValues(t, 2000, rows)
	t.Logf("claiming 2,000 of 8,000 messages over 100 keys read %d pages", pages)
	require.Less(t, pages, int64(40*2000), "the claim reads pages in proportion to what it claims, not to the backlog times the claim")
}

// A claim on a busy outbox reads pages in proportion to what it claims, not to what was published
// since the last vacuum: the entries of published rows stay in the unpublished index until vacuum
// removes them, and a bitmap scan, which the planner chose on some runs, read every one of them at
// every claim (about 900 pages to find 11 rows in a benchmark). An index scan marks the dead
// entries it meets, so the next claims skip them.
func TestOutboxClaimSkipsDeadEntries(t *testing.T) {
	ctx := context.Background()
	pool, drv := planSchema(t)
	_, err := pool.Exec(ctx, drv.sql(`ALTER TABLE {schema}.outbox SET (autovacuum_enabled = false)`))
	require.NoError(t, err)
	exec := drv.Executor()
	payload := []byte(`{"events":"` + strings.Repeat("x", 1000) + `"}`) // a lifecycle event's size
	next := 0
	insert := func(n int) {
		var msgs []*driver.OutboxInsertParams
		for range n {
			msgs = append(msgs, &driver.OutboxInsertParams{Category: driver.OutboxCategoryEvent, Transport: "kafka", Topic: "t",
				Key: fmt.Sprintf("k%d", next/5), Type: "E", MessageID: fmt.Sprint(next), Payload: payload})
			next++
		}
		_, err := exec.OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: msgs})
		require.NoError(t, err)
	}
	// A relay at work: messages come, are claimed, published and marked by the next claim. Other
	// tests' transactions may hold the horizon back a moment: the relay claims again until it has
	// taken everything written.
	var published []int64
	claimed := 0
	for range 100 {
		insert(50)
		for deadline := time.Now().Add(15 * time.Second); claimed < next; {
			rows, err := exec.OutboxClaim(ctx, &driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 500,
				Lease: time.Minute, RelayID: "r", Published: published})
			require.NoError(t, err)
			published = published[:0]
			for _, r := range rows {
				published = append(published, r.ID)
			}
			claimed += len(rows)
			if len(rows) == 0 {
				require.False(t, time.Now().After(deadline), "claimed %d of %d messages", claimed, next)
				time.Sleep(20 * time.Millisecond) // polling the horizon, not waiting for correctness
			}
		}
	}
	insert(10)

	// A claim takes rows below the horizon, which other tests' transactions may hold back a moment
	// (the explained claim is rolled back: it may run again).
	var rows, pages int64
	var claimPlan string
	for deadline := time.Now().Add(15 * time.Second); ; {
		rows, pages, claimPlan = explainClaim(t, pool, drv, &driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 500,
			Lease: time.Minute, RelayID: "r", Published: published})
		if rows == 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the horizon, not waiting for correctness
	}
	t.Logf("claiming %d messages after 5,000 published read %d pages", rows, pages)
	require.EqualValues(t, 10, rows)
	// Without statistics (autovacuum off) the planner chose a bitmap scan: 1,490 pages here, where
	// the index scan read 261 once earlier claims had marked the dead entries.
	require.NotContains(t, claimPlan, "Bitmap", "the claim scans the unpublished index in order, marking dead entries as it goes")
	require.NotContains(t, claimPlan, "Seq Scan")
	// The marks find their rows by primary key (the claim's batch marks with the statement of
	// OutboxMarkPublished). They used to search the unpublished indexes, whose statistics promise
	// few rows: a walk of the whole (key, txid, id) index per id.
	rec := &planRecorder{pool: pool, analyze: true}
	_, err = (&executor{d: drv, db: rec}).OutboxMarkPublished(ctx, &driver.OutboxMarkPublishedParams{IDs: published})
	require.ErrorIs(t, err, errExplained)
	requireByPrimaryKey(t, rec.plan)
	rec = &planRecorder{pool: pool, analyze: true}
	_, err = (&executor{d: drv, db: rec}).OutboxMarkFailed(ctx, &driver.OutboxMarkFailedParams{RelayID: "r",
		Failures: []*driver.OutboxFailure{{ID: published[0], Error: "down", RetryDelay: time.Second}}})
	require.ErrorIs(t, err, errExplained)
	requireByPrimaryKey(t, rec.plan)
}

// requireByPrimaryKey checks a mark's plan finds its rows by primary key, not through the
// partial indexes of unpublished rows.
func requireByPrimaryKey(t *testing.T, plan string) {
	t.Helper()
	require.Contains(t, plan, "outbox_pkey")
	require.NotContains(t, plan, "outbox_key_idx")
	require.NotContains(t, plan, "outbox_dispatch_idx")
}

// explainClaim runs the claim as the driver sends it, EXPLAIN ANALYZEd in a transaction rolled
// back, and returns the rows it claimed, the pages it read and the plan.
func explainClaim(t *testing.T, pool *pgxpool.Pool, drv *Driver, params *driver.OutboxClaimParams) (rows, pages int64, plan string) {
	t.Helper()
	rec := &planRecorder{pool: pool, analyze: true}
	_, err := (&executor{d: drv, db: rec}).OutboxClaim(context.Background(), params)
	require.ErrorIs(t, err, errExplained)
	var top []struct {
		Plan struct {
			ActualRows int64 `json:"Actual Rows"`
			SharedHit  int64 `json:"Shared Hit Blocks"`
			SharedRead int64 `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal([]byte(rec.plan), &top))
	require.Len(t, top, 1)
	return top[0].Plan.ActualRows, top[0].Plan.SharedHit + top[0].Plan.SharedRead, rec.plan
}

// The backlog the relay reports every few seconds reads the unpublished and the failed rows by
// their partial indexes, not the whole outbox: published rows stay until retention, and a filter
// for status IN ('NEW', 'FAILED'), which matched neither index, read all of them (390 ms a read
// in a 10-minute soak).
func TestOutboxBacklogReadsOnlyTheBacklog(t *testing.T) {
	ctx := context.Background()
	pool, drv := planSchema(t)
	exec := drv.Executor()
	payload := []byte(`{"events":"` + strings.Repeat("x", 1000) + `"}`)
	insert := func(n int) []int64 {
		msgs := make([]*driver.OutboxInsertParams, n)
		for i := range msgs {
			msgs[i] = &driver.OutboxInsertParams{Category: driver.OutboxCategoryEvent, Transport: "kafka", Topic: "t",
				Key: fmt.Sprintf("k%d", i), Type: "E", MessageID: fmt.Sprint(len(msgs), "-", i, "-", time.Now().UnixNano()), Payload: payload}
		}
		ids, err := exec.OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: msgs})
		require.NoError(t, err)
		return ids
	}
	published := insert(5000)
	_, err := exec.OutboxMarkPublished(ctx, &driver.OutboxMarkPublishedParams{IDs: published})
	require.NoError(t, err)
	failed := insert(2)
	// A claim takes rows below the horizon, which other tests' transactions may hold back a moment.
	require.Eventually(t, func() bool {
		rows, err := exec.OutboxClaim(ctx, &driver.OutboxClaimParams{Transports: []string{"kafka"}, Max: 2, Lease: time.Minute, RelayID: "r"})
		return err == nil && len(rows) == 2
	}, 20*time.Second, 5*time.Millisecond, "the relay claims the two messages")
	_, err = exec.OutboxMarkFailed(ctx, &driver.OutboxMarkFailedParams{RelayID: "r", Failures: []*driver.OutboxFailure{
		{ID: failed[0], Error: "refused", GiveUp: true}, {ID: failed[1], Error: "refused", GiveUp: true}}})
	require.NoError(t, err)
	insert(10)
	_, err = pool.Exec(ctx, drv.sql(`ANALYZE {schema}.outbox`))
	require.NoError(t, err)

	backlog, err := exec.OutboxBacklog(ctx)
	require.NoError(t, err)
	require.Len(t, backlog, 1)
	require.Equal(t, int64(10), backlog[0].New)
	require.Equal(t, int64(2), backlog[0].Failed)

	rec := &planRecorder{pool: pool, analyze: true}
	_, err = (&executor{d: drv, db: rec}).OutboxBacklog(ctx)
	require.ErrorIs(t, err, errExplained)
	var top []struct {
		Plan struct {
			SharedHit  int64 `json:"Shared Hit Blocks"`
			SharedRead int64 `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal([]byte(rec.plan), &top))
	pages := top[0].Plan.SharedHit + top[0].Plan.SharedRead
	t.Logf("the backlog of 12 rows beside 5,000 published read %d pages", pages)
	require.NotContains(t, rec.plan, "Seq Scan", "the backlog reads the partial indexes")
	require.Less(t, pages, int64(100), "the backlog reads pages in proportion to the backlog")
}
