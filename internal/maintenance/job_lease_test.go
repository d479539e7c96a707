package maintenance_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/maintenance"
)

// Three replicas run the same periodic task on one database; with the job's leased row it runs
// once per interval in all, and the row shows who ran it and when it runs next.
func TestJobLeaseRunsOncePerIntervalAcrossReplicas(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		var mu sync.Mutex
		var runs []string
		tasks := make([]maintenance.Task, 3)
		for i, holder := range []string{"replica-a", "replica-b", "replica-c"} {
			tasks[i] = maintenance.JobLease{Exec: drv.Executor(), Holder: holder, Now: clk.Now}.Wrap(maintenance.Task{
				Name: "retention", Interval: time.Minute, Run: func(ctx context.Context) error {
					mu.Lock()
					defer mu.Unlock()
					runs = append(runs, holder)
					if len(runs) == 2 {
						return errors.New("disk full")
					}
					return nil
				}})
		}
		// Each replica's ticker fires every 20s for 5 minutes, all three at the same moments.
		for step := 0; step < 15; step++ {
			var wg sync.WaitGroup
			for _, task := range tasks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := task.Run(ctx)
					if err != nil {
						require.EqualError(t, err, "disk full")
					}
				}()
			}
			wg.Wait()
			clk.Advance(20 * time.Second)
		}
		require.Len(t, runs, 5, "once per minute for five minutes, whichever replica got the row: %v", runs)

		rows, err := drv.Executor().JobLeaseList(ctx)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, "retention", rows[0].Name)
		require.Equal(t, "", rows[0].Holder, "released")
		require.Equal(t, runs[len(runs)-1], rows[0].LastHolder)
		require.Equal(t, int64(5), rows[0].Runs)
		require.True(t, rows[0].NextRunAt.After(*rows[0].LastFinishedAt))
	})
}

// TestJobLeaseNextRunCountsFromTheStart: a clock that moves during a run does not push the next
// run out. The next run is due one interval after the run started, so the next tick after the
// clock has passed that time runs it. Counting from the end, a run that straddled a jump of the
// clock was due only one interval after the jump, and with a frozen clock never again: the
// watchdog then never saw a lease the jump expired.
func TestJobLeaseNextRunCountsFromTheStart(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		var runs int
		task := maintenance.JobLease{Exec: drv.Executor(), Holder: "replica-a", Now: clk.Now}.Wrap(maintenance.Task{
			Name: "watchdog", Interval: 100 * time.Millisecond, Run: func(ctx context.Context) error {
				runs++
				if runs == 1 {
					clk.Advance(31 * time.Second) // the clock jumps while the first run works
				}
				return nil
			}})
		require.NoError(t, task.Run(ctx))
		require.NoError(t, task.Run(ctx), "the clock passed the next run's time during the first run")
		require.Equal(t, 2, runs, "the next tick ran again without the clock moving further")
	})
}

func TestStaleWorkReport(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		exec := drv.Executor()
		report := maintenance.StaleWorkReport{Exec: exec, Queues: func() []string { return []string{"fx__commands"} }}
		parked, expired, err := report.Run(ctx)
		require.NoError(t, err)
		require.Zero(t, parked)
		require.Zero(t, expired)

		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		id := uuid.New()
		_, err = exec.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{Now: &at, Executions: []*driver.ExecutionInsertParams{
			{ID: id, Model: "process", Type: "Pay", Domain: "d", Lease: time.Minute, WorkerID: "w"}}})
		require.NoError(t, err)
		_, err = exec.ExecutionCheckpointMany(ctx, &driver.ExecutionCheckpointManyParams{Now: &at, Checkpoints: []*driver.ExecutionCheckpoint{
			{ID: id, Fence: 1, Status: driver.ExecutionWaitingForTSQ, Release: true}}})
		require.NoError(t, err)
		parked, _, err = report.Run(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), parked, "the execution parked in the troubleshooting queue is reported")
	})
}
