package console_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/orchestration"
	. "github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/tenant"
	"github.com/commandbus/commandbus/workflow"
)

// The console lists QUEUED executions and an operator cancels one: it ends CANCELLED, audited,
// without taking its tenant's slot.
func TestConsoleCancelsQueuedExecution(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		off := false
		client, err := commandbus.NewClient(drv, &commandbus.Config{Features: commandbus.Features{ProcessExecution: &off},
			Logger: slog.New(slog.NewTextHandler(servertest.LogWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelError}))})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{Admission: orchestration.AdmissionConfig{CapacityLimited: []string{"job"}}})
		require.NoError(t, err)
		jobs, err := workflow.Register(rt, workflow.New("job", 1).WaitSignal("wait", "go"))
		require.NoError(t, err)
		srv, err := New(Config{Client: client, Runtime: rt, Tokens: testTokens})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, srv.Close()) })
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		f := &servertest.Fixture{T: t, Client: client, Server: srv, HTTP: hs}

		tenants := tenant.New(client)
		_, err = tenants.Create(ctx, tenant.CreateRequest{ID: "acme", Tier: tenant.TierFree, Actor: "test"})
		require.NoError(t, err)
		ids := make([]uuid.UUID, 2)
		for i := range ids {
			ids[i], err = jobs.Start(ctx, map[string]int{"n": i}, workflow.WithTenant("acme"))
			require.NoError(t, err)
		}

		op := f.HTTPClient()
		op.Login(operatorToken)
		resp, body := op.Get("/executions?status=QUEUED")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, ids[1].String(), "the queued one is listed")
		require.NotContains(t, body, ids[0].String(), "the admitted one is not queued")
		csrf := servertest.CSRFOf(t, body)
		resp, body = op.Post("/executions/"+ids[1].String()+"/cancel", url.Values{"reason": {"customer withdrew"}, "csrf": {csrf}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)

		x, err := drv.Executor().ExecutionGet(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCancelled, x.Status)
		audit, err := client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: ids[1].String()})
		require.NoError(t, err)
		require.Len(t, audit, 1)
		require.Equal(t, "alice@ops", audit[0].Actor)
		got, err := tenants.Get(ctx, "acme")
		require.NoError(t, err)
		require.Equal(t, 1, got.Active)
		require.Equal(t, 0, got.Queued)
	})
}
