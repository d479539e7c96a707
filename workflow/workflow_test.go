package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

var testStart = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

var operator = commandbus.OperatorAction{Actor: "ops:ada", Reason: "checked with the bank"}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func newRuntime(t *testing.T, drv driver.Driver, fake *clock.Fake) (*commandbus.Client, *orchestration.Runtime) {
	t.Helper()
	return newRuntimeWith(t, drv, fake, nil)
}

// newRuntimeWith is newRuntime with spans created by tp (nil: the global provider).
func newRuntimeWith(t *testing.T, drv driver.Driver, fake *clock.Fake, tp trace.TracerProvider) (*commandbus.Client, *orchestration.Runtime) {
	t.Helper()
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger:         slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Clock:          fake,
		TracerProvider: tp,
		Process: commandbus.ProcessConfig{
			PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20),
			DeadlineCheckInterval: ms(20), ExecutionLease: commandbus.Duration(30 * time.Second),
		},
	})
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

func waitStatus(t *testing.T, m *workflow.Manager, id uuid.UUID, want driver.ExecutionStatus) *workflow.Instance {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		inst, err := m.Get(context.Background(), id)
		require.NoError(t, err)
		if inst.Status == want {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s is %s (%s %s), want %s", id, inst.Status, inst.ErrorCode, inst.ErrorMessage, want)
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

func steps(inst *workflow.Instance) map[string]workflow.StepStatus {
	out := map[string]workflow.StepStatus{}
	for _, s := range inst.Steps {
		out[s.ID] = s
	}
	return out
}

func noop(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }

// counter counts each step's runs.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(step string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[step]++
	return c.n[step]
}

func (c *counter) get(step string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[step]
}

func counted(c *counter, fn workflow.StepFunc) workflow.StepFunc {
	return func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		c.inc(sc.Step)
		return fn(ctx, sc)
	}
}

func TestDefinitionValidation(t *testing.T) {
	t.Parallel()
	client, err := commandbus.NewClient(dbtest.SQLite(t), &commandbus.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		def  *workflow.Definition
		want []string
	}{
		{"empty", workflow.New("empty", 1), []string{"the definition has no steps"}},
		{"duplicate", workflow.New("dup", 1).Step("a", noop).Step("a", noop), []string{`step "a" is declared twice`}},
		{"missing", workflow.New("missing", 1).Step("a", noop, workflow.DependsOn("ghost")), []string{`step "a" depends on "ghost", which is not a step`}},
		{"self", workflow.New("self", 1).Step("a", noop, workflow.DependsOn("a")), []string{`step "a" depends on itself`}},
		{"cycle", workflow.New("cycle", 1).Step("start", noop).Step("a", noop, workflow.DependsOn("start", "c")).
			Step("b", noop, workflow.DependsOn("a")).Step("c", noop, workflow.DependsOn("b")), []string{"cycle: a → c → b → a"}},
		{"several", workflow.New("several", 1).Step("a", noop, workflow.DependsOn("a", "x")).Step("", noop),
			[]string{"step 2 has no id", `step "a" depends on itself`, `step "a" depends on "x", which is not a step`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := workflow.Register(rt, tc.def)
			var derr *workflow.DefinitionError
			require.ErrorAs(t, err, &derr)
			require.ErrorIs(t, err, workflow.ErrInvalidDefinition)
			require.Equal(t, tc.want, derr.Problems)
			require.Nil(t, rt.Operations(workflow.Model, tc.def.ID()), "a refused definition is not registered")
		})
	}

	m, err := workflow.Register(rt, fiveSteps("five", noop))
	require.NoError(t, err)
	require.Equal(t, [][]string{{"a"}, {"b", "c", "d"}, {"e"}}, m.Topology().Layers)
	require.Len(t, m.Topology().Edges, 6)
	require.Same(t, m, rt.Operations(workflow.Model, "five"))
}

// fiveSteps is one step, then three in parallel, then one. Subtests share a database, so each
// names its own workflow: another test's runner must not take its executions.
func fiveSteps(id string, fn workflow.StepFunc, opts ...workflow.StepOption) *workflow.Definition {
	return workflow.New(id, 1).
		Step("a", fn, opts...).
		Step("b", fn, append(opts, workflow.DependsOn("a"))...).
		Step("c", fn, append(opts, workflow.DependsOn("a"))...).
		Step("d", fn, append(opts, workflow.DependsOn("a"))...).
		Step("e", fn, append(opts, workflow.DependsOn("b", "c", "d"))...)
}

func TestWorkflow(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()

		t.Run("ParallelLayer", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, clock.NewFake(testStart))
			var mu sync.Mutex
			startedAt, endedAt := map[string]time.Time{}, map[string]time.Time{}
			middle := make(chan struct{}, 3)
			allStarted := make(chan struct{})
			var once sync.Once
			var seen atomic.Int32
			step := func(ctx context.Context, sc *workflow.StepContext) (any, error) {
				mu.Lock()
				startedAt[sc.Step] = time.Now()
				mu.Unlock()
				if sc.Step == "b" || sc.Step == "c" || sc.Step == "d" {
					middle <- struct{}{}
					if seen.Add(1) == 3 {
						once.Do(func() { close(allStarted) })
					}
					// Each middle step waits until all three have started: run one after the
					// other, they would never get there.
					select {
					case <-allStarted:
					case <-time.After(5 * time.Second):
						return nil, commandbus.Permanent("NOT_PARALLEL", errors.New("the other steps of the layer did not start"))
					}
				}
				var a string
				if sc.Step != "a" {
					if err := sc.Result("a", &a); err != nil {
						return nil, err
					}
				}
				mu.Lock()
				endedAt[sc.Step] = time.Now()
				mu.Unlock()
				return sc.Step + " after " + a, nil
			}
			m, err := workflow.Register(rt, fiveSteps("parallel", step))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, map[string]string{"customer": "c-1"})
			require.NoError(t, err)
			inst := waitStatus(t, m, id, driver.ExecutionCompleted)
			for _, s := range []string{"b", "c", "d"} {
				require.True(t, startedAt[s].Before(endedAt["b"]) && startedAt[s].Before(endedAt["c"]) && startedAt[s].Before(endedAt["d"]),
					"every middle step started before any ended")
				require.True(t, startedAt[s].After(endedAt["a"]), "the layer starts after its dependency")
				require.True(t, endedAt[s].Before(startedAt["e"]), "the last step waits for the whole layer")
			}
			st := steps(inst)
			require.Equal(t, "COMPLETED", st["e"].Status)
			require.JSONEq(t, `"b after a after "`, string(st["b"].Result), "b read a's result")
		})

		t.Run("RetryOutOfOrderReplay", func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(testStart)
			client, rt := newRuntime(t, drv, fake)
			calls := &counter{}
			step := counted(calls, func(ctx context.Context, sc *workflow.StepContext) (any, error) {
				if sc.Step == "c" && sc.Attempt < 3 {
					return nil, commandbus.Transient(errors.New("FX provider busy"))
				}
				return sc.Step, nil
			})
			m, err := workflow.Register(rt, fiveSteps("retrying", step, workflow.Retry(workflow.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Second})))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			inst := waitStatus(t, m, id, driver.ExecutionWaitingForRetry)
			require.Equal(t, "RETRY_SCHEDULED", steps(inst)["c"].Status)
			require.Equal(t, "COMPLETED", steps(inst)["b"].Status, "the other branches went on")
			fake.Advance(time.Second)
			eventually(t, "attempt 2 of c", func() bool { return calls.get("c") == 2 })
			inst = waitStatus(t, m, id, driver.ExecutionWaitingForRetry) // attempt 2 failed, 2s backoff
			require.Equal(t, 2, steps(inst)["c"].Attempts)
			fake.Advance(2 * time.Second)
			inst = waitStatus(t, m, id, driver.ExecutionCompleted)
			st := steps(inst)
			require.Equal(t, 3, st["c"].Attempts)
			for _, s := range []string{"a", "b", "d", "e"} {
				require.Equal(t, 1, calls.get(s), "replay by step id runs completed step %s once", s)
				require.Equal(t, 1, st[s].Attempts)
			}
			require.Equal(t, 3, calls.get("c"))
		})

		t.Run("PermanentFailureParksThenRetryAndSkip", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, clock.NewFake(testStart))
			var broken atomic.Bool
			broken.Store(true)
			calls := &counter{}
			step := counted(calls, func(ctx context.Context, sc *workflow.StepContext) (any, error) {
				if sc.Step == "b" && broken.Load() {
					return nil, commandbus.Permanent("BAD_IBAN", errors.New("checksum"))
				}
				return sc.Step, nil
			})
			m, err := workflow.Register(rt, fiveSteps("parking", step))
			require.NoError(t, err)
			start(t, client)

			id, err := m.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			inst := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
			require.Equal(t, "BAD_IBAN", inst.ErrorCode)
			require.Equal(t, "b", inst.Step)
			require.Equal(t, 1, calls.get("b"), "a permanent failure is not retried")
			require.Equal(t, "PENDING", steps(inst)["e"].Status)

			var verr *commandbus.ValidationError
			require.ErrorAs(t, m.Retry(ctx, id, commandbus.OperatorAction{}), &verr, "an action without actor and reason is refused")
			broken.Store(false)
			require.NoError(t, m.Retry(ctx, id, operator))
			inst = waitStatus(t, m, id, driver.ExecutionCompleted)
			require.Equal(t, 2, calls.get("b"))
			require.Equal(t, 1, calls.get("c"), "retry runs only what had not completed")

			broken.Store(true)
			id2, err := m.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			waitStatus(t, m, id2, driver.ExecutionWaitingForTSQ)
			err = m.Skip(ctx, id2, "c", nil, operator)
			require.ErrorIs(t, err, commandbus.ErrInvalidState, "only a failed step is skipped")
			require.NoError(t, m.Skip(ctx, id2, "b", json.RawMessage(`"by hand"`), operator))
			inst = waitStatus(t, m, id2, driver.ExecutionCompleted)
			require.JSONEq(t, `"by hand"`, string(steps(inst)["b"].Result))
			audit, err := drv.Executor().AuditLogList(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: id2.String()})
			require.NoError(t, err)
			require.Len(t, audit, 1)
			require.Equal(t, "ops:ada", audit[0].Actor)
		})

		t.Run("BusinessFailureCompensatesInReverse", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, clock.NewFake(testStart))
			var mu sync.Mutex
			var undone []string
			undo := func(ctx context.Context, sc *workflow.StepContext) error {
				var mine string
				if err := sc.Result(sc.Step, &mine); err != nil {
					return err
				}
				mu.Lock()
				undone = append(undone, mine)
				mu.Unlock()
				return nil
			}
			def := workflow.New("transfer", 1).
				Step("reserve", func(context.Context, *workflow.StepContext) (any, error) { return "reserve", nil }, workflow.Compensate(undo)).
				Step("debit", func(context.Context, *workflow.StepContext) (any, error) { return "debit", nil }, workflow.DependsOn("reserve"), workflow.Compensate(undo)).
				Step("credit", func(context.Context, *workflow.StepContext) (any, error) {
					return nil, commandbus.BusinessRule("ACCOUNT_CLOSED", "the beneficiary's account is closed")
				}, workflow.DependsOn("debit"), workflow.Compensate(undo))
			m, err := workflow.Register(rt, def)
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			inst := waitStatus(t, m, id, driver.ExecutionCompensated)
			require.Equal(t, "ACCOUNT_CLOSED", inst.ErrorCode)
			require.Equal(t, []string{"debit", "reserve"}, undone, "reverse completion order; the failed step is not compensated")
		})

		t.Run("ConditionSkipsAndDryRun", func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(testStart)
			client, rt := newRuntime(t, drv, fake)
			calls := &counter{}
			type input struct{ Amount int }
			def := workflow.New("review", 1).
				Step("score", counted(calls, noop)).
				Step("manualReview", counted(calls, noop), workflow.DependsOn("score"), workflow.When(func(sc *workflow.StepContext) bool {
					var in input
					return sc.DecodeInput(&in) == nil && in.Amount > 10_000
				})).
				Step("book", counted(calls, noop), workflow.DependsOn("manualReview"))
			m, err := workflow.Register(rt, def)
			require.NoError(t, err)
			start(t, client)

			id, err := m.Start(ctx, input{Amount: 50}, workflow.Immediate())
			require.NoError(t, err)
			st := steps(waitStatus(t, m, id, driver.ExecutionCompleted))
			require.Equal(t, "SKIPPED", st["manualReview"].Status)
			require.Equal(t, "COMPLETED", st["book"].Status, "a skipped step's dependants go on")
			require.Equal(t, 0, calls.get("manualReview"))

			dry, err := m.Start(ctx, input{Amount: 50_000}, workflow.DryRun(), workflow.Immediate())
			require.NoError(t, err)
			inst := waitStatus(t, m, dry, driver.ExecutionCompleted)
			var order []string
			for _, e := range inst.Log {
				if e.EntryType == "STEP" {
					require.Equal(t, "SKIPPED", e.StepStatus)
					order = append(order, e.Name)
				}
			}
			require.Equal(t, []string{"score", "manualReview", "book"}, order, "a dry run walks the layers in order")
			require.Equal(t, 1, calls.get("score"), "a dry run runs no step")

			again, err := m.Start(ctx, input{Amount: 1}, workflow.WithID(dry), workflow.Immediate())
			require.NoError(t, err, "a start with an existing id is a no-op")
			require.Equal(t, dry, again)
			require.Len(t, waitStatus(t, m, dry, driver.ExecutionCompleted).Log, len(inst.Log), "nothing more was written")

			later, err := m.Start(ctx, input{Amount: 1}, workflow.StartAt(testStart.Add(time.Hour)))
			require.NoError(t, err)
			delayed := waitStatus(t, m, later, driver.ExecutionWaitingForRetry)
			require.Equal(t, "PENDING", steps(delayed)["score"].Status, "a delayed start runs nothing before its time")
			fake.Advance(time.Hour)
			waitStatus(t, m, later, driver.ExecutionCompleted)
		})

		t.Run("DefinitionChangedParks", func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(testStart)
			client, rt := newRuntime(t, drv, fake)
			fail := func(context.Context, *workflow.StepContext) (any, error) {
				return nil, commandbus.Transient(errors.New("later"))
			}
			m1, err := workflow.Register(rt, workflow.New("evolving", 1).Step("a", fail))
			require.NoError(t, err)
			id, err := m1.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			waitStatus(t, m1, id, driver.ExecutionWaitingForRetry)

			// A new deployment registers another shape under the same workflow id.
			client2, rt2 := newRuntime(t, drv, fake)
			m2, err := workflow.Register(rt2, workflow.New("evolving", 2).Step("a", noop).Step("b", noop, workflow.DependsOn("a")))
			require.NoError(t, err)
			start(t, client2)
			fake.Advance(time.Minute)
			inst := waitStatus(t, m2, id, driver.ExecutionWaitingForTSQ)
			require.Equal(t, workflow.CodeDefinitionChanged, inst.ErrorCode)
			require.NoError(t, m2.Retry(ctx, id, operator))
			st := steps(waitStatus(t, m2, id, driver.ExecutionCompleted))
			require.Equal(t, "COMPLETED", st["b"].Status, "Retry adopted the new definition")
			_ = client
		})

		t.Run("CancelWithCompensations", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, clock.NewFake(testStart))
			var undone atomic.Int32
			def := workflow.New("cancellable", 1).
				Step("hold", noop, workflow.Compensate(func(context.Context, *workflow.StepContext) error { undone.Add(1); return nil })).
				Step("stuck", func(context.Context, *workflow.StepContext) (any, error) {
					return nil, commandbus.Permanent("DOWN", errors.New("bank down"))
				}, workflow.DependsOn("hold"))
			m, err := workflow.Register(rt, def)
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, workflow.Immediate())
			require.NoError(t, err)
			waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
			require.NoError(t, m.CancelOverride(ctx, id, true, operator))
			inst := waitStatus(t, m, id, driver.ExecutionCancelled)
			require.Equal(t, commandbus.CodeCancelled, inst.ErrorCode)
			require.EqualValues(t, 1, undone.Load())
			require.ErrorIs(t, m.CancelOverride(ctx, id, false, operator), commandbus.ErrInvalidState)
		})

		t.Run("SuspendLetsRunningStepsFinish", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, clock.NewFake(testStart))
			calls := &counter{}
			entered, release := make(chan struct{}), make(chan struct{})
			def := workflow.New("suspendable", 1).
				Step("slow", counted(calls, func(ctx context.Context, sc *workflow.StepContext) (any, error) {
					close(entered)
					<-release
					return "slow done", nil
				})).
				Step("next", counted(calls, noop), workflow.DependsOn("slow"))
			m, err := workflow.Register(rt, def)
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil)
			require.NoError(t, err)
			<-entered
			require.NoError(t, m.Suspend(ctx, id, operator))
			close(release)
			inst := waitStatus(t, m, id, driver.ExecutionSuspended)
			require.Equal(t, "COMPLETED", steps(inst)["slow"].Status, "the running step finished")
			require.Equal(t, 0, calls.get("next"), "no step starts once suspended")
			require.ErrorIs(t, m.Suspend(ctx, id, operator), commandbus.ErrInvalidState)

			require.NoError(t, m.Resume(ctx, id, operator))
			waitStatus(t, m, id, driver.ExecutionCompleted)
			require.Equal(t, 1, calls.get("next"))
			require.Equal(t, 1, calls.get("slow"))
		})

		t.Run("SearchAttributes", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, clock.NewFake(testStart))
			m, err := workflow.Register(rt, workflow.New("scored", 1).
				Step("score", func(ctx context.Context, sc *workflow.StepContext) (any, error) {
					if err := sc.SetAttribute("bad key", "x"); err == nil {
						return nil, errors.New("an invalid key was accepted")
					}
					return 12, sc.SetAttribute("risk", "low")
				}))
			require.NoError(t, err)
			start(t, client)
			_, err = m.Start(ctx, nil, workflow.WithAttributes(map[string]string{"": "x"}))
			var verr *commandbus.ValidationError
			require.ErrorAs(t, err, &verr, "an invalid attribute is refused at the start")
			id, err := m.Start(ctx, nil, workflow.Immediate(), workflow.WithAttributes(map[string]string{"channel": "web"}))
			require.NoError(t, err)
			other, err := m.Start(ctx, nil, workflow.Immediate(), workflow.WithAttributes(map[string]string{"channel": "branch"}))
			require.NoError(t, err)
			inst := waitStatus(t, m, id, driver.ExecutionCompleted)
			require.Equal(t, map[string]string{"channel": "web", "risk": "low"}, inst.Attributes, "set at the start and by the step")
			found, err := m.List(ctx, workflow.ListParams{Attributes: map[string]string{"risk": "low", "channel": "web"}})
			require.NoError(t, err)
			require.Len(t, found, 1)
			require.Equal(t, id, found[0].ID)
			waitStatus(t, m, other, driver.ExecutionCompleted)
		})
	})
}

// A runner stops (its instance dies) while a parallel layer runs: another instance replays the
// execution once the lease runs out. The steps recorded before are not run again; the step that
// was running runs again, and the workflow completes once.
func TestRunnerKilledDuringParallelLayer(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		calls := &counter{}
		frozen, entered := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(frozen) })
		var once sync.Once
		step := counted(calls, func(ctx context.Context, sc *workflow.StepContext) (any, error) {
			if sc.Step == "d" && calls.get("d") == 1 {
				once.Do(func() { close(entered) })
				<-frozen // the first runner's "d" never returns: its instance is gone
			}
			return sc.Step, nil
		})
		newInstance := func() (*commandbus.Client, *workflow.Manager) {
			client, err := commandbus.NewClient(drv, &commandbus.Config{
				Logger: slog.New(slog.DiscardHandler),
				Process: commandbus.ProcessConfig{PendingPollInterval: commandbus.Duration(20 * time.Millisecond),
					RetryPollInterval: commandbus.Duration(20 * time.Millisecond), ExecutionLease: commandbus.Duration(time.Second)},
			})
			require.NoError(t, err)
			rt, err := orchestration.New(client, orchestration.Config{})
			require.NoError(t, err)
			m, err := workflow.Register(rt, fiveSteps("killed", step))
			require.NoError(t, err)
			return client, m
		}
		first, m1 := newInstance()
		require.NoError(t, first.Start(ctx))
		id, err := m1.Start(ctx, nil)
		require.NoError(t, err)
		<-entered
		eventually(t, "b and c recorded", func() bool {
			inst, err := m1.Get(ctx, id)
			require.NoError(t, err)
			st := steps(inst)
			return st["b"].Status == "COMPLETED" && st["c"].Status == "COMPLETED"
		})
		stopCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_ = first.Stop(stopCtx) // its run is cut off mid-layer; its lease is left to run out
		cancel()

		second, m2 := newInstance()
		start(t, second)
		inst := waitStatus(t, m2, id, driver.ExecutionCompleted)
		for _, s := range []string{"a", "b", "c", "e"} {
			require.Equal(t, 1, calls.get(s), "%s was recorded before the kill and is not run again", s)
			require.Equal(t, 1, steps(inst)[s].Attempts)
		}
		require.Equal(t, 2, calls.get("d"), "the step in flight at the kill runs again")
		completions := 0
		for _, e := range inst.Log {
			if e.EntryType == "STEP" && e.StepStatus == "COMPLETED" {
				completions++
			}
		}
		require.Equal(t, 5, completions, "each step is recorded once")
	})
}
