package tenantweb_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

// REST: an operator cancels a QUEUED execution with POST /api/executions/{id}/cancel; it ends
// CANCELLED, audited with the token's subject, and its tenant's slots are untouched. Completing
// a queued execution answers 409 INVALID_STATE, not BUSY.
func TestCancelQueuedExecutionOverREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		var jobs *workflow.Manager
		f := setup(t, drv, func(rt *orchestration.Runtime) error {
			if err := rt.LimitCapacity("job"); err != nil {
				return err
			}
			var err error
			jobs, err = workflow.Register(rt, workflow.New("job", 1).WaitSignal("wait", "go"))
			return err
		})
		status, body := f.call(t, "POST", "/api/tenants", map[string]any{"id": "acme", "tier": "FREE"}, operatorToken)
		require.Equal(t, http.StatusCreated, status, string(body))
		ids := make([]uuid.UUID, 2)
		for i := range ids {
			var err error
			ids[i], err = jobs.Start(ctx, map[string]int{"n": i}, workflow.WithTenant("acme"))
			require.NoError(t, err)
		}
		queued, err := f.exec.ExecutionGet(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionQueued, queued.Status, "FREE: the first holds the only slot")

		status, body = f.call(t, "POST", "/api/executions/"+ids[1].String()+"/complete", map[string]any{"reason": "done by hand"}, operatorToken)
		require.Equal(t, http.StatusConflict, status)
		require.Contains(t, string(body), "INVALID_STATE")
		require.Contains(t, string(body), "QUEUED")

		status, body = f.call(t, "POST", "/api/executions/"+ids[1].String()+"/cancel", map[string]any{"reason": "customer withdrew"}, operatorToken)
		require.Equal(t, http.StatusOK, status, string(body))
		x, err := f.exec.ExecutionGet(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCancelled, x.Status)
		require.Equal(t, commandbus.CodeCancelled, x.ErrorCode)
		audit, err := f.exec.AuditLogList(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: ids[1].String()})
		require.NoError(t, err)
		require.Len(t, audit, 1)
		require.Equal(t, "alice@ops", audit[0].Actor)
		require.Equal(t, "customer withdrew", audit[0].Reason)

		status, body = f.call(t, "GET", "/api/tenants/acme", nil, viewerToken)
		require.Equal(t, http.StatusOK, status)
		acme := decode[tenantJSON](t, body)
		require.Equal(t, 1, acme.Active, "the cancelled one never took a slot")
		require.Equal(t, 0, acme.Queued)
	})
}
