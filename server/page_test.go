package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// listPage is a page of a list route.
type listPage struct {
	Items []struct {
		ID uuid.UUID `json:"id"`
	} `json:"items"`
	Next    string `json:"next"`
	HasMore bool   `json:"hasMore"`
}

// readAll follows a list route's cursors, limit rows a page, and returns every id it saw.
func readAll(t *testing.T, f *fixture, path string, limit int) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 20, "the cursors end")
		q := url.Values{"limit": {itoa(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		resp, body := f.do(t, "GET", path+"?"+q.Encode(), viewerToken, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var p listPage
		require.NoError(t, json.Unmarshal(body, &p))
		require.LessOrEqual(t, len(p.Items), limit)
		for _, it := range p.Items {
			ids = append(ids, it.ID)
		}
		if !p.HasMore {
			require.Empty(t, p.Next, "the last page has no next")
			return ids
		}
		require.Len(t, p.Items, limit, "a page before the last is full")
		require.NotEmpty(t, p.Next)
		cursor = p.Next
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// Lists are read in pages with an opaque cursor (next, hasMore), never silently cut.
func TestListsArePagedWithCursors(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		var parked []uuid.UUID
		for range 5 {
			parked = append(parked, f.parked(t))
		}
		got := readAll(t, f, "/api/tsq/commands", 2)
		require.ElementsMatch(t, parked, got, "every parked command, once")
		require.Equal(t, parked[4], got[0], "newest first")

		resp, body := f.do(t, "GET", "/api/tsq/commands?cursor=bm9wZQ", viewerToken, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, string(body), `"cursor"`, "the problem names the parameter")
		resp, body = f.do(t, "GET", "/api/tsq/commands?limit=1001", viewerToken, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a limit beyond the largest page is refused, not capped")
		require.Contains(t, string(body), `"limit"`)

		// Executions: three created for the (absent) runners, so PENDING.
		var started []uuid.UUID
		for i := range 3 {
			id, err := uuid.NewV7()
			require.NoError(t, err)
			_, err = drv.Executor().ExecutionInsertMany(context.Background(), &driver.ExecutionInsertManyParams{Executions: []*driver.ExecutionInsertParams{
				{ID: id, Model: "process", Type: "Paged", Domain: "payments", State: json.RawMessage(`{}`), BusinessKey: itoa(i)}}})
			require.NoError(t, err)
			started = append(started, id)
		}
		require.ElementsMatch(t, started, readAll(t, f, "/api/executions", 1))
		require.Empty(t, readAll(t, f, "/api/tsq/processes", 2), "none is in the troubleshooting queue")
		require.Empty(t, readAll(t, f, "/api/tsq/executions", 2))

		// The older before parameter still takes an execution id.
		resp, body = f.do(t, "GET", "/api/executions?limit=1&before="+started[2].String(), viewerToken, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var p listPage
		require.NoError(t, json.Unmarshal(body, &p))
		require.Equal(t, started[1], p.Items[0].ID)
	})
}
