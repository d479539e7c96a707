package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/workflow"
)

type report struct {
	Days int `json:"days"`
}

type reportProcess struct{ runs *atomic.Int64 }

func (reportProcess) Type() string   { return "report" }
func (reportProcess) Domain() string { return "reports" }
func (p reportProcess) Execute(x *process.Execution[report]) error {
	_, err := process.Step(x, "build", func(ctx context.Context) (int, error) {
		if p.runs != nil {
			p.runs.Add(1)
		}
		return x.State.Days, nil
	})
	return err
}

type fixture struct {
	client *commandbus.Client
	rt     *orchestration.Runtime
	sched  *schedule.Scheduler
	exec   driver.Executor
}

type fixtureOptions struct {
	clock   clock.Clock // nil: real time
	running bool        // run the engine and the scheduler's loop (start the client)
	declare func(rt *orchestration.Runtime)
	holder  string
}

func newFixture(t *testing.T, drv driver.Driver, opts fixtureOptions) *fixture {
	t.Helper()
	cfg := &commandbus.Config{Logger: slog.New(slog.DiscardHandler), Clock: opts.clock}
	cfg.Features.ProcessExecution = &opts.running
	cfg.Process.PendingPollInterval = commandbus.Duration(50 * time.Millisecond)
	client, err := commandbus.NewClient(drv, cfg)
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	_, err = process.NewManager(rt, process.Process[report](reportProcess{}))
	require.NoError(t, err)
	if opts.declare != nil {
		opts.declare(rt)
	}
	scfg := schedule.Config{PollInterval: 100 * time.Millisecond, Holder: opts.holder, Passive: !opts.running}
	if opts.clock != nil {
		scfg.Now = opts.clock.Now
	}
	sched, err := schedule.New(rt, scfg)
	require.NoError(t, err)
	if opts.running {
		require.NoError(t, client.Start(context.Background()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = client.Stop(ctx)
		})
	}
	return &fixture{client: client, rt: rt, sched: sched, exec: drv.Executor()}
}

func (f *fixture) executionsOf(t *testing.T, name string) []*driver.ExecutionRow {
	t.Helper()
	rows, err := f.exec.ExecutionList(context.Background(), &driver.ExecutionListParams{BusinessKey: name, Limit: 1000})
	require.NoError(t, err)
	return rows
}

func field(t *testing.T, err error) string {
	t.Helper()
	var v *commandbus.ValidationError
	require.ErrorAs(t, err, &v)
	return v.Field
}

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

// ops is who changes schedules in these tests.
var ops = commandbus.OperatorAction{Actor: "ops:test", Reason: "testing schedules"}

func TestCreateRefusesBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := newFixture(t, drv, fixtureOptions{clock: clock.NewFake(t0)})
		ctx := context.Background()
		ok := schedule.Spec{Name: "nightly", Model: process.Model, Type: "report", Cron: "0 0 2 * * *"}
		for _, c := range []struct {
			name  string
			edit  func(s *schedule.Spec)
			field string
		}{
			{"InvalidCron", func(s *schedule.Spec) { s.Cron = "0 0 2 * *" }, "cron"},
			{"UnknownZone", func(s *schedule.Spec) { s.Zone = "Europe/Atlantis" }, "zone"},
			{"NegativeRate", func(s *schedule.Spec) { s.Cron, s.FixedRate = "", -time.Second }, "fixedRate"},
			{"NegativeDelay", func(s *schedule.Spec) { s.Cron, s.FixedDelay = "", -time.Second }, "fixedDelay"},
			{"NegativeInitialDelay", func(s *schedule.Spec) { s.InitialDelay = -time.Second }, "initialDelay"},
			{"NoTrigger", func(s *schedule.Spec) { s.Cron = "" }, "cron"},
			{"TwoTriggers", func(s *schedule.Spec) { s.FixedRate = time.Minute }, "cron"},
			{"UnknownDefinition", func(s *schedule.Spec) { s.Type = "missing" }, "type"},
			{"NoModel", func(s *schedule.Spec) { s.Model = "" }, "model"},
			{"BadInput", func(s *schedule.Spec) { s.Input = json.RawMessage(`{"days":`) }, "input"},
			{"BadMisfire", func(s *schedule.Spec) { s.Misfire = "LATER" }, "misfirePolicy"},
			{"BadName", func(s *schedule.Spec) { s.Name = "has space" }, "name"},
		} {
			spec := ok
			c.edit(&spec)
			_, err := f.sched.Create(ctx, spec, ops)
			require.Error(t, err, c.name)
			require.Equal(t, c.field, field(t, err), c.name)
		}
		list, err := f.sched.List(ctx, 0)
		require.NoError(t, err)
		require.Empty(t, list, "bad input stores nothing")

		_, err = f.sched.Create(ctx, ok, ops)
		require.NoError(t, err)
		_, err = f.sched.Create(ctx, ok, ops)
		require.ErrorIs(t, err, driver.ErrConflict, "a name is unique")
	})
}

func TestFiresEachTickOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		clk := clock.NewFake(t0.Add(3 * time.Second))
		f := newFixture(t, drv, fixtureOptions{clock: clk})
		ctx := context.Background()
		s, err := f.sched.Create(ctx, schedule.Spec{Name: "every-10s", Model: process.Model, Type: "report",
			Cron: "*/10 * * * * *", Input: json.RawMessage(`{"days": 7}`)}, ops)
		require.NoError(t, err)
		require.Equal(t, t0.Add(10*time.Second), *s.NextFireAt)

		n, err := f.sched.RunDue(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "not due yet")

		clk.Set(t0.Add(10*time.Second + 300*time.Millisecond))
		n, err = f.sched.RunDue(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		n, err = f.sched.RunDue(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "a tick starts once")

		xs := f.executionsOf(t, "every-10s")
		require.Len(t, xs, 1)
		tick := t0.Add(10 * time.Second)
		require.Equal(t, schedule.TickExecutionID(s.ID, tick), xs[0].ID)
		require.JSONEq(t, `{"days":7}`, string(xs[0].State))

		got, err := f.sched.Get(ctx, s.ID)
		require.NoError(t, err)
		require.Equal(t, t0.Add(20*time.Second), *got.NextFireAt)
		require.Equal(t, tick, *got.LastFireAt)
		require.Equal(t, xs[0].ID, *got.LastExecutionID)
		require.Equal(t, int64(1), got.FireCount)
		require.Equal(t, string(driver.ExecutionPending), got.LastStatus)
	})
}

func TestMisfirePolicies(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		clk := clock.NewFake(t0)
		f := newFixture(t, drv, fixtureOptions{clock: clk})
		ctx := context.Background()
		for _, c := range []struct {
			name   string
			policy driver.MisfirePolicy
			limit  int
		}{{"once", driver.MisfireFireOnce, 0}, {"all", driver.MisfireFireAll, 3}, {"skip", driver.MisfireSkip, 0}} {
			_, err := f.sched.Create(ctx, schedule.Spec{Name: c.name, Model: process.Model, Type: "report",
				FixedRate: time.Minute, InitialDelay: time.Minute, Misfire: c.policy, MisfireLimit: c.limit}, ops)
			require.NoError(t, err)
		}
		// Nothing ran from 10:00 to 10:10:30: the ticks of 10:01 ... 10:10 were missed.
		clk.Set(t0.Add(10*time.Minute + 30*time.Second))
		n, err := f.sched.RunDue(ctx)
		require.NoError(t, err)
		require.Equal(t, 1+3, n)
		ticks := func(name string) []string {
			s, err := f.sched.GetByName(ctx, name)
			require.NoError(t, err)
			var out []string
			for _, x := range f.executionsOf(t, name) {
				out = append(out, tickOf(t, s.ID, x.ID, t0, t0.Add(time.Hour), time.Minute).Format("15:04:05"))
			}
			return out
		}
		require.Equal(t, []string{"10:01:00"}, ticks("once"))
		require.ElementsMatch(t, []string{"10:01:00", "10:02:00", "10:03:00"}, ticks("all"))
		require.Empty(t, ticks("skip"))
		for _, name := range []string{"once", "all", "skip"} {
			s, err := f.sched.GetByName(ctx, name)
			require.NoError(t, err)
			require.Equal(t, t0.Add(11*time.Minute), *s.NextFireAt, name)
		}
		// Back on time: every policy fires the next tick.
		clk.Set(t0.Add(11*time.Minute + time.Second))
		n, err = f.sched.RunDue(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, n)
	})
}

func TestCronAcrossDSTWithInjectedClock(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ny, err := time.LoadLocation("America/New_York")
		require.NoError(t, err)
		clk := clock.NewFake(time.Date(2026, 3, 6, 12, 0, 0, 0, ny))
		f := newFixture(t, drv, fixtureOptions{clock: clk})
		ctx := context.Background()
		_, err = f.sched.Create(ctx, schedule.Spec{Name: "cutoff", Model: process.Model, Type: "report",
			Cron: "0 30 2 * * *", Zone: "America/New_York"}, ops)
		require.NoError(t, err)
		// Walk the clock in 20-minute steps across the spring change (2026-03-08 02:00 EST -> 03:00 EDT).
		for clk.Now().Before(time.Date(2026, 3, 10, 12, 0, 0, 0, ny)) {
			clk.Advance(20 * time.Minute)
			_, err := f.sched.RunDue(ctx)
			require.NoError(t, err)
		}
		s, err := f.sched.GetByName(ctx, "cutoff")
		require.NoError(t, err)
		var got []string
		for _, x := range f.executionsOf(t, "cutoff") {
			tick := tickOf(t, s.ID, x.ID, time.Date(2026, 3, 6, 0, 0, 0, 0, ny), time.Date(2026, 3, 11, 0, 0, 0, 0, ny), 30*time.Minute)
			got = append(got, tick.In(ny).Format("01-02 15:04 MST"))
		}
		require.ElementsMatch(t, []string{"03-07 02:30 EST", "03-08 03:30 EDT", "03-09 02:30 EDT", "03-10 02:30 EDT"}, got,
			"one start a day; on the day of the change the skipped 02:30 runs at 03:30")
	})
}

func TestPauseResumeTriggerDelete(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		clk := clock.NewFake(t0)
		f := newFixture(t, drv, fixtureOptions{clock: clk})
		ctx := context.Background()
		s, err := f.sched.Create(ctx, schedule.Spec{Name: "rate", Model: process.Model, Type: "report", FixedRate: time.Minute}, ops)
		require.NoError(t, err)
		require.Equal(t, t0, *s.NextFireAt, "a fixed rate without initial delay fires at once")

		paused, err := f.sched.Pause(ctx, s.ID, ops)
		require.NoError(t, err)
		require.False(t, paused.Enabled)
		require.Nil(t, paused.NextFireAt)
		clk.Advance(5 * time.Minute)
		n, err := f.sched.RunDue(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "a paused schedule fires nothing")

		id, err := f.sched.Trigger(ctx, s.ID, ops)
		require.NoError(t, err)
		x, err := f.exec.ExecutionGet(ctx, id)
		require.NoError(t, err, "a trigger starts one execution even while paused")
		require.Equal(t, "report", x.Type)

		resumed, err := f.sched.Resume(ctx, s.ID, ops)
		require.NoError(t, err)
		require.True(t, resumed.Enabled)
		require.Equal(t, clk.Now(), *resumed.NextFireAt, "the pause's ticks are not caught up")
		n, err = f.sched.RunDue(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		upd, err := f.sched.Update(ctx, s.ID, schedule.Spec{Name: "rate", Model: process.Model, Type: "report", Cron: "0 0 * * * *"}, ops)
		require.NoError(t, err)
		require.Equal(t, driver.TriggerCron, upd.Trigger)
		require.Equal(t, t0.Add(time.Hour), *upd.NextFireAt)
		_, err = f.sched.Update(ctx, s.ID, schedule.Spec{Name: "renamed", Model: process.Model, Type: "report", Cron: "0 0 * * * *"}, ops)
		require.Equal(t, "name", field(t, err))
		_, err = f.sched.Update(ctx, s.ID, schedule.Spec{Name: "rate", Model: process.Model, Type: "report", Cron: "bad"}, ops)
		require.Equal(t, "cron", field(t, err))
		kept, err := f.sched.Get(ctx, s.ID)
		require.NoError(t, err)
		require.Equal(t, "0 0 * * * *", kept.Cron, "a refused update changes nothing")

		_, err = f.sched.Pause(ctx, s.ID, commandbus.OperatorAction{})
		require.Equal(t, "actor", field(t, err), "every change is audited with who made it")
		audit, err := f.exec.AuditLogList(ctx, &driver.AuditLogListParams{EntityType: schedule.AuditEntity, EntityID: s.ID.String()})
		require.NoError(t, err)
		var actions []string
		for _, a := range audit {
			require.Equal(t, ops.Actor, a.Actor)
			require.Equal(t, ops.Reason, a.Reason)
			actions = append(actions, a.Action)
		}
		require.ElementsMatch(t, []string{"SCHEDULE_CREATED", "SCHEDULE_PAUSED", "SCHEDULE_TRIGGERED", "SCHEDULE_RESUMED", "SCHEDULE_UPDATED"}, actions)

		require.NoError(t, f.sched.Delete(ctx, s.ID, ops))
		_, err = f.sched.Get(ctx, s.ID)
		require.ErrorIs(t, err, driver.ErrNotFound)
		require.ErrorIs(t, f.sched.Delete(ctx, uuid.New(), ops), driver.ErrNotFound)
	})
}

func TestDeclaredSchedules(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		declare := func(cron string) func(rt *orchestration.Runtime) {
			return func(rt *orchestration.Runtime) {
				require.NoError(t, rt.DeclareSchedule(process.Model, "report", orchestration.ScheduleSpec{
					Name: "declared-report", Cron: cron, Input: json.RawMessage(`{"days":1}`), Description: "declared with the definition"}))
				require.ErrorContains(t, rt.DeclareSchedule(process.Model, "missing", orchestration.ScheduleSpec{Name: "x", Cron: cron}), "no definition")
			}
		}
		f := newFixture(t, drv, fixtureOptions{clock: clock.NewFake(t0), declare: declare("0 0 3 * * *")})
		require.NoError(t, f.sched.SyncDeclared(ctx))
		s, err := f.sched.GetByName(ctx, "declared-report")
		require.NoError(t, err)
		require.Equal(t, driver.ScheduleDeclared, s.Source)
		require.Equal(t, t0.Add(17*time.Hour), *s.NextFireAt)
		_, err = f.sched.Pause(ctx, s.ID, ops)
		require.NoError(t, err)

		// Another deployment declares a new time: the row follows, the operator's pause stays.
		g := newFixture(t, drv, fixtureOptions{clock: clock.NewFake(t0), declare: declare("0 0 4 * * *")})
		require.NoError(t, g.sched.SyncDeclared(ctx))
		s2, err := g.sched.GetByName(ctx, "declared-report")
		require.NoError(t, err)
		require.Equal(t, s.ID, s2.ID)
		require.Equal(t, "0 0 4 * * *", s2.Cron)
		require.False(t, s2.Enabled)
	})
}

func TestFixedDelayRearmsWhenTheExecutionEnds(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := newFixture(t, drv, fixtureOptions{running: true})
		ctx := context.Background()
		delay := 300 * time.Millisecond
		_, err := f.sched.Create(ctx, schedule.Spec{Name: "delay", Model: process.Model, Type: "report", FixedDelay: delay}, ops)
		require.NoError(t, err)
		var xs []*driver.ExecutionRow
		require.Eventually(t, func() bool {
			xs = f.executionsOf(t, "delay")
			ended := 0
			for _, x := range xs {
				if x.Status == driver.ExecutionCompleted {
					ended++
				}
			}
			return ended >= 3
		}, 20*time.Second, 20*time.Millisecond)
		byCreation := map[time.Time]*driver.ExecutionRow{}
		var created []time.Time
		for _, x := range xs {
			byCreation[x.CreatedAt] = x
			created = append(created, x.CreatedAt)
		}
		require.Len(t, byCreation, len(xs))
		sortTimes(created)
		for i := 1; i < len(created); i++ {
			prev, next := byCreation[created[i-1]], byCreation[created[i]]
			require.NotNil(t, prev.CompletedAt, "an execution is created only after the previous one ended")
			require.False(t, next.CreatedAt.Before(*prev.CompletedAt), "execution %d created before the previous ended", i)
			if ran := stepStarted(t, f.exec, next.ID, "build"); !ran.IsZero() {
				// Created up to the lead ahead, it runs only once the delay has passed.
				require.False(t, ran.Before(prev.CompletedAt.Add(delay-time.Millisecond)),
					"execution %d ran %s after the previous ended; the delay is %s", i, ran.Sub(*prev.CompletedAt), delay)
			}
		}
	})
}

// tickOf finds the tick, every step from from to to, whose derived id is id: the execution was
// started for that tick of the schedule.
func tickOf(t *testing.T, scheduleID, id uuid.UUID, from, to time.Time, step time.Duration) time.Time {
	t.Helper()
	for tick := from.Truncate(step); !tick.After(to); tick = tick.Add(step) {
		if schedule.TickExecutionID(scheduleID, tick) == id {
			return tick.UTC()
		}
	}
	t.Fatalf("execution %s is no tick of schedule %s between %s and %s", id, scheduleID, from, to)
	return time.Time{}
}

func sortTimes(ts []time.Time) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Before(ts[j-1]); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// Three engines on one PostgreSQL database, each with its scheduler: every tick of every
// schedule starts exactly one execution, and the fire counts add up to the executions.
func TestOneStartPerTickAcrossThreeEngines(t *testing.T) {
	t.Parallel()
	drv := dbtest.Postgres(t)
	ctx := context.Background()
	var replicas []*fixture
	for i := range 3 {
		replicas = append(replicas, newFixture(t, drv, fixtureOptions{running: true, holder: "replica-" + string(rune('a'+i))}))
	}
	const schedules = 20
	var ids []uuid.UUID
	for i := range schedules {
		s, err := replicas[i%3].sched.Create(ctx, schedule.Spec{Name: "every-second-" + string(rune('a'+i)), Model: process.Model,
			Type: "report", Cron: "* * * * * *"}, ops)
		require.NoError(t, err)
		ids = append(ids, s.ID)
	}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			s, err := replicas[0].exec.ScheduleGet(ctx, id)
			require.NoError(t, err)
			if s.FireCount < 3 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond)
	for _, r := range replicas {
		require.NoError(t, r.sched.Stop(ctx))
	}
	for _, id := range ids {
		s, err := replicas[0].exec.ScheduleGet(ctx, id)
		require.NoError(t, err)
		xs := replicas[0].executionsOf(t, s.Name)
		require.Equal(t, int(s.FireCount), len(xs), "schedule %s: every recorded fire is one execution, none fired twice", s.Name)
		ticks := map[time.Time]bool{}
		for _, x := range xs {
			tick := tickOf(t, s.ID, x.ID, s.CreatedAt.Add(-time.Second), time.Now().Add(time.Second), time.Second)
			require.False(t, ticks[tick], "schedule %s: tick %s started twice", s.Name, tick)
			ticks[tick] = true
		}
	}
}

// Ticks of a workflow start in batches (orchestration.BatchStarter): one pass starts every due
// schedule's execution, each with its derived id and the schedule's input.
func TestWorkflowTicksStartInBatches(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		clk := clock.NewFake(t0)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
		f := newFixture(t, drv, fixtureOptions{clock: clk, declare: func(rt *orchestration.Runtime) {
			_, err := workflow.Register(rt, workflow.New("NightlyReport", 1).Step("build", noop))
			require.NoError(t, err)
		}})
		var ids []uuid.UUID
		for i := range 7 {
			s, err := f.sched.Create(ctx, schedule.Spec{Name: fmt.Sprintf("wf-%d", i), Model: workflow.Model, Type: "NightlyReport",
				FixedRate: time.Minute, Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}, ops)
			require.NoError(t, err)
			ids = append(ids, s.ID)
		}
		n, err := f.sched.RunDue(ctx)
		require.NoError(t, err)
		require.Equal(t, 7, n)
		for i, id := range ids {
			x, err := f.exec.ExecutionGet(ctx, schedule.TickExecutionID(id, t0))
			require.NoError(t, err, "schedule %d started its tick's execution", i)
			require.Equal(t, "NightlyReport", x.Type)
			require.Equal(t, fmt.Sprintf("wf-%d", i), x.BusinessKey)
			require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i), string(x.State))
		}
		n, err = f.sched.RunDue(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// With a lead, the loop claims a schedule ahead of its tick and creates the tick's execution
// then, runnable from the tick: the engine runs it never before the tick and without waiting for
// its next poll, once per tick.
func TestLeadStartsTicksNotBeforeTheirTime(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		var mu sync.Mutex
		committed, runnable := map[uuid.UUID]time.Time{}, map[uuid.UUID]time.Time{}
		cfg := &commandbus.Config{Logger: slog.New(slog.DiscardHandler), ExecutionObserver: func(c commandbus.ExecutionCommit) {
			if c.Inserted {
				at := time.Now()
				mu.Lock()
				committed[c.Execution.ID], runnable[c.Execution.ID] = at, *c.Execution.WakeAt
				mu.Unlock()
			}
		}}
		// Far longer than the test: a tick's execution runs early only if the engine is woken for it.
		cfg.Process.PendingPollInterval = commandbus.Duration(time.Minute)
		client, err := commandbus.NewClient(drv, cfg)
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		_, err = process.NewManager(rt, process.Process[report](reportProcess{}))
		require.NoError(t, err)
		sched, err := schedule.New(rt, schedule.Config{PollInterval: time.Second, Lead: 400 * time.Millisecond})
		require.NoError(t, err)
		s, err := sched.Create(ctx, schedule.Spec{Name: "ahead", Model: process.Model, Type: "report", Cron: "* * * * * *"}, ops)
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = client.Stop(stopCtx)
		})
		exec := drv.Executor()
		completed := func() []*driver.ExecutionRow {
			rows, err := exec.ExecutionList(ctx, &driver.ExecutionListParams{BusinessKey: "ahead", Statuses: []driver.ExecutionStatus{driver.ExecutionCompleted}, Limit: 100})
			require.NoError(t, err)
			return rows
		}
		require.Eventually(t, func() bool { return len(completed()) >= 3 }, 20*time.Second, 20*time.Millisecond)
		require.NoError(t, sched.Stop(ctx))
		got, err := sched.Get(ctx, s.ID)
		require.NoError(t, err)
		require.Eventually(t, func() bool { // the observer is told after the commit, on its own goroutine
			mu.Lock()
			defer mu.Unlock()
			return len(committed) == int(got.FireCount)
		}, 10*time.Second, 20*time.Millisecond, "one execution per recorded fire")

		ahead := 0
		for _, x := range completed() {
			tick := tickOf(t, s.ID, x.ID, s.CreatedAt.Add(-time.Second), time.Now().Add(2*time.Second), time.Second)
			mu.Lock()
			at, wake := committed[x.ID], runnable[x.ID]
			mu.Unlock()
			if at.Before(tick) {
				ahead++
			}
			require.False(t, wake.Before(tick), "tick %s runnable from %s, before its time", tick, wake)
			ran := stepStarted(t, exec, x.ID, "build")
			require.False(t, ran.Before(tick), "tick %s ran at %s, before its time", tick, ran)
			require.Less(t, ran.Sub(tick), 5*time.Second, "tick %s ran at %s: the engine waited for a poll", tick, ran)
		}
		require.Positive(t, ahead, "ticks' executions are created ahead of their ticks")
	})
}

// stepStarted is when the execution's step name started (zero: it has not).
func stepStarted(t *testing.T, exec driver.Executor, id uuid.UUID, name string) time.Time {
	t.Helper()
	log, err := exec.ExecutionLogList(context.Background(), id)
	require.NoError(t, err)
	for _, l := range log {
		if l.Name == name {
			if l.StartedAt != nil {
				return *l.StartedAt
			}
			return l.At
		}
	}
	return time.Time{}
}
