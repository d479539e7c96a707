package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// failWebhook writes a webhook message to an endpoint no relay of the fixture serves and gives it
// up as its last attempt would: FAILED, with the endpoint's error. It returns its id.
func failWebhook(t *testing.T, exec driver.Executor) int64 {
	t.Helper()
	ctx := context.Background()
	mid := uuid.NewString()
	ids, err := exec.OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: []*driver.OutboxInsertParams{{
		Category: driver.OutboxCategoryEvent, Transport: "webhook-console-test", Topic: "billing-hooks", Key: "exec-" + mid,
		Type: "callback.OnComplete", MessageID: mid, Payload: json.RawMessage(`{"type":"EXECUTION_COMPLETED"}`)}}})
	require.NoError(t, err)
	deadline := time.Now().Add(15 * time.Second)
	for {
		rows, err := exec.OutboxClaim(ctx, &driver.OutboxClaimParams{Transports: []string{"webhook-console-test"}, Max: 1, Lease: time.Minute, RelayID: "test-relay"})
		require.NoError(t, err)
		if len(rows) == 1 {
			break
		}
		require.False(t, time.Now().After(deadline), "claiming the test message")
		time.Sleep(10 * time.Millisecond) // PostgreSQL's horizon: polling with a deadline
	}
	_, err = exec.OutboxMarkFailed(ctx, &driver.OutboxMarkFailedParams{RelayID: "test-relay", Failures: []*driver.OutboxFailure{
		{ID: ids[0], Error: "webhook billing-hooks answered 503: maintenance", GiveUp: true}}})
	require.NoError(t, err)
	return ids[0]
}

// An operator finds an undelivered webhook on its page and resends it; a viewer sees it without
// the action.
func TestUndeliveredMessagesInBrowser(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		id := failWebhook(t, drv.Executor())
		row := fmt.Sprintf(`tr[data-id="%d"]`, id)

		viewer := f.openTab(t, browser, viewerToken)
		viewer.visit("/outbox")
		require.Contains(t, viewer.text(row), "billing-hooks")
		require.Zero(t, viewer.count(row+` a[href$="/resend"]`), "a viewer has no resend action")

		tb := f.openTab(t, browser, operatorToken)
		tb.visit("/tsq/commands")
		tb.submit("#outbox-tab")
		require.Contains(t, tb.text("h1"), "Undelivered messages")
		text := tb.text(row)
		for _, want := range []string{"callback.OnComplete", "billing-hooks", "answered 503: maintenance"} {
			require.Contains(t, text, want)
		}
		tb.submit(row + ` a[href$="/resend"]`)
		require.Contains(t, tb.text("h1"), fmt.Sprintf("Resend message %d", id))
		tb.confirmAction("billing endpoint is back")
		tb.waitText(".flash-success", "was resent")
		require.Zero(t, tb.count(row), "no longer undelivered")
		msg, err := drv.Executor().OutboxGet(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, driver.OutboxStatusNew, msg.Status)
		require.Zero(t, msg.Attempts)
	})
}
