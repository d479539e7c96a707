package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBenchSchedulesJSON(t *testing.T) {
	t.Parallel()
	out := run(t, "bench", "schedules", "--database", sqliteURL(t, "sch.db"), "--schedules", "20", "--duration", "2s", "--warmup", "1s", "--json")
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), "the output is one JSON object: %s", out)
	for _, field := range []string{"driver", "schedules", "ticks", "started", "missing", "duplicates", "lateness_p50_ms", "lateness_p99_ms", "starts_per_s", "config"} {
		require.Contains(t, res, field)
	}
	require.Equal(t, "sqlite", res["driver"])
	require.InDelta(t, 40, res["ticks"], 0, "20 schedules × 2 one-second ticks")
	require.InDelta(t, 0, res["duplicates"], 0)
	require.Positive(t, res["started"])
	require.GreaterOrEqual(t, res["lateness_p99_ms"], res["lateness_p50_ms"])
}

func TestBenchSchedulesWithEnginesReportsRuns(t *testing.T) {
	t.Parallel()
	out := run(t, "bench", "schedules", "--database", sqliteURL(t, "sch-engines.db"), "--schedules", "20", "--duration", "2s", "--warmup", "1s", "--engines", "--json")
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), "the output is one JSON object: %s", out)
	require.Positive(t, res["ran"], "the engines ran ticks' executions")
	require.NotContains(t, res, "run_early", "no tick ran before its time (omitted when 0)")
	require.GreaterOrEqual(t, res["run_lateness_p99_ms"], res["run_lateness_p50_ms"])
}
