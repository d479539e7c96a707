package process_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/process"
)

type taggedState struct {
	Customer       string `json:"customer"`
	BadKeyRejected bool   `json:"badKeyRejected"`
	Reserved       string `json:"reserved,omitempty"`
}

// taggedProcess sets search attributes as it goes: "stage" at each step, and it drops "customer"
// at the end.
type taggedProcess struct{}

func (taggedProcess) Type() string   { return "Tagged" }
func (taggedProcess) Domain() string { return "payments" }

func (taggedProcess) Execute(x *process.Execution[taggedState]) error {
	err := x.SetAttribute("bad key", "v")
	x.State.BadKeyRejected = errors.Is(err, driver.ErrInvalidAttribute)
	if err := x.SetAttribute("stage", "reserving"); err != nil {
		return err
	}
	reserved, err := process.Step(x, "reserve", func(ctx context.Context) (string, error) { return "R-" + x.State.Customer, nil })
	if err != nil {
		return err
	}
	x.State.Reserved = reserved
	if err := x.SetAttribute("stage", "done"); err != nil {
		return err
	}
	return x.SetAttribute("customer", "")
}

func TestSearchAttributes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := newClient(t, drv, testConfig(t, clock.NewFake(testStart), nil))
		m, err := process.NewManager(runtime(t, client), process.Process[taggedState](taggedProcess{}))
		require.NoError(t, err)
		start(t, client)

		eu, err := m.Start(ctx, taggedState{Customer: "c-1"},
			process.WithAttributes(map[string]string{"customer": "c-1"}), process.WithAttributes(map[string]string{"region": "eu"}))
		require.NoError(t, err)
		inst, err := m.Get(ctx, eu)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCompleted, inst.Status)
		require.True(t, inst.State.BadKeyRejected, "SetAttribute rejects an invalid key")
		require.Equal(t, map[string]string{"region": "eu", "stage": "done"}, inst.Attributes,
			"set at start, changed by the steps, the empty one removed")

		us, err := m.Start(ctx, taggedState{Customer: "c-2"}, process.Deferred(),
			process.WithAttributes(map[string]string{"customer": "c-2", "region": "us"}))
		require.NoError(t, err)
		waitStatus(t, m, us, driver.ExecutionCompleted)

		list := func(attrs map[string]string) []uuid.UUID {
			t.Helper()
			insts, err := m.List(ctx, process.ListParams{Attributes: attrs})
			require.NoError(t, err)
			ids := make([]uuid.UUID, len(insts))
			for i, inst := range insts {
				ids[i] = inst.ID
			}
			return ids
		}
		require.Equal(t, []uuid.UUID{us, eu}, list(map[string]string{"stage": "done"}))
		require.Equal(t, []uuid.UUID{eu}, list(map[string]string{"stage": "done", "region": "eu"}))
		require.Empty(t, list(map[string]string{"customer": "c-1"}), "removed by the step")

		_, err = m.Start(ctx, taggedState{}, process.WithID(uuid.Must(uuid.NewV7())),
			process.WithAttributes(map[string]string{"": "x", "ok": string(make([]byte, driver.MaxAttributeValueLength+1))}))
		require.ErrorIs(t, err, driver.ErrInvalidAttribute)
		require.ErrorContains(t, err, "the key is empty")
		require.ErrorContains(t, err, `the value of "ok" is 1025 bytes long`, "every problem is reported")
		insts, err := m.List(ctx, process.ListParams{})
		require.NoError(t, err)
		require.Len(t, insts, 2, "nothing is created with invalid attributes")
	})
}

// commits records what the client's execution observer is told, per execution.
type commits struct {
	mu   sync.Mutex
	byID map[uuid.UUID][]commandbus.ExecutionCommit
}

func (c *commits) observe(commit commandbus.ExecutionCommit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID[commit.Execution.ID] = append(c.byID[commit.Execution.ID], commit)
}

func (c *commits) of(id uuid.UUID) []commandbus.ExecutionCommit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]commandbus.ExecutionCommit(nil), c.byID[id]...)
}

// TestExecutionObserver runs the order process through its wait and its response: the client's
// observer is told of every commit once and in order, so the entries it saw are the stored log.
func TestExecutionObserver(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		seen := &commits{byID: map[uuid.UUID][]commandbus.ExecutionCommit{}}
		cfg := testConfig(t, clock.NewFake(testStart), nil)
		cfg.ExecutionObserver = seen.observe
		client := newClient(t, drv, cfg)
		proc := &orderProcess{calls: newCounter()}
		m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
		require.NoError(t, err)
		process.OnResponse(m, func(s *orderState, r confirmed) error {
			s.Confirmed = true
			return nil
		})
		start(t, client)

		id, err := m.Start(ctx, orderState{OrderID: "7"})
		require.NoError(t, err)
		require.NoError(t, m.ProcessAsyncResponse(ctx, id, confirmed{By: "bank"}))
		inst := waitStatus(t, m, id, driver.ExecutionCompleted)
		eventually(t, 10*time.Second, "the completion to be observed", func() bool {
			got := seen.of(id)
			return len(got) > 0 && got[len(got)-1].Execution.Status == driver.ExecutionCompleted
		})

		got := seen.of(id)
		require.True(t, got[0].Inserted, "the creation comes first")
		var statuses []driver.ExecutionStatus
		var entries []*driver.ExecutionLogEntry
		for i, c := range got {
			require.Equal(t, i == 0, c.Inserted)
			require.Equal(t, process.Model, c.Execution.Model)
			require.Equal(t, "Order", c.Execution.Type)
			if len(statuses) == 0 || statuses[len(statuses)-1] != c.Execution.Status {
				statuses = append(statuses, c.Execution.Status)
			}
			entries = append(entries, c.Log...)
		}
		require.Equal(t, []driver.ExecutionStatus{driver.ExecutionExecuting, driver.ExecutionWaitingForAsync,
			driver.ExecutionExecuting, driver.ExecutionCompleted}, statuses)
		require.Equal(t, logLines(inst.Log), logLines(entries), "every stored entry once, in order")
		for i, entry := range entries {
			require.Equal(t, i+1, entry.Seq)
		}
	})
}
