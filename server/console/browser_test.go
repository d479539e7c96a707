package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/server/console"
)

// The console in a real browser: headless Debian Chromium driven by chromedp against a real
// HTTP server, on both drivers. Without Chromium the test installs it with apt-get when it runs
// as root; if that fails it skips, unless COMMANDBUS_REQUIRE_BROWSER=1 (CI), where it fails. A
// failing test leaves a full-page screenshot in the artifacts directory
// ($COMMANDBUS_ARTIFACTS_DIR, default <tmp>/commandbus-console-artifacts).

var (
	chromiumOnce sync.Once
	chromiumPath string
	chromiumErr  error
)

func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// installChromium installs Debian's chromium package, non-interactively.
func installChromium() error {
	if os.Geteuid() != 0 {
		return errors.New("not root, so apt-get cannot install it")
	}
	install := func() ([]byte, error) {
		cmd := exec.Command("apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	if _, err := install(); err == nil {
		return nil
	}
	// A fresh machine may have no package lists yet.
	if out, err := exec.Command("apt-get", "update", "-q").CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get update: %w: %s", err, lastLines(out))
	}
	if out, err := install(); err != nil {
		return fmt.Errorf("apt-get install chromium: %w: %s", err, lastLines(out))
	}
	return nil
}

func lastLines(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(len(lines)-5, 0):], " / ")
}

// requireChromium returns Chromium's path, installing it if need be.
func requireChromium(t *testing.T) string {
	t.Helper()
	chromiumOnce.Do(func() {
		if chromiumPath = findChromium(); chromiumPath != "" {
			return
		}
		t.Log("chromium is missing; installing it with apt-get")
		if chromiumErr = installChromium(); chromiumErr == nil {
			if chromiumPath = findChromium(); chromiumPath == "" {
				chromiumErr = errors.New("apt-get installed chromium but it is not on PATH")
			}
		}
	})
	if chromiumPath == "" {
		msg := fmt.Sprintf("the browser tests need Debian's chromium (apt-get install -y chromium): %v", chromiumErr)
		if os.Getenv("COMMANDBUS_REQUIRE_BROWSER") == "1" {
			t.Fatal(msg + " (COMMANDBUS_REQUIRE_BROWSER=1)")
		}
		t.Skip("skipping: " + msg)
	}
	return chromiumPath
}

// startBrowser starts one headless Chromium for the test, with a fresh profile; each tab gets a
// browser context of its own (its own cookies).
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := requireChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Do(browser), "starting chromium")
	return browser
}

// artifactsDir is where screenshots go.
func artifactsDir(t testing.TB) string {
	dir := os.Getenv("COMMANDBUS_ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "commandbus-console-artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// tab is one browser tab signed in to the console.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// openTab opens a tab in a browser context of its own and signs in with token (none: stays
// signed out). A failing test saves a full-page screenshot of the tab.
func (f *consoleFixture) openTab(t *testing.T, browser context.Context, token string) *tab {
	t.Helper()
	tabCtx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(tabCtx), "opening a tab")
	ctx, cancelTimeout := context.WithTimeout(tabCtx, 3*time.Minute)
	t.Cleanup(cancelTimeout)
	tb := &tab{t: t, ctx: ctx, base: f.HTTP.URL}
	t.Cleanup(func() {
		if t.Failed() {
			path := tb.screenshot("failure")
			t.Logf("screenshot of the failing page: %s", path)
		}
	})
	if token != "" {
		tb.visit("/login")
		tb.fill("#field-token", token)
		tb.submit("button[type=submit].button-primary")
		tb.waitText(".flash-success", "Signed in as")
	}
	return tb
}

// screenshot saves a full-page PNG (quality 100 is PNG; less is JPEG) to the artifacts directory and returns its path.
func (tb *tab) screenshot(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	shotCtx, shotCancel := context.WithCancel(tb.ctx)
	defer shotCancel()
	go func() {
		select {
		case <-ctx.Done():
			shotCancel()
		case <-shotCtx.Done():
		}
	}()
	buf, err := chromedp.Run(shotCtx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(artifactsDir(tb.t), unsafeName.ReplaceAllString(tb.t.Name()+"-"+name, "_")+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		tb.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	return path
}

func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	require.NoError(tb.t, chromedp.Do(tb.ctx, actions...), what)
}

// visit loads a console page and waits for it.
func (tb *tab) visit(path string) {
	tb.t.Helper()
	resp, err := chromedp.RunResponse(tb.ctx, chromedp.Navigate(tb.base+path))
	require.NoError(tb.t, err, "visiting %s", path)
	require.Less(tb.t, resp.Status, int64(500), "visiting %s", path)
}

// submit clicks a button or link that loads a page, and waits for that page.
func (tb *tab) submit(sel string) int64 {
	tb.t.Helper()
	resp, err := chromedp.RunResponse(tb.ctx, chromedp.Click(chromedp.CSS(sel)))
	require.NoError(tb.t, err, "clicking %s", sel)
	return resp.Status
}

// fill replaces the value of a text field by typing into it.
func (tb *tab) fill(sel, value string) {
	tb.t.Helper()
	tb.do("filling "+sel, chromedp.WaitVisible(chromedp.CSS(sel)),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%s).value = ""`, jsString(sel))))
	if value != "" {
		tb.do("filling "+sel, chromedp.SendKeys(chromedp.CSS(sel), value))
	}
}

// set sets a field's value directly (selects, dates, numbers).
func (tb *tab) set(sel, value string) {
	tb.t.Helper()
	tb.do("setting "+sel, chromedp.SetValue(chromedp.CSS(sel), value))
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(tb.t, err, "reading %s", sel)
	return s
}

// textContent reads an element's text, shown or not (inside a closed <details>, say).
func (tb *tab) textContent(sel string) string {
	tb.t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.TextContent(chromedp.CSS(sel)))
	require.NoError(tb.t, err, "reading %s", sel)
	return s
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// waitText waits until the element's text contains want; live updates bring it without a reload.
func (tb *tab) waitText(sel, want string) {
	tb.t.Helper()
	expr := fmt.Sprintf(`(function(){ var e = document.querySelector(%s); return !!e && e.textContent.indexOf(%s) >= 0; })()`,
		jsString(sel), jsString(want))
	_, err := chromedp.Run(tb.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(90*time.Second)))
	if err != nil {
		got, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%s)||{}).textContent||"(missing)"`, jsString(sel))))
		tb.t.Fatalf("waiting for %s to say %q: %v; it says %q", sel, want, err, strings.TrimSpace(got))
	}
}

// count counts the elements matching a selector.
func (tb *tab) count(sel string) int {
	tb.t.Helper()
	n, err := chromedp.Run(tb.ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(sel))))
	require.NoError(tb.t, err)
	return n
}

// confirmAction fills the reason on a confirmation page and submits it.
func (tb *tab) confirmAction(reason string) {
	tb.t.Helper()
	tb.fill("#field-reason", reason)
	tb.submit("#confirm-submit")
}

func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		// The scenarios run in turn: injected faults hit the next call of a step, whichever payment
		// makes it.
		t.Run("create a batch from the form and watch it complete", func(t *testing.T) { browserBatch(t, f, browser) })
		t.Run("fix a payment stuck in the troubleshooting queues", func(t *testing.T) { browserTSQ(t, f, browser) })
		t.Run("approve a risk approval", func(t *testing.T) { browserApproval(t, f, browser) })
		t.Run("answer a pending network response", func(t *testing.T) { browserNetwork(t, f, browser) })
		t.Run("compensate and cancel a payment parked by a network error", func(t *testing.T) { browserCompensateNetworkError(t, f, browser) })
		t.Run("retry parked commands in bulk", func(t *testing.T) { browserBulkRetry(t, f, browser) })
		t.Run("search from the header", func(t *testing.T) { browserSearch(t, f, browser) })
		t.Run("resubmit from the dead-letter page", func(t *testing.T) { browserDLQ(t, f, browser) })
		t.Run("the error column shows at 1366 px", func(t *testing.T) { browserErrorColumn(t, f, browser) })
		t.Run("a viewer sees no actions and is refused", func(t *testing.T) { browserViewer(t, f, browser) })
		if drv.Name() == "sqlite" {
			t.Run("screenshots of every page", func(t *testing.T) { browserScreenshots(t, f, browser) })
		}
	})
}

func browserBatch(t *testing.T, f *consoleFixture, browser context.Context) {
	tb := f.openTab(t, browser, operatorToken)
	tb.visit("/batches")
	tb.submit("#new-batch")
	require.Equal(t, payments.TypePaymentStep, tb.value("#field-processType"), "the step process is the default")
	require.Equal(t, servertest.Today, tb.value("#field-day"))

	// A custom behaviour whose percentages add up to more than 100: the error shows on its row.
	tb.set("#field-preset", "custom")
	tb.set("#field-count", "6")
	tb.fill(`[id="field-bookRisk.failPermanentPct"]`, "60")
	tb.fill(`[id="field-bookRisk.failTransientPct"]`, "60")
	require.Equal(t, int64(422), tb.submit("#batch-continue"))
	require.Contains(t, tb.text(`[id="error-bookRisk"]`), "add up to 120")
	require.Contains(t, tb.text(".error-summary"), "There is a problem")
	require.Equal(t, "6", tb.value("#field-count"), "the form keeps what was typed")

	tb.set("#field-preset", payments.PresetHappy)
	tb.set("#field-count", "5")
	tb.submit("#batch-continue")
	require.Equal(t, "5", tb.text("#confirm-count"))
	tb.confirmAction("nightly settlement run")
	tb.waitText(".flash-success", "Batch")
	tb.waitText(".flash-success", "created: 5 payments")
	tb.waitText("#batch-status", payments.BatchSucceeded) // the live region updates without a reload
	require.Contains(t, tb.text(`[data-count="COMPLETED"]`), "5")
}

func (tb *tab) value(sel string) string {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%s).value`, jsString(sel))))
	require.NoError(tb.t, err)
	return v
}

func browserTSQ(t *testing.T, f *consoleFixture, browser context.Context) {
	ctx := context.Background()
	tb := f.openTab(t, browser, operatorToken)

	// A command parked in the command TSQ: retry it; the payment it blocked completes.
	payment, cmd := f.ParkRiskCommand()
	tb.visit("/tsq/commands")
	row := fmt.Sprintf(`tr[data-id="%s"]`, cmd.ID)
	require.Contains(t, tb.text(row), "EXTERNAL_PERMANENT_FAILURE")
	tb.submit(row + ` a[href$="/retry"]`)
	require.Contains(t, tb.text("h1"), "Retry command")
	tb.fill("#field-reason", "")
	require.Equal(t, int64(422), tb.submitNoValidate("#confirm-submit"), "a reason is required")
	require.Contains(t, tb.text("#error-reason"), "Say why")
	tb.confirmAction("risk engine is back")
	tb.waitText(".flash-success", "back on its queue")
	require.Zero(t, tb.count(row), "the command left the queue")
	tb.visit("/payments/" + payment.PaymentID.String())
	tb.waitText("#payment-state", "COMPLETED")
	audit, err := f.Client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "command", EntityID: cmd.ID.String()})
	require.NoError(t, err)
	require.Equal(t, "alice@ops", audit[0].Actor)
	require.Equal(t, "risk engine is back", audit[0].Reason)

	// A process in the process TSQ: complete it with state overrides; bad JSON is refused first.
	stuck := f.ParkManagerPayment()
	tb.visit("/tsq/processes")
	row = fmt.Sprintf(`tr[data-id="%s"]`, stuck.ExecutionID)
	require.Contains(t, tb.text(row), "COMMAND_PARKED")
	tb.submit(row + ` a[href$="/complete"]`)
	tb.fill("#field-stateOverrides", `{evidence: confirmed}`)
	tb.confirmAction("bank confirmed by phone")
	require.Contains(t, tb.text("#error-stateOverrides"), "not valid JSON")
	require.Equal(t, "bank confirmed by phone", tb.value("#field-reason"), "the form keeps the reason")
	tb.set("#field-stateOverrides", `{"evidence": "payment confirmed by the beneficiary bank"}`)
	tb.submit("#confirm-submit")
	tb.waitText(".flash-success", "was completed")
	tb.visit("/payments/" + stuck.PaymentID.String())
	tb.waitText("#payment-state", "COMPLETED")
	require.Contains(t, tb.text("#payment-status"), "payment confirmed by the beneficiary bank")
	require.Contains(t, tb.textContent("#payment-timeline"), "TSQ_COMPLETE", "the engineering timeline, collapsed, has the action")
}

// browserCompensateNetworkError compensates and cancels a payment whose L1 answer was a
// permanent network error, from the process TSQ: it ends CANCELLED with its submission recalled
// and its risk booking unwound.
func browserCompensateNetworkError(t *testing.T, f *consoleFixture, browser context.Context) {
	res := f.networkErrorPayment()
	tb := f.openTab(t, browser, operatorToken)
	tb.visit("/tsq/processes")
	row := fmt.Sprintf(`tr[data-id="%s"]`, res.ExecutionID)
	require.Contains(t, tb.text(row), "NETWORK_ERROR")
	require.Contains(t, tb.text(row), "250.50 GBP")
	tb.submit(row + ` a[href$="/compensate"]`)
	require.Contains(t, tb.text("h1"), "Compensate and cancel process")
	tb.confirmAction("beneficiary bank cannot take it; customer informed")
	if tb.count("#form-error") > 0 {
		t.Fatalf("compensate and cancel was refused: %q; the execution is %s in the database",
			tb.text("#form-error"), f.execution(res.ExecutionID).Status)
	}
	tb.waitText(".flash-success", "Process")
	f.requireCompensated(res.ExecutionID, map[string]string{"submitPayment": "RecallPayment", "bookRisk": "UnwindRisk"})
	tb.visit("/payments/" + res.PaymentID.String())
	tb.waitText("#payment-state", "CANCELLED")
	audit := f.audit("execution", res.ExecutionID)
	require.Equal(t, "TSQ_CANCEL", audit[0].Action)
	require.Equal(t, "beneficiary bank cannot take it; customer informed", audit[0].Reason)
}

// browserBulkRetry ticks two parked commands, retries them with one reason, and reads the
// summary; both payments complete and each command's audit has the action.
func browserBulkRetry(t *testing.T, f *consoleFixture, browser context.Context) {
	pays, cmds := f.parkRiskCommands(2)
	tb := f.openTab(t, browser, operatorToken)
	tb.visit("/tsq/commands")
	all := tb.count(`input[name="id"]`)
	require.GreaterOrEqual(t, all, 2)
	tb.do("ticking every row", chromedp.Click(chromedp.CSS("input.select-all")))
	require.Equal(t, all, tb.count(`input[name="id"]:checked`), "the box in the header ticks every row")
	tb.do("unticking every row", chromedp.Click(chromedp.CSS("input.select-all")))
	require.Zero(t, tb.count(`input[name="id"]:checked`))
	for _, c := range cmds {
		tb.do("ticking a row", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-id="%s"] input[name="id"]`, c.ID))))
	}
	tb.submit("#bulk-retry")
	require.Contains(t, tb.text("h1"), "Retry 2 commands")
	require.Equal(t, 2, tb.count("#bulk-items tbody tr"))
	tb.confirmAction("risk engine back after the outage")
	require.Contains(t, tb.text("#bulk-summary"), "2 commands retried, 0 refused")
	for i, c := range cmds {
		f.WaitPayment(pays[i].PaymentID, "COMPLETED")
		audit := f.audit("command", c.ID)
		require.Equal(t, "TSQ_RETRY", audit[0].Action)
		require.Equal(t, "alice@ops", audit[0].Actor)
		require.Equal(t, "risk engine back after the outage", audit[0].Reason)
	}
}

// browserSearch searches from the header by idempotency key, execution id, command id and
// account, and for something that does not exist.
func browserSearch(t *testing.T, f *consoleFixture, browser context.Context) {
	parked, cmd := f.ParkRiskCommand()
	v, err := f.Platform.GetPayment(context.Background(), parked.PaymentID)
	require.NoError(t, err)
	tb := f.openTab(t, browser, operatorToken)
	search := func(q string) {
		t.Helper()
		tb.visit("/")
		tb.fill("#site-search", q)
		tb.submit(".site-search button")
	}
	for _, q := range []string{v.IdempotencyKey, parked.ExecutionID.String(), parked.PaymentID.String()} {
		search(q)
		require.Contains(t, tb.text("h1"), "Payment "+shortID(parked.PaymentID), q)
		require.Contains(t, tb.text("#payment-why"), "Waiting on parked command BookRisk: EXTERNAL_PERMANENT_FAILURE")
	}
	search(cmd.ID.String())
	require.Contains(t, tb.text("h1"), "Command BookRisk")
	search("cust-gbp-001")
	require.Contains(t, tb.text("#account-title"), "Account CUST-GBP-001")
	require.Equal(t, 1, tb.count(fmt.Sprintf(`tr[data-id="%s"]`, parked.PaymentID)))
	search("PAY-does-not-exist")
	require.Contains(t, tb.text("#search-nothing"), "Nothing found for “PAY-does-not-exist”.")
	// Leave nothing parked for the next scenario.
	_, err = f.Client.TSQ().Retry(context.Background(), cmd.ID, commandbus.OperatorAction{Actor: "test", Reason: "clean up"})
	require.NoError(t, err)
	f.WaitPayment(parked.PaymentID, "COMPLETED")
}

// browserDLQ goes from the overview's DLQ card to the dead-letter page and resubmits a command.
func browserDLQ(t *testing.T, f *consoleFixture, browser context.Context) {
	parked, cmd := f.ParkRiskCommand()
	entry, err := f.Client.DLQ().Get(context.Background(), cmd.ID)
	require.NoError(t, err)
	tb := f.openTab(t, browser, operatorToken)
	tb.visit("/")
	tb.submit("#dlq-link")
	require.Contains(t, tb.text("h1"), "Dead-letter queue")
	row := fmt.Sprintf(`tr[data-id="%s"]`, cmd.ID)
	text := tb.text(row)
	for _, want := range []string{"BookRisk", entry.ParkedBy, "EXTERNAL_PERMANENT_FAILURE", "250.50 GBP"} {
		require.Contains(t, text, want)
	}
	tb.submit(row + ` a[href$="/resubmit"]`)
	require.Contains(t, tb.text("h1"), "Resubmit command")
	tb.confirmAction("risk engine fixed")
	tb.waitText(".flash-success", "resubmitted")
	require.Zero(t, tb.count(row))
	_, err = f.Client.DLQ().Get(context.Background(), cmd.ID)
	require.ErrorIs(t, err, commandbus.ErrNotFound, "the dead-letter record is gone")
	require.Equal(t, "DLQ_RESUBMIT", f.audit("command", cmd.ID)[0].Action)
	f.WaitPayment(parked.PaymentID, "COMPLETED")
}

// browserErrorColumn checks at a 1366 px wide window that every table with an Error column
// shows it without scrolling, and that no page scrolls sideways.
func browserErrorColumn(t *testing.T, f *consoleFixture, browser context.Context) {
	f.ParkManagerPayment()
	parked, _ := f.ParkRiskCommand()
	tb := f.openTab(t, browser, operatorToken)
	tb.viewport(1366, 900)
	for _, path := range []string{"/tsq/commands", "/tsq/processes", "/dlq", "/payments", "/payments?status=IN_TSQ",
		"/search?q=CUST-GBP-001", "/tsq/commands/bulk?action=retry&all=1", "/payments/" + parked.PaymentID.String()} {
		tb.visit(path)
		problems, err := chromedp.Run(tb.ctx, chromedp.Evaluate[[]string](`(function(){
			var out = [], width = document.documentElement.clientWidth, seen = 0;
			if (document.documentElement.scrollWidth > width) { out.push('the page scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + width); }
			document.querySelectorAll('main table th').forEach(function(th){
				if (th.textContent.trim() !== 'Error') { return; }
				seen++;
				var r = th.getBoundingClientRect();
				if (r.width === 0 || r.left < 0 || r.right > width) { out.push('Error column at ' + Math.round(r.left) + '–' + Math.round(r.right) + ' of ' + width); }
			});
			if (!seen) { out.push('no Error column'); }
			return out;
		})()`))
		require.NoError(t, err)
		require.Empty(t, problems, path)
	}
}

// submitNoValidate submits a form past the browser's own validation, to see the server's.
func (tb *tab) submitNoValidate(sel string) int64 {
	tb.t.Helper()
	tb.do("turning off browser validation", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("form").forEach(function(f){ f.noValidate = true; })`))
	return tb.submit(sel)
}

func browserApproval(t *testing.T, f *consoleFixture, browser context.Context) {
	big := f.Submit(servertest.BigPayment())
	f.WaitApproval(big.PaymentID)
	tb := f.openTab(t, browser, operatorToken)
	tb.visit("/approvals")
	row := fmt.Sprintf(`tr[data-payment="%s"]`, big.PaymentID)
	require.Contains(t, tb.text(row), "75,000.00 USD")
	require.Contains(t, tb.text(row), "CUST-USD-001 → BENE-USD-001")
	tb.submit(row + ` a[href$="/approve"]`)
	require.Contains(t, tb.text("h1"), "Approve payment")
	tb.confirmAction("customer called; verified")
	tb.waitText(".flash-success", "approved")
	require.Zero(t, tb.count(row))
	tb.visit("/payments/" + big.PaymentID.String())
	tb.waitText("#payment-state", "COMPLETED")
	require.Contains(t, tb.text("main"), "RISK_APPROVED")
}

func browserNetwork(t *testing.T, f *consoleFixture, browser context.Context) {
	res := f.Submit(servertest.PendingL2Payment())
	var pending *payments.PendingNetworkResponse
	servertest.Eventually(t, 30*time.Second, "L2 to be pending", func() bool {
		list, err := f.Platform.ListPendingNetworkResponses(context.Background(), payments.ListParams{})
		require.NoError(t, err)
		for _, n := range list {
			if n.PaymentID == res.PaymentID {
				pending = n
			}
		}
		return pending != nil
	})
	tb := f.openTab(t, browser, operatorToken)
	tb.visit("/network")
	row := fmt.Sprintf(`tr[data-id="%s"]`, pending.ID)
	require.Contains(t, tb.text(row), "L2")
	tb.submit(row + ` a[href$="/accept"]`)
	require.Contains(t, tb.text("h1"), "Answer success to L2")
	tb.confirmAction("network ops confirmed receipt")
	tb.waitText(".flash-success", "Answered success")
	tb.visit("/payments/" + res.PaymentID.String())
	tb.waitText("#payment-state", "COMPLETED")
}

func browserViewer(t *testing.T, f *consoleFixture, browser context.Context) {
	_, cmd := f.ParkRiskCommand()
	big := f.Submit(servertest.BigPayment())
	f.WaitApproval(big.PaymentID)
	tb := f.openTab(t, browser, viewerToken)
	tb.visit("/tsq/commands")
	row := fmt.Sprintf(`tr[data-id="%s"]`, cmd.ID)
	require.Contains(t, tb.text(row), "BookRisk")
	require.Zero(t, tb.count(`main a[href*="/retry"], main a[href*="/cancel"], main a[href*="/complete"]`), "no action buttons")
	require.Contains(t, tb.text("#viewer-notice"), "viewer role")
	tb.visit("/approvals")
	require.Zero(t, tb.count(`main a[href*="/approve"], main a[href*="/reject"]`))
	tb.visit("/batches")
	require.Zero(t, tb.count("#new-batch"))

	// A direct POST from the page, with the session's own CSRF token: refused all the same.
	status, err := chromedp.Run(tb.ctx, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%s, {method: "POST", credentials: "same-origin",
		body: new URLSearchParams({csrf: document.querySelector('input[name=csrf]').value, reason: "I am only a viewer"})}).then(function(r){ return r.status; })`,
		jsString("/tsq/commands/"+cmd.ID.String()+"/retry")), chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.Equal(t, 403, status)
	tb.visit("/tsq/commands/" + cmd.ID.String() + "/retry")
	require.Contains(t, tb.text("h1"), "Operators only")
	row2, err := f.Client.GetCommand(context.Background(), cmd.ID)
	require.NoError(t, err)
	require.Equal(t, commandbus.StatusInTSQ, row2.Status, "nothing changed")
}

// browserScreenshots saves a screenshot of every page, with something on each, for the record,
// at the width of a common laptop screen (1366 px).
func browserScreenshots(t *testing.T, f *consoleFixture, browser context.Context) {
	ctx := context.Background()
	stuck := f.ParkManagerPayment()
	parked, cmd := f.ParkRiskCommand()
	big := f.Submit(servertest.BigPayment())
	f.WaitApproval(big.PaymentID)
	pending := f.Submit(servertest.PendingL2Payment())
	servertest.Eventually(t, 30*time.Second, "L2 to be pending", func() bool {
		list, err := f.Platform.ListPendingNetworkResponses(ctx, payments.ListParams{})
		require.NoError(t, err)
		return len(list) > 0
	})
	jpy := f.Submit(payments.PaymentRequest{DebitAccount: "CUST-JPY-001", CreditAccount: "BENE-JPY-002", Amount: "1082325",
		Currency: "JPY", ProcessType: payments.TypePaymentStep})
	f.WaitPayment(jpy.PaymentID, "COMPLETED")
	batch, err := f.Platform.CreateBatch(ctx, 3, servertest.Today, payments.TypePaymentStep,
		&payments.Behavior{Name: "pending L2", Steps: map[string]payments.StepBehavior{payments.StepAwaitL2: {PendingPct: 100}}})
	require.NoError(t, err)
	servertest.Eventually(t, 30*time.Second, "the batch to wait for operators", func() bool {
		b, err := f.Platform.GetBatch(ctx, batch.ID)
		require.NoError(t, err)
		return b.Counts.Waiting == 3
	})

	dir := artifactsDir(t)
	shoot := func(tb *tab, name, path string) {
		t.Helper()
		if path != "" {
			tb.visit(path)
		}
		tb.checkAccessibility(name)
		buf, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		file := filepath.Join(dir, "console-"+name+".png")
		require.NoError(t, os.WriteFile(file, buf, 0o644))
		t.Logf("%s: %s", name, file)
	}
	anon := f.openTab(t, browser, "")
	anon.viewport(1366, 900)
	shoot(anon, "login", "/login")

	tb := f.openTab(t, browser, operatorToken)
	tb.viewport(1366, 900)
	servertest.Eventually(t, 10*time.Second, "a few samples for the charts", func() bool { return console.ExportSampleCount(f.Server.Console()) >= 5 })
	shoot(tb, "overview", "/")
	shoot(tb, "batches", "/batches")
	shoot(tb, "batch", "/batches/"+batch.ID.String())
	shoot(tb, "batch-new", "/batches/new")
	tb.set("#field-count", "250")
	tb.set("#field-preset", payments.PresetRealistic)
	tb.submit("#batch-continue")
	shoot(tb, "batch-confirm", "")
	shoot(tb, "payments", "/payments")
	shoot(tb, "payment-completed", "/payments/"+jpy.PaymentID.String())
	shoot(tb, "payment-in-tsq", "/payments/"+stuck.PaymentID.String())
	shoot(tb, "payment-parked-command", "/payments/"+parked.PaymentID.String())
	shoot(tb, "process-parked-command", "/processes/"+parked.ExecutionID.String())
	shoot(tb, "payment-waiting-approval", "/payments/"+big.PaymentID.String())
	shoot(tb, "tsq-commands", "/tsq/commands")
	shoot(tb, "tsq-processes", "/tsq/processes")
	shoot(tb, "dlq", "/dlq")
	shoot(tb, "dlq-resubmit", "/dlq/"+cmd.ID.String()+"/resubmit")
	shoot(tb, "bulk-confirm", "/tsq/commands/bulk?action=retry&all=1")
	shoot(tb, "search-account", "/search?q=CUST-GBP-001")
	shoot(tb, "search-nothing", "/search?q=no-such-thing")
	shoot(tb, "tsq-process-complete", "/tsq/processes/"+stuck.ExecutionID.String()+"/complete")
	tb.fill("#field-stateOverrides", "{not json")
	tb.confirmAction("checked with the bank")
	shoot(tb, "tsq-process-complete-error", "")
	shoot(tb, "command", "/commands/"+cmd.ID.String())
	shoot(tb, "approvals", "/approvals")
	shoot(tb, "approval-confirm", "/approvals/"+firstApproval(t, f).String()+"/approve")
	shoot(tb, "network", "/network")
	shoot(tb, "payment-pending-network", "/payments/"+pending.PaymentID.String())

	viewer := f.openTab(t, browser, viewerToken)
	viewer.viewport(1366, 900)
	shoot(viewer, "viewer-tsq-commands", "/tsq/commands")
}

// viewport sets the tab's window size, as a screen of that size shows the pages.
func (tb *tab) viewport(width, height int64) {
	tb.t.Helper()
	tb.do("setting the viewport", chromedp.EmulateViewport(width, height))
}

// checkAccessibility checks what a machine can: every field has a label, ids are unique, the
// page has one h1, a skip link to main, and every table has header cells.
func (tb *tab) checkAccessibility(Page string) {
	tb.t.Helper()
	problems, err := chromedp.Run(tb.ctx, chromedp.Evaluate[[]string](`(function(){
		var out = [];
		document.querySelectorAll('input:not([type=hidden]), select, textarea').forEach(function(e){
			if (e.closest('[aria-hidden=true]') || e.getAttribute('aria-hidden') === 'true') { return; }
			if (!e.labels.length && !e.getAttribute('aria-label')) { out.push('no label: ' + (e.id || e.name)); }
		});
		var seen = {};
		document.querySelectorAll('[id]').forEach(function(e){
			if (seen[e.id]) { out.push('duplicate id: ' + e.id); }
			seen[e.id] = true;
		});
		document.querySelectorAll('[aria-describedby]').forEach(function(e){
			e.getAttribute('aria-describedby').split(/\s+/).filter(Boolean).forEach(function(id){
				if (!document.getElementById(id)) { out.push('aria-describedby names no element: ' + id); }
			});
		});
		if (document.querySelectorAll('h1').length !== 1) { out.push('not exactly one h1'); }
		if (!document.querySelector('a.skip-link[href="#main"]') || !document.getElementById('main')) { out.push('no skip link to main'); }
		document.querySelectorAll('table').forEach(function(t){ if (!t.querySelector('th')) { out.push('a table without header cells'); } });
		if (!document.documentElement.lang) { out.push('no lang'); }
		return out;
	})()`))
	require.NoError(tb.t, err)
	require.Empty(tb.t, problems, "accessibility of %s", Page)
}

func firstApproval(t *testing.T, f *consoleFixture) uuid.UUID {
	list, err := f.Platform.ListApprovals(context.Background(), payments.ApprovalFilter{Status: payments.ApprovalPending, Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, list)
	return list[0].ID
}
