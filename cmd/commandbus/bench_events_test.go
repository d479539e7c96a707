package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBenchEventsJSON(t *testing.T) {
	t.Parallel()
	out := run(t, "bench", "events", "--database", sqliteURL(t, "e.db"), "--workflows", "20", "--handoff=false", "--json")
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), "the output is one JSON object: %s", out)
	require.Equal(t, "sqlite", res["driver"])
	require.InDelta(t, 20, res["workflows"], 0)
	require.InDelta(t, 20*12, res["events"], 0, "started, 5 × (step started, succeeded), completed per workflow")
	require.Positive(t, res["p50_ms"])
	require.GreaterOrEqual(t, res["p99_ms"], res["p50_ms"])
	require.InDelta(t, 20*12, res["commit_timed"], 0, "every event timed from its commit too")
	require.Positive(t, res["commit_p50_ms"])
	require.GreaterOrEqual(t, res["commit_p99_ms"], res["commit_p50_ms"])
	require.Zero(t, res["handed_off"], "left to the relay's claims")

	// Paced by the relay, every event is still published.
	out = run(t, "bench", "events", "--database", sqliteURL(t, "p.db"), "--workflows", "20", "--max-lag", "20ms", "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &res), "the output is one JSON object: %s", out)
	require.InDelta(t, 20*12, res["events"], 0)
	require.InDelta(t, 20e6, res["config"].(map[string]any)["max_lag"], 0, "the configuration says it was paced")

	// Handed to the relay after each commit, as serve does by default, every event is published.
	// (How many the hand-off takes rather than leaves to the claims depends on the machine's
	// load: a message whose key's previous one went to the claims goes there too.)
	out = run(t, "bench", "events", "--database", sqliteURL(t, "h.db"), "--workflows", "20", "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &res), "the output is one JSON object: %s", out)
	require.InDelta(t, 20*12, res["events"], 0)
	require.Positive(t, res["handed_off"])
	require.LessOrEqual(t, res["handed_off_left"], res["handed_off"])

	out = run(t, "bench", "workflow", "--database", sqliteURL(t, "w.db"), "--workflows", "20", "--events", "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &res), "the output is one JSON object: %s", out)
	require.InDelta(t, 20*12, res["events"], 0)
}

func TestBenchMemProfile(t *testing.T) {
	t.Parallel()
	profile := filepath.Join(t.TempDir(), "mem.prof")
	run(t, "bench", "workflow", "--database", sqliteURL(t, "m.db"), "--workflows", "5", "--memprofile", profile, "--json")
	b, err := os.ReadFile(profile)
	require.NoError(t, err)
	require.Greater(t, len(b), 2)
	require.Equal(t, []byte{0x1f, 0x8b}, b[:2], "a pprof profile, gzipped")

	res := fail(t, "bench", "workflow", "--database", sqliteURL(t, "n.db"), "--workflows", "5", "--memprofile", filepath.Join(t.TempDir(), "missing", "mem.prof"))
	require.ErrorContains(t, res.err, "--memprofile")
	require.NotContains(t, res.stdout, "workflows/s", "nothing ran")
}
