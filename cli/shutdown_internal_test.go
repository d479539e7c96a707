package cli

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/config"
)

func shutdownFile(t *testing.T, budget, drain time.Duration) *config.File {
	t.Helper()
	file := &config.File{}
	file.Database.URL = "sqlite://" + filepath.Join(t.TempDir(), "shutdown.db")
	file.Server.ShutdownBudget = commandbus.Duration(budget)
	file.Server.DrainDelay = commandbus.Duration(drain)
	file.ShutdownTimeout = commandbus.Duration(5 * time.Second)
	return file
}

// startRun runs a worker stack through run with interrupts the test sends, and returns the
// running stack and run's result.
func startRun(t *testing.T, file *config.File, interrupts chan os.Signal) (*Stack, <-chan error) {
	t.Helper()
	ready := make(chan *Stack, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), Config{Ready: func(s *Stack) { ready <- s }},
			StackOptions{File: file, Migrate: true, MetricsAddr: "127.0.0.1:0", interrupts: interrupts})
	}()
	select {
	case s := <-ready:
		return s, done
	case err := <-done:
		t.Fatalf("run ended before it was ready: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("run was not ready in time")
	}
	return nil, nil
}

func readyzStatus(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// The first interrupt fails /readyz at once while the servers keep answering through the drain
// delay; a second interrupt ends the shutdown at once, long before the budget.
func TestRunStopsAtOnceOnASecondInterrupt(t *testing.T) {
	t.Parallel()
	interrupts := make(chan os.Signal, 2)
	s, done := startRun(t, shutdownFile(t, 2*time.Minute, time.Minute), interrupts)
	require.Equal(t, http.StatusOK, readyzStatus(t, s.MetricsAddr))

	interrupts <- syscall.SIGTERM
	deadline := time.Now().Add(10 * time.Second)
	for readyzStatus(t, s.MetricsAddr) != http.StatusServiceUnavailable {
		require.True(t, time.Now().Before(deadline), "/readyz still answers 200 after the interrupt")
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	select {
	case err := <-done:
		t.Fatalf("run ended during the drain delay: %v", err)
	default:
	}

	started := time.Now()
	interrupts <- os.Interrupt
	select {
	case err := <-done:
		require.ErrorContains(t, err, "stopped at once on a second interrupt")
		require.Less(t, time.Since(started), 15*time.Second)
	case <-time.After(30 * time.Second):
		t.Fatal("a second interrupt did not stop run")
	}
	require.False(t, s.Client.Started(), "the workers were stopped")
}

// Without a second interrupt the shutdown is graceful and returns nil within its budget.
func TestRunShutsDownGracefullyWithinItsBudget(t *testing.T) {
	t.Parallel()
	interrupts := make(chan os.Signal, 1)
	s, done := startRun(t, shutdownFile(t, 10*time.Second, 100*time.Millisecond), interrupts)
	started := time.Now()
	interrupts <- syscall.SIGTERM
	select {
	case err := <-done:
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(started), 100*time.Millisecond, "the drain delay is kept")
	case <-time.After(10 * time.Second):
		t.Fatal("the graceful shutdown overran its budget")
	}
	require.False(t, s.Client.Started())
	_, err := http.Get("http://" + s.MetricsAddr + "/readyz")
	require.Error(t, err, "the probes stopped with the stack")
}
