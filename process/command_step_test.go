package process_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
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

// fxState is the state of the FX booking process.
type fxState struct {
	PaymentID string `json:"paymentId"`
	Amount    string `json:"amount"`
	Reserved  bool   `json:"reserved"`
	Contract  string `json:"contract,omitempty"`
	Submitted bool   `json:"submitted"`
}

type bookFxRequest struct {
	PaymentID string `json:"paymentId"`
	Amount    string `json:"amount"`
}

type bookFxResult struct {
	Contract string `json:"contract"`
}

// fxProcess: reserve (local step, compensated) → bookFx (command step to fx) → submit.
type fxProcess struct {
	calls *counter
}

func (fxProcess) Type() string   { return "FxPayment" }
func (fxProcess) Domain() string { return "payments" }

func (p fxProcess) Execute(x *process.Execution[fxState]) error {
	if _, err := process.Step(x, "reserve", func(ctx context.Context) (bool, error) {
		p.calls.inc("reserve")
		return true, nil
	}, process.Compensate(func(x *process.Execution[fxState]) error {
		p.calls.inc("unreserve")
		x.State.Reserved = false
		return nil
	})); err != nil {
		return err
	}
	x.State.Reserved = true
	fx, err := process.CommandStep[fxState, bookFxRequest, bookFxResult](x, "bookFx", "fx", "BookFx",
		bookFxRequest{PaymentID: x.State.PaymentID, Amount: x.State.Amount},
		process.MaxAttempts(2), process.RetryDelay(time.Second), process.Timeout(time.Minute),
		process.Compensate(func(x *process.Execution[fxState]) error {
			p.calls.inc("cancelFx") // keyed on x.StepKey("bookFx"): the contract may be unknown
			return nil
		}))
	if err != nil {
		return err
	}
	x.State.Contract = fx.Contract
	_, err = process.Step(x, "submit", func(ctx context.Context) (bool, error) {
		p.calls.inc("submit")
		return true, nil
	})
	x.State.Submitted = err == nil
	return err
}

type bookFxArgs struct {
	PaymentID string `json:"paymentId"`
	Amount    string `json:"amount"`
}

func (bookFxArgs) Kind() string { return "BookFx" }

// fxFixture runs the FX process on one client with an fx handler chosen by the test.
func fxFixture(t *testing.T, drv driver.Driver, fake *clock.Fake, handle func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error)) (*commandbus.Client, *process.Manager[fxState], *counter) {
	t.Helper()
	handlers := commandbus.NewHandlers()
	commandbus.AddHandler(handlers, "fx", commandbus.HandlerFunc[bookFxArgs](handle))
	cfg := testConfig(t, fake, handlers)
	cfg.Domains["fx"] = &commandbus.DomainConfig{ConcurrentMessages: 2, MaxAttempts: 1}
	// The watchdog looks often (real time), so a lease the fake clock expires is acted on within
	// moments rather than at its next 5 s tick.
	cfg.WatchdogInterval = commandbus.Duration(100 * time.Millisecond)
	client := newClient(t, drv, cfg)
	calls := newCounter()
	m, err := process.NewManager(runtime(t, client), process.Process[fxState](fxProcess{calls: calls}))
	require.NoError(t, err)
	return client, m, calls
}

func TestCommandStepSuspendsAndResumesOnReply(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		var keys []string
		client, m, calls := fxFixture(t, drv, fake, func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error) {
			keys = append(keys, cmd.Headers[process.HeaderStepKey])
			return bookFxResult{Contract: "FX-" + cmd.Args.PaymentID}, nil
		})
		ctx := context.Background()
		id, err := m.Start(ctx, fxState{PaymentID: "P1", Amount: "100.00"})
		require.NoError(t, err)
		inst, err := m.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionWaitingForAsync, inst.Status, "suspended until the reply")
		require.Equal(t, "bookFx", inst.CurrentWait)
		commands, err := client.ListCommands(ctx, &commandbus.ListParams{Domain: "fx"})
		require.NoError(t, err)
		require.Len(t, commands, 1)
		require.Equal(t, id, commands[0].CorrelationID, "correlation id = execution id")
		require.Equal(t, commandbus.ReplyQueue("payments"), commands[0].ReplyTo)
		require.Equal(t, id.String()+":bookFx:1", commands[0].IdempotencyKey)

		start(t, client) // the fx worker and the payments reply worker
		inst = waitStatus(t, m, id, driver.ExecutionCompleted)
		require.Equal(t, "FX-P1", inst.State.Contract)
		require.True(t, inst.State.Submitted)
		require.Equal(t, []string{id.String() + ":bookFx"}, keys, "the handler sees the stable step key")
		require.Equal(t, 1, calls.get("reserve"), "replay after the reply does not re-run earlier steps")
		require.Equal(t, []string{"LIFECYCLE created PROCESS_CREATED", "STEP reserve COMPLETED", "COMMAND bookFx SENT", "WAIT bookFx PENDING",
			"STEP bookFx COMPLETED", "STEP submit COMPLETED"}, logLines(inst.Log))
	})
}

func TestCommandStepFailureReplyIsClassified(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		var attempts atomic.Int32
		client, m, calls := fxFixture(t, drv, fake, func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error) {
			if cmd.Args.PaymentID == "TIMEOUT" && attempts.Add(1) == 1 {
				return nil, commandbus.Permanent("SHOULD_NOT_MATTER", errors.New("unused"))
			}
			if cmd.Args.PaymentID == "REJECT" {
				return nil, commandbus.BusinessRule("RATE_EXPIRED", "quoted rate expired")
			}
			return bookFxResult{Contract: "FX-OK"}, nil
		})
		start(t, client)
		ctx := context.Background()

		// A FAILED reply is a business failure: the reserve step is compensated, and so is the
		// booking itself, first: a failure reply does not prove that nothing was booked under
		// the step key (an earlier attempt may land late).
		id, err := m.Start(ctx, fxState{PaymentID: "REJECT", Amount: "1.00"})
		require.NoError(t, err)
		inst := waitStatus(t, m, id, driver.ExecutionCompensated)
		require.Equal(t, "RATE_EXPIRED", inst.ErrorCode)
		require.False(t, inst.State.Reserved, "the compensation ran")
		require.Equal(t, 1, calls.get("unreserve"))
		require.Equal(t, 1, calls.get("cancelFx"), "the failed command step's compensation ran")
		var compensations []string
		for _, line := range logLines(inst.Log) {
			if strings.HasPrefix(line, "COMPENSATION ") {
				compensations = append(compensations, line)
			}
		}
		require.Equal(t, []string{"COMPENSATION bookFx COMPENSATION_SUCCESS", "COMPENSATION reserve COMPENSATION_SUCCESS"}, compensations)
		require.Contains(t, logLines(inst.Log), "STEP bookFx REPLY_FAILED")
	})
}

func TestCommandStepTimedOutReplyIsRetried(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		var calls atomic.Int32
		release := make(chan struct{})
		client, m, _ := fxFixture(t, drv, fake, func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error) {
			if calls.Add(1) == 1 {
				<-release // the first attempt hangs past its lease and last attempt: TIMED_OUT
				return nil, nil
			}
			return bookFxResult{Contract: "FX-RETRIED"}, nil
		})
		start(t, client)
		defer close(release)
		ctx := context.Background()
		id, err := m.Start(ctx, fxState{PaymentID: "SLOW", Amount: "1.00"})
		require.NoError(t, err)
		eventually(t, 10*time.Second, "the first attempt to run", func() bool { return calls.Load() == 1 })

		fake.Advance(31 * time.Second) // the fx lease expires; the command times out with a reply
		inst := waitStatus(t, m, id, driver.ExecutionWaitingForRetry)
		require.Contains(t, logLines(inst.Log), "STEP bookFx WAITING_RETRY")
		fake.Advance(2 * time.Second)
		inst = waitStatus(t, m, id, driver.ExecutionCompleted)
		require.Equal(t, "FX-RETRIED", inst.State.Contract)
		commands, err := client.ListCommands(ctx, &commandbus.ListParams{Domain: "fx"})
		require.NoError(t, err)
		require.Len(t, commands, 2, "each attempt sends its own command")
	})
}

// crashProcess blocks its second step on the first call, simulating a runner that dies between
// the step's effect and its checkpoint.
type crashProcess struct {
	calls   *counter
	blocked chan struct{}
	unblock chan struct{}
}

func (crashProcess) Type() string   { return "Crash" }
func (crashProcess) Domain() string { return "payments" }

func (p crashProcess) Execute(x *process.Execution[orderState]) error {
	for _, name := range []string{"one", "two", "three"} {
		if _, err := process.Step(x, name, func(ctx context.Context) (bool, error) {
			if p.calls.inc(name) == 1 && name == "two" {
				close(p.blocked)
				<-p.unblock // the "dead" runner: its checkpoint comes too late
			}
			return true, nil
		}, process.Timeout(time.Hour)); err != nil {
			return err
		}
	}
	return nil
}

func TestRunnerDiesMidStepAnotherResumes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		proc := crashProcess{calls: newCounter(), blocked: make(chan struct{}), unblock: make(chan struct{})}
		newInstance := func(workerID string) (*commandbus.Client, *process.Manager[orderState]) {
			cfg := testConfig(t, fake, nil)
			cfg.WorkerID = workerID
			client := newClient(t, drv, cfg)
			m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
			require.NoError(t, err)
			return client, m
		}
		_, dying := newInstance("runner-a")
		survivorClient, survivor := newInstance("runner-b")
		ctx := context.Background()

		started := make(chan error, 1)
		go func() {
			_, err := dying.Start(ctx, orderState{OrderID: "crash"}, process.WithID(testExecutionID))
			started <- err
		}()
		<-proc.blocked
		fake.Advance(31 * time.Second) // runner-a's lease runs out while it is stuck in step two
		start(t, survivorClient)
		inst := waitStatus(t, survivor, testExecutionID, driver.ExecutionCompleted)
		require.Equal(t, "runner-b", inst.WorkerID)

		close(proc.unblock) // the stale runner finally finishes step two and tries to checkpoint
		err := <-started
		require.Error(t, err, "the stale runner's checkpoint is fenced out")
		inst, err = survivor.Get(ctx, testExecutionID)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCompleted, inst.Status)
		require.Equal(t, 1, proc.calls.get("one"), "a completed step never runs again")
		require.Equal(t, 2, proc.calls.get("two"), "only the step interrupted between effect and checkpoint runs twice")
		require.Equal(t, 1, proc.calls.get("three"))
		require.Equal(t, []string{"LIFECYCLE created PROCESS_CREATED", "STEP one COMPLETED", "STEP two COMPLETED", "STEP three COMPLETED"}, logLines(inst.Log))
	})
}

// Fifty processes, each with a command step to a domain with concurrent-messages 2, run by two
// worker instances: never more than 4 commands in flight.
func TestCommandStepConcurrencyAcrossInstances(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		var inFlight, maxInFlight atomic.Int32
		handle := func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error) {
			n := inFlight.Add(1)
			for {
				m := maxInFlight.Load()
				if n <= m || maxInFlight.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond) // simulated FX provider latency
			inFlight.Add(-1)
			return bookFxResult{Contract: "FX-" + cmd.Args.PaymentID}, nil
		}
		clientA, managerA, _ := fxFixture(t, drv, fake, handle)
		clientB, _, _ := fxFixture(t, drv, fake, handle)
		states := make([]fxState, 50)
		for i := range states {
			states[i] = fxState{PaymentID: string(rune('A'+i%26)) + string(rune('a'+i/26)), Amount: "10.00"}
		}
		ctx := context.Background()
		ids, err := managerA.StartBatch(ctx, states)
		require.NoError(t, err)
		start(t, clientA)
		start(t, clientB)
		for _, id := range ids {
			waitStatus(t, managerA, id, driver.ExecutionCompleted)
		}
		t.Logf("max FX commands in flight across 2 instances × concurrent-messages 2: %d", maxInFlight.Load())
		require.LessOrEqual(t, maxInFlight.Load(), int32(4))
		require.GreaterOrEqual(t, maxInFlight.Load(), int32(2), "the instances should have worked in parallel")
	})
}

// A command parked in the bus's troubleshooting queue tells its process at once (a PARKED
// reply): the execution waits in the process TSQ with COMMAND_PARKED long before its reply
// timeout. An operator's retry from the process TSQ retries that same command (no second
// command), whose reply resumes the execution.
func TestCommandStepParkedCommandRetriedFromProcessTSQ(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		var calls atomic.Int32
		var stepKeys []string
		client, m, _ := fxFixture(t, drv, fake, func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error) {
			stepKeys = append(stepKeys, cmd.Headers[process.HeaderStepKey])
			if calls.Add(1) == 1 {
				return nil, commandbus.Permanent("PROVIDER_REJECTED", errors.New("unknown account"))
			}
			return bookFxResult{Contract: "FX-RETRIED"}, nil
		})
		start(t, client)
		ctx := context.Background()
		id, err := m.Start(ctx, fxState{PaymentID: "P9", Amount: "5.00"})
		require.NoError(t, err)
		// The clock never moves: only the PARKED reply can park the execution.
		inst := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, process.CodeCommandParked, inst.ErrorCode)
		require.Contains(t, inst.ErrorMessage, "waiting on parked command BookFx: PROVIDER_REJECTED: unknown account")

		require.NoError(t, m.Retry(ctx, id, operator))
		inst = waitStatus(t, m, id, driver.ExecutionCompleted)
		require.Equal(t, "FX-RETRIED", inst.State.Contract)
		commands, err := client.ListCommands(ctx, &commandbus.ListParams{Domain: "fx"})
		require.NoError(t, err)
		require.Len(t, commands, 1, "the parked command itself is retried, not sent again")
		require.Equal(t, commandbus.StatusCompleted, commands[0].Status)
		require.Equal(t, id.String()+":bookFx:1", commands[0].IdempotencyKey)
		require.Equal(t, []string{id.String() + ":bookFx", id.String() + ":bookFx"}, stepKeys, "the step key is stable")
		require.Contains(t, logLines(inst.Log), "COMMAND bookFx COMMAND_PARKED")
		require.Contains(t, logLines(inst.Log), "COMMAND bookFx RETRY_REQUESTED")
	})
}

// The operator's action on a parked command in the command TSQ reaches its process: a retry that
// succeeds and a completion by hand resume it from the process TSQ with the result; a cancel's
// CANCELLED reply fails the step as a permanent failure, the process's normal policy.
func TestCommandStepParkedCommandActionsResumeProcess(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		var failing atomic.Bool
		failing.Store(true)
		client, m, calls := fxFixture(t, drv, fake, func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error) {
			if failing.Load() {
				return nil, commandbus.Permanent("EXTERNAL_PERMANENT_FAILURE", errors.New("fx provider refused the deal"))
			}
			return bookFxResult{Contract: "FX-" + cmd.Args.PaymentID}, nil
		})
		start(t, client)
		ctx := context.Background()
		ids := map[string]uuid.UUID{}
		for _, p := range []string{"RETRY", "COMPLETE", "CANCEL"} {
			id, err := m.Start(ctx, fxState{PaymentID: p, Amount: "1.00"})
			require.NoError(t, err)
			ids[p] = id
		}
		parked := map[string]uuid.UUID{}
		for p, id := range ids {
			// The step's reply timeout is a minute and the fake clock never moves.
			inst := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
			require.Equal(t, process.CodeCommandParked, inst.ErrorCode, p)
			require.Contains(t, inst.ErrorMessage, "waiting on parked command BookFx: EXTERNAL_PERMANENT_FAILURE: fx provider refused the deal", p)
			require.True(t, inst.State.Reserved, p)
		}
		list, err := client.TSQ().List(ctx, commandbus.TSQFilter{Domain: "fx"})
		require.NoError(t, err)
		require.Len(t, list, 3)
		for _, cmd := range list {
			for p, id := range ids {
				if cmd.CorrelationID == id {
					parked[p] = cmd.ID
				}
			}
		}
		require.Len(t, parked, 3)
		require.True(t, fake.Now().Equal(testStart), "no time passed")

		failing.Store(false)
		_, err = client.TSQ().Retry(ctx, parked["RETRY"], operator)
		require.NoError(t, err)
		inst := waitStatus(t, m, ids["RETRY"], driver.ExecutionCompleted)
		require.Equal(t, "FX-RETRY", inst.State.Contract)
		require.True(t, inst.State.Submitted)

		_, err = client.TSQ().Complete(ctx, parked["COMPLETE"], []byte(`{"contract":"FX-BY-HAND"}`), operator)
		require.NoError(t, err)
		inst = waitStatus(t, m, ids["COMPLETE"], driver.ExecutionCompleted)
		require.Equal(t, "FX-BY-HAND", inst.State.Contract)
		require.Equal(t, 2, calls.get("submit"))

		_, err = client.TSQ().Cancel(ctx, parked["CANCEL"], operator)
		require.NoError(t, err)
		eventually(t, 15*time.Second, "the cancelled command's process to leave COMMAND_PARKED", func() bool {
			inst, err = m.Get(ctx, ids["CANCEL"])
			require.NoError(t, err)
			return inst.ErrorCode != process.CodeCommandParked
		})
		require.Equal(t, driver.ExecutionWaitingForTSQ, inst.Status, "a cancelled command is a permanent step failure")
		require.Equal(t, process.CodePermanentFailure, inst.ErrorCode)
		require.Contains(t, inst.ErrorMessage, "cancelled by "+operator.Actor)
		require.Empty(t, inst.State.Contract)
	})
}

func TestStartBatchWithIDs(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		b := setupOrder(t, drv, &orderProcess{})
		ctx := context.Background()
		ids := []uuid.UUID{uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())}
		got, err := b.manager.StartBatch(ctx, []orderState{{OrderID: "a"}, {OrderID: "b"}}, process.WithIDs(ids...), process.WithBusinessKeys("order-a", "order-b"))
		require.NoError(t, err)
		require.Equal(t, ids, got)
		inst := waitStatus(t, b.manager, ids[1], driver.ExecutionWaitingForAsync)
		require.Equal(t, "b", inst.State.OrderID)
		require.Equal(t, "order-b", inst.BusinessKey)
		_, err = b.manager.StartBatch(ctx, []orderState{{OrderID: "c"}}, process.WithIDs(ids...))
		require.Error(t, err, "one id per state")
	})
}

// Every completed step's entry says when the step started and when it ended: a local step from
// its function's start, a command step from its command's send to its reply. The API's JSON
// carries the latency.
func TestStepEntriesCarryStartAndEnd(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		client, m, _ := fxFixture(t, drv, fake, func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error) {
			return bookFxResult{Contract: "FX-1"}, nil
		})
		ctx := context.Background()
		id, err := m.Start(ctx, fxState{PaymentID: "P1", Amount: "1.00"})
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionWaitingForAsync)
		fake.Advance(3 * time.Second) // the reply comes three seconds after the send
		start(t, client)
		inst := waitStatus(t, m, id, driver.ExecutionCompleted)
		var sent *driver.ExecutionLogEntry
		steps := map[string]*driver.ExecutionLogEntry{}
		for _, e := range inst.Log {
			if e.EntryType == "COMMAND" && e.StepStatus == "SENT" {
				sent = e
			}
			if e.EntryType == "STEP" && e.StepStatus == "COMPLETED" {
				steps[e.Name] = e
			}
		}
		require.Len(t, steps, 3)
		for name, e := range steps {
			require.NotNil(t, e.StartedAt, name)
			require.False(t, e.StartedAt.After(e.At), "%s: start %s after end %s", name, e.StartedAt, e.At)
		}
		require.NotNil(t, sent)
		bookFx := steps["bookFx"]
		require.True(t, bookFx.StartedAt.Equal(sent.At), "a command step starts when its command is sent")
		latency, ok := bookFx.Latency()
		require.True(t, ok)
		require.Equal(t, 3*time.Second, latency)
		require.True(t, steps["reserve"].StartedAt.Equal(testStart))

		b, err := json.Marshal(bookFx)
		require.NoError(t, err)
		var decoded map[string]any
		require.NoError(t, json.Unmarshal(b, &decoded))
		require.Equal(t, 3000.0, decoded["latencyMs"])
		require.NotEmpty(t, decoded["startedAt"])
	})
}

// An operator cancels with compensations while a command step's command is unanswered: the step
// did not complete, but its command may still take effect, so its compensation runs too.
func TestCancelCompensatesAnUnansweredCommandStep(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		fake := clock.NewFake(testStart)
		_, m, calls := fxFixture(t, drv, fake, func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error) {
			return bookFxResult{Contract: "FX-" + cmd.Args.PaymentID}, nil
		})
		ctx := context.Background()
		// The client does not start: the command stays unanswered.
		id, err := m.Start(ctx, fxState{PaymentID: "P1", Amount: "100.00"})
		require.NoError(t, err)
		inst, err := m.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "bookFx", inst.CurrentWait)
		require.NoError(t, m.CancelOverride(ctx, id, true, operator))
		inst = waitStatus(t, m, id, driver.ExecutionCancelled)
		require.Equal(t, 1, calls.get("cancelFx"), "the unanswered booking is compensated")
		require.Equal(t, 1, calls.get("unreserve"))
	})
}
