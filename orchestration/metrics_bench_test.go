package orchestration

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/commandbus/commandbus/driver"
)

// BenchmarkExecutionMetricsCheckpointed measures what the execution metrics add to one committed
// checkpoint: a step attempt that succeeded (with its latency) and, every fourth, the execution's
// end. Run: go test -run '^$' -bench ExecutionMetrics ./orchestration/
func BenchmarkExecutionMetricsCheckpointed(b *testing.B) {
	m, err := newExecutionMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	started := now.Add(-20 * time.Millisecond)
	steps := []string{"checkBalance", "checkDailyLimit", "bookRisk", "submitPayment"}
	row := &driver.ExecutionRow{Model: "process", Type: "PaymentStep", Status: driver.ExecutionWaitingForAsync, CreatedAt: now.Add(-time.Second)}
	done := *row
	done.Status = driver.ExecutionCompleted
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		entries := []*driver.ExecutionLogEntry{{EntryType: "STEP", Name: steps[i%4], StepStatus: "COMPLETED", StartedAt: &started, At: now}}
		if i%4 == 3 {
			m.Checkpointed(driver.ExecutionExecuting, &done, entries, false, now)
		} else {
			m.Checkpointed(driver.ExecutionExecuting, row, entries, i%4 == 0, now)
		}
	}
}
