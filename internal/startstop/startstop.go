// Package startstop gives every background service of the bus (the command workers, the outcome
// completer, the notification listener, the maintenance runner, the execution engine) one start and
// stop shape:
//
//   - Start begins a run; starting a running service does nothing.
//   - Stop ends the run and waits for every goroutine the run began; stopping a stopped service
//     does nothing.
//   - After Stop the service can be started again, as often as its owner likes.
//
// A service embeds Base, calls StartInit at the top of its Start and StopInit at the top of its
// Stop, starts its goroutines with Go, and calls Stopped once everything the run owned is released.
package startstop

import (
	"sync"
)

type state int

const (
	idle state = iota
	running
	stopping
)

// Base holds a service's run state. Its zero value is an idle service.
type Base struct {
	mu    sync.Mutex
	state state
	stop  chan struct{}
	wg    sync.WaitGroup
}

// StartInit begins a run. It returns ok=false when the service is running or still stopping, in
// which case the caller must return without starting anything. Otherwise stop is a channel closed
// when Stop begins; the run's goroutines watch it.
func (b *Base) StartInit() (stop <-chan struct{}, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != idle {
		return nil, false
	}
	b.state = running
	b.stop = make(chan struct{})
	return b.stop, true
}

// Go runs f as part of the current run: Wait (and so Stop) waits for it. Call it from Start or from
// a goroutine the run already began, never after the run ended.
func (b *Base) Go(f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
}

// StopInit begins stopping: it closes the run's stop channel. It returns ok=false when the service
// is not running (never started, already stopped, or another Stop is under way), in which case the
// caller must return at once.
func (b *Base) StopInit() (ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != running {
		return false
	}
	b.state = stopping
	close(b.stop)
	return true
}

// Done returns a channel closed when every goroutine started with Go has returned.
func (b *Base) Done() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	return done
}

// Stopped ends the run after StopInit: the service may be started again.
func (b *Base) Stopped() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == stopping {
		b.state = idle
	}
}

// Running reports whether a run is under way (started, and Stop not begun).
func (b *Base) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == running
}
