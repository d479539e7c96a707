package bench

import (
	"context"
	"testing"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// BenchmarkWorkflow reports five-step DAG workflows (one step, three in parallel, one) per
// second. Target on PostgreSQL on the reference machine: 3,000/s.
// Run: go test -run '^$' -bench Workflow ./internal/bench
func BenchmarkWorkflow(b *testing.B) {
	for _, tc := range []struct {
		name      string
		driver    func(testing.TB) driver.Driver
		workflows int
	}{
		{"postgres", func(tb testing.TB) driver.Driver { return dbtest.Postgres(tb) }, 5000},
		{"sqlite", func(tb testing.TB) driver.Driver { return dbtest.SQLite(tb) }, 1000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var perS float64
			for range b.N {
				b.StopTimer()
				drv := tc.driver(b)
				b.StartTimer()
				res, err := RunWorkflow(context.Background(), drv, WorkflowConfig{Workflows: tc.workflows})
				if err != nil {
					b.Fatal(err)
				}
				perS += res.WorkflowsPerS
			}
			b.ReportMetric(perS/float64(b.N), "workflows/s")
		})
	}
}

func TestRunWorkflowSmoke(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		res, err := RunWorkflow(context.Background(), drv, WorkflowConfig{Workflows: 100, StartBatch: 40})
		if err != nil {
			t.Fatal(err)
		}
		if res.Workflows != 100 || res.WorkflowsPerS <= 0 || res.StepsPerS != res.WorkflowsPerS*5 && res.StepsPerS <= res.WorkflowsPerS {
			t.Fatalf("implausible result: %+v", res)
		}
		counts, err := drv.Executor().ExecutionCountByStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range counts {
			if c.Type == "BenchWorkflow" && c.Status != driver.ExecutionCompleted {
				t.Fatalf("%d benchmark workflows are %s", c.Count, c.Status)
			}
		}
	})
}
