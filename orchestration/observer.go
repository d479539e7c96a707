package orchestration

import (
	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/execution"
)

// observerOf adapts the client's execution observer (commandbus.Config.ExecutionObserver) to
// the engine's.
func observerOf(observe commandbus.ExecutionObserver) execution.Observer {
	if observe == nil {
		return nil
	}
	return func(c *execution.Committed) {
		observe(commandbus.ExecutionCommit{Execution: c.Row, Log: c.Log, Inserted: c.Inserted})
	}
}
