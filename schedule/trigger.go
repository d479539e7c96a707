package schedule

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// cronParser reads six fields, seconds first, and the @every/@daily descriptors.
var cronParser = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// trigger computes a schedule's ticks.
type trigger struct {
	kind     driver.TriggerKind
	cron     cron.Schedule
	interval time.Duration
}

// parseCron parses a six-field expression in zone ("" is UTC); the errors name the field.
func parseCron(expr, zone string) (cron.Schedule, error) {
	loc := time.UTC
	if zone != "" {
		l, err := time.LoadLocation(zone)
		if err != nil {
			return nil, &commandbus.ValidationError{Field: "zone", Message: fmt.Sprintf("unknown time zone %q", zone)}
		}
		loc = l
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, &commandbus.ValidationError{Field: "cron", Message: "give the time zone in zone, not in the expression"}
	}
	sched, err := cronParser.Parse(expr)
	if err != nil {
		return nil, &commandbus.ValidationError{Field: "cron", Message: fmt.Sprintf("%q is not a cron expression of six fields (second minute hour day month weekday): %v", expr, err)}
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, &commandbus.ValidationError{Field: "cron", Message: "@every is a fixed rate; use fixedRate instead"}
	}
	if spec.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, &commandbus.ValidationError{Field: "cron", Message: fmt.Sprintf("%q never fires", expr)}
	}
	spec.Location = time.UTC
	const allHours = 1<<24 - 1
	return &zonedCron{wall: spec, loc: loc, everyHour: spec.Hour&allHours == allHours}, nil
}

// zonedCron fires a cron expression on the wall clock of a time zone, across DST changes the
// way operators expect of a daily job: a wall time that happens twice (clocks go back) fires
// once, at its first occurrence, and a wall time that does not exist (clocks go forward) fires
// at the same distance after the change (02:30 becomes 03:30). Expressions that fire every hour
// follow real time instead: they fire in both repeated hours and skip the hour that does not
// exist, since every hour has its own tick.
type zonedCron struct {
	wall      *cron.SpecSchedule // evaluated on wall-clock times written as UTC
	loc       *time.Location
	everyHour bool
}

func (z *zonedCron) Next(after time.Time) time.Time {
	if z.everyHour {
		real := *z.wall
		real.Location = z.loc
		return real.Next(after).UTC()
	}
	local := after.In(z.loc)
	w := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), local.Nanosecond(), time.UTC)
	for range 8 {
		nw := z.wall.Next(w)
		if nw.IsZero() {
			return nw
		}
		at := time.Date(nw.Year(), nw.Month(), nw.Day(), nw.Hour(), nw.Minute(), nw.Second(), 0, z.loc)
		if at.Hour() != nw.Hour() || at.Minute() != nw.Minute() {
			// nw does not exist on this day's clock: keep the offset in force before the change.
			_, offset := at.Zone()
			at = nw.Add(-time.Duration(offset) * time.Second)
		}
		if at.After(after) {
			return at.UTC()
		}
		w = nw // the second pass through a repeated wall time: its tick fired on the first
	}
	return time.Time{}
}

var cronCache sync.Map // "zone\x00expr" -> cron.Schedule; parsed expressions are immutable

func triggerOf(row *driver.ScheduleRow) (*trigger, error) {
	t := &trigger{kind: row.Trigger, interval: row.Interval}
	if row.Trigger != driver.TriggerCron {
		if row.Interval <= 0 {
			return nil, fmt.Errorf("schedule %s: %s needs a positive interval", row.ID, row.Trigger)
		}
		return t, nil
	}
	key := row.Zone + "\x00" + row.Cron
	if c, ok := cronCache.Load(key); ok {
		t.cron = c.(cron.Schedule)
		return t, nil
	}
	c, err := parseCron(row.Cron, row.Zone)
	if err != nil {
		return nil, err
	}
	cronCache.Store(key, c)
	t.cron = c
	return t, nil
}

// next returns the first tick strictly after after, on a cron trigger; on the fixed ones, the
// tick one interval after.
func (t *trigger) next(after time.Time) time.Time {
	if t.kind == driver.TriggerCron {
		return t.cron.Next(after).UTC()
	}
	return after.Add(t.interval)
}

// atOrAfter returns the first tick at or after at of the tick series through due.
func (t *trigger) atOrAfter(due, at time.Time) time.Time {
	if !due.Before(at) {
		return due
	}
	if t.kind == driver.TriggerCron {
		return t.cron.Next(at.Add(-time.Nanosecond)).UTC()
	}
	k := (at.Sub(due) + t.interval - 1) / t.interval
	return due.Add(k * t.interval)
}

// first is the first tick of a schedule created (or resumed) at now.
func (t *trigger) first(now time.Time, initialDelay time.Duration) time.Time {
	start := now.Add(initialDelay)
	if t.kind == driver.TriggerCron {
		return t.cron.Next(start.Add(-time.Nanosecond)).UTC()
	}
	return start.UTC()
}

// DefaultMisfireLimit bounds the missed ticks MisfireFireAll starts when the schedule sets no
// limit.
const DefaultMisfireLimit = 100

// maxOnTimeTicks bounds the ticks one claim starts that are within the misfire threshold.
const maxOnTimeTicks = 1000

// plan decides what a claim of a schedule due at due does at now: the ticks to start and the
// next fire time (nil for a fixed-delay schedule, which waits for its execution to end). A tick
// more than threshold behind now is missed and handled by the misfire policy; the others fire.
// The ticks depend only on the stored due time and the clock, so a replica that takes over a
// claim another replica dropped computes the same ticks, hence the same execution ids.
func plan(t *trigger, row *driver.ScheduleRow, due, now time.Time, threshold time.Duration) (fires []time.Time, next *time.Time) {
	return planAhead(t, row, due, now, now, threshold)
}

// planAhead is plan for a claim made ahead of time: the ticks up to horizon (at or after now)
// fire, the next fire time follows horizon, and lateness is judged at now.
func planAhead(t *trigger, row *driver.ScheduleRow, due, now, horizon time.Time, threshold time.Duration) (fires []time.Time, next *time.Time) {
	cut := now.Add(-threshold)
	now = horizon
	missed := due.Before(cut)
	if t.kind == driver.TriggerFixedDelay {
		if missed && row.Misfire == driver.MisfireSkip {
			n := now.Add(t.interval)
			return nil, &n
		}
		return []time.Time{due}, nil
	}
	if missed {
		switch row.Misfire {
		case driver.MisfireSkip:
		case driver.MisfireFireAll:
			limit := row.MisfireLimit
			if limit <= 0 {
				limit = DefaultMisfireLimit
			}
			for tick := due; tick.Before(cut) && len(fires) < limit; tick = t.next(tick) {
				fires = append(fires, tick)
			}
		default: // fire once, as of the first missed tick
			fires = append(fires, due)
		}
	}
	onTime := 0
	for tick := t.atOrAfter(due, cut); !tick.After(now) && onTime < maxOnTimeTicks; tick = t.next(tick) {
		fires = append(fires, tick)
		onTime++
	}
	var n time.Time
	if t.kind == driver.TriggerCron {
		n = t.cron.Next(now).UTC()
	} else {
		n = t.atOrAfter(due, now)
		if !n.After(now) {
			n = n.Add(t.interval)
		}
	}
	return fires, &n
}
