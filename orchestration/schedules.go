package orchestration

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/commandbus/commandbus/cbtype"
)

// ScheduleSpec declares a schedule that starts executions of one (model, type): on a cron
// expression with seconds (Cron, in Zone), at a fixed rate (FixedRate) or with a fixed delay
// after the previous execution ended (FixedDelay); exactly one of the three. Package schedule
// stores, validates and fires it; declaring it on the runtime (DeclareSchedule) keeps it with
// the definition in code, any model alike.
type ScheduleSpec struct {
	// Name identifies the schedule; declared schedules are kept in line with their declaration
	// by name when the scheduler starts.
	Name string
	// Model and Type name the registered definition the schedule starts.
	Model string
	Type  string
	// Cron is six fields: second minute hour day-of-month month day-of-week.
	Cron string
	// Zone is the IANA time zone of Cron ("America/New_York"); default UTC.
	Zone string
	// FixedRate starts an execution every FixedRate, from the first tick.
	FixedRate time.Duration
	// FixedDelay starts an execution FixedDelay after the previous one ended.
	FixedDelay time.Duration
	// InitialDelay postpones the first tick after the schedule is created.
	InitialDelay time.Duration
	// Input is the JSON input of every execution started; default {}.
	Input json.RawMessage
	// Disabled creates the schedule paused.
	Disabled    bool
	Description string
	// Misfire says what to do with ticks missed while no replica ran; default fire once.
	Misfire cbtype.MisfirePolicy
	// MisfireLimit bounds the missed ticks started under MisfireFireAll; default 100.
	MisfireLimit int
}

// DeclareSchedule declares a schedule of the definition registered under (model, typ), which
// the scheduler of package schedule creates (or updates to match) when it starts. Declare it
// before starting the client; the scheduler validates the trigger.
func (rt *Runtime) DeclareSchedule(model, typ string, spec ScheduleSpec) error {
	if spec.Name == "" {
		return errors.New("orchestration: a declared schedule needs a name")
	}
	if rt.Operations(model, typ) == nil {
		return fmt.Errorf("orchestration: schedule %q: no definition registered as %s %q; register it first", spec.Name, model, typ)
	}
	spec.Model, spec.Type = model, typ
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, s := range rt.schedules {
		if s.Name == spec.Name {
			return fmt.Errorf("orchestration: schedule %q is already declared", spec.Name)
		}
	}
	rt.schedules = append(rt.schedules, spec)
	return nil
}

// DeclaredSchedules returns the schedules declared on the runtime, in declaration order.
func (rt *Runtime) DeclaredSchedules() []ScheduleSpec {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]ScheduleSpec(nil), rt.schedules...)
}
