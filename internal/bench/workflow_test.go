package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

// BenchmarkWorkflow reports five-step DAG workflows (one step, three in parallel, one) per
// second. Target on PostgreSQL on the reference machine: 3,000/s.
// Run: go test -run '^$' -bench Workflow ./internal/bench
func BenchmarkWorkflow(b *testing.B) {
	benchmarkPerDriver(b, 5000, 1000, "workflows/s", func(ctx context.Context, drv driver.Driver, n int) (float64, error) {
		res, err := RunWorkflow(ctx, drv, WorkflowConfig{Workflows: n})
		if err != nil {
			return 0, err
		}
		return res.WorkflowsPerS, nil
	})
}

func TestRunWorkflowSmoke(t *testing.T) {
	smokePerDriver(t, "BenchWorkflow", "workflows", func(ctx context.Context, drv driver.Driver) (*WorkflowResult, error) {
		return RunWorkflow(ctx, drv, WorkflowConfig{Workflows: 100, StartBatch: 40})
	}, func(res *WorkflowResult) bool {
		return !(res.Workflows != 100 || res.WorkflowsPerS <= 0 || res.StepsPerS != res.WorkflowsPerS*5 && res.StepsPerS <= res.WorkflowsPerS)
	})
}

// With --rate, a start slower than the 10 ms tick does not lower the rate offered: the next call
// starts everything that fell due meanwhile. A ticker alone dropped the missed ticks: 20 a tick
// at 2,000/s took 5 calls of 25 ms each for 100 workflows, offering 800/s.
func TestStartPacedCatchesUp(t *testing.T) {
	t.Parallel()
	var calls, started int
	err := startPaced(context.Background(), WorkflowConfig{Workflows: 100, Rate: 2000, StartBatch: 1000}, time.Now(), func(from, n int) error {
		require.Equal(t, started, from, "in order, none twice")
		calls++
		started += n
		time.Sleep(25 * time.Millisecond) // a slow start: each call takes more than a tick
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 100, started)
	require.LessOrEqual(t, calls, 4, "each call starts what fell due during the last (at least 50)")
}
