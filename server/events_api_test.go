package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	. "github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/workflow"
)

// An inbound event posted to /api/events starts the workflow its type triggers once; a
// redelivery, an unknown type and a malformed event get the documented answers, on both drivers.
func TestReceiveEventAPI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		reg := prometheus.NewRegistry()
		client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler), MetricsRegisterer: reg})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
		_, err = workflow.Register(rt, workflow.New("open-account", 1).TriggeredBy("CustomerOnboarded").Step("open", noop))
		require.NoError(t, err)
		srv, err := New(Config{Client: client, Runtime: rt, Tokens: testTokens, Gatherer: reg})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, srv.Close()) })
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		doc := loadAPIDoc(t, hs.URL)
		post := func(body string, token string) (*exchange, map[string]any) {
			x := send(t, "POST", hs.URL+"/api/events", []byte(body), bearer(token))
			require.True(t, doc.checkResponse(t, x), "the route is documented")
			var answer map[string]any
			require.NoError(t, json.Unmarshal(x.respBody, &answer), "%s", x.respBody)
			return x, answer
		}
		def := send(t, "GET", hs.URL+"/api/definitions/workflow/open-account", nil, bearer(viewerToken))
		require.True(t, doc.checkResponse(t, def))
		var described orchestration.Definition
		require.NoError(t, json.Unmarshal(def.respBody, &described))
		require.Equal(t, []string{"CustomerOnboarded"}, described.TriggeredBy, "a definition says which events start it")

		event := `{"specversion":"1.0","id":"onb-1","type":"CustomerOnboarded","source":"crm","data":{"customer":"C-1"}}`
		want := orchestration.TriggeredExecutionID("crm", "onb-1", workflow.Model, "open-account").String()

		x, answer := post(event, operatorToken)
		doc.checkRequest(t, x)
		require.Equal(t, http.StatusAccepted, x.resp.StatusCode, "%s", x.respBody)
		require.Equal(t, "started", answer["outcome"])
		require.Equal(t, want, answer["executions"].([]any)[0].(map[string]any)["id"])

		x, answer = post(event, operatorToken)
		require.Equal(t, http.StatusAccepted, x.resp.StatusCode)
		require.Equal(t, "duplicate", answer["outcome"], "a redelivered event starts nothing new")
		require.Equal(t, want, answer["executions"].([]any)[0].(map[string]any)["id"])
		rows, err := drv.Executor().ExecutionList(ctx, &driver.ExecutionListParams{Type: "open-account", Limit: 10})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, want, rows[0].ID.String())

		x, answer = post(`{"id":"u-1","type":"NobodyListens","source":"crm"}`, operatorToken)
		require.Equal(t, http.StatusAccepted, x.resp.StatusCode, "an unknown type is acknowledged")
		require.Equal(t, "unknown", answer["outcome"])
		require.Empty(t, answer["executions"])

		x, answer = post(`{"id":"","type":"CustomerOnboarded","time":"soon"}`, operatorToken)
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, "application/problem+json", x.resp.Header.Get("Content-Type"))
		require.Equal(t, "VALIDATION_FAILED", answer["code"])
		var fields []string
		for _, e := range answer["errors"].([]any) {
			fields = append(fields, e.(map[string]any)["field"].(string))
		}
		require.Equal(t, []string{"id", "source", "time"}, fields, "each bad field is named")

		x, _ = post(event, viewerToken)
		require.Equal(t, http.StatusForbidden, x.resp.StatusCode, "starting executions takes an operator token")

		metrics := send(t, "GET", hs.URL+"/metrics", nil, bearer(viewerToken))
		for _, line := range []string{
			`commandbus_inbound_events_total{outcome="started",transport="http"} 1`,
			`commandbus_inbound_events_total{outcome="duplicate",transport="http"} 1`,
			`commandbus_inbound_events_total{outcome="unknown",transport="http"} 1`,
			`commandbus_inbound_events_total{outcome="malformed",transport="http"} 1`,
		} {
			require.True(t, strings.Contains(string(metrics.respBody), line), "/metrics has %s", line)
		}
		rows, err = drv.Executor().ExecutionList(ctx, &driver.ExecutionListParams{Limit: 10})
		require.NoError(t, err)
		require.Len(t, rows, 1, "only the first event started anything")
	})
}
