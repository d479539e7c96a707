package tenantweb_test

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
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/tenant"
	"github.com/commandbus/commandbus/tenant/tenantweb"
	"github.com/commandbus/commandbus/workflow"
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

func (p *page) attr(sel, name string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%s).getAttribute(%s) || ""`, jsString(sel), jsString(name))))
	require.NoError(p.t, err, "reading %s[%s]", sel, name)
	return v
}

func (p *page) waitText(sel, want string) {
	p.t.Helper()
	expr := fmt.Sprintf(`(function(){ var e = document.querySelector(%s); return !!e && e.textContent.indexOf(%s) >= 0; })()`, jsString(sel), jsString(want))
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(p.t, err, "waiting for %s to say %q", sel, want)
}

// The console's Tenants page shows a FREE tenant at its limit with executions queued; an
// operator raises its tier in a real browser, the queued executions start and the change is
// audited, on both drivers.
func TestTenantsPageInBrowser(t *testing.T) {
	t.Parallel()
	browser := startChromium(t)
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		cfg := &commandbus.Config{Logger: slog.New(slog.DiscardHandler)}
		client, err := commandbus.NewClient(drv, cfg)
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{Admission: orchestration.AdmissionConfig{CapacityLimited: []string{"job"}}})
		require.NoError(t, err)
		jobs, err := workflow.Register(rt, workflow.New("job", 1).WaitSignal("wait", "go"))
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, client.Stop(stopCtx))
		})
		tenants := tenant.New(client)
		_, err = tenants.Create(ctx, tenant.CreateRequest{ID: "acme", Name: "Acme Ltd", Tier: tenant.TierFree})
		require.NoError(t, err)
		var ids []string
		for i := range 3 {
			id, err := jobs.Start(ctx, map[string]int{"n": i}, workflow.WithTenant("acme"))
			require.NoError(t, err)
			ids = append(ids, id.String())
		}

		srv, err := server.New(server.Config{Client: client, Runtime: rt, Extensions: []server.Extension{tenantweb.New(tenants)},
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

		p.visit("/tenants")
		row := `tr[data-id="acme"]`
		require.Contains(t, p.text(`nav`), "Tenants")
		require.Contains(t, p.text(row+" .tier"), "FREE")
		require.Equal(t, "1 / 1", strings.TrimSpace(p.text(row+" .usage-text")), "active against the limit")
		require.Equal(t, "1", p.attr(row+" meter", "value"), "the bar")
		require.Equal(t, "2", strings.TrimSpace(p.text(row+" .queued")))
		require.Regexp(t, `^\d+s$`, strings.TrimSpace(p.text(row+" .oldest")), "the oldest queued execution's age")

		p.click(row + ` a[href$="/edit"]`)
		require.Contains(t, p.text("h1"), "Change tenant acme")
		p.fill("#field-tier", "PRO")
		p.fill("#field-reason", "upgraded to PRO")
		p.click("#confirm-submit")
		p.waitText(".flash-success", "changed")

		got, err := tenants.Get(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, tenant.TierPro, got.Tier, "changed in the database")
		require.Equal(t, 3, got.Active, "the queued executions were admitted at once")
		audit, err := drv.Executor().AuditLogList(ctx, &driver.AuditLogListParams{EntityType: "tenant", EntityID: "acme"})
		require.NoError(t, err)
		require.Equal(t, "TENANT_UPDATE", audit[0].Action)
		require.Equal(t, "alice@ops", audit[0].Actor)
		require.Equal(t, "upgraded to PRO", audit[0].Reason)
		p.visit("/tenants")
		require.Equal(t, "3 / 5", strings.TrimSpace(p.text(row+" .usage-text")))
		require.Equal(t, "0", strings.TrimSpace(p.text(row+" .queued")))
		require.False(t, strings.Contains(p.text("body"), "Internal"), "no error page")
	})
}
