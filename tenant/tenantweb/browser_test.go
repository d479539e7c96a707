package tenantweb_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/browsertest"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/tenant"
	"github.com/commandbus/commandbus/tenant/tenantweb"
	"github.com/commandbus/commandbus/workflow"
)

// The console's Tenants page shows a FREE tenant at its limit with executions queued; an
// operator raises its tier in a real browser, the queued executions start and the change is
// audited, on both drivers.
func TestTenantsPageInBrowser(t *testing.T) {
	t.Parallel()
	browser := browsertest.Start(t)
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

		p := browsertest.NewPage(t, browser, hs.URL)
		p.SignIn(operatorToken)

		p.Visit("/tenants")
		row := `tr[data-id="acme"]`
		require.Contains(t, p.Text(`nav`), "Tenants")
		require.Contains(t, p.Text(row+" .tier"), "FREE")
		require.Equal(t, "1 / 1", strings.TrimSpace(p.Text(row+" .usage-text")), "active against the limit")
		require.Equal(t, "1", p.Attr(row+" meter", "value"), "the bar")
		require.Equal(t, "2", strings.TrimSpace(p.Text(row+" .queued")))
		require.Regexp(t, `^\d+s$`, strings.TrimSpace(p.Text(row+" .oldest")), "the oldest queued execution's age")

		p.Click(row + ` a[href$="/edit"]`)
		require.Contains(t, p.Text("h1"), "Change tenant acme")
		p.Fill("#field-tier", "PRO")
		p.Fill("#field-reason", "upgraded to PRO")
		p.Click("#confirm-submit")
		p.WaitText(".flash-success", "changed")

		got, err := tenants.Get(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, tenant.TierPro, got.Tier, "changed in the database")
		require.Equal(t, 3, got.Active, "the queued executions were admitted at once")
		audit, err := drv.Executor().AuditLogList(ctx, &driver.AuditLogListParams{EntityType: "tenant", EntityID: "acme"})
		require.NoError(t, err)
		require.Equal(t, "TENANT_UPDATE", audit[0].Action)
		require.Equal(t, "alice@ops", audit[0].Actor)
		require.Equal(t, "upgraded to PRO", audit[0].Reason)
		p.Visit("/tenants")
		require.Equal(t, "3 / 5", strings.TrimSpace(p.Text(row+" .usage-text")))
		require.Equal(t, "0", strings.TrimSpace(p.Text(row+" .queued")))
		require.False(t, strings.Contains(p.Text("body"), "Internal"), "no error page")
	})
}
