package console

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
)

// Steps of one layer that ran at the same time overlap on the timeline; later layers start to
// the right; a step still running reaches now; one that has not run has no bar.
func TestLayoutTimeline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	at := func(s float64) *time.Time { v := t0.Add(time.Duration(s * float64(time.Second))); return &v }
	bars := []*timelineBar{
		{Name: "verify", Start: at(0), End: at(1)},
		{Name: "kyc", Start: at(1), End: at(4)},
		{Name: "sanctions", Start: at(1.1), End: at(2)},
		{Name: "open", Start: at(4), End: nil}, // running: reaches now
		{Name: "welcome"},                      // not run
	}
	ch := layoutTimeline(bars, *at(8))
	require.Equal(t, 8*time.Second, ch.Span)
	byName := map[string]*timelineBar{}
	for _, b := range ch.Bars {
		byName[b.Name] = b
	}
	end := func(b *timelineBar) int { return b.X + b.W }
	require.Equal(t, chartLabelW, byName["verify"].X, "the earliest start is the axis origin")
	require.Less(t, end(byName["verify"]), end(byName["kyc"]))
	k, s := byName["kyc"], byName["sanctions"]
	require.True(t, k.X <= end(s) && s.X <= end(k), "kyc and sanctions overlap: kyc %d+%d, sanctions %d+%d", k.X, k.W, s.X, s.W)
	require.Greater(t, byName["open"].X, end(byName["verify"]))
	require.Equal(t, chartLabelW+chartBarW, end(byName["open"]), "a running step reaches now, the end of the axis")
	require.Zero(t, byName["welcome"].W)
	require.Less(t, byName["verify"].Y, byName["kyc"].Y, "a row per step")
}

// The DAG has a column per layer, a box per step and a line per edge, from the right edge of
// one box to the left edge of the next.
func TestLayoutDAG(t *testing.T) {
	t.Parallel()
	topo := &orchestration.Topology{
		Layers: [][]string{{"a"}, {"b", "c"}, {"d"}},
		Edges:  []orchestration.Edge{{From: "a", To: "b"}, {From: "a", To: "c"}, {From: "b", To: "d"}, {From: "c", To: "d"}},
	}
	pic := layoutDAG(topo, []orchestration.StepInfo{{ID: "b", Kind: orchestration.StepKindSignal, Signal: "go"}, {ID: "c", Kind: orchestration.StepKindSleep, Sleep: time.Minute},
		{ID: "d", Kind: orchestration.StepKindCommand, CommandDomain: "kyc", CommandType: "CheckID"}})
	require.Len(t, pic.Boxes, 4)
	require.Len(t, pic.Lines, 4)
	boxes := map[string]*dagBox{}
	for _, b := range pic.Boxes {
		boxes[b.ID] = b
	}
	require.Less(t, boxes["a"].X, boxes["b"].X)
	require.Equal(t, boxes["b"].X, boxes["c"].X, "one column per layer")
	require.Less(t, boxes["b"].Y, boxes["c"].Y)
	require.Less(t, boxes["c"].X, boxes["d"].X)
	require.Equal(t, "signal", boxes["b"].Kind)
	require.Equal(t, "signal go", boxes["b"].Detail)
	require.Equal(t, "sleep", boxes["c"].Kind)
	require.Equal(t, "local", boxes["a"].Kind, "a step without a description is local")
	require.Equal(t, "sends CheckID to kyc", boxes["d"].Detail)
	require.GreaterOrEqual(t, pic.Width, boxes["d"].X+boxes["d"].W)
	require.GreaterOrEqual(t, pic.Height, boxes["c"].Y+boxes["c"].H)
}

// The filter turns the query into list parameters, and refuses what it cannot read, naming the
// field.
func TestParseExecutionFilter(t *testing.T) {
	t.Parallel()
	q := url.Values{"model": {"workflow"}, "type": {"Gate"}, "status": {"waiting_for_async, COMPLETED"}, "key": {"k-1"},
		"attr.region": {"EU"}, "attr": {"tier=gold"}}
	f, p, err := parseExecutionFilter(q)
	require.NoError(t, err)
	require.Equal(t, "workflow", p.Model)
	require.Equal(t, "Gate", p.Type)
	require.Equal(t, "k-1", p.BusinessKey)
	require.Equal(t, []driver.ExecutionStatus{driver.ExecutionWaitingForAsync, driver.ExecutionCompleted}, p.Statuses)
	require.Equal(t, map[string]string{"region": "EU", "tier": "gold"}, p.Attributes)
	require.Equal(t, executionsPageSize+1, p.Limit)
	require.True(t, f.Active())

	for _, bad := range []url.Values{
		{"status": {"DONE"}},
		{"attr": {"novalue"}},
		{"before": {"x"}},
	} {
		_, _, err := parseExecutionFilter(bad)
		require.Error(t, err, "%v", bad)
	}
	_, _, err = parseExecutionFilter(url.Values{"status": {"DONE"}, "attr": {"x"}})
	require.ErrorContains(t, err, "status")
	require.ErrorContains(t, err, "attr", "every problem at once")
}

// Bars come from the log: a declarative model's steps in layer order with those not run yet, a
// step from its start to the entry that ends it, a waiting step open, a retried step from its
// first start.
func TestStepBars(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ptr := func(v time.Time) *time.Time { return &v }
	log := []*driver.ExecutionLogEntry{
		{EntryType: "LIFECYCLE", Name: "CREATED", At: at(0)},
		{EntryType: "STEP", Name: "a", StepStatus: "COMPLETED", StartedAt: ptr(at(0)), At: at(1)},
		{EntryType: "STEP", Name: "b", StepStatus: "RETRY_SCHEDULED", StartedAt: ptr(at(1)), At: at(2), ErrorCode: "BUSY", ErrorMessage: "try later"},
		{EntryType: "STEP", Name: "b", StepStatus: "COMPLETED", StartedAt: ptr(at(3)), At: at(4)},
		{EntryType: "STEP", Name: "gate", StepStatus: "WAITING", At: at(1)},
	}
	topo := &orchestration.Topology{Layers: [][]string{{"a"}, {"b", "gate"}, {"c"}}}
	row := &driver.ExecutionRow{Status: driver.ExecutionWaitingForAsync}
	bars := stepBars(topo, row, log)
	require.Len(t, bars, 4)
	names := []string{bars[0].Name, bars[1].Name, bars[2].Name, bars[3].Name}
	require.Equal(t, []string{"a", "b", "gate", "c"}, names, "layer order")
	require.Equal(t, at(1), *bars[1].Start, "from the first attempt's start")
	require.Equal(t, at(4), *bars[1].End)
	require.Equal(t, "COMPLETED", bars[1].Status)
	require.Empty(t, bars[1].Error, "the error of an attempt that was retried is gone once it completed")
	require.Equal(t, "WAITING", bars[2].Status)
	require.Nil(t, bars[2].End, "a waiting step reaches now")
	require.Equal(t, "PENDING", bars[3].Status)
	require.Nil(t, bars[3].Start)

	// Without a topology (a process), the steps come in the order they first ran.
	bars = stepBars(nil, &driver.ExecutionRow{Status: driver.ExecutionCompleted, CompletedAt: ptr(at(9))}, log)
	require.Len(t, bars, 3)
	require.Equal(t, "gate", bars[2].Name)
	require.Equal(t, at(9), *bars[2].End, "an ended execution closes its open bars")
}
