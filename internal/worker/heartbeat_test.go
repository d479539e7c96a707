package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

// The claim loop beats on every round, polls included, so a readiness probe can tell a live loop
// from a stuck one without a query.
func TestLastBeatFollowsTheClaimLoop(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t)
	cfg.PollInterval = 10 * time.Millisecond
	cfg.Run = func(context.Context, *driver.CommandRow) *driver.CommandCompletion { return nil }
	w := New(*cfg)
	require.True(t, w.LastBeat().IsZero(), "no beat before Start")
	w.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.Stop(ctx, 100*time.Millisecond)
	})
	deadline := time.Now().Add(10 * time.Second)
	for w.LastBeat().IsZero() {
		require.True(t, time.Now().Before(deadline), "the loop never beat")
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	first := w.LastBeat()
	for !w.LastBeat().After(first) {
		require.True(t, time.Now().Before(deadline), "the loop beat once, not on its polls")
		time.Sleep(time.Millisecond) // polling with a deadline
	}
	require.Equal(t, 10*time.Millisecond, w.PollInterval())
}
