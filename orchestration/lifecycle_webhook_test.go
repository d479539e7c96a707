package orchestration_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/workflow"
)

// An HTTP callback is a signed webhook delivered through the outbox: the endpoint fails, the
// delivery is retried with backoff, and the callback arrives once the endpoint recovers.
func TestWebhookCallbackRetriesUntilTheEndpointRecovers(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		var mu sync.Mutex
		failures, attempts := 2, 0
		var got []orchestration.LifecycleEvent
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if err := outbox.VerifyWebhook("cb-secret", r.Header, body, time.Now(), time.Minute); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			attempts++
			if failures > 0 {
				failures--
				http.Error(w, "restarting", http.StatusBadGateway)
				return
			}
			var ev orchestration.LifecycleEvent
			if err := json.Unmarshal(body, &ev); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			got = append(got, ev)
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(srv.Close)

		client := fastClient(t, drv)
		rt, err := orchestration.New(client, orchestration.Config{Webhooks: &outbox.WebhookConfig{
			Endpoints: map[string]outbox.WebhookEndpoint{"ops-hooks": {URL: srv.URL, Secret: "cb-secret", Timeout: 5 * time.Second}}}})
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		m, err := workflow.Register(rt, workflow.New("hooked", 1).Step("a", noop).Step("b", noop, workflow.DependsOn("a")))
		require.NoError(t, err)
		require.NoError(t, rt.AddCallbacks(workflow.Model, "hooked", orchestration.Callbacks{
			OnComplete:     []orchestration.Callback{{Endpoint: "ops-hooks"}},
			OnStepComplete: []orchestration.Callback{{Endpoint: "ops-hooks", StepIDs: []string{"a"}}},
		}))
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })

		id, err := m.Start(ctx, nil, workflow.Immediate())
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionCompleted)
		waitFor(t, "both callbacks delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == 2
		})
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, cbtype.EventStepSucceeded, got[0].Type, "in order: the step, then the completion")
		require.Equal(t, "a", got[0].StepID)
		require.Equal(t, cbtype.EventExecutionCompleted, got[1].Type)
		require.Equal(t, id, got[1].ExecutionID)
		require.Equal(t, 4, attempts, "two failures, then two deliveries")
		rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Transport: outbox.TransportWebhook})
		require.NoError(t, err)
		require.Len(t, rows, 2)
		for _, r := range rows {
			require.Equal(t, "ops-hooks", r.Topic)
		}
	})
}
