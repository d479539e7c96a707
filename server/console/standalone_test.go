package console_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/server/console"
)

// The console serves on its own mux, without the server: an operator signs in with a token and
// reads the overview, and an unknown page is the console's page-not-found.
func TestConsoleWithoutServer(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		client, err := commandbus.NewClient(drv, &commandbus.Config{MetricsRegisterer: prometheus.NewRegistry()})
		require.NoError(t, err)
		c, err := console.New(console.Options{Client: client, Tokens: testTokens, Gatherer: prometheus.NewRegistry()})
		require.NoError(t, err)
		mux := http.NewServeMux()
		c.Register(mux)
		require.NoError(t, c.Start())
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		require.ErrorContains(t, c.Start(), "Start called twice")
		hs := httptest.NewServer(mux)
		t.Cleanup(hs.Close)

		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		b := &servertest.Browserless{T: t, Base: hs.URL, Client: &http.Client{Jar: jar,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		resp, _ := b.Get("/")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "nobody is signed in yet")
		b.Login(operatorToken)
		resp, body := b.Get("/")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, "alice@ops")
		resp, body = b.Get("/no-such-page")
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Contains(t, body, "There is no console page at /no-such-page.")

		resp, err = http.Get(hs.URL + "/api/anything")
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.ReadAll(resp.Body)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	})
}

// New refuses what it cannot work with and names it.
func TestConsoleNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	_, err := console.New(console.Options{})
	require.ErrorContains(t, err, "Client is required")

	client, err := commandbus.NewClient(dbtest.SQLite(t), nil)
	require.NoError(t, err)
	_, err = console.New(console.Options{Client: client, Tokens: []console.Token{{Subject: "x", Token: "short", Role: "viewer"}}})
	require.ErrorContains(t, err, "token 0 (x) needs a secret of at least 16 characters or its SHA256")
	_, err = console.New(console.Options{Client: client, Hooks: []console.Hooks{nil}})
	require.ErrorContains(t, err, "Hooks[0] is nil")
}
