package scheduleweb_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/browsertest"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/schedule/scheduleweb"
	"github.com/commandbus/commandbus/server"
)

// The payments platform's daily run, declared with its definition, on the console's schedules
// page: its next fire time shows, an operator pauses it, resumes it and triggers it, in a real
// browser, on both drivers.
func TestSchedulesPageInBrowser(t *testing.T) {
	t.Parallel()
	browser := browsertest.Start(t)
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		fake := clock.NewFake(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
		off := false
		cfg := &commandbus.Config{Logger: slog.New(slog.DiscardHandler), Clock: fake, Domains: payments.DefaultDomainConfigs(2)}
		cfg.Features.ProcessExecution = &off
		client, err := commandbus.NewClient(drv, cfg)
		require.NoError(t, err)
		platform, err := payments.New(client, payments.Options{DisableSimulator: true, CustomersPerCurrency: 1, BeneficiariesPerCurrency: 1})
		require.NoError(t, err)
		sched, err := schedule.New(platform.Runtime(), schedule.Config{Passive: true})
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, client.Stop(stopCtx))
		})
		srv, err := server.New(server.Config{Client: client, Runtime: platform.Runtime(), Extensions: []server.Extension{scheduleweb.New(sched)},
			Tokens: []server.Token{{Subject: "alice@ops", Token: operatorToken, Role: server.RoleOperator}}})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, srv.Close()) })
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)

		p := browsertest.NewPage(t, browser, hs.URL)
		p.SignIn(operatorToken)

		require.Eventually(t, func() bool { // the client's maintenance takes its jobs' rows as it starts
			jobs, err := client.Driver().Executor().JobLeaseList(ctx)
			require.NoError(t, err)
			return len(jobs) > 0
		}, 30*time.Second, 20*time.Millisecond)
		p.Visit("/schedules")
		row := `tr[data-name="` + payments.DailyRunSchedule + `"]`
		require.Contains(t, p.Text(row), "cron 0 0 6 * * * (Europe/London)")
		require.Contains(t, p.Text(row), payments.TypeDailyRun)
		require.Contains(t, p.Text(row+" .next-fire"), "2026-11-24", "the next fire time shows")
		require.Contains(t, p.Text(`nav`), "Schedules")
		require.Contains(t, p.Text(`#jobs-table tr[data-job="stale-work-report"]`), "stale-work-report",
			"the periodic jobs' leased rows show, with their next run")

		p.Click(row + ` a[href$="/pause"]`)
		require.Contains(t, p.Text("h1"), "Pause schedule "+payments.DailyRunSchedule)
		p.Fill("#field-reason", "bank holiday tomorrow")
		p.Click("#confirm-submit")
		p.WaitText(".flash-success", "paused")
		s, err := sched.GetByName(ctx, payments.DailyRunSchedule)
		require.NoError(t, err)
		require.False(t, s.Enabled, "paused in the database")
		require.Contains(t, p.Text(row), "paused")

		p.Click(row + ` a[href$="/resume"]`)
		p.Fill("#field-reason", "holiday over")
		p.Click("#confirm-submit")
		p.WaitText(".flash-success", "resumed")
		s, err = sched.GetByName(ctx, payments.DailyRunSchedule)
		require.NoError(t, err)
		require.True(t, s.Enabled)

		p.Click(row + ` a[href$="/trigger"]`)
		p.Fill("#field-reason", "run the day now")
		p.Click("#confirm-submit")
		p.WaitText(".flash-success", "triggered")
		started, err := client.Driver().Executor().ExecutionList(ctx, &driver.ExecutionListParams{BusinessKey: payments.DailyRunSchedule})
		require.NoError(t, err)
		require.Len(t, started, 1, "the trigger started one daily run")
		require.Equal(t, payments.TypeDailyRun, started[0].Type)
		require.False(t, strings.Contains(p.Text("body"), "Internal"), "no error page")
	})
}
