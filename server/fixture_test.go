package server_test

import (
	"testing"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/servertest"
)

// consoleFixture is the shared fixture (servertest.Fixture); the REST API's tests use it with
// the schedules extension and a review workflow triggered by LoanApplied.
type consoleFixture = servertest.Fixture

func setupConsole(t *testing.T, drv driver.Driver) *consoleFixture {
	t.Helper()
	return servertest.Setup(t, drv, servertest.Options{Tokens: testTokens, ReviewTrigger: "LoanApplied", Schedules: true})
}
