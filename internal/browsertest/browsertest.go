// Package browsertest drives the operator console in a real browser for tests: headless Chromium
// (Debian's chromium package) through chromedp, and a Page with the few actions the console's
// tests need (visit, fill, click, read, wait for text, sign in).
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// Start starts headless Chromium and returns its browser context, or skips the test without a
// chromium binary unless COMMANDBUS_REQUIRE_BROWSER=1 (then it fails).
func Start(t *testing.T) context.Context {
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

// Page is one browser tab, in its own browser context (cookies), on the server at Base.
type Page struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// NewPage opens a tab of browser (from Start) in a new browser context, on the server at base,
// with a two-minute budget for everything the test does in it.
func NewPage(t *testing.T, browser context.Context, base string) *Page {
	tabCtx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tabCtx, cancelTimeout := context.WithTimeout(tabCtx, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	return &Page{t: t, ctx: tabCtx, base: base}
}

// SignIn signs in to the console with token and waits for the confirmation.
func (p *Page) SignIn(token string) {
	p.t.Helper()
	p.Visit("/login")
	p.Fill("#field-token", token)
	p.Click("button[type=submit].button-primary")
	p.WaitText(".flash-success", "Signed in as")
}

// Visit navigates to path and fails on an HTTP error status.
func (p *Page) Visit(path string) {
	p.t.Helper()
	resp, err := chromedp.RunResponse(p.ctx, chromedp.Navigate(p.base+path))
	require.NoError(p.t, err, "visiting %s", path)
	require.Less(p.t, resp.Status, int64(400), "visiting %s", path)
}

// Click clicks the element sel selects and waits for the navigation it causes, if any.
func (p *Page) Click(sel string) {
	p.t.Helper()
	_, err := chromedp.RunResponse(p.ctx, chromedp.Click(chromedp.CSS(sel)))
	require.NoError(p.t, err, "clicking %s", sel)
}

// Fill replaces the value of the input sel selects with value.
func (p *Page) Fill(sel, value string) {
	p.t.Helper()
	require.NoError(p.t, chromedp.Do(p.ctx, chromedp.WaitVisible(chromedp.CSS(sel)),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%s).value = ""`, jsString(sel))),
		chromedp.SendKeys(chromedp.CSS(sel), value)), "filling %s", sel)
}

// Text returns the text of the element sel selects.
func (p *Page) Text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(p.t, err, "reading %s", sel)
	return s
}

// Attr returns the attribute name of the element sel selects ("" when it has none).
func (p *Page) Attr(sel, name string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%s).getAttribute(%s) || ""`, jsString(sel), jsString(name))))
	require.NoError(p.t, err, "reading %s[%s]", sel, name)
	return v
}

// WaitText waits (up to a minute) until the element sel selects contains want.
func (p *Page) WaitText(sel, want string) {
	p.t.Helper()
	expr := fmt.Sprintf(`(function(){ var e = document.querySelector(%s); return !!e && e.textContent.indexOf(%s) >= 0; })()`, jsString(sel), jsString(want))
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(p.t, err, "waiting for %s to say %q", sel, want)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
