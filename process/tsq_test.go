package process_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// networkState is the state of networkProcess: the answer a network gave to a submission.
type networkState struct {
	Ref        string `json:"ref"`
	Answered   bool   `json:"answered"`
	AnswerCode string `json:"answerCode,omitempty"`
	FailWith   string `json:"failWith,omitempty"`
}

// networkAnswer is the network's answer; Code "" is an acceptance.
type networkAnswer struct {
	Code string `json:"code"`
}

func (networkAnswer) ResponseName() string { return "NetworkAnswer" }

// networkProcess is the shape of the payments step process: steps with compensations, a wait
// for the network's answer, and then Execute itself returning the error the answer carries (not
// a step's failure), or a step that fails permanently when FailWith is set.
type networkProcess struct {
	mu sync.Mutex
	// undone lists the compensations run, in order; failUndo makes the named ones fail.
	undone   []string
	failUndo map[string]int
	typ      string
	action   process.DeadlineAction
	// ended lists the ends the manager told the process of (process.Ender).
	ended []driver.ExecutionStatus
}

// End records an end the manager decided without running the process (process.Ender).
func (p *networkProcess) End(_ *process.Execution[networkState], status driver.ExecutionStatus) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = append(p.ended, status)
	return nil
}

func (p *networkProcess) ends() []driver.ExecutionStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]driver.ExecutionStatus(nil), p.ended...)
}

func (p *networkProcess) DeadlineAction() process.DeadlineAction { return p.action }

func (p *networkProcess) Type() string   { return p.typ }
func (p *networkProcess) Domain() string { return "payments" }

func (p *networkProcess) compensation(name string) func(x *process.Execution[networkState]) error {
	return func(x *process.Execution[networkState]) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.undone = append(p.undone, name)
		if p.failUndo[name] > 0 {
			p.failUndo[name]--
			return fmt.Errorf("%s: downstream unavailable", name)
		}
		return nil
	}
}

func (p *networkProcess) setFailUndo(name string, times int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failUndo == nil {
		p.failUndo = map[string]int{}
	}
	p.failUndo[name] = times
}

func (p *networkProcess) compensations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.undone...)
}

func (p *networkProcess) Execute(x *process.Execution[networkState]) error {
	for _, name := range []string{"bookRisk", "submit"} {
		if _, err := process.Step(x, name, func(context.Context) (bool, error) { return true, nil },
			process.Compensate(p.compensation("undo-"+name))); err != nil {
			return err
		}
	}
	if x.State.FailWith != "" {
		_, err := process.Step(x, "confirm", func(context.Context) (bool, error) {
			return false, commandbus.Permanent(x.State.FailWith, errors.New("the confirmation service refused"))
		})
		return err
	}
	if err := x.Wait("awaitL1", func() bool { return x.State.Answered }, 0); err != nil {
		return err
	}
	if x.State.AnswerCode != "" {
		// Read from the state, as the payments process reads a level's answer.
		return commandbus.Permanent("NETWORK_ERROR", fmt.Errorf("L1 %s: permanent network failure", x.State.AnswerCode))
	}
	return nil
}

func setupNetwork(t *testing.T, drv driver.Driver, typ string) (*process.Manager[networkState], *networkProcess, *commandbus.Client) {
	t.Helper()
	m, proc, client, _ := setupNetworkWith(t, drv, &networkProcess{typ: typ})
	return m, proc, client
}

func setupNetworkWith(t *testing.T, drv driver.Driver, proc *networkProcess) (*process.Manager[networkState], *networkProcess, *commandbus.Client, *clock.Fake) {
	t.Helper()
	fake := clock.NewFake(testStart)
	client := newClient(t, drv, testConfig(t, fake, nil))
	m, err := process.NewManager(runtime(t, client), process.Process[networkState](proc))
	require.NoError(t, err)
	process.OnResponse(m, func(s *networkState, a networkAnswer) error {
		s.Answered, s.AnswerCode = true, a.Code
		return nil
	})
	start(t, client)
	return m, proc, client, fake
}

// parkByNetworkError starts an execution and parks it in the TSQ through the network's
// permanent answer.
func parkByNetworkError(t *testing.T, m *process.Manager[networkState], ref string, opts ...process.StartOption) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	id, err := m.Start(ctx, networkState{Ref: ref}, opts...)
	require.NoError(t, err)
	waitStatus(t, m, id, driver.ExecutionWaitingForAsync)
	require.NoError(t, m.ProcessAsyncResponse(ctx, id, networkAnswer{Code: "PERM_ERROR"}))
	inst := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
	require.Equal(t, "NETWORK_ERROR", inst.ErrorCode)
	return id
}

// lastLines is the tail of an execution's log as logLines renders it.
func lastLines(entries []*driver.ExecutionLogEntry, n int) []string {
	lines := logLines(entries)
	if len(lines) < n {
		return lines
	}
	return lines[len(lines)-n:]
}

// Issue 15, defect 1: compensate-and-cancel of an execution parked by an error Execute returned
// from its state (a permanent network answer) re-parked it instead of compensating.
func TestCancelWithCompensationsForEveryParkReason(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		m, proc, client := setupNetwork(t, drv, "NetworkCancel")

		// Parked by the network's permanent error, read from the state after a satisfied wait.
		id := parkByNetworkError(t, m, "N1")
		require.NoError(t, m.CancelOverride(ctx, id, true, operator))
		inst := waitStatus(t, m, id, driver.ExecutionCancelled)
		require.Equal(t, commandbus.CodeCancelled, inst.ErrorCode)
		require.Equal(t, []string{"undo-submit", "undo-bookRisk"}, proc.compensations(), "the completed steps' compensations, in reverse")
		require.Equal(t, []string{
			"TSQ_CANCEL cancel", "LIFECYCLE compensation COMPENSATING",
			"COMPENSATION submit COMPENSATION_SUCCESS", "COMPENSATION bookRisk COMPENSATION_SUCCESS",
		}, lastLines(inst.Log, 4))
		require.NotContains(t, lastLines(inst.Log, 4), "LIFECYCLE troubleshooting queue WAITING_FOR_TSQ")

		// Parked by a step that failed permanently.
		proc.undone = nil
		id2, err := m.Start(ctx, networkState{Ref: "N2", FailWith: "CONFIRMATION_REFUSED"})
		require.NoError(t, err)
		inst = waitStatus(t, m, id2, driver.ExecutionWaitingForTSQ)
		require.Equal(t, process.CodePermanentFailure, inst.ErrorCode)
		require.NoError(t, m.CancelOverride(ctx, id2, true, operator))
		inst = waitStatus(t, m, id2, driver.ExecutionCancelled)
		require.Equal(t, []string{"undo-submit", "undo-bookRisk"}, proc.compensations())
		require.Equal(t, "COMPENSATION bookRisk COMPENSATION_SUCCESS", lastLines(inst.Log, 1)[0])

		// A cancelled execution cannot be cancelled again: the action says so.
		require.ErrorIs(t, m.CancelOverride(ctx, id, true, operator), commandbus.ErrInvalidState)

		audit, err := client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "execution"})
		require.NoError(t, err)
		cancels := 0
		for _, a := range audit {
			if a.Action == "TSQ_CANCEL" {
				cancels++
			}
		}
		require.Equal(t, 2, cancels, "each applied cancellation audited, the refused one not")
	})
}

// Issue 15, defect 3: a failed compensation parks the execution with COMPENSATION_FAILED, naming
// the failed compensations; an operator's retry runs only those again, and a skip marks them
// skipped; either way the execution ends as its compensation meant to.
func TestFailedCompensationParksForRetryAndSkip(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		m, proc, client := setupNetwork(t, drv, "NetworkCompensationFailed")

		// Cancel with compensations: undo-submit fails twice.
		id := parkByNetworkError(t, m, "F1")
		proc.setFailUndo("undo-submit", 2)
		err := m.CancelOverride(ctx, id, true, operator)
		require.ErrorIs(t, err, process.ErrCompensationFailed, "the cancellation did not end CANCELLED, and says so")
		require.ErrorIs(t, err, commandbus.ErrInvalidState)
		inst := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, process.CodeCompensationFailed, inst.ErrorCode)
		require.Contains(t, inst.ErrorMessage, "submit (undo-submit: downstream unavailable)")
		require.Contains(t, inst.ErrorMessage, "CANCELLED")
		require.NotContains(t, inst.ErrorMessage, "bookRisk")
		require.Equal(t, "submit", inst.Step, "parked at the step whose compensation failed")
		require.Equal(t, []string{
			"COMPENSATION submit COMPENSATION_FAILED", "COMPENSATION bookRisk COMPENSATION_SUCCESS",
			"LIFECYCLE troubleshooting queue WAITING_FOR_TSQ",
		}, lastLines(inst.Log, 3))

		// Retry runs the failed compensation only; it fails again, parks again and says so.
		require.ErrorIs(t, m.Retry(ctx, id, operator), process.ErrCompensationFailed)
		require.Equal(t, []string{"undo-submit", "undo-bookRisk", "undo-submit"}, proc.compensations())
		inst = waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, process.CodeCompensationFailed, inst.ErrorCode)

		// The second retry succeeds: the execution ends CANCELLED, as the cancellation meant.
		require.NoError(t, m.Retry(ctx, id, operator))
		require.Equal(t, []string{"undo-submit", "undo-bookRisk", "undo-submit", "undo-submit"}, proc.compensations(), "bookRisk's compensation is not run again")
		inst = waitStatus(t, m, id, driver.ExecutionCancelled)
		require.Equal(t, commandbus.CodeCancelled, inst.ErrorCode, "the cancellation's code, not the compensation failure's")
		require.Equal(t, []string{
			"TSQ_RETRY retry", "LIFECYCLE compensation COMPENSATING", "COMPENSATION submit COMPENSATION_SUCCESS",
		}, lastLines(inst.Log, 3))

		// A business failure whose compensation fails: skip ends it COMPENSATED.
		proc.undone = nil
		proc.setFailUndo("undo-bookRisk", 1)
		id2, err := m.Start(ctx, networkState{Ref: "F2"})
		require.NoError(t, err)
		waitStatus(t, m, id2, driver.ExecutionWaitingForAsync)
		require.NoError(t, m.ProcessAsyncResponse(ctx, id2, networkAnswer{Code: "PERM_ERROR"}))
		waitStatus(t, m, id2, driver.ExecutionWaitingForTSQ)
		require.ErrorIs(t, m.CancelOverride(ctx, id2, true, operator), process.ErrCompensationFailed)
		inst = waitStatus(t, m, id2, driver.ExecutionWaitingForTSQ)
		require.Equal(t, "bookRisk", inst.Step)
		var verr *commandbus.ValidationError
		require.ErrorAs(t, m.Skip(ctx, id2, "submit", nil, operator), &verr, "submit's compensation did not fail")
		require.NoError(t, m.Skip(ctx, id2, "bookRisk", nil, operator))
		inst = waitStatus(t, m, id2, driver.ExecutionCancelled)
		require.Equal(t, []string{"undo-submit", "undo-bookRisk"}, proc.compensations(), "a skip runs nothing")
		require.Equal(t, []string{"TSQ_RETRY skip", "COMPENSATION bookRisk COMPENSATION_SKIPPED"}, lastLines(inst.Log, 2))
		require.Equal(t, "alice@ops", inst.Log[len(inst.Log)-1].Actor)

		audit, err := client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: id2.String()})
		require.NoError(t, err)
		require.Equal(t, "SKIP", audit[0].Action)
	})
}

// A business failure whose compensation fails parks; a skip ends it COMPENSATED with the
// business failure's code.
func TestFailedCompensationOfBusinessFailureEndsCompensatedAfterRetry(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		fake := clock.NewFake(testStart)
		client := newClient(t, drv, testConfig(t, fake, nil))
		proc := &compensatingProcess{calls: newCounter()}
		m, err := process.NewManager(runtime(t, client), process.Process[orderState](proc))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, orderState{OrderID: "B"})
		require.NoError(t, err)
		inst := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, process.CodeCompensationFailed, inst.ErrorCode)
		require.Contains(t, inst.ErrorMessage, "COMPENSATED after EMBARGO")

		// compensatingProcess's charge compensation always fails: skip it.
		require.NoError(t, m.Skip(ctx, id, "charge", nil, operator))
		inst = waitStatus(t, m, id, driver.ExecutionCompensated)
		require.Equal(t, "EMBARGO", inst.ErrorCode, "the business failure stays the execution's error")
		require.Equal(t, []string{"undo-notify", "undo-charge", "undo-reserve"}, proc.order)
	})
}

// Issue 15, defect 10: the deadline action applies to an execution parked in the TSQ for
// another reason, once, recorded in its log.
func TestDeadlineAppliesToParkedExecutions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action process.DeadlineAction
		want   driver.ExecutionStatus
		undone []string
		ends   []driver.ExecutionStatus // what the process is told (process.Ender)
	}{
		{process.DeadlineCompensate, driver.ExecutionCompensated, []string{"undo-submit", "undo-bookRisk"}, nil},
		{process.DeadlineTSQ, driver.ExecutionWaitingForTSQ, nil, nil},
		{process.DeadlineFail, driver.ExecutionFailed, nil, []driver.ExecutionStatus{driver.ExecutionFailed}},
	} {
		t.Run(string(tc.action), func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
				m, proc, _, fake := setupNetworkWith(t, drv, &networkProcess{typ: "ParkedDeadline" + string(tc.action), action: tc.action})
				deadline := process.WithDeadline(testStart.Add(time.Hour))
				id := parkByNetworkError(t, m, "D1", deadline)

				fake.Advance(2 * time.Hour)
				var inst *process.Instance[networkState]
				eventually(t, 15*time.Second, "the deadline action", func() bool {
					var err error
					inst, err = m.Get(context.Background(), id)
					require.NoError(t, err)
					return inst.ErrorCode == process.CodeDeadlineExceeded && inst.Status == tc.want
				})
				require.Equal(t, tc.undone, proc.compensations())
				require.Equal(t, tc.ends, proc.ends(), "a FAIL deadline tells the process how its execution ended")
				require.Contains(t, inst.ErrorMessage, "while in the troubleshooting queue for NETWORK_ERROR: ")
				require.Contains(t, logLines(inst.Log), "LIFECYCLE deadline "+string(tc.action))

				// Once: a later execution's deadline is handled, and the first is not touched again.
				later, err := m.Start(context.Background(), networkState{Ref: "D2"}, process.WithDeadline(fake.Now()))
				require.NoError(t, err)
				eventually(t, 15*time.Second, "the later execution's deadline action", func() bool {
					inst, err := m.Get(context.Background(), later)
					require.NoError(t, err)
					return inst.ErrorCode == process.CodeDeadlineExceeded
				})
				inst, err = m.Get(context.Background(), id)
				require.NoError(t, err)
				deadlines := 0
				for _, line := range logLines(inst.Log) {
					if strings.HasPrefix(line, "LIFECYCLE deadline") {
						deadlines++
					}
				}
				require.Equal(t, 1, deadlines, "the deadline action applies once")
			})
		})
	}
}

// Issue 15, defect 11: every execution's log starts with PROCESS_CREATED, immediate or deferred.
func TestLogStartsWithProcessCreated(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		m, _, _ := setupNetwork(t, drv, "NetworkCreated")
		immediate, err := m.Start(ctx, networkState{Ref: "C1"}, process.WithBusinessKey("PAY-C1"))
		require.NoError(t, err)
		ids, err := m.StartBatch(ctx, []networkState{{Ref: "C2"}})
		require.NoError(t, err)
		for _, id := range []uuid.UUID{immediate, ids[0]} {
			inst := waitStatus(t, m, id, driver.ExecutionWaitingForAsync)
			first := inst.Log[0]
			require.Equal(t, "LIFECYCLE created PROCESS_CREATED", logLines(inst.Log)[0])
			require.Equal(t, 1, first.Seq)
			require.Equal(t, "process:NetworkCreated", first.Actor)
			require.False(t, first.At.IsZero())
			require.Equal(t, "STEP bookRisk COMPLETED", logLines(inst.Log)[1], "the steps follow, numbered after it")
		}
		inst, err := m.Get(ctx, immediate)
		require.NoError(t, err)
		require.JSONEq(t, `{"businessKey":"PAY-C1","deferred":false}`, string(inst.Log[0].Response))
	})
}
