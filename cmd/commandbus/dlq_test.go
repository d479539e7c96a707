package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
)

func TestDLQFromTheCommandLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dlq.db")
	db := "sqlite://" + path
	parkCommands(t, path, 3)

	var parked []*commandbus.DLQEntry
	require.NoError(t, json.Unmarshal([]byte(run(t, "dlq", "list", "--json", "--database", db, "--domain", "fx")), &parked))
	require.Len(t, parked, 3)
	for _, p := range parked {
		require.Equal(t, "fx", p.Command.Domain)
		require.Equal(t, 1, p.Attempts)
		require.Contains(t, p.Error, "CURRENCY_PAIR_SUSPENDED")
	}
	table := run(t, "dlq", "list", "--database", db)
	require.Contains(t, table, "CURRENCY_PAIR_SUSPENDED")
	require.Contains(t, table, parked[0].CommandID.String())

	res := fail(t, "dlq", "resubmit", parked[0].CommandID.String(), "--database", db)
	require.ErrorContains(t, res.err, `"reason" not set`)
	out := run(t, "dlq", "resubmit", parked[0].CommandID.String(), "--database", db, "--reason", "pair reopened", "--actor", "ops:ann")
	require.Contains(t, out, "is now PENDING (resubmitted by ops:ann: pair reopened)")
	require.NoError(t, json.Unmarshal([]byte(run(t, "dlq", "list", "--json", "--database", db)), &parked))
	require.Len(t, parked, 2)

	row := showJSON(t, db, parked[0].CommandID.String())
	require.Equal(t, commandbus.StatusInTSQ, row.Status)
	res = fail(t, "dlq", "resubmit", "not-a-uuid", "--database", db, "--reason", "r")
	require.ErrorContains(t, res.err, "command id")
	require.Contains(t, run(t, "dlq", "list", "--database", db, "--domain", "nothing"), "the dead-letter queue is empty")
}
