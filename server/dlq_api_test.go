package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// parkCommands inserts n commands of domain and parks each, as an operator would, at parkedAt
// (the same instant, so the command id orders them). It returns their ids.
func parkCommands(t *testing.T, exec driver.Executor, domain string, n int, parkedAt time.Time) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var params []*driver.CommandInsertParams
	var ids []uuid.UUID
	for range n {
		id := uuid.Must(uuid.NewV7())
		ids = append(ids, id)
		params = append(params, &driver.CommandInsertParams{ID: id, Kind: driver.CommandKindCommand, Domain: domain,
			Queue: domain + "__commands", Type: "BookFx", Data: []byte(`{}`), CorrelationID: id, MaxAttempts: 3,
			IdempotencyKey: "dlq-" + id.String()})
	}
	_, err := exec.CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: params, Now: &parkedAt})
	require.NoError(t, err)
	for _, id := range ids {
		_, err := exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{ID: id,
			FromStatuses: []driver.CommandStatus{driver.CommandStatusPending}, ToStatus: driver.CommandStatusInTSQ,
			Event: "PARKED", Actor: "ops:kim", Reason: "hold", ErrorCode: "HELD", Now: &parkedAt})
		require.NoError(t, err)
	}
	return ids
}

// GET /api/dlq pages the dead-letter queue, most recently parked first, with the same opaque
// cursor as the other lists; entries parked at the same instant are ordered by command id, and
// a cursor the server did not make is a 400 naming it.
func TestDLQAPI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		exec := drv.Executor()
		older := parkCommands(t, exec, "dlqtest", 2, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
		newer := parkCommands(t, exec, "dlqtest", 3, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
		parkCommands(t, exec, "dlqother", 1, time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC))

		type page struct {
			Items []struct {
				CommandID uuid.UUID `json:"commandId"`
				ParkedBy  string    `json:"parkedBy"`
				Error     string    `json:"error"`
				Command   struct {
					Domain string `json:"domain"`
				} `json:"command"`
			} `json:"items"`
			Next    string `json:"next"`
			HasMore bool   `json:"hasMore"`
		}
		var got []uuid.UUID
		url := f.HTTP.URL + "/api/dlq?domain=dlqtest&limit=2"
		for pages := 0; ; pages++ {
			require.Less(t, pages, 3, "five entries take three pages of two")
			x := send(t, http.MethodGet, url, nil, bearer(viewerToken))
			require.Equal(t, http.StatusOK, x.resp.StatusCode, "%s", x.respBody)
			var p page
			require.NoError(t, json.Unmarshal(x.respBody, &p))
			for _, it := range p.Items {
				require.Equal(t, "dlqtest", it.Command.Domain)
				require.Equal(t, "ops:kim", it.ParkedBy)
				got = append(got, it.CommandID)
			}
			if !p.HasMore {
				require.Empty(t, p.Next)
				break
			}
			url = f.HTTP.URL + "/api/dlq?domain=dlqtest&limit=2&cursor=" + p.Next
		}
		want := []uuid.UUID{newer[2], newer[1], newer[0], older[1], older[0]}
		require.Equal(t, want, got, "most recently parked first, then by command id, each once")

		x := send(t, http.MethodGet, f.HTTP.URL+"/api/dlq?cursor=djE6YWJj", nil, bearer(viewerToken))
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, "cursor", problemOf(t, x).Errors[0].Field)
		x = send(t, http.MethodGet, f.HTTP.URL+"/api/dlq?limit=1001", nil, bearer(viewerToken))
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, "limit", problemOf(t, x).Errors[0].Field)
	})
}
