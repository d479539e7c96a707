package bench

import (
	"context"
	"testing"

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
