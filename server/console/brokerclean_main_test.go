package console_test

import (
	"os"
	"testing"

	"github.com/commandbus/commandbus/internal/brokerclean"
)

// TestMain deletes, once every test has ended, the broker queues the tests declared (a test's
// cleanup deletes them already; this catches one redeclared after it).
func TestMain(m *testing.M) { os.Exit(brokerclean.Main(m).Run()) }
