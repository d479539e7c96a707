package scheduleweb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/schedule/scheduleweb"
	"github.com/commandbus/commandbus/server"
)

// startChromium starts headless Chromium (Debian's chromium package), or skips without it
// unless COMMANDBUS_REQUIRE_BROWSER=1.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("COMMANDBUS_REQUIRE_BROWSER") == "1" {
			t.Fatal("the browser test needs chromium (apt-get install -y chromium)")
		}
		t.Skip("skipping: the browser test needs chromium (apt-get install -y chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Do(browser), "starting chromium")
	return browser
}

type page struct {
	t    *testing.T
	ctx  context.Context
	base string
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (p *page) visit(path string) {
	p.t.Helper()
	resp, err := chromedp.RunResponse(p.ctx, chromedp.Navigate(p.base+path))
	require.NoError(p.t, err, "visiting %s", path)
	require.Less(p.t, resp.Status, int64(400), "visiting %s", path)
}

func (p *page) click(sel string) {
	p.t.Helper()
	_, err := chromedp.RunResponse(p.ctx, chromedp.Click(chromedp.CSS(sel)))
	require.NoError(p.t, err, "clicking %s", sel)
}

func (p *page) fill(sel, value string) {
	p.t.Helper()
	require.NoError(p.t, chromedp.Do(p.ctx, chromedp.WaitVisible(chromedp.CSS(sel)),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%s).value = ""`, jsString(sel))),
		chromedp.SendKeys(chromedp.CSS(sel), value)), "filling %s", sel)
}

func (p *page) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(p.t, err, "reading %s", sel)
	return s
}

func (p *page) waitText(sel, want string) {
	p.t.Helper()
	expr := fmt.Sprintf(`(function(){ var e = document.querySelector(%s); return !!e && e.textContent.indexOf(%s) >= 0; })()`, jsString(sel), jsString(want))
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(p.t, err, "waiting for %s to say %q", sel, want)
}

// The payments platform's daily run, declared with its definition, on the console's schedules
// page: its next fire time shows, an operator pauses it, resumes it and triggers it, in a real
// browser, on both drivers.
func TestSchedulesPageInBrowser(t *testing.T) {
	t.Parallel()
	browser := startChromium(t)
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

		tabCtx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
		t.Cleanup(cancel)
		tabCtx, cancelTimeout := context.WithTimeout(tabCtx, 2*time.Minute)
		t.Cleanup(cancelTimeout)
		p := &page{t: t, ctx: tabCtx, base: hs.URL}
		p.visit("/login")
		p.fill("#field-token", operatorToken)
		p.click("button[type=submit].button-primary")
		p.waitText(".flash-success", "Signed in as")

		require.Eventually(t, func() bool { // the client's maintenance takes its jobs' rows as it starts
			jobs, err := client.Driver().Executor().JobLeaseList(ctx)
			require.NoError(t, err)
			return len(jobs) > 0
		}, 30*time.Second, 20*time.Millisecond)
		p.visit("/schedules")
		row := `tr[data-name="` + payments.DailyRunSchedule + `"]`
		require.Contains(t, p.text(row), "cron 0 0 6 * * * (Europe/London)")
		require.Contains(t, p.text(row), payments.TypeDailyRun)
		require.Contains(t, p.text(row+" .next-fire"), "2026-11-24", "the next fire time shows")
		require.Contains(t, p.text(`nav`), "Schedules")
		require.Contains(t, p.text(`#jobs-table tr[data-job="stale-work-report"]`), "stale-work-report",
			"the periodic jobs' leased rows show, with their next run")

		p.click(row + ` a[href$="/pause"]`)
		require.Contains(t, p.text("h1"), "Pause schedule "+payments.DailyRunSchedule)
		p.fill("#field-reason", "bank holiday tomorrow")
		p.click("#confirm-submit")
		p.waitText(".flash-success", "paused")
		s, err := sched.GetByName(ctx, payments.DailyRunSchedule)
		require.NoError(t, err)
		require.False(t, s.Enabled, "paused in the database")
		require.Contains(t, p.text(row), "paused")

		p.click(row + ` a[href$="/resume"]`)
		p.fill("#field-reason", "holiday over")
		p.click("#confirm-submit")
		p.waitText(".flash-success", "resumed")
		s, err = sched.GetByName(ctx, payments.DailyRunSchedule)
		require.NoError(t, err)
		require.True(t, s.Enabled)

		p.click(row + ` a[href$="/trigger"]`)
		p.fill("#field-reason", "run the day now")
		p.click("#confirm-submit")
		p.waitText(".flash-success", "triggered")
		started, err := client.Driver().Executor().ExecutionList(ctx, &driver.ExecutionListParams{BusinessKey: payments.DailyRunSchedule})
		require.NoError(t, err)
		require.Len(t, started, 1, "the trigger started one daily run")
		require.Equal(t, payments.TypeDailyRun, started[0].Type)
		require.False(t, strings.Contains(p.text("body"), "Internal"), "no error page")
	})
}
