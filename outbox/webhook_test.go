package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
)

// hookServer is a webhook receiver that answers failStatus to the first failures requests (all of
// them while failures is negative), then 200, checking every signature.
type hookServer struct {
	t        *testing.T
	mu       sync.Mutex
	failures int
	status   int
	received []string // message ids delivered with 200, in order
	attempts int
}

func (h *hookServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	require.NoError(h.t, err)
	if err := outbox.VerifyWebhook("s3cret", r.Header, body, time.Now(), time.Minute); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempts++
	if h.failures != 0 {
		if h.failures > 0 {
			h.failures--
		}
		http.Error(w, "down for maintenance", h.status)
		return
	}
	h.received = append(h.received, r.Header.Get(outbox.HeaderWebhookMessageID))
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookServer) set(failures, status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures, h.status = failures, status
}

func (h *hookServer) delivered() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.received...)
}

func webhookMessages(t *testing.T, exec driver.Executor, key string, n int) []string {
	t.Helper()
	var params []*driver.OutboxInsertParams
	var ids []string
	for i := range n {
		id := uuid.Must(uuid.NewV7()).String()
		ids = append(ids, id)
		params = append(params, &driver.OutboxInsertParams{
			Category: driver.OutboxCategoryEvent, Transport: outbox.TransportWebhook, Topic: "hooks", Key: key,
			Type: "STEP_SUCCEEDED", MessageID: id, Payload: json.RawMessage(fmt.Sprintf(`{"id":%q,"n":%d}`, id, i)),
		})
	}
	_, err := exec.OutboxInsertMany(context.Background(), &driver.OutboxInsertManyParams{Messages: params})
	require.NoError(t, err)
	return ids
}

func TestWebhookRetriesThenDelivers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		hooks := &hookServer{t: t}
		hooks.set(3, http.StatusServiceUnavailable)
		srv := httptest.NewServer(hooks)
		t.Cleanup(srv.Close)
		pub, err := outbox.NewWebhookPublisher(outbox.WebhookConfig{
			Endpoints: map[string]outbox.WebhookEndpoint{"hooks": {URL: srv.URL, Secret: "s3cret", Timeout: 5 * time.Second}},
		})
		require.NoError(t, err)
		ids := webhookMessages(t, drv.Executor(), "exec-1", 5)
		relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, PollInterval: 20 * time.Millisecond,
			InitialBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
		relay.Kick()
		waitFor(t, "every webhook delivered", func() bool { return len(hooks.delivered()) == len(ids) })
		require.Equal(t, ids, hooks.delivered(), "in the order written, none lost")
		var rows []*driver.OutboxRow
		waitFor(t, "every webhook marked published", func() bool {
			var err error
			rows, err = drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Transport: outbox.TransportWebhook, Statuses: []driver.OutboxStatus{driver.OutboxStatusPublished}})
			require.NoError(t, err)
			return len(rows) == len(ids)
		})
		attempts := map[string]int{}
		for _, r := range rows {
			require.Equal(t, driver.OutboxStatusPublished, r.Status)
			attempts[r.MessageID] = r.Attempts
		}
		require.Equal(t, 4, attempts[ids[0]], "three failures, then the delivery")
		require.Equal(t, 1, attempts[ids[1]], "the messages waiting behind the failing one spent no attempt")
	})
}

func TestWebhookDeadLetterAndResend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		hooks := &hookServer{t: t}
		hooks.set(-1, http.StatusInternalServerError)
		srv := httptest.NewServer(hooks)
		t.Cleanup(srv.Close)
		pub, err := outbox.NewWebhookPublisher(outbox.WebhookConfig{MaxAttempts: 3,
			Endpoints: map[string]outbox.WebhookEndpoint{"hooks": {URL: srv.URL, Secret: "s3cret"}}})
		require.NoError(t, err)
		ids := webhookMessages(t, drv.Executor(), "exec-2", 1)
		relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, PollInterval: 20 * time.Millisecond,
			InitialBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
		relay.Kick()
		var dead *driver.OutboxRow
		waitFor(t, "the dead letter", func() bool {
			rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusFailed}})
			require.NoError(t, err)
			if len(rows) == 1 {
				dead = rows[0]
			}
			return dead != nil
		})
		require.Equal(t, ids[0], dead.MessageID)
		require.Equal(t, 3, dead.Attempts)
		require.Contains(t, dead.LastError, "answered 500")
		hooks.mu.Lock()
		require.Equal(t, 3, hooks.attempts, "no attempt after the last")
		hooks.mu.Unlock()

		hooks.set(0, 0)
		resent, err := drv.Executor().OutboxResend(ctx, &driver.OutboxResendParams{IDs: []int64{dead.ID}})
		require.NoError(t, err)
		require.Equal(t, []int64{dead.ID}, resent)
		relay.Kick()
		waitFor(t, "the resent webhook delivered", func() bool { return len(hooks.delivered()) == 1 })
	})
}

func TestWebhookConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	_, err := outbox.NewWebhookPublisher(outbox.WebhookConfig{MaxAttempts: -1,
		Endpoints: map[string]outbox.WebhookEndpoint{"h": {URL: "ftp://x", Timeout: -time.Second}}})
	require.ErrorContains(t, err, `Endpoints["h"].URL`)
	require.ErrorContains(t, err, `Endpoints["h"].Secret`)
	require.ErrorContains(t, err, `Endpoints["h"].Timeout`)
	require.ErrorContains(t, err, "MaxAttempts")
}

func TestVerifyWebhookRefusesTampering(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	now := time.Unix(1_700_000_000, 0)
	h.Set(outbox.HeaderWebhookTimestamp, "1700000000")
	h.Set(outbox.HeaderWebhookSignature, outbox.SignWebhook("k", "1700000000", []byte(`{"a":1}`)))
	require.NoError(t, outbox.VerifyWebhook("k", h, []byte(`{"a":1}`), now, time.Minute))
	require.Error(t, outbox.VerifyWebhook("k", h, []byte(`{"a":2}`), now, time.Minute))
	require.Error(t, outbox.VerifyWebhook("other", h, []byte(`{"a":1}`), now, time.Minute))
	require.Error(t, outbox.VerifyWebhook("k", h, []byte(`{"a":1}`), now.Add(time.Hour), time.Minute))
}
