package saga_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/saga"
)

type creditAccount struct {
	Account string `json:"account"`
}

func (creditAccount) Kind() string { return "CreditAccount" }

// A command step's command that parks in the command troubleshooting queue parks the saga with
// COMMAND_PARKED; the operator's Retry retries that command (no second one), and its reply
// resumes the saga. A FAILED reply is a business failure: the saga compensates.
func TestCommandStepsParkAndCompensate(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		var calls atomic.Int32
		handlers := commandbus.NewHandlers()
		commandbus.AddHandler(handlers, "ledger", commandbus.HandlerFunc[creditAccount](func(ctx context.Context, cmd *commandbus.Command[creditAccount]) (any, error) {
			switch cmd.Args.Account {
			case "closed":
				return nil, commandbus.BusinessRule("ACCOUNT_CLOSED", "the account is closed")
			case "flaky":
				if calls.Add(1) == 1 {
					return nil, commandbus.Permanent("LEDGER_DOWN", errors.New("the ledger refused the connection"))
				}
			}
			return map[string]string{"credited": cmd.Args.Account}, nil
		}))
		cfg := testConfig(t, nil)
		cfg.Handlers, cfg.FetchPollInterval = handlers, commandbus.Duration(20*time.Millisecond)
		cfg.Domains = map[string]*commandbus.DomainConfig{"ledger": {ConcurrentMessages: 2, MaxAttempts: 1}}
		client, rt := newRuntime(t, drv, cfg)
		j := &journal{}
		m, err := saga.Register(rt, saga.New("credit", 1).
			Step("debit", okStep(j), saga.Compensate(undo(j))).
			Command("credit", "ledger", "CreditAccount", func(sc *saga.StepContext) (any, error) {
				var in creditAccount
				err := sc.DecodeInput(&in)
				return in, err
			}, saga.DependsOn("debit")))
		require.NoError(t, err)
		start(t, client)

		refused, err := m.Start(ctx, creditAccount{Account: "closed"})
		require.NoError(t, err)
		r := waitStatus(t, m, refused, driver.ExecutionCompensated)
		require.Equal(t, "ACCOUNT_CLOSED", r.ErrorCode)
		require.Equal(t, []string{"debit"}, r.CompensatedSteps)

		parked, err := m.Start(ctx, creditAccount{Account: "flaky"})
		require.NoError(t, err)
		r = waitStatus(t, m, parked, driver.ExecutionWaitingForTSQ)
		require.Equal(t, "COMMAND_PARKED", r.ErrorCode)
		require.Contains(t, r.Error, "waiting on parked command CreditAccount: LEDGER_DOWN")
		require.Equal(t, saga.StepWaiting, r.Steps["credit"].Status)
		before := calls.Load()
		require.NoError(t, m.Retry(ctx, parked, operator))
		r = waitStatus(t, m, parked, driver.ExecutionCompleted)
		require.JSONEq(t, `{"credited":"flaky"}`, string(r.Steps["credit"].Result))
		require.Equal(t, before+1, calls.Load(), "the parked command ran again; no second command")
		require.Empty(t, r.CompensatedSteps)
	})
}

// An operator who ends a saga without running it tells the definition's OnOperatorEnd first; its
// error refuses the action.
func TestOnOperatorEnd(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client, rt := newRuntime(t, drv, testConfig(t, nil))
		var ended []driver.ExecutionStatus
		refuse := false
		j := &journal{}
		m, err := saga.Register(rt, saga.New("ended", 1).
			OnOperatorEnd(func(ctx context.Context, row *driver.ExecutionRow, status driver.ExecutionStatus) error {
				if refuse {
					return errors.New("the ledger is read-only")
				}
				ended = append(ended, status)
				return nil
			}).
			Step("debit", okStep(j), saga.Compensate(undo(j))).
			Step("credit", func(context.Context, *saga.StepContext) (any, error) {
				return nil, commandbus.Permanent("LEDGER_DOWN", errors.New("down"))
			}, saga.DependsOn("debit")))
		require.NoError(t, err)
		start(t, client)
		park := func() *saga.Result {
			id, err := m.Start(ctx, nil)
			require.NoError(t, err)
			return waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
		}
		a, b, c := park(), park(), park()
		require.NoError(t, m.CancelOverride(ctx, a.ExecutionID, false, operator))
		require.NoError(t, m.CompleteOverride(ctx, b.ExecutionID, nil, operator))
		require.Equal(t, []driver.ExecutionStatus{driver.ExecutionCancelled, driver.ExecutionCompleted}, ended)
		refuse = true
		require.ErrorContains(t, m.CancelOverride(ctx, c.ExecutionID, false, operator), "the ledger is read-only")
		r, err := m.Result(ctx, c.ExecutionID)
		require.NoError(t, err)
		require.Equal(t, string(driver.ExecutionWaitingForTSQ), r.Status, "refused: nothing changed")
	})
}

// An inbound event of a type the saga names starts it, once per event.
func TestTriggeredByAnEvent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client, rt := newRuntime(t, drv, testConfig(t, nil))
		j := &journal{}
		m, err := saga.Register(rt, saga.New("on-order", 1).TriggeredBy("OrderPlaced").
			Step("reserve", okStep(j), saga.Compensate(undo(j))))
		require.NoError(t, err)
		require.Equal(t, []string{"OrderPlaced"}, rt.Describe(m).TriggeredBy)
		start(t, client)
		ev := &orchestration.InboundEvent{ID: "evt-1", Type: "OrderPlaced", Source: "shop", Data: json.RawMessage(`{"order":"o-1"}`)}
		receipt, err := rt.HandleEvent(ctx, "test", ev)
		require.NoError(t, err)
		require.Equal(t, orchestration.EventStarted, receipt.Outcome)
		require.Len(t, receipt.Executions, 1)
		require.Equal(t, saga.Model, receipt.Executions[0].Model)
		waitStatus(t, m, receipt.Executions[0].ID, driver.ExecutionCompleted)
		again, err := rt.HandleEvent(ctx, "test", ev)
		require.NoError(t, err)
		require.Equal(t, orchestration.EventDuplicate, again.Outcome)
		require.Equal(t, 1, j.n("do:reserve"))
	})
}
