package console_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/server/console"
	"github.com/commandbus/commandbus/workflow"
)

// A definition's console page says which inbound event types start it.
func TestDefinitionPageShowsTriggers(t *testing.T) {
	t.Parallel()
	client, err := commandbus.NewClient(dbtest.SQLite(t), &commandbus.Config{MetricsRegisterer: prometheus.NewRegistry()})
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	_, err = workflow.Register(rt, workflow.New("settle", 1).TriggeredBy("PaymentReceived", "PaymentReturned").Step("book", noop))
	require.NoError(t, err)
	_, err = workflow.Register(rt, workflow.New("manual", 1).Step("book", noop))
	require.NoError(t, err)
	c, err := console.New(console.Options{Client: client, Runtime: rt, Tokens: testTokens, Gatherer: prometheus.NewRegistry()})
	require.NoError(t, err)
	mux := http.NewServeMux()
	c.Register(mux)
	require.NoError(t, c.Start())
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	b := &servertest.Browserless{T: t, Base: hs.URL, Client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	b.Login(viewerToken)

	resp, body := b.Get("/definitions/workflow/settle")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<dd id="triggered-by"><code>PaymentReceived</code>, <code>PaymentReturned</code>`)
	_, body = b.Get("/definitions/workflow/manual")
	require.NotContains(t, body, `id="triggered-by"`, "a definition no event starts says nothing about events")
}
