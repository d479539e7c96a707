// Package brokerlock keeps the tests of different packages from tripping over each other on the
// shared test RabbitMQ: a test that stops the broker (transport/amqp's TestBrokerRestart) holds
// the lock exclusively while it is down, and tests in other packages that use the broker hold
// it shared while they run. go test runs packages in parallel, so without it a restart in one
// package fails the broker tests of another.
package brokerlock

import (
	"os"
	"path/filepath"
	"testing"
)

// path is the lock file, shared by every test process on the machine.
func path() string { return filepath.Join(os.TempDir(), "commandbus-test-rabbitmq.lock") }

// Shared holds the lock shared until tb ends: the broker is not stopped by another package's
// test meanwhile. A test that stops the broker itself must not call it (it would wait for
// itself).
func Shared(tb testing.TB) {
	tb.Helper()
	release := lock(tb, false)
	tb.Cleanup(release)
}

// Exclusive waits until no other package's test uses the broker and holds the lock until the
// returned function is called (it is also called when tb ends).
func Exclusive(tb testing.TB) func() {
	tb.Helper()
	release := lock(tb, true)
	tb.Cleanup(release)
	return release
}
