package process_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/process"
)

// orderState is the state of the test processes.
type orderState struct {
	OrderID    string `json:"orderId"`
	Reserved   string `json:"reserved,omitempty"`
	Token      string `json:"token,omitempty"`
	Confirmed  bool   `json:"confirmed"`
	Shipped    string `json:"shipped,omitempty"`
	Signals    []int  `json:"signals,omitempty"`
	SeenAtWait []int  `json:"seenAtWait,omitempty"`
	Note       string `json:"note,omitempty"`
}

// confirmed is the async response of the order process.
type confirmed struct {
	By string `json:"by"`
}

func (confirmed) ResponseName() string { return "Confirmed" }

// signal is a numbered async response.
type signal struct {
	N int `json:"n"`
}

func (signal) ResponseName() string { return "Signal" }

// orderProcess: reserve (step with compensation) → token (side effect) → wait for confirmation
// → ship (step).
type orderProcess struct {
	calls      *counter
	shipErr    func(attempt int) error
	opts       []process.StepOption
	typ        string
	compensate func() error
}

func (p *orderProcess) Type() string {
	if p.typ != "" {
		return p.typ
	}
	return "Order"
}
func (p *orderProcess) Domain() string { return "payments" }

func (p *orderProcess) Execute(x *process.Execution[orderState]) error {
	reserved, err := process.Step(x, "reserve", func(ctx context.Context) (string, error) {
		p.calls.inc("reserve")
		return "R-" + x.State.OrderID, nil
	}, process.Compensate(func(x *process.Execution[orderState]) error {
		p.calls.inc("unreserve")
		if p.compensate != nil {
			return p.compensate()
		}
		return nil
	}))
	if err != nil {
		return err
	}
	x.State.Reserved = reserved
	token, err := process.SideEffect(x, "token", func() (string, error) {
		p.calls.inc("token")
		return uuid.NewString(), nil
	})
	if err != nil {
		return err
	}
	x.State.Token = token
	if err := x.Wait("awaitConfirmation", func() bool { return x.State.Confirmed }, 5*time.Minute); err != nil {
		return err
	}
	shipped, err := process.Step(x, "ship", func(ctx context.Context) (string, error) {
		n := p.calls.inc("ship")
		if p.shipErr != nil {
			if err := p.shipErr(n); err != nil {
				return "", err
			}
		}
		return "S-" + x.State.OrderID, nil
	}, p.opts...)
	if err != nil {
		return err
	}
	x.State.Shipped = shipped
	return nil
}

type bundle struct {
	drv     driver.Driver
	fake    *clock.Fake
	client  *commandbus.Client
	manager *process.Manager[orderState]
	proc    *orderProcess
}

func setupOrder(t *testing.T, drv driver.Driver, proc *orderProcess) *bundle {
	t.Helper()
	fake := clock.NewFake(testStart)
	client := newClient(t, drv, testConfig(t, fake, nil))
	if proc.calls == nil {
		proc.calls = newCounter()
	}
	m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
	require.NoError(t, err)
	process.OnResponse(m, func(s *orderState, r confirmed) error {
		s.Confirmed = true
		s.Note = "confirmed by " + r.By
		return nil
	})
	start(t, client)
	return &bundle{drv: drv, fake: fake, client: client, manager: m, proc: proc}
}

var operator = commandbus.OperatorAction{Actor: "alice@ops", Reason: "checked with the bank"}

func TestStepReplayAndCompletion(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		b := setupOrder(t, drv, &orderProcess{})
		ctx := context.Background()

		id, err := b.manager.Start(ctx, orderState{OrderID: "42"}, process.WithBusinessKey("order-42"))
		require.NoError(t, err)
		inst, err := b.manager.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionWaitingForAsync, inst.Status, "immediate start runs until the wait")
		require.Equal(t, "awaitConfirmation", inst.CurrentWait)
		require.Equal(t, testStart.Add(5*time.Minute), inst.NextWaitTimeoutAt.UTC())
		require.Equal(t, "R-42", inst.State.Reserved)
		token := inst.State.Token
		require.NotEmpty(t, token)

		require.NoError(t, b.manager.ProcessAsyncResponse(ctx, id, confirmed{By: "bank"}))
		inst = waitStatus(t, b.manager, id, driver.ExecutionCompleted)
		require.Equal(t, "S-42", inst.State.Shipped)
		require.Equal(t, token, inst.State.Token, "a side effect's value is recorded, not drawn again")
		require.Equal(t, "confirmed by bank", inst.State.Note)
		require.Equal(t, 1, b.proc.calls.get("reserve"), "replay returns the recorded result")
		require.Equal(t, 1, b.proc.calls.get("token"))
		require.Equal(t, 1, b.proc.calls.get("ship"))
		require.Equal(t, []string{
			"LIFECYCLE created PROCESS_CREATED",
			"STEP reserve COMPLETED", "SIDE_EFFECT token RECORDED", "WAIT awaitConfirmation PENDING",
			"ASYNC_RESPONSE Confirmed APPLIED", "WAIT awaitConfirmation SATISFIED", "STEP ship COMPLETED",
		}, logLines(inst.Log))
		require.Equal(t, "order-42", inst.BusinessKey)
		require.NotNil(t, inst.CompletedAt)
	})
}

func TestDeferredStartAndBatch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		b := setupOrder(t, drv, &orderProcess{})
		ctx := context.Background()
		id, err := b.manager.Start(ctx, orderState{OrderID: "1"}, process.Deferred())
		require.NoError(t, err)
		ids, err := b.manager.StartBatch(ctx, []orderState{{OrderID: "2"}, {OrderID: "3"}})
		require.NoError(t, err)
		for _, id := range append(ids, id) {
			inst := waitStatus(t, b.manager, id, driver.ExecutionWaitingForAsync)
			require.Equal(t, "R-"+inst.State.OrderID, inst.State.Reserved)
		}
		list, err := b.manager.List(ctx, process.ListParams{Statuses: []driver.ExecutionStatus{driver.ExecutionWaitingForAsync}})
		require.NoError(t, err)
		require.Len(t, list, 3)
	})
}

func TestRetryIsScheduledDurably(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		proc := &orderProcess{
			shipErr: func(n int) error {
				if n < 3 {
					return commandbus.Transient(errors.New("carrier unavailable"))
				}
				return nil
			},
			opts: []process.StepOption{process.MaxAttempts(3), process.RetryDelay(time.Second)},
		}
		b := setupOrder(t, drv, proc)
		ctx := context.Background()
		id, err := b.manager.Start(ctx, orderState{OrderID: "7", Confirmed: true})
		require.NoError(t, err)

		inst, err := b.manager.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionWaitingForRetry, inst.Status)
		require.Equal(t, testStart.Add(2*time.Second), inst.NextRetryAt.UTC(), "delay·2^attempt")
		require.Equal(t, 1, inst.Retries)

		b.fake.Advance(2 * time.Second) // the retry poller takes it once due
		eventually(t, 10*time.Second, "second attempt", func() bool { return proc.calls.get("ship") == 2 })
		inst = waitStatus(t, b.manager, id, driver.ExecutionWaitingForRetry)
		require.Equal(t, testStart.Add(2*time.Second+4*time.Second), inst.NextRetryAt.UTC())

		b.fake.Advance(4 * time.Second)
		inst = waitStatus(t, b.manager, id, driver.ExecutionCompleted)
		require.Equal(t, 3, proc.calls.get("ship"))
		require.Equal(t, 1, proc.calls.get("reserve"))
		require.Equal(t, []string{"LIFECYCLE created PROCESS_CREATED", "STEP reserve COMPLETED", "SIDE_EFFECT token RECORDED", "WAIT awaitConfirmation SATISFIED",
			"STEP ship WAITING_RETRY", "STEP ship WAITING_RETRY", "STEP ship COMPLETED"}, logLines(inst.Log))
		require.Equal(t, 3, inst.Log[6].Attempt)
		require.Equal(t, 3, inst.Log[6].MaxAttempts)
	})
}

func TestRetriesExhaustedAndPermanentFailuresGoToTSQ(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		exhausted := setupOrder(t, drv, &orderProcess{typ: "Exhausted",
			shipErr: func(int) error { return commandbus.Transient(errors.New("carrier unavailable")) },
			opts:    []process.StepOption{process.MaxAttempts(2), process.RetryDelay(time.Second)}})
		id, err := exhausted.manager.Start(ctx, orderState{OrderID: "1", Confirmed: true})
		require.NoError(t, err)
		exhausted.fake.Advance(time.Minute)
		inst := waitStatus(t, exhausted.manager, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, process.CodeRetriesExhausted, inst.ErrorCode)
		require.Contains(t, inst.ErrorMessage, "attempt 2 of 2")

		permanent := setupOrder(t, drv, &orderProcess{typ: "Permanent",
			shipErr: func(int) error { return commandbus.Permanent("ADDRESS_INVALID", errors.New("no such street")) },
			opts:    []process.StepOption{process.MaxAttempts(5)}})
		id, err = permanent.manager.Start(ctx, orderState{OrderID: "2", Confirmed: true})
		require.NoError(t, err)
		inst = waitStatus(t, permanent.manager, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, process.CodePermanentFailure, inst.ErrorCode)
		require.Equal(t, 1, permanent.proc.calls.get("ship"), "a permanent failure is not retried")
	})
}

// compensating: reserve, charge and notify each compensate; charge's compensation fails; the
// final step fails on a business rule.
type compensatingProcess struct {
	calls *counter
	order []string
	mu    sync.Mutex
}

func (p *compensatingProcess) Type() string   { return "Compensating" }
func (p *compensatingProcess) Domain() string { return "payments" }

func (p *compensatingProcess) record(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.order = append(p.order, name)
}

func (p *compensatingProcess) Execute(x *process.Execution[orderState]) error {
	for _, name := range []string{"reserve", "charge", "notify"} {
		_, err := process.Step(x, name, func(ctx context.Context) (bool, error) {
			p.calls.inc(name)
			return true, nil
		}, process.Compensate(func(x *process.Execution[orderState]) error {
			p.record("undo-" + name)
			if name == "charge" {
				return errors.New("refund API down")
			}
			return nil
		}))
		if err != nil {
			return err
		}
	}
	_, err := process.Step(x, "ship", func(ctx context.Context) (bool, error) {
		return false, commandbus.BusinessRule("EMBARGO", "destination under embargo")
	})
	return err
}

func TestBusinessFailureCompensatesInReverseOrder(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		client := newClient(t, drv, testConfig(t, fake, nil))
		proc := &compensatingProcess{calls: newCounter()}
		m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
		require.NoError(t, err)
		start(t, client)

		id, err := m.Start(context.Background(), orderState{OrderID: "9"})
		require.NoError(t, err)
		// The failed compensation parks the execution for an operator (issue 15, defect 3).
		inst := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, []string{"undo-notify", "undo-charge", "undo-reserve"}, proc.order, "reverse order, a failed compensation does not stop the others")
		require.Equal(t, process.CodeCompensationFailed, inst.ErrorCode)
		require.Contains(t, inst.ErrorMessage, "charge (refund API down)")
		require.Contains(t, inst.ErrorMessage, "EMBARGO")
		require.Equal(t, []string{
			"LIFECYCLE created PROCESS_CREATED",
			"STEP reserve COMPLETED", "STEP charge COMPLETED", "STEP notify COMPLETED", "STEP ship FAILED",
			"LIFECYCLE compensation COMPENSATING", "COMPENSATION notify COMPENSATION_SUCCESS",
			"COMPENSATION charge COMPENSATION_FAILED", "COMPENSATION reserve COMPENSATION_SUCCESS",
			"LIFECYCLE troubleshooting queue WAITING_FOR_TSQ",
		}, logLines(inst.Log))
		require.Equal(t, "refund API down", inst.Log[7].ErrorMessage)
		require.Equal(t, 1, proc.calls.get("charge"))
	})
}

func TestWaitTimeoutGoesToTSQ(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		b := setupOrder(t, drv, &orderProcess{})
		ctx := context.Background()
		id, err := b.manager.Start(ctx, orderState{OrderID: "5"})
		require.NoError(t, err)
		b.fake.Advance(4 * time.Minute)
		inst, err := b.manager.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionWaitingForAsync, inst.Status, "not yet timed out")

		b.fake.Advance(2 * time.Minute)
		inst = waitStatus(t, b.manager, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, process.CodeWaitTimeout, inst.ErrorCode)
		require.Equal(t, "awaitConfirmation", inst.CurrentWait)
		require.Equal(t, "WAIT awaitConfirmation TIMED_OUT", logLines(inst.Log)[len(inst.Log)-1])
	})
}

// deadlineProcess applies a configurable deadline action.
type deadlineProcess struct {
	orderProcess
	action process.DeadlineAction
}

func (p *deadlineProcess) Type() string                           { return "Deadline" + string(p.action) }
func (p *deadlineProcess) DeadlineAction() process.DeadlineAction { return p.action }

func TestDeadlineActions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action process.DeadlineAction
		want   driver.ExecutionStatus
		undone int
	}{
		{process.DeadlineTSQ, driver.ExecutionWaitingForTSQ, 0},
		{process.DeadlineCompensate, driver.ExecutionCompensated, 1},
		{process.DeadlineFail, driver.ExecutionFailed, 0},
	} {
		t.Run(string(tc.action), func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
				fake := clock.NewFake(testStart)
				client := newClient(t, drv, testConfig(t, fake, nil))
				proc := &deadlineProcess{orderProcess: orderProcess{calls: newCounter()}, action: tc.action}
				m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
				require.NoError(t, err)
				start(t, client)
				id, err := m.Start(context.Background(), orderState{OrderID: "D"}, process.WithDeadline(testStart.Add(time.Minute)))
				require.NoError(t, err)
				waitStatus(t, m, id, driver.ExecutionWaitingForAsync)

				fake.Advance(2 * time.Minute) // past the deadline, before the wait's own timeout
				inst := waitStatus(t, m, id, tc.want)
				require.Equal(t, process.CodeDeadlineExceeded, inst.ErrorCode)
				require.Equal(t, tc.undone, proc.calls.get("unreserve"))
			})
		})
	}
}

// A deadline action configured for the process type, here from the environment as
// process.<type>.deadline-action (whose entry is named in lower case), overrides the one the
// process's code chooses.
func TestConfiguredDeadlineActionOverridesTheCode(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		parsed, err := config.Parse(nil, []string{"COMMANDBUS_PROCESS_DEADLINECOMPENSATE_DEADLINE_ACTION=FAIL"})
		require.NoError(t, err)
		cfg := testConfig(t, fake, nil)
		cfg.Process.Types = parsed.Process.Types
		client := newClient(t, drv, cfg)
		proc := &deadlineProcess{orderProcess: orderProcess{calls: newCounter()}, action: process.DeadlineCompensate}
		m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(context.Background(), orderState{OrderID: "D"}, process.WithDeadline(testStart.Add(time.Minute)))
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionWaitingForAsync)
		fake.Advance(2 * time.Minute)
		inst := waitStatus(t, m, id, driver.ExecutionFailed)
		require.Equal(t, process.CodeDeadlineExceeded, inst.ErrorCode)
		require.Zero(t, proc.calls.get("unreserve"), "FAIL does not compensate")
	})
}

// signalProcess waits for four signals in turn and records what it saw at each wait.
type signalProcess struct{}

func (signalProcess) Type() string   { return "Signals" }
func (signalProcess) Domain() string { return "payments" }

func (signalProcess) Execute(x *process.Execution[orderState]) error {
	for n := 1; n <= 4; n++ {
		if err := x.Wait(fmt.Sprintf("awaitL%d", n), func() bool {
			for _, s := range x.State.Signals {
				if s == n {
					return true
				}
			}
			return false
		}, time.Hour); err != nil {
			return err
		}
		x.State.SeenAtWait = append(x.State.SeenAtWait, len(x.State.Signals))
	}
	return nil
}

func TestConcurrentAsyncResponsesAreSerialized(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		client := newClient(t, drv, testConfig(t, fake, nil))
		m, err := process.NewManager(runtime(t, client), process.Process[orderState](signalProcess{}))
		require.NoError(t, err)
		var applied atomic.Int32
		process.OnResponse(m, func(s *orderState, r signal) error {
			applied.Add(1)
			s.Signals = append(s.Signals, r.N)
			return nil
		})
		start(t, client)
		ctx := context.Background()
		id, err := m.Start(ctx, orderState{OrderID: "L"})
		require.NoError(t, err)

		var wg sync.WaitGroup
		ready := make(chan struct{})
		for n := 4; n >= 1; n-- { // in reverse, all at once
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ready
				require.NoError(t, m.ProcessAsyncResponse(ctx, id, signal{N: n}))
			}()
		}
		close(ready)
		wg.Wait()
		inst := waitStatus(t, m, id, driver.ExecutionCompleted)
		require.ElementsMatch(t, []int{1, 2, 3, 4}, inst.State.Signals, "no response lost or overwritten")
		require.Equal(t, int32(4), applied.Load(), "each response applied exactly once")
		require.Equal(t, inst.ResponsesReceived, inst.ResponsesApplied, "every stored response was applied")
		for i := 1; i < len(inst.State.SeenAtWait); i++ {
			require.GreaterOrEqual(t, inst.State.SeenAtWait[i], inst.State.SeenAtWait[i-1], "a later replay sees every earlier update")
		}
		responses := 0
		for _, e := range inst.Log {
			if e.EntryType == "ASYNC_RESPONSE" {
				require.Equal(t, "APPLIED", e.StepStatus)
				responses++
			}
		}
		require.Equal(t, 4, responses)
	})
}

func TestLateResponseUpdatesStateWithoutReplay(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		b := setupOrder(t, drv, &orderProcess{})
		ctx := context.Background()
		id, err := b.manager.Start(ctx, orderState{OrderID: "8", Confirmed: true})
		require.NoError(t, err)
		waitStatus(t, b.manager, id, driver.ExecutionCompleted)

		require.NoError(t, b.manager.ProcessAsyncResponse(ctx, id, confirmed{By: "late bank"}))
		eventually(t, 10*time.Second, "late response applied", func() bool {
			inst, err := b.manager.Get(ctx, id)
			require.NoError(t, err)
			return inst.State.Note == "confirmed by late bank"
		})
		inst, err := b.manager.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCompleted, inst.Status)
		require.Equal(t, "ASYNC_RESPONSE Confirmed LATE_ASYNC_RESPONSE", logLines(inst.Log)[len(inst.Log)-1])
		require.Equal(t, 1, b.proc.calls.get("ship"), "no replay for a finished execution")
	})
}

func TestTSQOverrides(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		var broken atomic.Bool
		broken.Store(true)
		b := setupOrder(t, drv, &orderProcess{shipErr: func(int) error {
			if broken.Load() {
				return errors.New("carrier rejected the label") // unclassified: permanent
			}
			return nil
		}})
		ctx := context.Background()
		park := func(orderID string) uuid.UUID {
			id, err := b.manager.Start(ctx, orderState{OrderID: orderID, Confirmed: true})
			require.NoError(t, err)
			waitStatus(t, b.manager, id, driver.ExecutionWaitingForTSQ)
			return id
		}
		retryID, cancelID, cancelCompID, completeID := park("r"), park("c"), park("cc"), park("done")

		// Input is validated before anything changes.
		err := b.manager.Retry(ctx, retryID, commandbus.OperatorAction{Actor: "alice@ops"})
		var verr *commandbus.ValidationError
		require.ErrorAs(t, err, &verr)
		require.ErrorAs(t, b.manager.CompleteOverride(ctx, completeID, map[string]any{"noSuchField": 1}, operator), &verr)
		require.Equal(t, "stateOverrides", verr.Field)
		waitStatus(t, b.manager, completeID, driver.ExecutionWaitingForTSQ) // unchanged

		// Retry: a fresh attempt, replayed from the top.
		broken.Store(false)
		require.NoError(t, b.manager.Retry(ctx, retryID, operator))
		inst := waitStatus(t, b.manager, retryID, driver.ExecutionCompleted)
		lines := logLines(inst.Log)
		require.Contains(t, lines, "TSQ_RETRY retry")
		for _, e := range inst.Log {
			if e.EntryType == "TSQ_RETRY" {
				require.Equal(t, "alice@ops", e.Actor)
				require.Equal(t, "checked with the bank", e.Reason)
			}
		}
		require.ErrorIs(t, b.manager.Retry(ctx, retryID, operator), commandbus.ErrInvalidState, "only executions in the TSQ can be retried")

		// Cancel without compensation.
		require.NoError(t, b.manager.CancelOverride(ctx, cancelID, false, operator))
		inst = waitStatus(t, b.manager, cancelID, driver.ExecutionCancelled)
		require.Equal(t, 0, b.proc.calls.get("unreserve"))

		// Cancel with compensation.
		require.NoError(t, b.manager.CancelOverride(ctx, cancelCompID, true, operator))
		inst = waitStatus(t, b.manager, cancelCompID, driver.ExecutionCancelled)
		require.Equal(t, 1, b.proc.calls.get("unreserve"))
		require.Contains(t, logLines(inst.Log), "COMPENSATION reserve COMPENSATION_SUCCESS")

		// Complete with state overrides.
		require.NoError(t, b.manager.CompleteOverride(ctx, completeID, map[string]any{"shipped": "S-BY-PHONE"}, operator))
		inst = waitStatus(t, b.manager, completeID, driver.ExecutionCompleted)
		require.Equal(t, "S-BY-PHONE", inst.State.Shipped)
		require.Equal(t, "TSQ_COMPLETE complete", logLines(inst.Log)[len(inst.Log)-1])

		audit, err := b.client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "execution"})
		require.NoError(t, err)
		actions := map[string]int{}
		for _, a := range audit {
			require.Equal(t, "alice@ops", a.Actor)
			actions[a.Action]++
		}
		require.Equal(t, map[string]int{"TSQ_RETRY": 1, "TSQ_CANCEL": 2, "TSQ_COMPLETE": 1}, actions)
	})
}

// versionedProcess changes its steps when v2 is set: code changed under a running execution.
type versionedProcess struct {
	v2    *atomic.Bool
	calls *counter
}

func (versionedProcess) Type() string   { return "Versioned" }
func (versionedProcess) Domain() string { return "payments" }

func (p versionedProcess) Execute(x *process.Execution[orderState]) error {
	names := []string{"reserve", "charge"}
	if p.v2.Load() {
		names = []string{"reserve", "fraudCheck"}
	}
	for _, name := range names {
		if _, err := process.Step(x, name, func(ctx context.Context) (bool, error) { p.calls.inc(name); return true, nil }); err != nil {
			return err
		}
	}
	return x.Wait("awaitConfirmation", func() bool { return x.State.Confirmed }, time.Hour)
}

func TestDivergenceIsDetected(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		client := newClient(t, drv, testConfig(t, fake, nil))
		proc := versionedProcess{v2: &atomic.Bool{}, calls: newCounter()}
		m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
		require.NoError(t, err)
		process.OnResponse(m, func(s *orderState, r confirmed) error { s.Confirmed = true; return nil })
		start(t, client)
		ctx := context.Background()
		id, err := m.Start(ctx, orderState{OrderID: "v"})
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionWaitingForAsync)

		proc.v2.Store(true) // deploy a new version with a different second step
		require.NoError(t, m.ProcessAsyncResponse(ctx, id, confirmed{By: "bank"}))
		inst := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, process.CodeNondeterministic, inst.ErrorCode)
		require.Contains(t, inst.ErrorMessage, "recorded STEP charge, code now calls STEP fraudCheck")
		require.Zero(t, proc.calls.get("fraudCheck"), "nothing re-runs on divergence")
		require.Equal(t, 1, proc.calls.get("reserve"))
	})
}
