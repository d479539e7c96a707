package saga_test

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
	"github.com/commandbus/commandbus/saga"
)

var testStart = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

var operator = commandbus.OperatorAction{Actor: "ops:ada", Reason: "refund made by hand"}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func testConfig(t *testing.T, fake *clock.Fake) *commandbus.Config {
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	cfg := &commandbus.Config{
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Process: commandbus.ProcessConfig{
			PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20),
			DeadlineCheckInterval: ms(20), ExecutionLease: commandbus.Duration(30 * time.Second),
		},
	}
	if fake != nil {
		cfg.Clock = fake
	}
	return cfg
}

func newRuntime(t *testing.T, drv driver.Driver, cfg *commandbus.Config) (*commandbus.Client, *orchestration.Runtime) {
	t.Helper()
	client, err := commandbus.NewClient(drv, cfg)
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	return client, rt
}

func start(t *testing.T, client *commandbus.Client) {
	t.Helper()
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
}

func waitStatus(t *testing.T, m *saga.Manager, id uuid.UUID, want driver.ExecutionStatus) *saga.Result {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := m.Result(context.Background(), id)
		require.NoError(t, err)
		if r.Status == string(want) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("saga %s is %s (%s %s), want %s", id, r.Status, r.ErrorCode, r.Error, want)
		}
		time.Sleep(10 * time.Millisecond) // polling the stored status with a deadline
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// journal records what steps and compensations ran, in order.
type journal struct {
	mu      sync.Mutex
	entries []string
	count   map[string]int
}

func (j *journal) add(s string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, s)
	if j.count == nil {
		j.count = map[string]int{}
	}
	j.count[s]++
	return j.count[s]
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.entries...)
}

func (j *journal) n(s string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.count[s]
}

// filter keeps the journal entries with prefix.
func filter(entries []string, prefix string) []string {
	var out []string
	for _, e := range entries {
		if len(e) > len(prefix) && e[:len(prefix)] == prefix {
			out = append(out, e[len(prefix):])
		}
	}
	return out
}

func okStep(j *journal) saga.StepFunc {
	return func(ctx context.Context, sc *saga.StepContext) (any, error) {
		j.add("do:" + sc.Step)
		return sc.Step + "-done", nil
	}
}

func undo(j *journal) saga.CompensateFunc {
	return func(ctx context.Context, sc *saga.StepContext) error {
		j.add("undo:" + sc.Step)
		return nil
	}
}

func failBusiness(j *journal) saga.StepFunc {
	return func(ctx context.Context, sc *saga.StepContext) (any, error) {
		j.add("do:" + sc.Step)
		return nil, commandbus.BusinessRule("INSUFFICIENT_FUNDS", "the account cannot cover it")
	}
}

// barrier lets n parallel callers through only once all n have arrived (or fails after 5s): run
// one after the other, they would never get there.
type barrier struct {
	mu      sync.Mutex
	n       int
	arrived int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) wait() bool {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}
