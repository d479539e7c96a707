package sqlitedriver

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQueryPlans checks that the hot queries use the partial indexes of migration 001: a partial
// index serves a query only when the query repeats its WHERE terms, which is easy to break.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(filepath.Join(t.TempDir(), "db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	for _, m := range d.Migrations() {
		_, err := d.DB().ExecContext(ctx, m.Up)
		require.NoError(t, err)
	}
	plan := func(t *testing.T, query string, args ...any) string {
		t.Helper()
		rows, err := d.DB().QueryContext(ctx, "EXPLAIN QUERY PLAN "+d.sql(query), args...)
		require.NoError(t, err)
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			lines = append(lines, detail)
		}
		require.NoError(t, rows.Err())
		return strings.Join(lines, "\n")
	}

	t.Run("Claim", func(t *testing.T) {
		t.Parallel()
		require.Contains(t, plan(t, commandClaimSQL, 1, 1, 1, "w", "q", 1, 1, 10), "USING INDEX commandbus_command_claim_idx (queue=? AND visible_at<?)")
	})

	t.Run("CountRunning", func(t *testing.T) {
		t.Parallel()
		require.Contains(t, plan(t, commandCountRunningSQL, "q", 1), "USING INDEX commandbus_command_claim_idx (queue=?)")
	})

	t.Run("QueueDepths", func(t *testing.T) {
		t.Parallel()
		got := plan(t, commandQueueDepthsSQL, 1, 1)
		require.Contains(t, got, "commandbus_command_claim_idx")
		require.Contains(t, got, "commandbus_command_tsq_idx")
	})
}
