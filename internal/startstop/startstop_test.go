package startstop

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// service is the smallest user of Base: one goroutine that runs until Stop.
type service struct {
	Base
	runs atomic.Int32
	live atomic.Int32
}

func (s *service) Start() {
	stop, ok := s.StartInit()
	if !ok {
		return
	}
	s.runs.Add(1)
	s.live.Add(1)
	s.Go(func() {
		defer s.live.Add(-1)
		<-stop
	})
}

func (s *service) Stop() {
	if !s.StopInit() {
		return
	}
	<-s.Done()
	s.Stopped()
}

func TestCyclesTwiceAndIgnoresRepeats(t *testing.T) {
	var s service
	s.Stop() // stopping a service never started does nothing
	require.False(t, s.Running())
	for cycle := 1; cycle <= 2; cycle++ {
		s.Start()
		s.Start() // a second Start does nothing
		require.True(t, s.Running())
		require.EqualValues(t, cycle, s.runs.Load(), "one run per Start while running")
		require.EqualValues(t, 1, s.live.Load())
		s.Stop()
		s.Stop()
		require.False(t, s.Running())
		require.EqualValues(t, 0, s.live.Load(), "Stop waited for the run's goroutine")
	}
}

func TestStartDuringStopIsRefused(t *testing.T) {
	var b Base
	stop, ok := b.StartInit()
	require.True(t, ok)
	release := make(chan struct{})
	b.Go(func() { <-stop; <-release })
	require.True(t, b.StopInit())
	_, ok = b.StartInit()
	require.False(t, ok, "a service still stopping does not start")
	close(release)
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the run's goroutine did not end")
	}
	b.Stopped()
	_, ok = b.StartInit()
	require.True(t, ok, "once stopped, it starts again")
}
