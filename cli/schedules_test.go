package cli_test

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/driver"
)

func TestSchedulesCommands(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "team.db")
	cfg := cli.Config{Register: registerGreeting}
	run := func(args ...string) string {
		t.Helper()
		out, err := runCLI(cfg, append(args, "--database", db)...)
		require.NoError(t, err, "teambin %s: %s", strings.Join(args, " "), out)
		return out
	}
	run("migrate", "up")
	require.Contains(t, run("schedules", "list"), "no schedule")

	out := run("schedules", "create", "hello-hourly", "--model", "process", "--type", "Greeting", "--cron", "0 0 * * * *",
		"--zone", "Europe/Paris", "--input", `{"name":"Ada"}`)
	require.Regexp(t, `created schedule hello-hourly \(\S+\): process Greeting, cron "0 0 \* \* \* \*" Europe/Paris, next fire`, out)

	_, err := runCLI(cfg, "schedules", "create", "bad", "--model", "process", "--type", "Greeting", "--fixed-delay", "-5s", "--database", db)
	require.ErrorContains(t, err, "invalid fixedDelay")
	_, err = runCLI(cfg, "schedules", "create", "bad", "--model", "process", "--type", "Greeting", "--cron", "0 0 * * *", "--database", db)
	require.ErrorContains(t, err, "invalid cron")
	_, err = runCLI(cfg, "schedules", "create", "bad", "--model", "process", "--type", "Nope", "--fixed-rate", "1m", "--database", db)
	require.ErrorContains(t, err, "invalid type")

	var list []struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Enabled bool   `json:"enabled"`
	}
	require.NoError(t, json.Unmarshal([]byte(run("schedules", "list", "--json")), &list))
	require.Len(t, list, 1, "refused schedules are not stored")
	require.True(t, list[0].Enabled)

	// --limit cuts the listing and says so; --all follows the pages, by name.
	run("schedules", "create", "a-daily", "--model", "process", "--type", "Greeting", "--fixed-rate", "24h")
	cut := run("schedules", "list", "--limit", "1")
	require.Contains(t, cut, "more than 1 rows match")
	require.Contains(t, cut, "a-daily")
	require.NotContains(t, cut, "hello-hourly")
	require.NoError(t, json.Unmarshal([]byte(run("schedules", "list", "--limit", "1", "--all", "--json")), &list))
	require.Len(t, list, 2)
	require.Equal(t, "a-daily", list[0].Name)
	require.Equal(t, "hello-hourly", list[1].Name)
	require.Contains(t, run("schedules", "delete", "a-daily"), "deleted")
	list = list[1:]

	require.Contains(t, run("schedules", "pause", "hello-hourly"), "schedule hello-hourly is paused")
	require.Contains(t, run("schedules", "list"), "false")
	out = run("schedules", "trigger", list[0].ID)
	started := regexp.MustCompile(`execution (\S+)`).FindStringSubmatch(out)
	require.Len(t, started, 2, out)
	var rows []*driver.ExecutionRow
	require.NoError(t, json.Unmarshal([]byte(run("executions", "list", "--json")), &rows))
	require.Len(t, rows, 1)
	require.Equal(t, started[1], rows[0].ID.String())
	require.JSONEq(t, `{"name":"Ada"}`, string(rows[0].State))
	require.Contains(t, run("schedules", "resume", "hello-hourly"), "is enabled")
	require.Contains(t, run("schedules", "delete", "hello-hourly"), "deleted")
	require.Contains(t, run("schedules", "list"), "no schedule")
}
