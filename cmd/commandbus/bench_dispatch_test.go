package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBenchDispatchJSON(t *testing.T) {
	t.Parallel()
	out := run(t, "bench", "dispatch", "--database", sqliteURL(t, "dispatch.db"), "--tenants", "10", "--items", "200", "--backlog", "300", "--work", "1ms", "--json")
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), "the output is one JSON object: %s", out)
	for _, field := range []string{"driver", "tenants", "slots", "admitted_per_s", "free_slot_p50_ms", "step_violations", "sampled_violations", "samples", "free_behind_backlog_ms", "config"} {
		require.Contains(t, res, field)
	}
	require.Equal(t, "sqlite", res["driver"])
	require.InDelta(t, 0, res["step_violations"], 0)
	require.InDelta(t, 0, res["sampled_violations"], 0)
	require.Positive(t, res["samples"])
	require.Positive(t, res["admitted_per_s"])
	require.Positive(t, res["backlog_queued"], "the backlog was still queued when the FREE tenant's execution ran")
}
