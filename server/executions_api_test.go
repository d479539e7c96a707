package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/workflow"
)

// problemFields decodes a problem's invalid fields.
func problemFields(t *testing.T, x *exchange) []string {
	t.Helper()
	var p struct {
		Code   string `json:"code"`
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(x.respBody, &p), "%s", x.respBody)
	var fields []string
	for _, e := range p.Errors {
		fields = append(fields, e.Field)
	}
	return fields
}

// The generic routes refuse bad input with a 4xx that names the field, and write nothing; a
// good start and signal do what they say, in the database.
func TestExecutionsAPI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		ctx := context.Background()
		op := bearer(operatorToken)
		api := f.HTTP.URL + "/api"

		x := send(t, http.MethodGet, api+"/definitions/workflow/ReviewFlow", nil, bearer(viewerToken))
		require.Equal(t, http.StatusOK, x.resp.StatusCode)
		var def struct {
			Topology struct {
				Layers [][]string `json:"layers"`
			} `json:"topology"`
		}
		require.NoError(t, json.Unmarshal(x.respBody, &def))
		require.Equal(t, [][]string{{"prepare"}, {"approve"}, {"coolOff"}, {"done"}}, def.Topology.Layers)

		x = send(t, http.MethodPost, api+"/definitions/workflow/Nope/start", []byte(`{}`), op)
		require.Equal(t, http.StatusNotFound, x.resp.StatusCode, "an unknown definition: %s", x.respBody)
		x = send(t, http.MethodPost, api+"/definitions/workflow/ReviewFlow/start", []byte(`{"id":"seven","businessKey":"bad-start"}`), op)
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, []string{"id"}, problemFields(t, x))
		x = send(t, http.MethodPost, api+"/definitions/workflow/ReviewFlow/start", []byte(`{"input":{"a":1},"surprise":true}`), op)
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode, "an unknown field: %s", x.respBody)
		x = send(t, http.MethodPost, api+"/definitions/process/PaymentStep/start", []byte(`{"dryRun":true}`), op)
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, []string{"dryRun"}, problemFields(t, x))
		rows, err := f.Review.List(ctx, workflow.ListParams{BusinessKey: "bad-start"})
		require.NoError(t, err)
		require.Empty(t, rows, "a refused start writes nothing")
		x = send(t, http.MethodPost, api+"/definitions/workflow/ReviewFlow/start", []byte(`{"input":{"a":1}}`), bearer(viewerToken))
		require.Equal(t, http.StatusForbidden, x.resp.StatusCode, "starting needs an operator")

		x = send(t, http.MethodPost, api+"/definitions/workflow/ReviewFlow/start", []byte(`{"input":{"a":1},"attributes":{"bad key":"1"}}`), op)
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, []string{"attributes"}, problemFields(t, x))
		x = send(t, http.MethodPost, api+"/definitions/workflow/ReviewFlow/start", []byte(`{"input":{"subject":"loan-9"},"businessKey":"loan-9","attributes":{"desk":"mortgages"}}`), op)
		require.Equal(t, http.StatusCreated, x.resp.StatusCode, "%s", x.respBody)
		var started struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(x.respBody, &started))
		exec := api + "/executions/" + started.ID
		servertest.Eventually(t, 30*time.Second, "the review waits for its sign-off", func() bool {
			x := send(t, http.MethodGet, exec, nil, bearer(viewerToken))
			return x.resp.StatusCode == http.StatusOK && json.Valid(x.respBody) &&
				string(must(t, x.respBody, "currentWait")) == `"approve"`
		})

		x = send(t, http.MethodPost, exec+"/signals/approved", []byte(`{"payload":`), op)
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode, "a malformed body: %s", x.respBody)
		x = send(t, http.MethodPost, exec+"/resume", []byte(`{"reason":"nothing to resume"}`), op)
		require.Equal(t, http.StatusConflict, x.resp.StatusCode, "an action invalid in the current state: %s", x.respBody)
		x = send(t, http.MethodPost, exec+"/pause", []byte(`{"reason":"x"}`), op)
		require.Equal(t, http.StatusNotFound, x.resp.StatusCode)
		x = send(t, http.MethodDelete, exec+"/timers/none", []byte(`{"reason":"x"}`), op)
		require.Equal(t, http.StatusNotFound, x.resp.StatusCode, "%s", x.respBody)
		x = send(t, http.MethodGet, api+"/executions?status=WAITING", nil, bearer(viewerToken))
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, []string{"status"}, problemFields(t, x))
		x = send(t, http.MethodGet, api+"/executions?attr.bad%20key=1", nil, bearer(viewerToken))
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode, "%s", x.respBody)
		pending, err := f.Platform.Runtime().PendingSignals(ctx, parseID(t, started.ID))
		require.NoError(t, err)
		require.Empty(t, pending, "no refused call sent a signal")

		x = send(t, http.MethodPost, exec+"/signals/approved", []byte(`{"payload":{"by":"ops:ada"},"signalId":"s-1"}`), op)
		require.Equal(t, http.StatusAccepted, x.resp.StatusCode, "%s", x.respBody)
		x = send(t, http.MethodPost, exec+"/signals/approved", []byte(`{"payload":{"by":"ops:eve"},"signalId":"s-1"}`), op)
		require.JSONEq(t, `{"signalId":"s-1","duplicate":true}`, string(x.respBody))
		servertest.Eventually(t, 30*time.Second, "the review sleeps after its sign-off", func() bool {
			x := send(t, http.MethodGet, exec+"/timers", nil, bearer(viewerToken))
			return x.resp.StatusCode == http.StatusOK && len(must(t, x.respBody, "items")) > 2
		})

		x = send(t, http.MethodGet, api+"/executions?model=workflow&attr.desk=mortgages&limit=1", nil, bearer(viewerToken))
		require.Equal(t, http.StatusOK, x.resp.StatusCode)
		var page struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		require.NoError(t, json.Unmarshal(x.respBody, &page))
		require.Len(t, page.Items, 1)
		require.Equal(t, started.ID, page.Items[0].ID)
	})
}

func must(t *testing.T, body []byte, field string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m))
	return m[field]
}

func parseID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	require.NoError(t, err)
	return id
}

// Hostile input on the generic routes: a NUL byte, trailing JSON, a huge value, an unknown enum
// value. Each gets a 4xx and nothing is written.
func TestExecutionsAPIHostileInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		op := bearer(operatorToken)
		api := f.HTTP.URL + "/api"
		huge := strings.Repeat("x", 70*1024)
		for _, tc := range []struct {
			name, method, path, body string
		}{
			{"NUL in a business key", http.MethodPost, "/definitions/workflow/ReviewFlow/start", `{"businessKey":"a\u0000b"}`},
			{"NUL in an attribute", http.MethodPost, "/definitions/workflow/ReviewFlow/start", `{"attributes":{"desk":"a\u0000b"}}`},
			{"trailing JSON", http.MethodPost, "/definitions/workflow/ReviewFlow/start", `{"input":{}} {"input":{}}`},
			{"huge body", http.MethodPost, "/definitions/workflow/ReviewFlow/start", `{"input":"` + huge + `"}`},
			{"unknown status", http.MethodGet, "/executions?status=DONE", ""},
			{"NUL in an attribute search", http.MethodGet, "/executions?attr.desk=a%00b", ""},
			{"NUL in a filter", http.MethodGet, "/executions?type=a%00b", ""},
			{"NUL in a signal payload", http.MethodPost, "/executions/" + uuid.NewString() + "/signals/approved", `{"payload":{"by":"a\u0000b"}}`},
			{"NUL in a signal name", http.MethodPost, "/executions/" + uuid.NewString() + "/signals/appr%00oved", `{}`},
			{"trailing JSON in a signal", http.MethodPost, "/executions/" + uuid.NewString() + "/signals/approved", `{} []`},
			{"huge signal id", http.MethodPost, "/executions/" + uuid.NewString() + "/signals/approved", `{"signalId":"` + strings.Repeat("s", 5000) + `"}`},
		} {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			x := send(t, tc.method, api+tc.path, body, op)
			require.GreaterOrEqual(t, x.resp.StatusCode, 400, "%s: %s", tc.name, x.respBody)
			require.Less(t, x.resp.StatusCode, 500, "%s: %s", tc.name, x.respBody)
		}
		rows, err := f.Review.List(context.Background(), workflow.ListParams{})
		require.NoError(t, err)
		require.Empty(t, rows, "no refused start created an execution")
	})
}
