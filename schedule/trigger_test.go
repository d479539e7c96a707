package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

func mustTrigger(t *testing.T, row *driver.ScheduleRow) *trigger {
	t.Helper()
	tr, err := triggerOf(row)
	require.NoError(t, err)
	return tr
}

func ticksOf(t *testing.T, tr *trigger, from time.Time, n int) []time.Time {
	t.Helper()
	out := make([]time.Time, 0, n)
	at := from
	for range n {
		at = tr.next(at)
		out = append(out, at)
	}
	return out
}

func TestCronAcrossDST(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	wall := func(ts []time.Time) []string {
		out := make([]string, len(ts))
		for i, x := range ts {
			out[i] = x.In(ny).Format("2006-01-02 15:04 MST")
		}
		return out
	}

	t.Run("DailyInTheSkippedHourFiresAfterTheChange", func(t *testing.T) {
		t.Parallel()
		tr := mustTrigger(t, &driver.ScheduleRow{Trigger: driver.TriggerCron, Cron: "0 30 2 * * *", Zone: "America/New_York"})
		// Clocks go from 02:00 EST to 03:00 EDT on 2026-03-08: 02:30 does not exist that day.
		got := wall(ticksOf(t, tr, time.Date(2026, 3, 6, 12, 0, 0, 0, ny), 4))
		require.Equal(t, []string{"2026-03-07 02:30 EST", "2026-03-08 03:30 EDT", "2026-03-09 02:30 EDT", "2026-03-10 02:30 EDT"}, got,
			"one run a day, the skipped one an hour later on the day of the change")
	})

	t.Run("DailyInTheRepeatedHourFiresOnce", func(t *testing.T) {
		t.Parallel()
		tr := mustTrigger(t, &driver.ScheduleRow{Trigger: driver.TriggerCron, Cron: "0 30 1 * * *", Zone: "America/New_York"})
		// Clocks go from 02:00 EDT back to 01:00 EST on 2026-11-01: 01:30 happens twice.
		got := wall(ticksOf(t, tr, time.Date(2026, 10, 31, 12, 0, 0, 0, ny), 3))
		require.Equal(t, []string{"2026-11-01 01:30 EDT", "2026-11-02 01:30 EST", "2026-11-03 01:30 EST"}, got)
		// Asked during the second 01:xx hour, it does not fire the repeated 01:30 again.
		secondPass := time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC) // 01:10 EST
		require.Equal(t, "2026-11-02 01:30 EST", wall([]time.Time{tr.next(secondPass)})[0])
	})

	t.Run("HourlyFollowsRealTime", func(t *testing.T) {
		t.Parallel()
		tr := mustTrigger(t, &driver.ScheduleRow{Trigger: driver.TriggerCron, Cron: "0 0 * * * *", Zone: "America/New_York"})
		got := ticksOf(t, tr, time.Date(2026, 11, 1, 4, 30, 0, 0, time.UTC), 4)
		for i := 1; i < len(got); i++ {
			require.Equal(t, time.Hour, got[i].Sub(got[i-1]), "every real hour, both 01:00 included: %v", wall(got))
		}
		got = ticksOf(t, tr, time.Date(2026, 3, 8, 5, 30, 0, 0, time.UTC), 3)
		require.Equal(t, []string{"2026-03-08 01:00 EST", "2026-03-08 03:00 EDT", "2026-03-08 04:00 EDT"}, wall(got))
	})

	t.Run("SecondsField", func(t *testing.T) {
		t.Parallel()
		tr := mustTrigger(t, &driver.ScheduleRow{Trigger: driver.TriggerCron, Cron: "*/15 * * * * *"})
		got := ticksOf(t, tr, time.Date(2026, 1, 1, 0, 0, 7, 0, time.UTC), 3)
		require.Equal(t, time.Date(2026, 1, 1, 0, 0, 15, 0, time.UTC), got[0])
		require.Equal(t, time.Date(2026, 1, 1, 0, 0, 45, 0, time.UTC), got[2])
	})
}

func TestParseCronRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ expr, zone, field string }{
		{"0 0 * * *", "", "cron"}, // five fields
		{"61 0 * * * *", "", "cron"},
		{"@every 1s", "", "cron"},
		{"0 0 0 30 2 *", "", "cron"}, // February 30th never comes
		{"0 0 2 * * *", "Mars/Olympus", "zone"},
		{"CRON_TZ=UTC 0 0 2 * * *", "", "cron"},
	} {
		_, err := parseCron(c.expr, c.zone)
		require.Error(t, err, c.expr)
		require.Contains(t, err.Error(), "invalid "+c.field, c.expr)
	}
}

func TestPlanMisfires(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	rate := func(policy driver.MisfirePolicy, limit int) *driver.ScheduleRow {
		return &driver.ScheduleRow{Trigger: driver.TriggerFixedRate, Interval: time.Minute, Misfire: policy, MisfireLimit: limit}
	}
	threshold := 5 * time.Second

	t.Run("OnTime", func(t *testing.T) {
		t.Parallel()
		row := rate(driver.MisfireSkip, 0)
		fires, next := plan(mustTrigger(t, row), row, base, base.Add(200*time.Millisecond), threshold)
		require.Equal(t, []time.Time{base}, fires)
		require.Equal(t, base.Add(time.Minute), *next)
	})

	// Down from 10:00 to 10:10:30: ticks 10:00 ... 10:10 were missed.
	now := base.Add(10*time.Minute + 30*time.Second)
	t.Run("FireOnce", func(t *testing.T) {
		t.Parallel()
		row := rate(driver.MisfireFireOnce, 0)
		fires, next := plan(mustTrigger(t, row), row, base, now, threshold)
		require.Equal(t, []time.Time{base}, fires, "one start for all the missed ticks, as of the first")
		require.Equal(t, base.Add(11*time.Minute), *next)
	})
	t.Run("FireAllUpToTheLimit", func(t *testing.T) {
		t.Parallel()
		row := rate(driver.MisfireFireAll, 4)
		fires, next := plan(mustTrigger(t, row), row, base, now, threshold)
		require.Equal(t, []time.Time{base, base.Add(time.Minute), base.Add(2 * time.Minute), base.Add(3 * time.Minute)}, fires)
		require.Equal(t, base.Add(11*time.Minute), *next)
		row = rate(driver.MisfireFireAll, 0)
		fires, _ = plan(mustTrigger(t, row), row, base, now, threshold)
		require.Len(t, fires, 11, "all eleven missed ticks under the default limit")
	})
	t.Run("Skip", func(t *testing.T) {
		t.Parallel()
		row := rate(driver.MisfireSkip, 0)
		fires, next := plan(mustTrigger(t, row), row, base, now, threshold)
		require.Empty(t, fires)
		require.Equal(t, base.Add(11*time.Minute), *next)
	})
	t.Run("MissedAndOnTime", func(t *testing.T) {
		t.Parallel()
		row := rate(driver.MisfireSkip, 0)
		// Down until 10:10:02: the 10:10 tick is within the threshold and fires.
		fires, next := plan(mustTrigger(t, row), row, base, base.Add(10*time.Minute+2*time.Second), threshold)
		require.Equal(t, []time.Time{base.Add(10 * time.Minute)}, fires)
		require.Equal(t, base.Add(11*time.Minute), *next)
	})
	t.Run("FixedDelay", func(t *testing.T) {
		t.Parallel()
		row := &driver.ScheduleRow{Trigger: driver.TriggerFixedDelay, Interval: time.Minute, Misfire: driver.MisfireSkip}
		fires, next := plan(mustTrigger(t, row), row, base, base.Add(time.Second), threshold)
		require.Equal(t, []time.Time{base}, fires)
		require.Nil(t, next, "waits for its execution to end")
		fires, next = plan(mustTrigger(t, row), row, base, now, threshold)
		require.Empty(t, fires)
		require.Equal(t, now.Add(time.Minute), *next)
	})
	t.Run("CronAfterDowntime", func(t *testing.T) {
		t.Parallel()
		row := &driver.ScheduleRow{Trigger: driver.TriggerCron, Cron: "0 */5 * * * *", Misfire: driver.MisfireFireAll}
		fires, next := plan(mustTrigger(t, row), row, base, now, threshold)
		require.Equal(t, []time.Time{base, base.Add(5 * time.Minute), base.Add(10 * time.Minute)}, fires)
		require.Equal(t, base.Add(15*time.Minute), *next)
	})
}
