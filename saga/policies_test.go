package saga_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/saga"
)

func TestDefinitionValidation(t *testing.T) {
	t.Parallel()
	_, rt := newRuntime(t, dbtest.SQLite(t), testConfig(t, nil))
	noop := func(context.Context, *saga.StepContext) (any, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		def  *saga.Definition
		want []string
	}{
		{"empty", saga.New("empty", 1), []string{"the definition has no steps"}},
		{"missing", saga.New("missing", 1).Step("a", noop, saga.DependsOn("ghost")), []string{`step "a" depends on "ghost", which is not a step`}},
		{"cycle", saga.New("cycle", 1).Step("a", noop, saga.DependsOn("b")).Step("b", noop, saga.DependsOn("a")), []string{"cycle: a → b → a"}},
		{"policy", saga.New("policy", 1).Policy("SOMETIMES").Step("a", noop), []string{`the compensation policy "SOMETIMES" is not one of`}},
		{"compensation timeout", saga.New("ct", 1).Step("a", noop, saga.CompensationTimeout(-time.Second)), []string{`step "a": the compensation timeout must not be negative`}},
	} {
		_, err := saga.Register(rt, tc.def)
		require.ErrorIs(t, err, saga.ErrInvalidDefinition, tc.name)
		var de *saga.DefinitionError
		require.ErrorAs(t, err, &de)
		require.Equal(t, tc.def.ID(), de.Saga)
		for _, w := range tc.want {
			require.Contains(t, err.Error(), w, tc.name)
		}
	}
}

// chain is a → b → c → d, every step compensated, d failing with a business error.
func chain(id string, j *journal, opts map[string][]saga.StepOption) *saga.Definition {
	d := saga.New(id, 1)
	prev := ""
	for _, s := range []string{"a", "b", "c", "d"} {
		fn := okStep(j)
		if s == "d" {
			fn = failBusiness(j)
		}
		o := append([]saga.StepOption{saga.Compensate(undo(j))}, opts[s]...)
		if prev != "" {
			o = append(o, saga.DependsOn(prev))
		}
		d.Step(s, fn, o...)
		prev = s
	}
	return d
}

func TestCompensationPolicies(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()

		t.Run("StrictSequential", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, testConfig(t, clock.NewFake(testStart)))
			j := &journal{}
			m, err := saga.Register(rt, chain("strict", j, nil))
			require.NoError(t, err)
			require.Equal(t, saga.StrictSequential, m.Policy())
			start(t, client)
			id, err := m.Start(ctx, nil)
			require.NoError(t, err)
			r := waitStatus(t, m, id, driver.ExecutionCompensated)
			require.Equal(t, []string{"c", "b", "a"}, filter(j.list(), "undo:"), "reverse completion order")
			require.Equal(t, []string{"c", "b", "a"}, r.CompensatedSteps)
			require.Equal(t, []string{"d"}, r.FailedSteps)
			require.Equal(t, "d", r.FirstErrorStep)
			require.Equal(t, "INSUFFICIENT_FUNDS", r.FirstErrorCode)
			require.Equal(t, "INSUFFICIENT_FUNDS", r.ErrorCode)
			require.Contains(t, r.FirstError, "the account cannot cover it")
			require.False(t, r.Success)
			a, _ := r.Step("a")
			require.Equal(t, saga.StepCompensated, a.Status)
			require.True(t, a.Compensated)
			require.Equal(t, 1, a.Attempts)
			require.Equal(t, 1, a.CompensationAttempts)
			require.JSONEq(t, `"a-done"`, string(a.Result))
		})

		t.Run("GroupedParallel", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, testConfig(t, clock.NewFake(testStart)))
			j := &journal{}
			layer := newBarrier(3)
			parallelUndo := func(ctx context.Context, sc *saga.StepContext) error {
				j.add("undo:" + sc.Step)
				if !layer.wait() {
					return errors.New("the other compensations of the layer did not start")
				}
				return nil
			}
			def := saga.New("grouped", 1).Policy(saga.GroupedParallel).
				Step("a", okStep(j), saga.Compensate(undo(j))).
				Step("b1", okStep(j), saga.DependsOn("a"), saga.Compensate(parallelUndo)).
				Step("b2", okStep(j), saga.DependsOn("a"), saga.Compensate(parallelUndo)).
				Step("b3", okStep(j), saga.DependsOn("a"), saga.Compensate(parallelUndo)).
				Step("c", okStep(j), saga.DependsOn("b1", "b2", "b3"), saga.Compensate(undo(j))).
				Step("d", failBusiness(j), saga.DependsOn("c"))
			m, err := saga.Register(rt, def)
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil)
			require.NoError(t, err)
			r := waitStatus(t, m, id, driver.ExecutionCompensated)
			undone := filter(j.list(), "undo:")
			require.Len(t, undone, 5)
			require.Equal(t, "c", undone[0], "the last layer first")
			require.ElementsMatch(t, []string{"b1", "b2", "b3"}, undone[1:4], "the middle layer together (each waited for the others)")
			require.Equal(t, "a", undone[4], "the first layer last")
			require.Len(t, r.CompensatedSteps, 5)
			require.Equal(t, "a", r.CompensatedSteps[4])
		})

		t.Run("RetryWithBackoff", func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(testStart)
			client, rt := newRuntime(t, drv, testConfig(t, fake))
			j := &journal{}
			flaky := func(ctx context.Context, sc *saga.StepContext) error {
				if j.add("undo:"+sc.Step) < 3 {
					return commandbus.Transient(errors.New("ledger busy"))
				}
				return nil
			}
			def := saga.New("backoff", 1).Policy(saga.RetryWithBackoff).
				Step("a", okStep(j), saga.Compensate(undo(j))).
				Step("b", okStep(j), saga.DependsOn("a"), saga.Compensate(flaky),
					saga.CompensationRetry(saga.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Second})).
				Step("c", failBusiness(j), saga.DependsOn("b"))
			m, err := saga.Register(rt, def)
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil)
			require.NoError(t, err)
			eventually(t, "b's first compensation attempt recorded", func() bool {
				r, err := m.Result(ctx, id)
				require.NoError(t, err)
				return r.Steps["b"].Status == saga.StepCompensating && r.Steps["b"].CompensationAttempts == 1
			})
			inst, err := m.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, driver.ExecutionCompensating, inst.Status, "the saga sleeps compensating, durably")
			require.Equal(t, 1, j.n("undo:b"), "nothing retries before the clock moves: no goroutine sleeps")
			require.Zero(t, j.n("undo:a"), "a waits for b (sequential)")
			fake.Advance(time.Second)
			eventually(t, "attempt 2", func() bool {
				r, err := m.Result(ctx, id)
				require.NoError(t, err)
				return r.Steps["b"].CompensationAttempts == 2
			})
			require.Equal(t, 2, j.n("undo:b"))
			fake.Advance(2 * time.Second) // the backoff doubles
			r := waitStatus(t, m, id, driver.ExecutionCompensated)
			require.Equal(t, []string{"b", "b", "b", "a"}, filter(j.list(), "undo:"))
			require.Equal(t, 3, r.Steps["b"].CompensationAttempts)
			require.Equal(t, []string{"b", "a"}, r.CompensatedSteps)
		})

		t.Run("CircuitBreaker", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, testConfig(t, clock.NewFake(testStart)))
			j := &journal{}
			broken := func(ctx context.Context, sc *saga.StepContext) error {
				j.add("undo:" + sc.Step)
				return commandbus.Permanent("LEDGER_CLOSED", errors.New("the ledger refuses reversals"))
			}
			m, err := saga.Register(rt, chain("breaker", j, map[string][]saga.StepOption{
				"b": {saga.Compensate(broken), saga.Critical()},
			}).Policy(saga.CircuitBreaker))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil)
			require.NoError(t, err)
			r := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
			require.Equal(t, "COMPENSATION_FAILED", r.ErrorCode)
			require.Equal(t, []string{"c", "b"}, filter(j.list(), "undo:"), "a critical failure stops the rest")
			require.Contains(t, r.Error, "circuit open")
			require.Equal(t, []string{"b"}, r.CompensationFailed)
			require.Equal(t, saga.StepDone, r.Steps["a"].Status, "a is not compensated")
			require.Equal(t, 1, r.Steps["b"].CompensationAttempts, "a permanent error is not retried")
			inst, err := m.Get(ctx, id)
			require.NoError(t, err)
			require.Contains(t, inst.ErrorMessage, "a did not run")

			// The operator reverses b by hand and skips its compensation: the rest runs.
			require.NoError(t, m.Skip(ctx, id, "b", nil, operator))
			r = waitStatus(t, m, id, driver.ExecutionCompensated)
			require.Equal(t, []string{"c", "b", "a"}, filter(j.list(), "undo:"))
			require.Equal(t, saga.StepCompensationSkip, r.Steps["b"].Status)
			require.Equal(t, []string{"c", "a"}, r.CompensatedSteps)
		})

		t.Run("BestEffortParallel", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, testConfig(t, clock.NewFake(testStart)))
			j := &journal{}
			all := newBarrier(3)
			undoAll := func(ctx context.Context, sc *saga.StepContext) error {
				n := j.add("undo:" + sc.Step)
				if n == 1 && !all.wait() {
					return errors.New("the other compensations did not start")
				}
				if sc.Step == "b" && n == 1 {
					return errors.New("the card network is down")
				}
				return nil
			}
			def := saga.New("besteffort", 1).Policy(saga.BestEffortParallel).
				Step("a", okStep(j), saga.Compensate(undoAll)).
				Step("b", okStep(j), saga.DependsOn("a"), saga.Compensate(undoAll)).
				Step("c", okStep(j), saga.DependsOn("b"), saga.Compensate(undoAll)).
				Step("d", failBusiness(j), saga.DependsOn("c"))
			m, err := saga.Register(rt, def)
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil)
			require.NoError(t, err)
			r := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
			require.Equal(t, "COMPENSATION_FAILED", r.ErrorCode)
			require.ElementsMatch(t, []string{"a", "b", "c"}, filter(j.list(), "undo:"), "all at once, across layers")
			require.ElementsMatch(t, []string{"a", "c"}, r.CompensatedSteps, "a failure stops no other")
			require.Equal(t, []string{"b"}, r.CompensationFailed)
			require.Equal(t, "the card network is down", r.Steps["b"].CompensationError)

			require.NoError(t, m.Retry(ctx, id, operator))
			r = waitStatus(t, m, id, driver.ExecutionCompensated)
			require.Equal(t, 2, j.n("undo:b"), "Retry runs the failed compensation again")
			require.Equal(t, 1, j.n("undo:a"), "and only it")
			require.Equal(t, "INSUFFICIENT_FUNDS", r.ErrorCode, "the saga keeps the failure that started it")
		})
	})
}

// A compensation that fails for good parks the saga with COMPENSATION_FAILED; the operator's
// Retry, Skip and CompleteOverride move it on.
func TestCompensationFailedOperatorActions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client, rt := newRuntime(t, drv, testConfig(t, clock.NewFake(testStart)))
		j := &journal{}
		failOnce := func(ctx context.Context, sc *saga.StepContext) error {
			if j.add("undo:"+sc.Step+":"+sc.ExecutionID.String()) == 1 {
				return errors.New("refund refused")
			}
			return nil
		}
		m, err := saga.Register(rt, chain("ops", j, map[string][]saga.StepOption{"b": {saga.Compensate(failOnce)}}))
		require.NoError(t, err)
		start(t, client)
		parked := func() (*saga.Result, string) {
			id, err := m.Start(ctx, nil)
			require.NoError(t, err)
			r := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
			require.Equal(t, "COMPENSATION_FAILED", r.ErrorCode)
			require.Equal(t, []string{"c", "a"}, r.CompensatedSteps, "strict sequential goes on past a failed compensation")
			require.Equal(t, []string{"b"}, r.CompensationFailed)
			return r, id.String()
		}

		r, _ := parked()
		require.NoError(t, m.Retry(ctx, r.ExecutionID, operator))
		r = waitStatus(t, m, r.ExecutionID, driver.ExecutionCompensated)
		require.Equal(t, []string{"c", "a", "b"}, r.CompensatedSteps)
		require.Equal(t, 1, r.Steps["b"].CompensationAttempts, "attempts count since the operator's retry, as a step's do")
		require.Empty(t, r.Steps["b"].CompensationError)

		r, _ = parked()
		require.Error(t, m.Skip(ctx, r.ExecutionID, "a", nil, operator), "a's compensation did not fail")
		require.NoError(t, m.Skip(ctx, r.ExecutionID, "b", nil, operator))
		r = waitStatus(t, m, r.ExecutionID, driver.ExecutionCompensated)
		require.Equal(t, saga.StepCompensationSkip, r.Steps["b"].Status)

		r, key := parked()
		require.NoError(t, m.CompleteOverride(ctx, r.ExecutionID, nil, operator))
		waitStatus(t, m, r.ExecutionID, driver.ExecutionCompleted)
		require.Equal(t, 1, j.n("undo:b:"+key), "completing runs no compensation")
	})
}

func TestCompensateOn(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		fake := clock.NewFake(testStart)
		client, rt := newRuntime(t, drv, testConfig(t, fake))
		j := &journal{}
		permanent := func(ctx context.Context, sc *saga.StepContext) (any, error) {
			j.add("do:" + sc.Step)
			return nil, commandbus.Permanent("ACCOUNT_CLOSED", errors.New("the account is closed"))
		}
		transient := func(ctx context.Context, sc *saga.StepContext) (any, error) {
			j.add("do:" + sc.Step)
			return nil, commandbus.Transient(errors.New("network down"))
		}
		def := func(id string, fn saga.StepFunc, on saga.CompensationTrigger) *saga.Definition {
			return saga.New(id, 1).CompensateOn(on).
				Step("debit", okStep(j), saga.Compensate(undo(j))).
				Step("credit", fn, saga.DependsOn("debit"), saga.Retry(saga.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Second}))
		}
		businessOnlyPermanent, err := saga.Register(rt, def("bp", permanent, saga.OnBusinessFailure))
		require.NoError(t, err)
		anyPermanent, err := saga.Register(rt, def("ap", permanent, saga.OnAnyFailure))
		require.NoError(t, err)
		businessOnlyExhausted, err := saga.Register(rt, def("be", transient, saga.OnBusinessFailure))
		require.NoError(t, err)
		anyExhausted, err := saga.Register(rt, def("ae", transient, saga.OnAnyFailure))
		require.NoError(t, err)
		start(t, client)

		id, err := businessOnlyPermanent.Start(ctx, nil)
		require.NoError(t, err)
		r := waitStatus(t, businessOnlyPermanent, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, "ACCOUNT_CLOSED", r.ErrorCode, "a permanent failure waits for an operator")
		require.Empty(t, r.CompensatedSteps)

		id, err = anyPermanent.Start(ctx, nil)
		require.NoError(t, err)
		r = waitStatus(t, anyPermanent, id, driver.ExecutionCompensated)
		require.Equal(t, []string{"debit"}, r.CompensatedSteps)
		require.Equal(t, "ACCOUNT_CLOSED", r.ErrorCode)

		idBE, err := businessOnlyExhausted.Start(ctx, nil)
		require.NoError(t, err)
		idAE, err := anyExhausted.Start(ctx, nil)
		require.NoError(t, err)
		waitStatus(t, businessOnlyExhausted, idBE, driver.ExecutionWaitingForRetry)
		waitStatus(t, anyExhausted, idAE, driver.ExecutionWaitingForRetry)
		fake.Advance(time.Second)
		r = waitStatus(t, businessOnlyExhausted, idBE, driver.ExecutionWaitingForTSQ)
		require.Equal(t, commandbus.CodeRetriesExhausted, r.ErrorCode)
		r = waitStatus(t, anyExhausted, idAE, driver.ExecutionCompensated)
		require.Equal(t, commandbus.CodeRetriesExhausted, r.ErrorCode)
		require.Equal(t, []string{"debit"}, r.CompensatedSteps)
		require.Equal(t, 2, r.Steps["credit"].Attempts)
	})
}

// A saga still running past its timeout compensates what completed.
func TestSagaTimeoutCompensates(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		fake := clock.NewFake(testStart)
		client, rt := newRuntime(t, drv, testConfig(t, fake))
		j := &journal{}
		stuck := func(ctx context.Context, sc *saga.StepContext) (any, error) {
			j.add("do:" + sc.Step)
			return nil, commandbus.Transient(errors.New("the bank is closed for the night"))
		}
		m, err := saga.Register(rt, saga.New("timed", 1).Timeout(10*time.Minute).
			Step("debit", okStep(j), saga.Compensate(undo(j))).
			Step("credit", stuck, saga.DependsOn("debit"), saga.Retry(saga.RetryPolicy{MaxAttempts: 5, InitialDelay: time.Hour, MaxDelay: 2 * time.Hour})))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, nil)
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionWaitingForRetry)
		fake.Advance(11 * time.Minute)
		r := waitStatus(t, m, id, driver.ExecutionCompensated)
		require.Equal(t, commandbus.CodeDeadlineExceeded, r.ErrorCode)
		require.Equal(t, []string{"debit"}, r.CompensatedSteps)
		require.Equal(t, 1, j.n("do:credit"), "no retry ran after the deadline")
		require.Equal(t, commandbus.CodeTransientFailure, r.Steps["credit"].ErrorCode, "an uncoded transient error is recorded as one")
	})
}
