package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

// An operator starts, finds and cancels a workflow execution from the command line, with the
// same commands that act on processes.
func TestExecutionsFromTheCommandLine(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	run(t, "migrate", "up", "--database", db)

	res := fail(t, "executions", "start", "workflow", "Nope", "--database", db)
	require.ErrorContains(t, res.err, `no workflow "Nope" in this binary; known:`)
	require.ErrorContains(t, res.err, "workflow CustomerOnboarding")
	res = fail(t, "executions", "start", "workflow", "CustomerOnboarding", "--input", "{", "--database", db)
	require.ErrorContains(t, res.err, "--input is not valid JSON")

	out := run(t, "executions", "start", "workflow", "CustomerOnboarding", "--database", db, "--business-key", "app-7",
		"--input", `{"name":"Ada","email":"ada@example.com","country":"GB"}`)
	id := regexp.MustCompile(`started workflow CustomerOnboarding: (\S+)`).FindStringSubmatch(out)
	require.Len(t, id, 2, out)

	var rows []*driver.ExecutionRow
	require.NoError(t, json.Unmarshal([]byte(run(t, "executions", "list", "--model", "workflow", "--json", "--database", db)), &rows))
	require.Len(t, rows, 1)
	require.Equal(t, id[1], rows[0].ID.String())
	require.Equal(t, driver.ExecutionPending, rows[0].Status, "started for the workers to run")
	require.Equal(t, "app-7", rows[0].BusinessKey)
	require.Contains(t, run(t, "executions", "list", "--status", "pending", "--database", db), id[1])
	require.NotContains(t, run(t, "executions", "list", "--model", "process", "--database", db), id[1])
	res = fail(t, "executions", "list", "--status", "WAITING", "--database", db)
	require.ErrorContains(t, res.err, `--status "WAITING": not an execution status`)

	out = run(t, "executions", "signal", id[1], "documents", "--payload", `{"passport":"P-1"}`, "--id", "docs-1", "--database", db)
	require.Contains(t, out, `signal "documents" (docs-1) sent to `+id[1])
	out = run(t, "executions", "signal", id[1], "documents", "--payload", `{"passport":"P-2"}`, "--id", "docs-1", "--database", db)
	require.Contains(t, out, "was already sent", "one effect per signal id")
	res = fail(t, "executions", "signal", id[1], "documents", "--payload", `{`, "--database", db)
	require.ErrorContains(t, res.err, "--payload is not valid JSON")
	out = run(t, "executions", "suspend", id[1], "--database", db, "--reason", "fraud check")
	require.Contains(t, out, "is now SUSPENDED")
	res = fail(t, "executions", "suspend", id[1], "--database", db, "--reason", "again")
	require.ErrorContains(t, res.err, "SUSPENDED")
	out = run(t, "executions", "resume", id[1], "--database", db, "--reason", "cleared")
	require.Contains(t, out, "is now PENDING", "resumed as it was: pending for the workers")
	out = run(t, "executions", "cancel", id[1], "--database", db, "--reason", "applicant withdrew", "--actor", "ops:eve")
	require.Contains(t, out, "is now CANCELLED (by ops:eve: applicant withdrew)")
	shown := run(t, "executions", "show", id[1], "--database", db)
	require.Contains(t, shown, "status      CANCELLED")
	require.Contains(t, shown, "TSQ_CANCEL cancel")
	res = fail(t, "executions", "skip", id[1], "--database", db, "--reason", "x")
	require.ErrorContains(t, res.err, `"step" not set`)
}

// The trip booking TCC is started, found and cancelled from the command line like any model.
func TestTccFromTheCommandLine(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	run(t, "migrate", "up", "--database", db)
	out := run(t, "executions", "start", "tcc", "TripBooking", "--database", db, "--business-key", "trip-9",
		"--input", `{"traveller":"Ada","flight":"LH 400","destination":"New York"}`)
	id := regexp.MustCompile(`started tcc TripBooking: (\S+)`).FindStringSubmatch(out)
	require.Len(t, id, 2, out)
	var rows []*driver.ExecutionRow
	require.NoError(t, json.Unmarshal([]byte(run(t, "executions", "list", "--model", "tcc", "--json", "--database", db)), &rows))
	require.Len(t, rows, 1)
	require.Equal(t, "trip-9", rows[0].BusinessKey)
	out = run(t, "executions", "cancel", id[1], "--database", db, "--reason", "traveller withdrew", "--actor", "ops:eve")
	require.Contains(t, out, "is now CANCELLED")
}
