package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments/paymentsweb"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	. "github.com/commandbus/commandbus/server"
)

// logLines is a JSON log that tests read back.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// find returns the log entries with message msg whose request_id is id.
func (l *logLines) find(t *testing.T, msg, id string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(l.buf.String()) {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
		if entry["msg"] == msg && entry["request_id"] == id {
			out = append(out, entry)
		}
	}
	return out
}

// observedServer serves the fixture's platform with a server of its own whose log and metrics
// the test reads.
func observedServer(t *testing.T, f *consoleFixture) (base string, logs *logLines, reg *prometheus.Registry) {
	t.Helper()
	logs, reg = &logLines{}, prometheus.NewRegistry()
	srv, err := New(Config{Client: f.Client, Runtime: f.Platform.Runtime(), Extensions: []Extension{paymentsweb.New(f.Platform)}, Tokens: testTokens,
		Gatherer: reg, Logger: slogJSON(logs)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL, logs, reg
}

// Every answer carries a request id, the client's X-Request-Id when it is usable and a new one
// otherwise; each request is logged with it, and a 500 gives it so the cause can be found in the
// log, which the answer does not repeat.
func TestRequestIDsInAnswersAndLogs(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		base, logs, _ := observedServer(t, f)

		missing := "/api/payments/" + uuid.NewString()
		headers := bearer(viewerToken)
		headers["X-Request-Id"] = "trace-4711"
		x := send(t, "GET", base+missing, nil, headers)
		require.Equal(t, http.StatusNotFound, x.resp.StatusCode)
		require.Equal(t, "trace-4711", x.resp.Header.Get("X-Request-Id"), "the client's id is honoured")
		lines := logs.find(t, "http request", "trace-4711")
		require.Len(t, lines, 1)
		require.Equal(t, "/api/payments/{id}", lines[0]["route"])
		require.Equal(t, missing, lines[0]["path"])
		require.EqualValues(t, 404, lines[0]["status"])
		require.Equal(t, "GET", lines[0]["method"])

		for _, bad := range []string{"", "two words", strings.Repeat("x", 129), "line\u2028break"} {
			headers["X-Request-Id"] = bad
			x = send(t, "GET", base+"/api/queues", nil, headers)
			require.Equal(t, http.StatusOK, x.resp.StatusCode)
			id := x.resp.Header.Get("X-Request-Id")
			_, err := uuid.Parse(id)
			require.NoError(t, err, "an unusable id %q is replaced by a new one, got %q", bad, id)
			require.Len(t, logs.find(t, "http request", id), 1)
		}

		refuse := `CREATE TRIGGER refuse_execution BEFORE INSERT ON {schema}.execution BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;`
		if drv.Name() == "postgres" {
			refuse = `CREATE FUNCTION {schema}.refuse_execution() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
				CREATE TRIGGER refuse_execution BEFORE INSERT ON {schema}.execution FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_execution();`
		}
		require.NoError(t, drv.Executor().Exec(context.Background(), refuse))
		headers = bearer(operatorToken)
		headers["X-Request-Id"] = "incident-42"
		x = send(t, "POST", base+"/api/payments", []byte(`{"idempotencyKey":"k-500","debitAccount":"CUST-USD-001",
			"creditAccount":"BENE-USD-001","amount":"10.00","currency":"USD"}`), headers)
		require.Equal(t, http.StatusInternalServerError, x.resp.StatusCode, "%s", x.respBody)
		p := problemOf(t, x)
		require.Equal(t, "INTERNAL", p.Code)
		require.Equal(t, "incident-42", p.RequestID)
		require.NotContains(t, string(x.respBody), "refused by the test")
		failed := logs.find(t, "request failed", "incident-42")
		require.Len(t, failed, 1, "the cause is logged under the answer's request id")
		require.Contains(t, failed[0]["error"], "refused by the test")
		require.EqualValues(t, 500, logs.find(t, "http request", "incident-42")[0]["status"])

		// The console's pages keep the cause to the log too.
		b := f.HTTPClient()
		b.Base = base
		b.Login(viewerToken)
		require.NoError(t, drv.Executor().Exec(context.Background(), `ALTER TABLE {schema}.execution RENAME TO execution_gone`))
		req, err := http.NewRequest(http.MethodGet, base+"/executions", nil)
		require.NoError(t, err)
		req.Header.Set("X-Request-Id", "console-7")
		resp, page := b.Do(req)
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		require.Contains(t, page, "request id console-7")
		for _, leak := range []string{"execution_gone", "no such table", "does not exist", "SQLSTATE"} {
			require.NotContains(t, page, leak)
		}
		require.Len(t, logs.find(t, "console: request failed", "console-7"), 1)
	})
}

// A console action that fails inside the server keeps the cause to the log as well: the form
// says the request id, not the database's words.
func TestConsoleActionFailureKeepsTheCauseToTheLog(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		base, logs, _ := observedServer(t, f)
		_, cmd := f.ParkRiskCommand()
		retry := "/tsq/commands/" + cmd.ID.String() + "/retry"
		op := f.HTTPClient()
		op.Base = base
		op.Login(operatorToken)
		resp, page := op.Get(retry)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		csrf := servertest.CSRFOf(t, page)

		require.NoError(t, drv.Executor().Exec(context.Background(), `ALTER TABLE {schema}.audit_log RENAME TO audit_gone`))
		resp, page = op.Post(retry, url.Values{"csrf": {csrf}, "reason": {"Downstream fixed."}}, "X-Request-Id", "action-9")
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		require.Contains(t, page, "request id action-9")
		for _, leak := range []string{"audit_gone", "audit_log", "no such table", "does not exist", "SQLSTATE"} {
			require.NotContains(t, strings.ToLower(page), strings.ToLower(leak))
		}
		failed := logs.find(t, "console: action failed", "action-9")
		require.Len(t, failed, 1)
		require.Contains(t, failed[0]["error"], "audit")
	})
}

// The server counts and times requests by route pattern, method and status; the ids in paths
// never become label values.
func TestHTTPMetricsByRoutePattern(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		base, _, reg := observedServer(t, f)
		ids := []string{uuid.NewString(), uuid.NewString()}
		for _, id := range ids {
			require.Equal(t, http.StatusNotFound, send(t, "GET", base+"/api/payments/"+id, nil, bearer(viewerToken)).resp.StatusCode)
		}
		require.Equal(t, http.StatusOK, send(t, "GET", base+"/api/queues", nil, bearer(viewerToken)).resp.StatusCode)
		require.Equal(t, http.StatusNotFound, send(t, "GET", base+"/api/no-such-route/"+ids[0], nil, bearer(viewerToken)).resp.StatusCode)
		require.Equal(t, http.StatusUnauthorized, send(t, "GET", base+"/api/queues", nil, nil).resp.StatusCode)

		families, err := reg.Gather()
		require.NoError(t, err)
		counts := map[string]uint64{}
		for _, mf := range families {
			if mf.GetName() != "commandbus_http_request_duration_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
					for _, id := range ids {
						require.NotContains(t, l.GetValue(), id, "no id in a label")
					}
				}
				counts[labels["method"]+" "+labels["route"]+" "+labels["status"]] = m.GetHistogram().GetSampleCount()
			}
		}
		require.Equal(t, uint64(2), counts["GET /api/payments/{id} 404"], "%v", counts)
		require.Equal(t, uint64(1), counts["GET /api/queues 200"], "%v", counts)
		require.Equal(t, uint64(1), counts["GET /api/queues 401"], "%v", counts)
		require.Equal(t, uint64(1), counts["GET unmatched 404"], "%v", counts)

		x := send(t, "GET", base+"/metrics", nil, bearer(viewerToken))
		require.Contains(t, string(x.respBody), `commandbus_http_request_duration_seconds_count{method="GET",route="/api/queues",status="200"} 1`)
	})
}

func slogJSON(w *logLines) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Probes, scrapes and the console's live refreshes are logged at debug level, so an info-level
// access log holds what people and clients asked for.
func TestQuietRoutesLogAtDebug(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		base, logs, _ := observedServer(t, f)
		level := func(path string) string {
			t.Helper()
			headers := bearer(viewerToken)
			id := uuid.NewString()
			headers["X-Request-Id"] = id
			send(t, "GET", base+path, nil, headers)
			lines := logs.find(t, "http request", id)
			require.Len(t, lines, 1, path)
			return lines[0]["level"].(string)
		}
		require.Equal(t, "DEBUG", level("/healthz"))
		require.Equal(t, "DEBUG", level("/metrics"))
		require.Equal(t, "DEBUG", level("/live/overview"))
		require.Equal(t, "INFO", level("/api/queues"))
	})
}
