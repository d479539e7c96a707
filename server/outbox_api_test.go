package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// failOutboxMessages writes n webhook messages to an endpoint no relay serves and gives each up
// as its last attempt would: FAILED, with the error. It returns their ids.
func failOutboxMessages(t *testing.T, exec driver.Executor, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	var params []*driver.OutboxInsertParams
	for i := range n {
		id := uuid.NewString()
		params = append(params, &driver.OutboxInsertParams{Category: driver.OutboxCategoryEvent, Transport: "webhook-test",
			Topic: "billing-hooks", Key: "exec-" + id, Type: "callback.OnComplete", MessageID: id,
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	ids, err := exec.OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: params})
	require.NoError(t, err)
	var claimed []*driver.OutboxRow
	deadline := time.Now().Add(15 * time.Second)
	for len(claimed) < n {
		rows, err := exec.OutboxClaim(ctx, &driver.OutboxClaimParams{Transports: []string{"webhook-test"}, Max: n, Lease: time.Minute, RelayID: "test-relay"})
		require.NoError(t, err)
		claimed = append(claimed, rows...)
		require.False(t, time.Now().After(deadline), "claiming the test messages")
		time.Sleep(10 * time.Millisecond) // PostgreSQL's horizon: polling with a deadline
	}
	var failures []*driver.OutboxFailure
	for _, row := range claimed {
		failures = append(failures, &driver.OutboxFailure{ID: row.ID, Error: "webhook billing-hooks answered 500: down", GiveUp: true})
	}
	_, err = exec.OutboxMarkFailed(ctx, &driver.OutboxMarkFailedParams{Failures: failures, RelayID: "test-relay"})
	require.NoError(t, err)
	return ids
}

func TestOutboxAPI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		ids := failOutboxMessages(t, drv.Executor(), 2)

		x := send(t, http.MethodGet, f.HTTP.URL+"/api/outbox?transport=webhook-test", nil, bearer(viewerToken))
		require.Equal(t, http.StatusOK, x.resp.StatusCode, "%s", x.respBody)
		var list struct {
			Items []struct {
				ID        int64  `json:"id"`
				Status    string `json:"status"`
				LastError string `json:"lastError"`
				Topic     string `json:"topic"`
			} `json:"items"`
		}
		require.NoError(t, json.Unmarshal(x.respBody, &list))
		require.Len(t, list.Items, 2, "FAILED by default")
		require.Equal(t, ids[1], list.Items[0].ID, "newest first")
		require.Equal(t, "FAILED", list.Items[0].Status)
		require.Contains(t, list.Items[0].LastError, "answered 500")

		// Paged: one a page, the cursor leads to the older one, and the last page says so.
		var page struct {
			Items []struct {
				ID int64 `json:"id"`
			} `json:"items"`
			Next    string `json:"next"`
			HasMore bool   `json:"hasMore"`
		}
		x = send(t, http.MethodGet, f.HTTP.URL+"/api/outbox?transport=webhook-test&limit=1", nil, bearer(viewerToken))
		require.NoError(t, json.Unmarshal(x.respBody, &page))
		require.True(t, page.HasMore)
		require.Equal(t, ids[1], page.Items[0].ID)
		x = send(t, http.MethodGet, f.HTTP.URL+"/api/outbox?transport=webhook-test&limit=1&cursor="+page.Next, nil, bearer(viewerToken))
		page.Next = ""
		require.NoError(t, json.Unmarshal(x.respBody, &page))
		require.False(t, page.HasMore)
		require.Empty(t, page.Next)
		require.Equal(t, ids[0], page.Items[0].ID)
		x = send(t, http.MethodGet, f.HTTP.URL+"/api/outbox?cursor=djE6YWJj", nil, bearer(viewerToken))
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, "cursor", problemOf(t, x).Errors[0].Field)

		resend := func(id string, token, body string) *exchange {
			return send(t, http.MethodPost, f.HTTP.URL+"/api/outbox/"+id+"/resend", []byte(body), bearer(token))
		}
		x = resend(strconv.FormatInt(ids[0], 10), viewerToken, `{"reason":"endpoint fixed"}`)
		require.Equal(t, http.StatusForbidden, x.resp.StatusCode, "a viewer cannot resend")
		x = resend(strconv.FormatInt(ids[0], 10), operatorToken, `{}`)
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, "reason", problemOf(t, x).Errors[0].Field)
		x = resend("abc", operatorToken, `{"reason":"endpoint fixed"}`)
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, "id", problemOf(t, x).Errors[0].Field)
		x = resend("999999999", operatorToken, `{"reason":"endpoint fixed"}`)
		require.Equal(t, http.StatusNotFound, x.resp.StatusCode, "%s", x.respBody)

		x = resend(strconv.FormatInt(ids[0], 10), operatorToken, `{"reason":"endpoint fixed"}`)
		require.Equal(t, http.StatusOK, x.resp.StatusCode, "%s", x.respBody)
		row, err := drv.Executor().OutboxGet(context.Background(), ids[0])
		require.NoError(t, err)
		require.Equal(t, driver.OutboxStatusNew, row.Status)
		require.Zero(t, row.Attempts)
		x = resend(strconv.FormatInt(ids[0], 10), operatorToken, `{"reason":"again"}`)
		require.Equal(t, http.StatusConflict, x.resp.StatusCode, "only FAILED messages are resent")
		other, err := drv.Executor().OutboxGet(context.Background(), ids[1])
		require.NoError(t, err)
		require.Equal(t, driver.OutboxStatusFailed, other.Status, "the bad requests changed nothing")
	})
}
