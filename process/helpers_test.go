package process_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
)

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// testConfig is a client configuration with fast pollers and a fake clock, so tests move time
// instead of waiting for it.
func testConfig(t testing.TB, fake *clock.Fake, handlers *commandbus.Handlers) *commandbus.Config {
	noJitter := 0.0
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	return &commandbus.Config{
		Handlers:          handlers,
		Logger:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Clock:             fake,
		FetchPollInterval: ms(20),
		Process: commandbus.ProcessConfig{
			PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20),
			DeadlineCheckInterval: ms(20), ExecutionLease: commandbus.Duration(30 * time.Second),
		},
		Domains: map[string]*commandbus.DomainConfig{
			"payments": {ConcurrentMessages: 10, Retry: commandbus.RetryPolicy{InitialDelay: ms(10), MaxDelay: ms(50), Jitter: &noJitter}},
		},
	}
}

func newClient(t testing.TB, drv driver.Driver, cfg *commandbus.Config) *commandbus.Client {
	t.Helper()
	client, err := commandbus.NewClient(drv, cfg)
	require.NoError(t, err)
	return client
}

// runtime creates the orchestration runtime of client.
func runtime(t testing.TB, client *commandbus.Client) *orchestration.Runtime {
	t.Helper()
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	return rt
}

func start(t testing.TB, client *commandbus.Client) {
	t.Helper()
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
}

func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStatus polls an execution until it reaches want.
func waitStatus[S any](t testing.TB, m *process.Manager[S], id uuid.UUID, want driver.ExecutionStatus) *process.Instance[S] {
	t.Helper()
	var inst *process.Instance[S]
	eventually(t, 15*time.Second, "execution to be "+string(want), func() bool {
		var err error
		inst, err = m.Get(context.Background(), id)
		require.NoError(t, err)
		return inst.Status == want
	})
	return inst
}

// logLines renders an execution log as "TYPE name STATUS" lines for assertions.
func logLines(entries []*driver.ExecutionLogEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		line := e.EntryType
		if e.Name != "" {
			line += " " + e.Name
		}
		if e.StepStatus != "" {
			line += " " + e.StepStatus
		}
		out[i] = line
	}
	return out
}

// counter counts calls by name.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func newCounter() *counter { return &counter{n: map[string]int{}} }

func (c *counter) inc(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[name]++
	return c.n[name]
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

var testStart = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

var testExecutionID = uuid.MustParse("01a1ff00-0000-7000-8000-000000000001")
