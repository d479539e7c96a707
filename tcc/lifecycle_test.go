package tcc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tcc"
)

// The runtime's durable lifecycle events carry a transaction's phase and participant events
// (PHASE_STARTED, TRY_COMPLETED, ...), in order, written with the checkpoints that record them.
func TestLifecycleEventsThroughRuntime(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		l := newLedger()
		l.failWith("hotel:TRY", func(int) error { return commandbus.BusinessRule("NO_ROOMS", "full") })
		client, rt := newRuntime(t, drv, nil)
		var mu sync.Mutex
		var got []string
		done := make(chan struct{})
		require.NoError(t, rt.OnLifecycle(func(_ context.Context, ev orchestration.LifecycleEvent) error {
			if ev.Model != tcc.Model {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			got = append(got, string(ev.Type)+" "+ev.StepID)
			if ev.Type == cbtype.EventExecutionCompleted {
				close(done)
			}
			return nil
		}))
		m, err := tcc.Register(rt, trip(l, "trip-lifecycle"))
		require.NoError(t, err)
		start(t, client)
		_, err = m.Start(ctx, nil, tcc.Immediate())
		require.NoError(t, err)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Fatal("no EXECUTION_COMPLETED event")
		}
		mu.Lock()
		defer mu.Unlock()
		for _, want := range []string{"PHASE_STARTED TRY", "TRY_COMPLETED flight", "TRY_FAILED hotel", "PHASE_FAILED TRY",
			"PHASE_STARTED CANCEL", "CANCEL_COMPLETED flight", "PHASE_COMPLETED CANCEL", "EXECUTION_COMPLETED "} {
			require.Contains(t, got, want, "events: %v", got)
		}
		index := func(s string) int {
			for i, g := range got {
				if g == s {
					return i
				}
			}
			return -1
		}
		require.Less(t, index("TRY_FAILED hotel"), index("CANCEL_COMPLETED flight"), "in the order they happened")
	})
}
