package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/commandbus/commandbus/cbtype"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	. "github.com/commandbus/commandbus/server"
)

// exchange is one request sent and its answer.
type exchange struct {
	req      *http.Request
	reqBody  []byte
	resp     *http.Response
	respBody []byte
}

// send sends a request with a raw body (nil for none) and the given headers.
func send(t *testing.T, method, target string, body []byte, headers map[string]string) *exchange {
	t.Helper()
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, target, reader)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &exchange{req: req, reqBody: body, resp: resp, respBody: data}
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

func problemOf(t *testing.T, x *exchange) Problem {
	t.Helper()
	require.Equal(t, "application/problem+json", x.resp.Header.Get("Content-Type"), "%s", x.respBody)
	var p Problem
	require.NoError(t, json.Unmarshal(x.respBody, &p))
	return p
}

// The scheme of an Authorization header is case-insensitive (RFC 7235).
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
			x := send(t, "GET", f.HTTP.URL+"/api/tsq/commands", nil, map[string]string{"Authorization": scheme + " " + viewerToken})
			require.Equal(t, http.StatusOK, x.resp.StatusCode, scheme)
		}
		x := send(t, "GET", f.HTTP.URL+"/api/tsq/commands", nil, map[string]string{"Authorization": "Bearer"})
		require.Equal(t, http.StatusUnauthorized, x.resp.StatusCode)
	})
}

// The REST API takes bearer tokens only: a browser sends the console's session cookie with any
// request to this origin, a cross-site one included, so an operator's session must not act
// through /api. The console itself keeps working with the cookie.
func TestAPIRefusesTheSessionCookie(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		_, command := f.ParkRiskCommand()
		op := f.HTTPClient()
		op.Login(operatorToken)

		req, err := http.NewRequest(http.MethodPost, f.HTTP.URL+"/api/tsq/commands/"+command.ID.String()+"/cancel",
			strings.NewReader(`{"reason":"cross-site"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "https://evil.example")
		resp, body := op.Do(req)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
		require.Contains(t, body, "session cookie is not accepted")
		row, err := f.Client.GetCommand(context.Background(), command.ID)
		require.NoError(t, err)
		require.Equal(t, "IN_TSQ", string(row.Status), "the cookie changed nothing")

		resp, body = op.Get("/api/payments")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "reads too: "+body)
		resp, body = op.Get("/tsq/commands")
		require.Equal(t, http.StatusOK, resp.StatusCode, "the console still takes its cookie")
		require.Contains(t, body, "Retry…")
	})
}

// Every error is a problem document: unknown routes (404) and methods (405 with Allow) included.
func TestUnknownRoutesAndMethodsAreProblems(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		for _, tc := range []struct {
			method, path string
			status       int
			allow        string
		}{
			{"DELETE", "/api/payments", 405, "GET, HEAD, POST"},
			{"PATCH", "/api/payments/" + uuid.NewString(), 405, "GET, HEAD"},
			{"GET", "/api/tsq/commands/" + uuid.NewString() + "/retry", 405, "POST"},
			{"POST", "/healthz", 405, "GET, HEAD"},
			{"DELETE", "/metrics", 405, "GET, HEAD"},
			{"GET", "/api/nothing", 404, ""},
			{"POST", "/api/nothing", 404, ""},
			{"DELETE", "/api/nothing/at/all", 404, ""},
			{"GET", "/api/payments/", 404, ""},
		} {
			x := send(t, tc.method, f.HTTP.URL+tc.path, nil, bearer(operatorToken))
			require.Equal(t, tc.status, x.resp.StatusCode, "%s %s: %s", tc.method, tc.path, x.respBody)
			p := problemOf(t, x)
			require.Equal(t, tc.status, p.Status)
			require.Equal(t, tc.allow, x.resp.Header.Get("Allow"), "%s %s", tc.method, tc.path)
			require.NotEmpty(t, p.Detail)
		}
		// A page the console does not have is still the console's own page.
		op := f.HTTPClient()
		op.Login(viewerToken)
		resp, body := op.Get("/no-such-page")
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Contains(t, body, "Page not found")
	})
}

// Empty lists are [], never null, on every list route.
func TestEmptyListsAreArrays(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		for _, path := range []string{"/api/tsq/commands", "/api/tsq/processes", "/api/payments", "/api/batches", "/api/approvals",
			"/api/network/pending", "/api/queues"} {
			x := send(t, "GET", f.HTTP.URL+path, nil, bearer(viewerToken))
			require.Equal(t, http.StatusOK, x.resp.StatusCode)
			var body map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(x.respBody, &body))
			key := "items"
			if path == "/api/queues" {
				key = "queues"
			}
			require.Equal(t, "[]", string(body[key]), "%s: %s", path, x.respBody)
		}
	})
}

// A 404 names what was not found and its id.
func TestNotFoundNamesTheID(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		id := uuid.NewString()
		for _, tc := range []struct{ method, path, body string }{
			{"POST", "/api/tsq/commands/" + id + "/retry", `{"reason":"ok"}`},
			{"POST", "/api/tsq/commands/" + id + "/complete", `{"reason":"ok"}`},
			{"POST", "/api/tsq/processes/" + id + "/retry", `{"reason":"ok"}`},
			{"POST", "/api/tsq/processes/" + id + "/complete", `{"reason":"ok","stateOverrides":{"evidence":"x"}}`},
			{"GET", "/api/commands/" + id, ""},
			{"GET", "/api/processes/" + id, ""},
			{"GET", "/api/payments/" + id, ""},
			{"GET", "/api/payments/" + id + "/status", ""},
			{"GET", "/api/batches/" + id, ""},
			{"POST", "/api/approvals/" + id + "/approve", `{"reason":"ok"}`},
			{"POST", "/api/network/pending/" + id + "/respond", `{"answer":"ACCEPT","reason":"ok"}`},
		} {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			x := send(t, tc.method, f.HTTP.URL+tc.path, body, bearer(operatorToken))
			require.Equal(t, http.StatusNotFound, x.resp.StatusCode, "%s %s: %s", tc.method, tc.path, x.respBody)
			require.Contains(t, problemOf(t, x).Detail, id, "%s %s", tc.method, tc.path)
		}
	})
}

// A failure inside the server answers 500 without the database's words (a NUL byte once leaked
// "SQLSTATE 22021"); it gives the request id under which the cause was logged.
func TestInternalErrorsDoNotLeakTheCause(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		refuse := `CREATE TRIGGER refuse_execution BEFORE INSERT ON {schema}.execution BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;`
		if drv.Name() == "postgres" {
			refuse = `CREATE FUNCTION {schema}.refuse_execution() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '22021'; END $$;
				CREATE TRIGGER refuse_execution BEFORE INSERT ON {schema}.execution FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_execution();`
		}
		require.NoError(t, drv.Executor().Exec(context.Background(), refuse))
		x := send(t, "POST", f.HTTP.URL+"/api/payments", []byte(`{"idempotencyKey":"k1","debitAccount":"CUST-USD-001",
			"creditAccount":"BENE-USD-001","amount":"10.00","currency":"USD"}`), bearer(operatorToken))
		require.Equal(t, http.StatusInternalServerError, x.resp.StatusCode, "%s", x.respBody)
		p := problemOf(t, x)
		require.Equal(t, "INTERNAL", p.Code)
		require.NotEmpty(t, p.RequestID)
		require.Equal(t, x.resp.Header.Get("X-Request-Id"), p.RequestID, "the answer names the id the cause was logged under")
		require.Contains(t, p.Detail, "request id "+p.RequestID)
		for _, leak := range []string{"SQLSTATE", "22021", "refused by the test", "execution", "INSERT"} {
			require.NotContains(t, string(x.respBody), leak)
		}
		list, err := f.Platform.ListPayments(context.Background(), payments.PaymentFilter{})
		require.NoError(t, err)
		require.Empty(t, list, "no payment without its execution")
	})
}

// POST /api/tsq/processes/{id}/complete applies the console's rule: a payment is completed only
// on the evidence that it was made. Without it nothing changes; with it the execution is
// COMPLETED and the evidence is in its state.
func TestAPICompleteNeedsEvidence(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		parked := f.ParkManagerPayment()
		path := f.HTTP.URL + "/api/tsq/processes/" + parked.ExecutionID.String() + "/complete"
		for _, body := range []string{`{"reason":"looks fine"}`, `{"reason":"looks fine","stateOverrides":{}}`,
			`{"reason":"looks fine","stateOverrides":{"evidence":""}}`, `{"reason":"looks fine","stateOverrides":{"holdId":"H"}}`} {
			x := send(t, "POST", path, []byte(body), bearer(operatorToken))
			require.Equal(t, http.StatusBadRequest, x.resp.StatusCode, "%s", x.respBody)
			p := problemOf(t, x)
			require.Equal(t, "stateOverrides.evidence", p.Errors[0].Field)
			require.Equal(t, "IN_TSQ", f.PaymentStatus(parked.PaymentID), "a refused completion changes nothing")
		}
		x := send(t, "POST", path, []byte(`{"reason":"confirmed","stateOverrides":{"evidence":"SWIFT gpi shows ACSC"}}`), bearer(operatorToken))
		require.Equal(t, http.StatusOK, x.resp.StatusCode, "%s", x.respBody)
		v, err := f.Platform.GetPayment(context.Background(), parked.PaymentID)
		require.NoError(t, err)
		require.Equal(t, "COMPLETED", v.Status)
		require.Equal(t, "SWIFT gpi shows ACSC", v.Evidence)
	})
}

// GET /api/payments/{processId}/status answers the status of a payment's process, as it is in
// the database.
func TestPaymentProcessStatus(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		ctx := context.Background()
		step := f.Submit(servertest.PendingL2Payment())
		// Wait until the process rests: L1 arrived and it waits for L2, which waits for an
		// operator. Comparing with a second read while the runner still checkpoints raced.
		servertest.Eventually(t, 30*time.Second, "L1 to arrive and the process to wait", func() bool {
			v, err := f.Platform.GetPayment(ctx, step.PaymentID)
			require.NoError(t, err)
			row, err := f.Client.Driver().Executor().ExecutionGet(ctx, step.ExecutionID)
			require.NoError(t, err)
			return v.Network[0].Received && row.Status == cbtype.ExecutionWaitingForAsync
		})
		// Other network levels still arrive while L2 waits, each waking the process for a moment,
		// so the answer is compared with reads of the row just before and just after it: the two
		// agree and the answer matches them, within a few tries.
		var got payments.PaymentStatus
		servertest.Eventually(t, 30*time.Second, "the answer to match the row read around it", func() bool {
			before, err := f.Client.Driver().Executor().ExecutionGet(ctx, step.ExecutionID)
			require.NoError(t, err)
			x := send(t, "GET", f.HTTP.URL+"/api/payments/"+step.ExecutionID.String()+"/status", nil, bearer(viewerToken))
			require.Equal(t, http.StatusOK, x.resp.StatusCode, "%s", x.respBody)
			got = payments.PaymentStatus{}
			require.NoError(t, json.Unmarshal(x.respBody, &got))
			after, err := f.Client.Driver().Executor().ExecutionGet(ctx, step.ExecutionID)
			require.NoError(t, err)
			return before.Status == after.Status && before.UpdatedAt.Equal(after.UpdatedAt) && string(after.Status) == got.Status
		})
		require.Equal(t, step.ExecutionID, got.ProcessID)
		require.Equal(t, step.PaymentID, got.PaymentID)
		require.Equal(t, payments.TypePaymentStep, got.ProcessType)
		require.True(t, got.L1Received)
		require.False(t, got.L4Received, "L2 waits for an operator, so L4 has not arrived")

		manager := f.Submit(servertest.DomesticPayment(payments.TypePaymentManager))
		f.WaitPayment(manager.PaymentID, "COMPLETED")
		x := send(t, "GET", f.HTTP.URL+"/api/payments/"+manager.ExecutionID.String()+"/status", nil, bearer(viewerToken))
		require.Equal(t, http.StatusOK, x.resp.StatusCode)
		require.NoError(t, json.Unmarshal(x.respBody, &got))
		require.Equal(t, "COMPLETED", got.Status)
		require.Equal(t, manager.PaymentID, got.PaymentID)

		// A payment id is not a process id, and a process of another type is no payment.
		x = send(t, "GET", f.HTTP.URL+"/api/payments/"+manager.PaymentID.String()+"/status", nil, bearer(viewerToken))
		require.Equal(t, http.StatusNotFound, x.resp.StatusCode)
	})
}

// GET /api/processes/{id} gives each completed step's start and end (startedAt, at) and its
// latency in milliseconds.
func TestAPIProcessLogHasStepTimes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		paid := f.Submit(servertest.DomesticPayment(payments.TypePaymentStep))
		f.WaitPayment(paid.PaymentID, "COMPLETED")
		x := send(t, "GET", f.HTTP.URL+"/api/processes/"+paid.ExecutionID.String(), nil, bearer(viewerToken))
		require.Equal(t, http.StatusOK, x.resp.StatusCode, "%s", x.respBody)
		var body struct {
			Log []struct {
				EntryType  string     `json:"entryType"`
				StepStatus string     `json:"stepStatus"`
				At         time.Time  `json:"at"`
				StartedAt  *time.Time `json:"startedAt"`
				LatencyMs  *float64   `json:"latencyMs"`
			} `json:"log"`
		}
		require.NoError(t, json.Unmarshal(x.respBody, &body))
		steps := 0
		for _, e := range body.Log {
			if e.EntryType != "STEP" || e.StepStatus != "COMPLETED" {
				continue
			}
			steps++
			require.NotNil(t, e.StartedAt, "%s", x.respBody)
			require.False(t, e.StartedAt.After(e.At))
			require.NotNil(t, e.LatencyMs)
			require.InDelta(t, float64(e.At.Sub(*e.StartedAt).Microseconds())/1000, *e.LatencyMs, 0.001)
		}
		require.Positive(t, steps, "%s", x.respBody)
	})
}
