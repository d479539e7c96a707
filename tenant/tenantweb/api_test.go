package tenantweb_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/tenant"
	"github.com/commandbus/commandbus/tenant/tenantweb"
)

const (
	operatorToken = "operator-token-0123456789"
	viewerToken   = "viewer-token-0123456789ab"
)

type fixture struct {
	url  string
	exec driver.Executor
	api  *servertest.Documented
}

// setup serves the tenants extension; register, when given, adds models to the runtime (no
// runner runs them: process execution is off).
func setup(t *testing.T, drv driver.Driver, register ...func(rt *orchestration.Runtime) error) *fixture {
	t.Helper()
	off := false
	cfg := &commandbus.Config{Logger: slog.New(slog.DiscardHandler)}
	cfg.Features.ProcessExecution = &off
	client, err := commandbus.NewClient(drv, cfg)
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	for _, r := range register {
		require.NoError(t, r(rt))
	}
	srv, err := server.New(server.Config{Client: client, Runtime: rt, Extensions: []server.Extension{tenantweb.New(tenant.New(client))},
		Tokens: []server.Token{{Subject: "alice@ops", Token: operatorToken, Role: server.RoleOperator},
			{Subject: "victor@audit", Token: viewerToken, Role: server.RoleViewer}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	return &fixture{url: hs.URL, exec: drv.Executor(), api: servertest.NewDocumented(t, hs.URL)}
}

// call sends a request and checks the answer against the OpenAPI document.
func (f *fixture) call(t *testing.T, method, path string, body any, token string) (int, []byte) {
	t.Helper()
	return f.api.Call(t, method, path, body, token)
}

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(data, &v), string(data))
	return v
}

type tenantJSON struct {
	ID                string `json:"id"`
	Tier              string `json:"tier"`
	Status            string `json:"status"`
	MaxActive         int    `json:"maxActive"`
	MaxActiveOverride *int   `json:"maxActiveOverride"`
	Active            int    `json:"active"`
	Queued            int    `json:"queued"`
}

func TestTenantsAPI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		status, body := f.call(t, "POST", "/api/tenants", map[string]any{"id": "acme", "name": "Acme Ltd", "tier": "PRO"}, operatorToken)
		require.Equal(t, http.StatusCreated, status, string(body))
		created := decode[tenantJSON](t, body)
		require.Equal(t, 5, created.MaxActive)
		require.Equal(t, "active", created.Status)
		status, _ = f.call(t, "POST", "/api/tenants", map[string]any{"id": "x", "tier": "FREE"}, viewerToken)
		require.Equal(t, http.StatusForbidden, status, "a viewer cannot create")

		status, body = f.call(t, "GET", "/api/tenants", nil, viewerToken)
		require.Equal(t, http.StatusOK, status)
		require.Len(t, decode[struct{ Items []tenantJSON }](t, body).Items, 1)
		status, body = f.call(t, "GET", "/api/tenants?status=suspended", nil, viewerToken)
		require.Equal(t, http.StatusOK, status)
		require.Empty(t, decode[struct{ Items []tenantJSON }](t, body).Items)
		status, body = f.call(t, "GET", "/api/tenants/acme", nil, viewerToken)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "PRO", decode[tenantJSON](t, body).Tier)
		status, _ = f.call(t, "GET", "/api/tenants/nobody", nil, viewerToken)
		require.Equal(t, http.StatusNotFound, status)

		status, body = f.call(t, "PATCH", "/api/tenants/acme", map[string]any{"tier": "ENTERPRISE", "maxActiveOverride": 30, "reason": "upgraded plan"}, operatorToken)
		require.Equal(t, http.StatusOK, status, string(body))
		patched := decode[tenantJSON](t, body)
		require.Equal(t, "ENTERPRISE", patched.Tier)
		require.Equal(t, 30, patched.MaxActive)
		audit, err := f.exec.AuditLogList(context.Background(), &driver.AuditLogListParams{EntityType: "tenant", EntityID: "acme"})
		require.NoError(t, err)
		require.Equal(t, "TENANT_UPDATE", audit[0].Action, "newest first")
		require.Equal(t, "alice@ops", audit[0].Actor, "the token's subject")
		require.Equal(t, "upgraded plan", audit[0].Reason)
		status, _ = f.call(t, "PATCH", "/api/tenants/nobody", map[string]any{"tier": "FREE"}, operatorToken)
		require.Equal(t, http.StatusNotFound, status)
	})
}

func TestTenantsAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		status, body := f.call(t, "POST", "/api/tenants", map[string]any{"id": "acme", "tier": "PRO"}, operatorToken)
		require.Equal(t, http.StatusCreated, status, string(body))
		fieldsOf := func(data []byte) []string {
			var fields []string
			for _, e := range decode[server.Problem](t, data).Errors {
				fields = append(fields, e.Field)
			}
			return fields
		}
		for _, c := range []struct {
			name  string
			body  map[string]any
			field string
		}{
			{"UnknownTier", map[string]any{"id": "b", "tier": "GOLD"}, "tier"},
			{"NegativeLimit", map[string]any{"id": "b", "tier": "FREE", "maxActiveOverride": -1}, "maxActiveOverride"},
			{"DuplicateID", map[string]any{"id": "acme", "tier": "FREE"}, "id"},
			{"BadStatus", map[string]any{"id": "b", "tier": "FREE", "status": "gone"}, "status"},
			{"EmptyID", map[string]any{"id": "", "tier": "FREE"}, "id"},
			{"NULInID", map[string]any{"id": "b\x00c", "tier": "FREE"}, "id"},
			{"HugeID", map[string]any{"id": strings.Repeat("b", 129), "tier": "FREE"}, "id"},
		} {
			status, data := f.call(t, "POST", "/api/tenants", c.body, operatorToken)
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", c.name, data)
			require.Contains(t, fieldsOf(data), c.field, "%s: %s", c.name, data)
		}
		for name, raw := range map[string]string{
			"TrailingJSON": `{"id": "b", "tier": "FREE"}{"id": "c"}`,
			"UnknownField": `{"id": "b", "tier": "FREE", "plan": "gold"}`,
			"HugeLimit":    `{"id": "b", "tier": "FREE", "maxActiveOverride": 1e40}`,
		} {
			status, data := f.call(t, "POST", "/api/tenants", raw, operatorToken)
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", name, data)
		}
		status, data := f.call(t, "PATCH", "/api/tenants/acme", map[string]any{"tier": "GOLD", "maxActiveOverride": -3}, operatorToken)
		require.Equal(t, http.StatusBadRequest, status, string(data))
		require.ElementsMatch(t, []string{"maxActiveOverride"}, fieldsOf(data), "the limit is refused before the tier is looked up")
		status, data = f.call(t, "PATCH", "/api/tenants/acme", map[string]any{"tier": "GOLD"}, operatorToken)
		require.Equal(t, http.StatusBadRequest, status, string(data))
		require.Equal(t, []string{"tier"}, fieldsOf(data))

		status, data = f.call(t, "GET", "/api/tenants", nil, viewerToken)
		require.Equal(t, http.StatusOK, status)
		items := decode[struct{ Items []tenantJSON }](t, data).Items
		require.Len(t, items, 1, "bad input stores nothing")
		require.Equal(t, "PRO", items[0].Tier, "nor changes anything")
		require.Nil(t, items[0].MaxActiveOverride)
	})
}

// The tenants list pages by id with an opaque cursor (the plain after id still works); every
// tenant once, hasMore until the last page, and a cursor the server did not make is a 400.
func TestTenantsAPIPages(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		ids := []string{"t-a", "t-b", "t-c", "t-d", "t-e"}
		for _, id := range ids {
			status, body := f.call(t, "POST", "/api/tenants", map[string]any{"id": id, "tier": "FREE"}, operatorToken)
			require.Equal(t, http.StatusCreated, status, string(body))
		}
		type page struct {
			Items   []tenantJSON `json:"items"`
			Next    string       `json:"next"`
			HasMore bool         `json:"hasMore"`
		}
		var got []string
		path := "/api/tenants?limit=2"
		for pages := 0; ; pages++ {
			require.Less(t, pages, 3, "five tenants take three pages of two")
			status, body := f.call(t, "GET", path, nil, viewerToken)
			require.Equal(t, http.StatusOK, status, string(body))
			p := decode[page](t, body)
			for _, x := range p.Items {
				got = append(got, x.ID)
			}
			if !p.HasMore {
				require.Empty(t, p.Next, "no cursor on the last page")
				break
			}
			path = "/api/tenants?limit=2&cursor=" + p.Next
		}
		require.Equal(t, ids, got, "every tenant once, by id")

		status, body := f.call(t, "GET", "/api/tenants?after=t-c", nil, viewerToken)
		require.Equal(t, http.StatusOK, status, string(body))
		p := decode[page](t, body)
		require.Len(t, p.Items, 2)
		require.Equal(t, "t-d", p.Items[0].ID)
		require.False(t, p.HasMore)

		status, body = f.call(t, "GET", "/api/tenants?cursor=not-ours", nil, viewerToken)
		require.Equal(t, http.StatusBadRequest, status, string(body))
		require.Contains(t, string(body), "cursor")
	})
}
