package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// A command against an unmigrated database, or one a migration behind, says so and names
// `commandbus migrate up`, never a raw "no such table" or "relation does not exist".
func TestCommandsOnUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	databases := map[string]func(t *testing.T) []string{
		"sqlite": func(t *testing.T) []string {
			return []string{"--database", "sqlite://" + filepath.Join(t.TempDir(), "fresh.db")}
		},
		"postgres": func(t *testing.T) []string {
			pool := dbtest.Pool(t)
			schema := "cbtest_" + uuid.NewString()[:8]
			t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
			return []string{"--database", dbtest.DatabaseURL(), "--schema", schema}
		},
	}
	commands := [][]string{
		{"tsq", "list"}, {"tsq", "show", uuid.NewString()}, {"tsq", "retry", "--dry-run", "--reason", "r"},
		{"tsq", "processes", "list"}, {"dlq", "list"}, {"dlq", "resubmit", "--dry-run", "--reason", "r"},
		{"executions", "list"}, {"executions", "show", uuid.NewString()}, {"schedules", "list"},
	}
	for name, database := range databases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := database(t)
			check := func(want string) {
				t.Helper()
				for _, args := range commands {
					res, code := runExit(t, append(args, db...)...)
					require.Equal(t, cli.ExitSchema, code, "%v: %v", args, res.err)
					require.ErrorContains(t, res.err, want, "%v", args)
					require.ErrorContains(t, res.err, "commandbus migrate up", "%v", args)
					for _, raw := range []string{"no such table", "does not exist", "SQLSTATE"} {
						require.NotContains(t, res.err.Error()+res.stderr, raw, "%v", args)
					}
				}
			}
			check("the database is not migrated")
			run(t, append([]string{"migrate", "up"}, db...)...)
			run(t, append([]string{"migrate", "down", "--steps", "1"}, db...)...)
			check("older than this binary (1 migration pending: the payments migration line has ") // the newest is reverted
			run(t, append([]string{"migrate", "up"}, db...)...)
			run(t, append([]string{"tsq", "list"}, db...)...)
		})
	}
}
