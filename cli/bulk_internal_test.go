package cli

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// A long run reports its progress on stderr, carries on past an item that fails, and ends with
// an error (exit code 1) that counts the failures.
func TestRunBulkProgressAndFailures(t *testing.T) {
	t.Parallel()
	var items []*bulkItem
	for range 250 {
		items = append(items, &bulkItem{ID: uuid.New(), Domain: "fx", Type: "BookFx"})
	}
	broken := items[7].ID
	var stdout, stderr bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetContext(context.Background())
	var output outputFlag
	output.register(cmd)
	acted := 0
	err := runBulk(cmd, &output, "retry", false, items, func(_ context.Context, id uuid.UUID) (string, error) {
		acted++
		if id == broken {
			return "", errors.New("not in the troubleshooting queue")
		}
		return "PENDING", nil
	})
	require.Error(t, err)
	require.Equal(t, ExitFailure, ExitCode(err))
	require.ErrorContains(t, err, "retry failed on 1 of 250 items")
	require.Equal(t, 250, acted, "a failure does not stop the run")
	require.Contains(t, stderr.String(), "progress: 100/250 (1 failed)")
	require.Contains(t, stderr.String(), "progress: 200/250 (1 failed)")
	require.Contains(t, stdout.String(), "failed  "+broken.String())
	require.Contains(t, stdout.String(), "249 retried, 1 failed, of 250 matching")

	stdout.Reset()
	acted = 0
	require.NoError(t, runBulk(cmd, &output, "retry", true, items, func(context.Context, uuid.UUID) (string, error) {
		acted++
		return "", nil
	}))
	require.Zero(t, acted, "a dry run acts on nothing")
	require.Contains(t, stdout.String(), "250 would be retried; nothing changed")
}
