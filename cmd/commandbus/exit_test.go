package main

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/cli"
)

// Scripts tell a usage error, a missing item, a conflict and a failure apart by the exit code,
// and --help says which is which.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t, "x.db")
	run(t, "migrate", "up", "--database", db)
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"unknown command", []string{"tsq", "nope", "--database", db}, cli.ExitUsage},
		{"unknown flag", []string{"tsq", "list", "--nope", "--database", db}, cli.ExitUsage},
		{"missing flag", []string{"tsq", "retry", uuid.NewString(), "--database", db}, cli.ExitUsage},
		{"malformed id", []string{"tsq", "show", "not-a-uuid", "--database", db}, cli.ExitUsage},
		{"too many arguments", []string{"tsq", "show", "a", "b", "--database", db}, cli.ExitUsage},
		{"bad flag value", []string{"tsq", "list", "-o", "yaml", "--database", db}, cli.ExitUsage},
		{"not found", []string{"tsq", "show", uuid.NewString(), "--database", db}, cli.ExitNotFound},
		{"execution not found", []string{"executions", "cancel", uuid.NewString(), "--reason", "r", "--database", db}, cli.ExitNotFound},
		{"unreachable database", []string{"tsq", "list", "--database", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}, cli.ExitFailure},
	} {
		res, code := runExit(t, tc.args...)
		require.Equal(t, tc.want, code, "%s: %v", tc.name, res.err)
	}
	for _, args := range [][]string{{"--help"}, {"tsq", "retry", "--help"}, {"migrate", "--help"}} {
		require.Contains(t, run(t, args...), "Exit codes:\n  0  success", "%v", args)
	}
}
