package commandbus

import "github.com/commandbus/commandbus/driver"

// ExecutionCommit is what one commit of this instance did to one execution (a process step, a
// wait, a completion, an operator action, or the execution's creation).
type ExecutionCommit struct {
	// Execution is the execution as this instance knows it after the commit: id, model, type,
	// status, step, error and the rest of the row (timestamps from this instance's clock).
	Execution driver.ExecutionRow
	// Log holds the log entries the commit wrote, in order, with their sequence numbers.
	Log []*driver.ExecutionLogEntry
	// Inserted is set for the commit that created the execution.
	Inserted bool
}

// ExecutionObserver is told about every commit of this instance's execution engine after it
// committed: each checkpoint that applied, and each execution created (except those created
// inside the caller's own transaction). It runs on a goroutine of its own, never on the commit
// path; each commit is reported once and the commits of one execution in the order they
// committed. A checkpoint that was fenced out (its runner lost the execution) is never reported.
// An observer that falls behind by 10,000 observations loses the next ones, with a warning in
// the log; a panic in it is logged and contained. It must not modify what it is given.
type ExecutionObserver func(commit ExecutionCommit)
