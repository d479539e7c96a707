package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBenchSignalJSON(t *testing.T) {
	t.Parallel()
	out := run(t, "bench", "signal", "--database", sqliteURL(t, "s.db"), "--executions", "30", "--json")
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), "the output is one JSON object: %s", out)
	require.Equal(t, "sqlite", res["driver"])
	require.InDelta(t, 30, res["executions"], 0)
	require.Positive(t, res["p50_ms"])
	require.GreaterOrEqual(t, res["p99_ms"], res["p50_ms"])
}

func TestBenchTimersJSON(t *testing.T) {
	t.Parallel()
	out := run(t, "bench", "timers", "--database", sqliteURL(t, "t.db"), "--timers", "200", "--executions", "20",
		"--window", "200ms", "--lead", "1s", "--settle", "100ms", "--json")
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), "the output is one JSON object: %s", out)
	require.Equal(t, "sqlite", res["driver"])
	require.InDelta(t, 200, res["fired"], 0)
	require.InDelta(t, 0, res["fired_twice"], 0)
	require.InDelta(t, 0, res["lost"], 0)
	require.InDelta(t, 0, res["unfired"], 0)
	require.GreaterOrEqual(t, res["p99_late_ms"], res["p50_late_ms"])

	res2 := fail(t, "bench", "timers", "--database", sqliteURL(t, "v.db"), "--timers", "10", "--executions", "20")
	require.ErrorContains(t, res2.err, "executions must be between 1 and the number of timers")
}
