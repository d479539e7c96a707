package execution

import (
	"time"

	"github.com/commandbus/commandbus/driver"
)

// Metrics is told what the engine's commits did, on the committing goroutine right after the
// commit, so it must be quick (counters and histograms). Only commits of this instance are
// reported; a fenced checkpoint is never reported.
type Metrics interface {
	// Checkpointed reports one committed checkpoint: prev is the execution's status before it,
	// row the execution after it, entries the log entries it wrote, started whether it was the
	// execution's first progress, now the engine's clock at the commit.
	Checkpointed(prev driver.ExecutionStatus, row *driver.ExecutionRow, entries []*driver.ExecutionLogEntry, started bool, now time.Time)
	// Rescued reports an execution the pending poller claimed from a runner whose lease had
	// expired.
	Rescued(row *driver.ExecutionRow)
}

// rescued reports whether a claimed row was taken from a runner whose lease had expired.
func rescued(row *driver.ExecutionRow) bool { return row.StaleLease }
