package workflow_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

type bookRisk struct {
	Payment string `json:"payment"`
}

func (bookRisk) Kind() string { return "BookRisk" }

// Command steps of one layer go out together; each completes with its reply's result. A FAILED
// reply is a business failure that runs the compensations, once the commands still in flight have
// answered (their effects are unwound too), the refused step's own included; the step's key reaches the
// handler.
func TestCommandSteps(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		var handled atomic.Int32
		handlers := commandbus.NewHandlers()
		commandbus.AddHandler(handlers, "risk", commandbus.HandlerFunc[bookRisk](func(ctx context.Context, cmd *commandbus.Command[bookRisk]) (any, error) {
			handled.Add(1)
			if cmd.Args.Payment == "slow" {
				time.Sleep(300 * time.Millisecond) // a slow bank: the other step's refusal comes first
			}
			if cmd.Args.Payment == "refused" {
				return nil, commandbus.BusinessRule("LIMIT_EXCEEDED", "over the counterparty limit")
			}
			return map[string]string{"booking": "RISK-" + cmd.Args.Payment, "key": cmd.Headers["commandbus-step-key"]}, nil
		}))
		ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
		client, err := commandbus.NewClient(drv, &commandbus.Config{
			Logger: slog.New(slog.DiscardHandler), Handlers: handlers, FetchPollInterval: ms(20),
			Process: commandbus.ProcessConfig{PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20)},
			Domains: map[string]*commandbus.DomainConfig{"risk": {ConcurrentMessages: 4, MaxAttempts: 1}, "payments-wf": {ConcurrentMessages: 4}},
		})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		var unwound, refusedUnwound atomic.Int32
		request := func(sc *workflow.StepContext) (any, error) {
			var in map[string]string
			if err := sc.DecodeInput(&in); err != nil {
				return nil, err
			}
			return bookRisk{Payment: in[sc.Step]}, nil
		}
		m, err := workflow.Register(rt, workflow.New("risk-check", 1).Domain("payments-wf").
			Step("start", noop).
			Command("debtorRisk", "risk", "BookRisk", request, workflow.DependsOn("start"),
				workflow.Compensate(func(context.Context, *workflow.StepContext) error { unwound.Add(1); return nil })).
			Command("creditorRisk", "risk", "BookRisk", request, workflow.DependsOn("start"),
				workflow.Compensate(func(context.Context, *workflow.StepContext) error { refusedUnwound.Add(1); return nil })).
			Step("done", noop, workflow.DependsOn("debtorRisk", "creditorRisk")))
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { _ = client.Stop(context.Background()) })

		id, err := m.Start(ctx, map[string]string{"debtorRisk": "p-1", "creditorRisk": "p-2"})
		require.NoError(t, err)
		inst := waitStatus(t, m, id, driver.ExecutionCompleted)
		st := steps(inst)
		require.JSONEq(t, `{"booking":"RISK-p-1","key":"`+id.String()+`:debtorRisk"}`, string(st["debtorRisk"].Result))
		require.JSONEq(t, `{"booking":"RISK-p-2","key":"`+id.String()+`:creditorRisk"}`, string(st["creditorRisk"].Result))
		require.EqualValues(t, 2, handled.Load(), "one command per step")

		refused, err := m.Start(ctx, map[string]string{"debtorRisk": "slow", "creditorRisk": "refused"})
		require.NoError(t, err)
		inst = waitStatus(t, m, refused, driver.ExecutionCompensated)
		require.Equal(t, "LIMIT_EXCEEDED", inst.ErrorCode)
		require.EqualValues(t, 1, unwound.Load(), "the debtor risk booked after the refusal was awaited and unwound")
		require.EqualValues(t, 1, refusedUnwound.Load(),
			"the refused step's compensation ran too: a FAILED reply does not prove that nothing was booked under its key")
		require.Equal(t, "PENDING", steps(inst)["done"].Status)
	})
}

// A command step's reply runs the waiting workflow at once: it is stored under the lease its
// delivery took and applied by the run that follows, not left to the pending poller (here polling
// once an hour, so a reply left to it would stall the workflow).
func TestCommandReplyRunsTheWorkflowAtOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		handlers := commandbus.NewHandlers()
		commandbus.AddHandler(handlers, "risk", commandbus.HandlerFunc[bookRisk](func(ctx context.Context, cmd *commandbus.Command[bookRisk]) (any, error) {
			return map[string]string{"booking": "RISK-" + cmd.Args.Payment}, nil
		}))
		ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
		hour := commandbus.Duration(time.Hour)
		client, err := commandbus.NewClient(drv, &commandbus.Config{
			Logger: slog.New(slog.DiscardHandler), Handlers: handlers, FetchPollInterval: ms(20),
			Process: commandbus.ProcessConfig{PendingPollInterval: hour, RetryPollInterval: hour, TimeoutCheckInterval: hour},
			Domains: map[string]*commandbus.DomainConfig{"risk": {ConcurrentMessages: 2, MaxAttempts: 1}, "payments-wf": {ConcurrentMessages: 2}},
		})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		m, err := workflow.Register(rt, workflow.New("risk-once", 1).Domain("payments-wf").
			Command("risk", "risk", "BookRisk", func(sc *workflow.StepContext) (any, error) { return bookRisk{Payment: "p-1"}, nil }).
			Step("done", noop, workflow.DependsOn("risk")))
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { _ = client.Stop(context.Background()) })

		id, err := m.Start(ctx, nil, workflow.Immediate())
		require.NoError(t, err)
		inst := waitStatus(t, m, id, driver.ExecutionCompleted)
		require.JSONEq(t, `{"booking":"RISK-p-1"}`, string(steps(inst)["risk"].Result))
		require.Equal(t, "COMPLETED", steps(inst)["done"].Status)
	})
}
