package cli_test

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
)

// registerLimitedGreeting is registerGreeting with Greeting capacity-limited.
func registerLimitedGreeting(client *commandbus.Client) (*orchestration.Runtime, error) {
	rt, err := registerGreeting(client)
	if err != nil {
		return nil, err
	}
	return rt, rt.LimitCapacity("Greeting")
}

// `executions cancel` ends a QUEUED execution (waiting for its tenant's slot) CANCELLED.
func TestExecutionsCancelQueued(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "team.db")
	cfg := cli.Config{Register: registerLimitedGreeting}
	run := func(args ...string) string {
		t.Helper()
		out, err := runCLI(cfg, append(args, "--database", db)...)
		require.NoError(t, err, "teambin %s: %s", strings.Join(args, " "), out)
		return out
	}
	run("migrate", "up")
	run("tenants", "create", "acme", "--tier", "FREE")
	var ids []string
	for _, name := range []string{"Ada", "Bo"} {
		out := run("executions", "start", "process", "Greeting", "--input", `{"name":"`+name+`"}`, "--tenant", "acme")
		id := regexp.MustCompile(`started process Greeting: (\S+)`).FindStringSubmatch(out)
		require.Len(t, id, 2, out)
		ids = append(ids, id[1])
	}
	var rows []*driver.ExecutionRow
	require.NoError(t, json.Unmarshal([]byte(run("executions", "list", "--json", "--status", "QUEUED")), &rows))
	require.Len(t, rows, 1, "FREE: the first holds the only slot")
	require.Equal(t, ids[1], rows[0].ID.String())

	run("executions", "cancel", ids[1], "--reason", "sent twice", "--actor", "ops:ann")
	require.NoError(t, json.Unmarshal([]byte(run("executions", "list", "--json", "--status", "CANCELLED")), &rows))
	require.Len(t, rows, 1)
	require.Equal(t, ids[1], rows[0].ID.String())
	require.Equal(t, process.Model, rows[0].Model)
}
