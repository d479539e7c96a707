package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	. "github.com/commandbus/commandbus/server"
)

const (
	operatorToken = "operator-token-0123456789"
	viewerToken   = "viewer-token-0123456789ab"
)

var testTokens = []Token{
	{Subject: "alice@ops", Token: operatorToken, Role: RoleOperator},
	{Subject: "victor@audit", Token: viewerToken, Role: RoleViewer},
}

type failArgs struct{}

func (failArgs) Kind() string { return "Fail" }

type fixture struct {
	Client *commandbus.Client
	HTTP   *httptest.Server
}

func setup(t *testing.T, drv driver.Driver) *fixture {
	t.Helper()
	handlers := commandbus.NewHandlers()
	commandbus.AddHandler(handlers, "fx", commandbus.HandlerFunc[failArgs](func(ctx context.Context, cmd *commandbus.Command[failArgs]) (any, error) {
		return nil, commandbus.Permanent("REJECTED", errors.New("provider rejected"))
	}))
	reg := prometheus.NewRegistry()
	client, err := commandbus.NewClient(drv, &commandbus.Config{Handlers: handlers, MetricsRegisterer: reg,
		FetchPollInterval: commandbus.Duration(20 * time.Millisecond)})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() { _ = client.Stop(context.Background()) })
	srv, err := New(Config{Client: client, Tokens: testTokens, Gatherer: reg})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &fixture{Client: client, HTTP: hs}
}

func (f *fixture) do(t *testing.T, method, path, token string, body any) (*http.Response, []byte) {
	t.Helper()
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		reader = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, f.HTTP.URL+path, reader)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, data
}

func (f *fixture) parked(t *testing.T) uuid.UUID {
	t.Helper()
	res, err := f.Client.Send(context.Background(), "fx", failArgs{}, nil)
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		row, err := f.Client.GetCommand(context.Background(), res.ID)
		require.NoError(t, err)
		if row.Status == commandbus.StatusInTSQ {
			return res.ID
		}
		require.True(t, time.Now().Before(deadline), "command never reached the TSQ")
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAuthRolesAndProblems(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		id := f.parked(t)

		resp, body := f.do(t, "GET", "/api/tsq/commands", "", nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		require.Contains(t, string(body), `"code":"UNAUTHENTICATED"`)

		resp, body = f.do(t, "GET", "/api/tsq/commands", viewerToken, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var listed struct {
			Items []map[string]any `json:"items"`
		}
		require.NoError(t, json.Unmarshal(body, &listed))
		require.Len(t, listed.Items, 1)
		// Fields are camelCase, as in the payments API.
		require.Equal(t, id.String(), listed.Items[0]["id"])
		require.Equal(t, "IN_TSQ", listed.Items[0]["status"])
		require.Contains(t, listed.Items[0], "errorCode")
		require.NotContains(t, listed.Items[0], "Status")

		resp, body = f.do(t, "POST", "/api/tsq/commands/"+id.String()+"/cancel", viewerToken, map[string]string{"reason": "no"})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "a viewer is refused an action")
		require.Contains(t, string(body), `"code":"FORBIDDEN"`)

		resp, body = f.do(t, "POST", "/api/tsq/commands/"+id.String()+"/cancel", operatorToken, map[string]string{})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a reason is required")
		var p Problem
		require.NoError(t, json.Unmarshal(body, &p))
		require.Equal(t, "VALIDATION_FAILED", p.Code)
		require.Equal(t, "reason", p.Errors[0].Field)
		row, err := f.Client.GetCommand(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, commandbus.StatusInTSQ, row.Status, "a refused action changes nothing")

		resp, _ = f.do(t, "POST", "/api/tsq/commands/"+id.String()+"/cancel", operatorToken, map[string]string{"reason": "customer withdrew"})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		row, err = f.Client.GetCommand(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, commandbus.StatusCancelled, row.Status)
		last := row.Audit[len(row.Audit)-1]
		require.Equal(t, "alice@ops", last.Actor, "audited with the token's subject")
		require.Equal(t, "customer withdrew", last.Reason)

		resp, body = f.do(t, "POST", "/api/tsq/commands/"+id.String()+"/retry", operatorToken, map[string]string{"reason": "again"})
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Contains(t, string(body), `"code":"INVALID_STATE"`)

		resp, _ = f.do(t, "GET", "/api/commands/"+uuid.NewString(), viewerToken, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		resp, _ = f.do(t, "GET", "/api/commands/not-a-uuid", viewerToken, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	})
}

func TestOperationsEndpoints(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		f.parked(t)
		resp, _ := f.do(t, "GET", "/healthz", "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		resp, _ = f.do(t, "GET", "/readyz", "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		resp, body := f.do(t, "GET", "/metrics", viewerToken, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, string(body), "commandbus_commands_handled_total")

		resp, body = f.do(t, "GET", "/api/openapi.json", "", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(body, &doc))
		require.Equal(t, "3.0.3", doc["openapi"])
		paths := doc["paths"].(map[string]any)
		for _, p := range []string{"/healthz", "/readyz", "/metrics", "/api/tsq/commands", "/api/tsq/commands/{id}/retry",
			"/api/tsq/processes", "/api/tsq/processes/{id}/complete"} {
			require.Contains(t, paths, p)
		}
		require.True(t, strings.Contains(string(body), `"x-required-role": "operator"`))
		// Response schemas follow the Go types and their JSON tags.
		schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
		property := func(schema, name string) map[string]any {
			t.Helper()
			props := schemas[schema].(map[string]any)["properties"].(map[string]any)
			require.Contains(t, props, name, "schema %s", schema)
			return props[name].(map[string]any)
		}
		require.Equal(t, "uuid", property("Command", "correlationId")["format"])
		require.Equal(t, "date-time", property("Command", "createdAt")["format"])
		require.Equal(t, "array", property("Command", "audit")["type"])
		require.Equal(t, "string", property("Execution", "status")["type"], "the embedded row's fields are flattened")
		require.Equal(t, "integer", property("Execution", "log")["items"].(map[string]any)["properties"].(map[string]any)["seq"].(map[string]any)["type"])
	})
}
