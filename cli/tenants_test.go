package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/cli"
)

func TestTenantsCommands(t *testing.T) {
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
	require.Contains(t, run("tenants", "list"), "no tenant")
	require.Contains(t, run("tenants", "create", "acme", "--tier", "PRO", "--name", "Acme Ltd"), "created tenant acme: tier PRO, 5 at once, active")

	_, err := runCLI(cfg, "tenants", "create", "acme", "--tier", "FREE", "--database", db)
	require.ErrorContains(t, err, "invalid id")
	_, err = runCLI(cfg, "tenants", "create", "other", "--tier", "GOLD", "--database", db)
	require.ErrorContains(t, err, "invalid tier")
	_, err = runCLI(cfg, "tenants", "create", "other", "--tier", "FREE", "--limit", "-1", "--database", db)
	require.ErrorContains(t, err, "invalid maxActiveOverride")

	require.Contains(t, run("tenants", "update", "acme", "--tier", "ENTERPRISE", "--limit", "25", "--reason", "upgraded"),
		"tenant acme: tier ENTERPRISE, 25 at once, active")
	_, err = runCLI(cfg, "tenants", "update", "acme", "--status", "gone", "--database", db)
	require.ErrorContains(t, err, "invalid status")
	require.Contains(t, run("tenants", "update", "acme", "--clear-limit"), "20 at once")

	var list []struct {
		ID        string `json:"id"`
		Tier      string `json:"tier"`
		MaxActive int    `json:"maxActive"`
	}
	require.NoError(t, json.Unmarshal([]byte(run("tenants", "list", "--json")), &list))
	require.Len(t, list, 1, "refused tenants are not stored")
	require.Equal(t, "ENTERPRISE", list[0].Tier)
	require.Contains(t, run("tenants", "show", "acme"), "0/20")

	// --limit cuts the listing and says so; --all follows the pages, by id.
	run("tenants", "create", "beta", "--tier", "FREE")
	run("tenants", "create", "gamma", "--tier", "FREE")
	cut := run("tenants", "list", "--limit", "1")
	require.Contains(t, cut, "more than 1 rows match")
	require.Contains(t, cut, "acme")
	require.NotContains(t, cut, "beta")
	require.NoError(t, json.Unmarshal([]byte(run("tenants", "list", "--limit", "1", "--all", "--json")), &list))
	ids := make([]string, len(list))
	for i, x := range list {
		ids[i] = x.ID
	}
	require.Equal(t, []string{"acme", "beta", "gamma"}, ids)
	_, err = runCLI(cfg, "tenants", "list", "--limit", "0", "--database", db)
	require.Equal(t, cli.ExitUsage, cli.ExitCode(err))
	_, err = runCLI(cfg, "tenants", "show", "nobody", "--database", db)
	require.ErrorContains(t, err, "not found")
}
