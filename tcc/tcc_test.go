package tcc_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tcc"
)

var operator = commandbus.OperatorAction{Actor: "ops:ada", Reason: "released the hold at the bank"}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func ms(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }

func newRuntime(t *testing.T, drv driver.Driver, observe commandbus.ExecutionObserver) (*commandbus.Client, *orchestration.Runtime) {
	t.Helper()
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Process: commandbus.ProcessConfig{
			PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20),
			DeadlineCheckInterval: ms(20), ExecutionLease: commandbus.Duration(30 * time.Second),
		},
		ExecutionObserver: observe,
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

// waitResult polls the stored transaction until its result has the wanted status, with a
// deadline.
func waitResult(t *testing.T, m *tcc.Manager, id uuid.UUID, want tcc.Status) *tcc.Instance {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		inst, err := m.Get(context.Background(), id)
		require.NoError(t, err)
		if inst.Result.Status == want {
			return inst
		}
		if time.Now().After(deadline) {
			for _, e := range inst.Log {
				t.Logf("log %d %s %s %s attempt %d %s %s %s", e.Seq, e.EntryType, e.Name, e.StepStatus, e.Attempt, e.ErrorCode, e.Request, e.Response)
			}
			t.Fatalf("transaction %s is %s / %s (%s %s), want %s", id, inst.Status, inst.Result.Status, inst.ErrorCode, inst.ErrorMessage, want)
		}
		time.Sleep(10 * time.Millisecond) // polling the stored status with a deadline
	}
}

// ledger records every phase call and decides which fail.
type ledger struct {
	mu    sync.Mutex
	calls map[string]int // "flight:TRY" → calls
	order []string       // every call, in order
	fail  map[string]func(attempt int) error
	seen  map[string][]string // "hotel:CONFIRM" → try results it received
}

func newLedger() *ledger {
	return &ledger{calls: map[string]int{}, fail: map[string]func(int) error{}, seen: map[string][]string{}}
}

func (l *ledger) failWith(key string, fn func(attempt int) error) {
	l.mu.Lock()
	l.fail[key] = fn
	l.mu.Unlock()
}

func (l *ledger) enter(c *tcc.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := c.Participant + ":" + string(c.Phase)
	l.calls[key]++
	l.order = append(l.order, key)
	if c.Phase != tcc.PhaseTry {
		var hold string
		_ = c.DecodeTryResult(&hold)
		l.seen[key] = append(l.seen[key], hold)
	}
	if fn := l.fail[key]; fn != nil {
		return fn(c.Attempt)
	}
	return nil
}

func (l *ledger) count(key string) int { l.mu.Lock(); defer l.mu.Unlock(); return l.calls[key] }

func (l *ledger) sequence() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.order...)
}

// participant adds a participant whose phases go through the ledger; the try's result is a hold
// id the confirm and cancel receive.
func participant(l *ledger, def *tcc.Definition, id string, opts ...tcc.ParticipantOption) *tcc.Definition {
	return def.Participant(id,
		func(ctx context.Context, c *tcc.Context) (any, error) {
			if err := l.enter(c); err != nil {
				return nil, err
			}
			return "hold-" + c.Participant, nil
		},
		func(ctx context.Context, c *tcc.Context) error { return l.enter(c) },
		func(ctx context.Context, c *tcc.Context) error { return l.enter(c) },
		opts...)
}

func trip(l *ledger, name string, carOpts ...tcc.ParticipantOption) *tcc.Definition {
	def := tcc.New(name, 1)
	participant(l, def, "flight")
	participant(l, def, "hotel")
	return participant(l, def, "car", carOpts...)
}

var fast = tcc.RetryPolicy{MaxAttempts: 3, InitialDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}

func noRetry() tcc.RetryPolicy { return tcc.RetryPolicy{MaxAttempts: 1} }

func TestOutcomes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()

		t.Run("Confirmed", func(t *testing.T) {
			l := newLedger()
			client, rt := newRuntime(t, drv, nil)
			m, err := tcc.Register(rt, trip(l, "trip-confirmed"))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, map[string]string{"traveller": "ada"}, tcc.Immediate())
			require.NoError(t, err)
			inst := waitResult(t, m, id, tcc.StatusConfirmed)
			require.Equal(t, driver.ExecutionCompleted, inst.Status)
			seq := l.sequence()
			require.Len(t, seq, 6, "three tries and three confirms; no cancel: %v", seq)
			require.Equal(t, []string{"flight:TRY", "hotel:TRY", "car:TRY"}, seq[:3], "tries in order")
			require.ElementsMatch(t, []string{"flight:CONFIRM", "hotel:CONFIRM", "car:CONFIRM"}, seq[3:], "then the confirms, at once")
			require.Equal(t, []string{"hold-hotel"}, l.seen["hotel:CONFIRM"], "confirm receives the try's result")
			res := inst.Result
			require.Empty(t, res.FailedParticipant)
			for _, p := range res.Participants {
				require.Equal(t, "COMPLETED", p.Try.Status, p.ID)
				require.Equal(t, "COMPLETED", p.Confirm.Status, p.ID)
				require.Empty(t, p.Cancel.Status, p.ID)
				require.Equal(t, 2, p.Attempts, p.ID)
			}
			var hold string
			require.NoError(t, res.DecodeTryResult("car", &hold))
			require.Equal(t, "hold-car", hold)
		})

		t.Run("TryFailureCancelsOnlySucceededTries", func(t *testing.T) {
			l := newLedger()
			l.failWith("hotel:TRY", func(int) error { return commandbus.BusinessRule("NO_ROOMS", "the hotel is full") })
			client, rt := newRuntime(t, drv, nil)
			m, err := tcc.Register(rt, trip(l, "trip-try-fails"))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, tcc.Immediate())
			require.NoError(t, err)
			inst := waitResult(t, m, id, tcc.StatusCanceled)
			require.Equal(t, driver.ExecutionCompensated, inst.Status)
			require.Equal(t, tcc.CodeTryFailed, inst.ErrorCode)
			require.Equal(t, []string{"flight:TRY", "hotel:TRY", "flight:CANCEL"}, l.sequence(),
				"only the flight's try succeeded, so only the flight is cancelled; the car never tried")
			require.Equal(t, []string{"hold-flight"}, l.seen["flight:CANCEL"], "cancel receives the try's result")
			res := inst.Result
			require.Equal(t, "hotel", res.FailedParticipant)
			require.Equal(t, tcc.PhaseTry, res.FailedPhase)
			require.Equal(t, "NO_ROOMS", res.ErrorCode)
			require.Equal(t, "COMPLETED", res.Participant("flight").Cancel.Status)
			require.Equal(t, "FAILED", res.Participant("hotel").Try.Status)
			require.Empty(t, res.Participant("hotel").Cancel.Status)
			require.Empty(t, res.Participant("car").Try.Status)
		})

		t.Run("OptionalParticipant", func(t *testing.T) {
			l := newLedger()
			l.failWith("car:TRY", func(int) error { return commandbus.BusinessRule("NO_CARS", "no car left") })
			client, rt := newRuntime(t, drv, nil)
			m, err := tcc.Register(rt, trip(l, "trip-optional", tcc.Optional()))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, tcc.Immediate())
			require.NoError(t, err)
			inst := waitResult(t, m, id, tcc.StatusConfirmed)
			seq := l.sequence()
			require.Equal(t, []string{"flight:TRY", "hotel:TRY", "car:TRY"}, seq[:3])
			require.ElementsMatch(t, []string{"flight:CONFIRM", "hotel:CONFIRM"}, seq[3:],
				"the optional car's failed try cancels nothing, and the car is neither confirmed nor cancelled")
			car := inst.Result.Participant("car")
			require.True(t, car.Optional)
			require.Equal(t, "FAILED", car.Try.Status)
			require.Equal(t, "NO_CARS", car.Try.ErrorCode)
			require.Empty(t, car.Confirm.Status)
			require.Empty(t, car.Cancel.Status)
		})

		t.Run("ConfirmRetriedThenCancels", func(t *testing.T) {
			l := newLedger()
			l.failWith("hotel:CONFIRM", func(int) error { return commandbus.Transient(errors.New("hotel API down")) })
			client, rt := newRuntime(t, drv, nil)
			def := tcc.New("trip-confirm-fails", 1).DefaultRetry(fast)
			participant(l, def, "flight")
			participant(l, def, "hotel", tcc.ConfirmRetry(tcc.RetryPolicy{MaxAttempts: 2, InitialDelay: 10 * time.Millisecond}))
			participant(l, def, "car")
			m, err := tcc.Register(rt, def)
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, tcc.Immediate())
			require.NoError(t, err)
			inst := waitResult(t, m, id, tcc.StatusCanceled)
			require.Equal(t, tcc.CodeConfirmFailed, inst.ErrorCode)
			require.Equal(t, 2, l.count("hotel:CONFIRM"), "the confirm is retried by its own policy (2 attempts)")
			require.Equal(t, 0, l.count("flight:CANCEL"), "the flight confirmed; it is not cancelled")
			require.Equal(t, 0, l.count("car:CANCEL"), "nor the car, which confirmed beside the hotel")
			require.Equal(t, 1, l.count("hotel:CANCEL"), "the hotel had not confirmed")
			require.Equal(t, 1, l.count("car:CONFIRM"))
			res := inst.Result
			require.Equal(t, "hotel", res.FailedParticipant)
			require.Equal(t, tcc.PhaseConfirm, res.FailedPhase)
			require.Equal(t, commandbus.CodeRetriesExhausted, res.ErrorCode)
			require.Equal(t, 2, res.Participant("hotel").Confirm.Attempts)
			seq := l.sequence()
			require.Equal(t, "hotel:CANCEL", seq[len(seq)-1])
		})

		t.Run("CancelFailureParksThenRetry", func(t *testing.T) {
			l := newLedger()
			l.failWith("car:TRY", func(int) error { return commandbus.BusinessRule("NO_CARS", "no car left") })
			var fixed bool
			var mu sync.Mutex
			l.failWith("flight:CANCEL", func(int) error {
				mu.Lock()
				defer mu.Unlock()
				if fixed {
					return nil
				}
				return commandbus.Permanent("AIRLINE_REFUSED", errors.New("the airline refuses the release"))
			})
			client, rt := newRuntime(t, drv, nil)
			m, err := tcc.Register(rt, trip(l, "trip-cancel-fails"))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, tcc.Immediate())
			require.NoError(t, err)
			inst := waitResult(t, m, id, tcc.StatusFailed)
			require.Equal(t, driver.ExecutionWaitingForTSQ, inst.Status, "a failed cancel is never silent: the transaction parks")
			require.Equal(t, tcc.CodeCancelFailed, inst.ErrorCode)
			require.Equal(t, 1, l.count("hotel:CANCEL"), "the other cancels still ran")
			res := inst.Result
			require.Equal(t, "flight", res.FailedParticipant)
			require.Equal(t, tcc.PhaseCancel, res.FailedPhase)
			require.Equal(t, "car", res.CauseParticipant)
			require.Equal(t, tcc.PhaseTry, res.CausePhase)

			require.ErrorIs(t, m.Skip(ctx, id, "hotel", nil, operator), commandbus.ErrInvalidState, "the hotel's cancel did not fail")
			mu.Lock()
			fixed = true
			mu.Unlock()
			require.NoError(t, m.Retry(ctx, id, operator))
			inst = waitResult(t, m, id, tcc.StatusCanceled)
			require.Equal(t, driver.ExecutionCompensated, inst.Status)
			require.Equal(t, 2, l.count("flight:CANCEL"))
			require.Equal(t, 1, l.count("hotel:CANCEL"), "a cancel that succeeded is not run again")
			require.Equal(t, "car", inst.Result.FailedParticipant, "once the cancels succeed, the result names the try that failed")
			require.Equal(t, tcc.PhaseTry, inst.Result.FailedPhase)
		})

		t.Run("CancelFailureSkipped", func(t *testing.T) {
			l := newLedger()
			l.failWith("car:TRY", func(int) error { return commandbus.BusinessRule("NO_CARS", "no car left") })
			l.failWith("hotel:CANCEL", func(int) error { return commandbus.Permanent("HOTEL_GONE", errors.New("gone")) })
			client, rt := newRuntime(t, drv, nil)
			m, err := tcc.Register(rt, trip(l, "trip-cancel-skipped"))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, tcc.Immediate())
			require.NoError(t, err)
			waitResult(t, m, id, tcc.StatusFailed)
			require.NoError(t, m.Skip(ctx, id, "hotel", nil, operator))
			inst := waitResult(t, m, id, tcc.StatusCanceled)
			require.Equal(t, "SKIPPED", inst.Result.Participant("hotel").Cancel.Status)
			require.Equal(t, 1, l.count("hotel:CANCEL"), "a skipped cancel does not run again")
			require.Equal(t, 1, l.count("flight:CANCEL"))
		})

		t.Run("CancelFailureCompletedByOperator", func(t *testing.T) {
			l := newLedger()
			l.failWith("car:TRY", func(int) error { return commandbus.BusinessRule("NO_CARS", "no car left") })
			l.failWith("hotel:CANCEL", func(int) error { return commandbus.Permanent("HOTEL_GONE", errors.New("gone")) })
			client, rt := newRuntime(t, drv, nil)
			m, err := tcc.Register(rt, trip(l, "trip-cancel-completed"))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, tcc.Immediate())
			require.NoError(t, err)
			waitResult(t, m, id, tcc.StatusFailed)
			var verr *commandbus.ValidationError
			require.ErrorAs(t, m.CompleteOverride(ctx, id, map[string]any{"x": 1}, operator), &verr, "a TCC takes no state overrides")
			require.Equal(t, "stateOverrides", verr.Field)
			require.ErrorAs(t, m.CompleteOverride(ctx, id, nil, commandbus.OperatorAction{}), &verr, "an action needs an actor and a reason")
			require.NoError(t, m.CompleteOverride(ctx, id, nil, operator))
			inst := waitResult(t, m, id, tcc.StatusCanceled)
			require.Equal(t, driver.ExecutionCompleted, inst.Status, "resolved by hand")
			require.Equal(t, 1, l.count("hotel:CANCEL"), "completing runs nothing")
			require.ErrorIs(t, m.Retry(ctx, id, operator), commandbus.ErrInvalidState, "an ended transaction is not retried")
		})

		t.Run("OperatorCancel", func(t *testing.T) {
			l := newLedger()
			l.failWith("hotel:TRY", func(int) error { return commandbus.Transient(errors.New("slow")) })
			client, rt := newRuntime(t, drv, nil)
			def := trip(l, "trip-operator-cancel")
			def.DefaultRetry(tcc.RetryPolicy{MaxAttempts: 5, InitialDelay: time.Hour})
			m, err := tcc.Register(rt, def)
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, nil, tcc.Immediate())
			require.NoError(t, err)
			inst := waitResult(t, m, id, tcc.StatusTrying)
			require.Equal(t, driver.ExecutionWaitingForRetry, inst.Status, "the retry waits in the engine, not in a goroutine")
			require.Equal(t, "RETRY_SCHEDULED", inst.Result.Participant("hotel").Try.Status)
			require.NoError(t, m.CancelOverride(ctx, id, true, operator))
			inst = waitResult(t, m, id, tcc.StatusCanceled)
			require.Equal(t, driver.ExecutionCancelled, inst.Status)
			require.True(t, inst.Result.CancelledByOperator)
			require.Equal(t, 1, l.count("flight:CANCEL"))
			require.Equal(t, 0, l.count("hotel:CANCEL"), "the hotel never reserved")
		})
	})
}

// The effective retry policy and timeout of a phase: phase, then participant, then definition,
// then configuration, then the defaults.
func TestEffectiveValueChain(t *testing.T) {
	t.Parallel()
	_, rt := newRuntime(t, dbtest.SQLite(t), nil)
	noop := func(context.Context, *tcc.Context) (any, error) { return nil, nil }
	nop := func(context.Context, *tcc.Context) error { return nil }
	def := tcc.New("chain", 1).DefaultRetry(tcc.RetryPolicy{MaxAttempts: 4}).DefaultTimeout(4*time.Second).
		Participant("a", noop, nop, nop, tcc.TryRetry(tcc.RetryPolicy{MaxAttempts: 7}), tcc.ConfirmTimeout(7*time.Second),
			tcc.Retry(tcc.RetryPolicy{MaxAttempts: 5}), tcc.Timeout(5*time.Second)).
		Participant("b", noop, nop, nop)
	m, err := tcc.Register(rt, def, tcc.WithConfig(tcc.Config{Retry: &tcc.RetryPolicy{MaxAttempts: 9}, Timeout: 9 * time.Second}))
	require.NoError(t, err)
	for _, tc := range []struct {
		participant string
		phase       tcc.Phase
		attempts    int
		timeout     time.Duration
	}{
		{"a", tcc.PhaseTry, 7, 5 * time.Second},     // phase retry, participant timeout
		{"a", tcc.PhaseConfirm, 5, 7 * time.Second}, // participant retry, phase timeout
		{"a", tcc.PhaseCancel, 5, 5 * time.Second},  // participant
		{"b", tcc.PhaseTry, 4, 4 * time.Second},     // definition
	} {
		retry, timeout, err := m.PhasePolicy(tc.participant, tc.phase)
		require.NoError(t, err)
		require.Equal(t, tc.attempts, retry.MaxAttempts, "%s %s", tc.participant, tc.phase)
		require.Equal(t, tc.timeout, timeout, "%s %s", tc.participant, tc.phase)
	}

	_, rt2 := newRuntime(t, dbtest.SQLite(t), nil)
	m2, err := tcc.Register(rt2, tcc.New("config", 1).Participant("a", noop, nop, nop), tcc.WithConfig(tcc.Config{Retry: &tcc.RetryPolicy{MaxAttempts: 9}, Timeout: 9 * time.Second}))
	require.NoError(t, err)
	retry, timeout, err := m2.PhasePolicy("a", tcc.PhaseCancel)
	require.NoError(t, err)
	require.Equal(t, 9, retry.MaxAttempts, "the configuration is the last level")
	require.Equal(t, 9*time.Second, timeout)
	_, rt3 := newRuntime(t, dbtest.SQLite(t), nil)
	m3, err := tcc.Register(rt3, tcc.New("defaults", 1).Participant("a", noop, nop, nop))
	require.NoError(t, err)
	retry, timeout, err = m3.PhasePolicy("a", tcc.PhaseTry)
	require.NoError(t, err)
	require.Equal(t, commandbus.DefaultMaxAttempts, retry.MaxAttempts)
	require.Equal(t, tcc.DefaultTimeout, timeout)
	_, _, err = m3.PhasePolicy("ghost", tcc.PhaseTry)
	var verr *commandbus.ValidationError
	require.ErrorAs(t, err, &verr)
}

func TestDefinitionValidation(t *testing.T) {
	t.Parallel()
	_, rt := newRuntime(t, dbtest.SQLite(t), nil)
	noop := func(context.Context, *tcc.Context) (any, error) { return nil, nil }
	nop := func(context.Context, *tcc.Context) error { return nil }
	_, err := tcc.Register(rt, tcc.New("bad", 1).
		Participant("a", noop, nop, nil).
		Participant("a", noop, nop, nop).
		Participant("", noop, nop, nop).
		Participant("b", noop, nop, nop, tcc.CancelTimeout(-time.Second)))
	require.ErrorIs(t, err, tcc.ErrInvalidDefinition)
	for _, want := range []string{`participant "a" needs try, confirm and cancel functions`, `participant "a" is declared twice`,
		"participant 3 has no id", `participant "b": the CANCEL timeout must not be negative`} {
		require.ErrorContains(t, err, want)
	}
	_, err = tcc.Register(rt, tcc.New("empty", 1))
	require.ErrorContains(t, err, "the definition has no participants")
	require.Empty(t, rt.All(), "a bad definition registers nothing")
}

// The lifecycle entries reach the runtime's execution observer as they commit; Events reads
// the phase and participant events from them.
func TestLifecycleEventsThroughObserver(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		var mu sync.Mutex
		var events []tcc.Event
		done := make(chan struct{})
		observe := func(c commandbus.ExecutionCommit) {
			if c.Execution.Model != tcc.Model {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			events = append(events, tcc.Events(c.Execution.ID, c.Log)...)
			if c.Execution.Status.Terminal() {
				close(done)
			}
		}
		l := newLedger()
		l.failWith("hotel:TRY", func(int) error { return commandbus.BusinessRule("NO_ROOMS", "full") })
		client, rt := newRuntime(t, drv, observe)
		m, err := tcc.Register(rt, trip(l, "trip-events"))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, nil, tcc.Immediate())
		require.NoError(t, err)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Fatal("the observer saw no terminal commit")
		}
		mu.Lock()
		defer mu.Unlock()
		var got []string
		for _, e := range events {
			require.Equal(t, id, e.TransactionID)
			s := fmt.Sprintf("%s %s", e.Type, e.Phase)
			if e.Participant != "" {
				s += " " + e.Participant
			}
			got = append(got, s)
		}
		require.Equal(t, []string{
			"PHASE_STARTED TRY",
			"PARTICIPANT_STARTED TRY flight", "PARTICIPANT_SUCCEEDED TRY flight",
			"PARTICIPANT_STARTED TRY hotel", "PARTICIPANT_FAILED TRY hotel",
			"PHASE_FAILED TRY hotel",
			"PHASE_STARTED CANCEL",
			"PARTICIPANT_STARTED CANCEL flight", "PARTICIPANT_SUCCEEDED CANCEL flight",
			"PHASE_COMPLETED CANCEL",
		}, got)
	})
}

// A runner dies in the middle of the confirm phase: another instance finishes the transaction
// once the lease runs out. The phases recorded before are not run again (the confirms that
// finished beside the stuck one were recorded as they arrived); the confirm that was running runs
// again (its attempt was never recorded), once.
func TestRunnerKilledMidPhase(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		l := newLedger()
		frozen, entered := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(frozen) })
		var once sync.Once
		l.failWith("hotel:CONFIRM", func(int) error {
			if l.calls["hotel:CONFIRM"] == 1 {
				once.Do(func() { close(entered) })
				l.mu.Unlock()
				<-frozen // the first runner's confirm never returns: its instance is gone
				l.mu.Lock()
			}
			return nil
		})
		newInstance := func() (*commandbus.Client, *tcc.Manager) {
			client, err := commandbus.NewClient(drv, &commandbus.Config{
				Logger:  slog.New(slog.DiscardHandler),
				Process: commandbus.ProcessConfig{PendingPollInterval: ms(20), RetryPollInterval: ms(20), ExecutionLease: commandbus.Duration(time.Second)},
			})
			require.NoError(t, err)
			rt, err := orchestration.New(client, orchestration.Config{})
			require.NoError(t, err)
			m, err := tcc.Register(rt, trip(l, "trip-killed"))
			require.NoError(t, err)
			return client, m
		}
		first, m1 := newInstance()
		require.NoError(t, first.Start(ctx))
		ids, err := m1.StartMany(ctx, []any{nil})
		require.NoError(t, err)
		id := ids[0]
		select {
		case <-entered:
		case <-time.After(15 * time.Second):
			t.Fatal("the hotel's confirm never started")
		}
		eventually := func(what string, cond func(*tcc.Instance) bool) {
			deadline := time.Now().Add(15 * time.Second)
			for {
				inst, err := m1.Get(ctx, id)
				require.NoError(t, err)
				if cond(inst) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("timed out waiting for %s", what)
				}
				time.Sleep(10 * time.Millisecond) // polling the stored log with a deadline
			}
		}
		eventually("the confirms beside the hotel's recorded", func(inst *tcc.Instance) bool {
			return inst.Result.Participant("flight").Confirm.Status == "COMPLETED" && inst.Result.Participant("car").Confirm.Status == "COMPLETED"
		})
		stopCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_ = first.Stop(stopCtx) // its run is cut off mid-phase; its lease is left to run out
		cancel()

		second, m2 := newInstance()
		start(t, second)
		inst := waitResult(t, m2, id, tcc.StatusConfirmed)
		for _, key := range []string{"flight:TRY", "hotel:TRY", "car:TRY", "flight:CONFIRM", "car:CONFIRM"} {
			require.Equal(t, 1, l.count(key), "%s was recorded before the kill (or after it) and runs once", key)
		}
		require.Equal(t, 2, l.count("hotel:CONFIRM"), "the confirm in flight at the kill runs again")
		for _, p := range inst.Result.Participants {
			require.Equal(t, 1, p.Confirm.Attempts, "%s: one recorded confirm", p.ID)
			require.Equal(t, 1, p.Try.Attempts, "%s: one recorded try", p.ID)
		}
	})
}

// An operator suspends a transaction while a try runs: the try finishes and is recorded, no
// other phase starts, and the transaction is SUSPENDED until it is resumed.
func TestSuspendBetweenParticipants(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		l := newLedger()
		entered, proceed := make(chan struct{}), make(chan struct{})
		l.failWith("flight:TRY", func(int) error {
			close(entered)
			l.mu.Unlock()
			<-proceed
			l.mu.Lock()
			return nil
		})
		client, rt := newRuntime(t, drv, nil)
		m, err := tcc.Register(rt, trip(l, "trip-suspend"))
		require.NoError(t, err)
		start(t, client)
		ids, err := m.StartMany(ctx, []any{nil})
		require.NoError(t, err)
		id := ids[0]
		<-entered
		require.NoError(t, m.Suspend(ctx, id, operator))
		close(proceed)
		deadline := time.Now().Add(15 * time.Second)
		for {
			inst, err := m.Get(ctx, id)
			require.NoError(t, err)
			if inst.Status == driver.ExecutionSuspended {
				require.Equal(t, "COMPLETED", inst.Result.Participant("flight").Try.Status, "the running try was recorded")
				break
			}
			require.False(t, time.Now().After(deadline), "transaction %s is %s, want SUSPENDED", id, inst.Status)
			time.Sleep(10 * time.Millisecond) // polling the stored status with a deadline
		}
		require.Equal(t, 0, l.count("hotel:TRY"), "nothing starts after the suspend")
		require.NoError(t, m.Resume(ctx, id, operator))
		waitResult(t, m, id, tcc.StatusConfirmed)
		require.Equal(t, 1, l.count("flight:TRY"))
		require.Equal(t, 1, l.count("hotel:TRY"))
	})
}

// A TCC transaction starts at once: a start request with a not-before time is refused, naming
// the field, and nothing is stored.
func TestStartJSONRefusesNotBefore(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		_, rt := newRuntime(t, drv, nil)
		m, err := tcc.Register(rt, trip(newLedger(), "trip-not-before"))
		require.NoError(t, err)
		id := uuid.New()
		_, err = m.StartJSON(ctx, orchestration.StartRequest{ID: id, NotBefore: time.Now().Add(time.Hour)})
		var invalid *commandbus.ValidationError
		require.ErrorAs(t, err, &invalid)
		require.Equal(t, "notBefore", invalid.Field)
		_, err = drv.Executor().ExecutionGet(ctx, id)
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
}
