package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/server/console"
)

// replica serves a console of its own (its own client, no memory shared with another replica)
// over the database of drv.
func replica(t *testing.T, drv driver.Driver, opts console.Options) *httptest.Server {
	t.Helper()
	client, err := commandbus.NewClient(drv, &commandbus.Config{MetricsRegisterer: prometheus.NewRegistry()})
	require.NoError(t, err)
	opts.Client, opts.Gatherer = client, prometheus.NewRegistry()
	c, err := console.New(opts)
	require.NoError(t, err)
	mux := http.NewServeMux()
	c.Register(mux)
	require.NoError(t, c.Start())
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs
}

func browserless(t *testing.T, base string) *servertest.Browserless {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &servertest.Browserless{T: t, Base: base, Client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// withSession is b's request for path on another replica, with the session cookie id.
func getWithSession(t *testing.T, base, path, id string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: "commandbus_session", Value: id})
	return browserless(t, base).Do(req)
}

func sessionCookie(t *testing.T, b *servertest.Browserless) string {
	t.Helper()
	u, err := url.Parse(b.Base)
	require.NoError(t, err)
	for _, ck := range b.Client.Jar.Cookies(u) {
		if ck.Name == "commandbus_session" {
			return ck.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}

// A console session is a row in the database: the cookie holds an opaque id (never the token),
// any replica accepts it and the forms one replica renders, and signing out on one replica
// revokes it on all. A token removed from a replica's configuration ends its sessions there.
func TestConsoleSessionsAreServerSideAcrossReplicas(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		a := replica(t, drv, console.Options{Tokens: testTokens})
		b := replica(t, drv, console.Options{Tokens: testTokens})
		onlyViewer := replica(t, drv, console.Options{Tokens: testTokens[1:]})

		op := browserless(t, a.URL)
		op.Login(operatorToken)
		id := sessionCookie(t, op)
		require.NotEqual(t, operatorToken, id, "the cookie does not hold the token")
		require.GreaterOrEqual(t, len(id), 43, "32 random bytes")
		sum := sha256.Sum256([]byte(id))
		row, err := drv.Executor().ConsoleSessionGet(context.Background(), &driver.ConsoleSessionGetParams{IDHash: hex.EncodeToString(sum[:]), Now: time.Now()})
		require.NoError(t, err, "the session is stored by the hash of its id")
		require.Equal(t, "alice@ops", row.Subject)
		require.WithinDuration(t, time.Now().Add(12*time.Hour), row.ExpiresAt, time.Minute)

		resp, body := getWithSession(t, b.URL, "/", id)
		require.Equal(t, http.StatusOK, resp.StatusCode, "replica b knows the session")
		require.Contains(t, body, "alice@ops")
		csrfFromB := servertest.CSRFOf(t, body)
		resp, _ = getWithSession(t, onlyViewer.URL, "/", id)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "a replica without the operator's token refuses the session")

		// Sign out on replica a with the form replica b rendered.
		resp, _ = op.Post("/logout", url.Values{"csrf": {csrfFromB}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/login", resp.Header.Get("Location"))
		_, err = drv.Executor().ConsoleSessionGet(context.Background(), &driver.ConsoleSessionGetParams{IDHash: hex.EncodeToString(sum[:]), Now: time.Now()})
		require.ErrorIs(t, err, driver.ErrNotFound, "signing out deleted the session")
		for _, base := range []string{a.URL, b.URL} {
			resp, _ = getWithSession(t, base, "/", id)
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, "a kept cookie is refused after sign-out on %s", base)
		}
	})
}

// Cookies are Secure over HTTPS: a TLS-terminating proxy says so with X-Forwarded-Proto, which is
// believed only from a trusted proxy's address; SecureCookies makes them Secure always.
func TestConsoleCookiesSecureBehindATrustedProxy(t *testing.T) {
	t.Parallel()
	drv := dbtest.SQLite(t)
	loginCookieSecure := func(base string, forwarded bool) bool {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+"/login", nil)
		require.NoError(t, err)
		if forwarded {
			req.Header.Set("X-Forwarded-Proto", "https")
		}
		resp, _ := browserless(t, base).Do(req)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		for _, ck := range resp.Cookies() {
			if ck.Name == "commandbus_login" {
				return ck.Secure
			}
		}
		t.Fatal("the sign-in page set no cookie")
		return false
	}
	trusted := replica(t, drv, console.Options{Tokens: testTokens, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	untrusted := replica(t, drv, console.Options{Tokens: testTokens, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	always := replica(t, drv, console.Options{Tokens: testTokens, SecureCookies: true})
	require.True(t, loginCookieSecure(trusted.URL, true), "HTTPS as the trusted proxy says")
	require.False(t, loginCookieSecure(trusted.URL, false), "plain HTTP")
	require.False(t, loginCookieSecure(untrusted.URL, true), "X-Forwarded-Proto from an untrusted address is ignored")
	require.True(t, loginCookieSecure(always.URL, false))

	op := browserless(t, trusted.URL)
	_, body := op.Get("/login")
	resp, _ := op.Post("/login", url.Values{"csrf": {servertest.CSRFOf(t, body)}, "token": {operatorToken}}, "X-Forwarded-Proto", "https")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "commandbus_session" {
			session = ck
		}
	}
	require.NotNil(t, session)
	require.True(t, session.Secure)
	require.True(t, session.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, session.SameSite)
}
