package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	. "github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/server/console"
)

// Sign-in, sessions, roles and CSRF, without a browser.
func TestConsoleAuthAndForms(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		_, cmd := f.ParkRiskCommand()
		retry := "/tsq/commands/" + cmd.ID.String() + "/retry"

		anon := f.HTTPClient()
		resp, _ := anon.Get("/tsq/commands")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/login?next=%2Ftsq%2Fcommands", resp.Header.Get("Location"))
		resp, body := anon.Get("/login")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, `<label for="field-token">`)
		require.Equal(t, "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "+
			"form-action 'self'; frame-ancestors 'none'; base-uri 'none'", resp.Header.Get("Content-Security-Policy"))
		resp, body = anon.Post("/login", url.Values{"csrf": {servertest.CSRFOf(t, body)}, "token": {"not-a-real-token-at-all"}})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Contains(t, body, "This token is not valid.")
		require.Contains(t, body, `aria-invalid="true"`)
		resp, body = anon.Post("/login", url.Values{"csrf": {"forged"}, "token": {operatorToken}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "the sign-in form is CSRF-protected too")
		require.Contains(t, body, "The sign-in form expired")
		resp, _ = anon.Get("/api/tsq/commands")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the API is unchanged")
		resp, body = anon.Get("/api/nothing-here")
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Contains(t, body, `"code":"NOT_FOUND"`)

		// A viewer sees no actions and is refused on a direct POST, even with a valid CSRF token.
		viewer := f.HTTPClient()
		viewer.Login(viewerToken)
		cookies := viewer.Client.Jar.Cookies(mustURL(t, f.HTTP.URL))
		require.NotEmpty(t, cookies)
		resp, body = viewer.Get("/tsq/commands")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, cmd.ID.String())
		require.NotContains(t, body, "Retry…")
		require.Contains(t, body, "You have the viewer role")
		viewerCSRF := servertest.CSRFOf(t, body) // the sign-out form's
		resp, _ = viewer.Get(retry)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		resp, body = viewer.Post(retry, url.Values{"csrf": {viewerCSRF}, "reason": {"let me"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		require.Contains(t, body, "can look but not act")
		row, err := f.Client.GetCommand(context.Background(), cmd.ID)
		require.NoError(t, err)
		require.Equal(t, commandbus.StatusInTSQ, row.Status, "the refused action changed nothing")

		op := f.HTTPClient()
		op.Login(operatorToken)
		resp, body = op.Get("/tsq/commands")
		require.Contains(t, body, "Retry…")
		csrf := servertest.CSRFOf(t, body)
		resp, body = op.Get(retry)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, "Retry command")
		require.Contains(t, body, `<label for="field-reason">`)

		resp, _ = op.Post(retry, url.Values{"reason": {"no token"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "no CSRF token")
		resp, _ = op.Post(retry, url.Values{"csrf": {csrf}, "reason": {"cross-site"}}, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "a cross-site request")
		other := f.HTTPClient()
		other.Login(operatorToken)
		resp, _ = other.Post(retry, url.Values{"csrf": {viewerCSRF}, "reason": {"token of another session"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "a CSRF token is bound to its session")
		resp, body = op.Post(retry, url.Values{"csrf": {csrf}, "reason": {"  "}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		require.Contains(t, body, `id="error-reason"`)
		require.Contains(t, body, "There is a problem")

		resp, _ = op.Post(retry, url.Values{"csrf": {csrf}, "reason": {"provider fixed the outage"}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/tsq/commands", resp.Header.Get("Location"))
		resp, body = op.Get("/tsq/commands")
		require.Contains(t, body, "is back on its queue", "the flash message follows the redirect")
		_, body = op.Get("/tsq/commands")
		require.NotContains(t, body, "is back on its queue", "a flash message shows once")
		row, err = f.Client.GetCommand(context.Background(), cmd.ID)
		require.NoError(t, err)
		require.NotEqual(t, commandbus.StatusInTSQ, row.Status)
		audit, err := f.Client.AuditLog(context.Background(), &driver.AuditLogListParams{EntityType: "command", EntityID: cmd.ID.String()})
		require.NoError(t, err)
		require.Equal(t, "alice@ops", audit[0].Actor)
		require.Equal(t, "provider fixed the outage", audit[0].Reason)

		resp, body = op.Post(retry, url.Values{"csrf": {csrf}, "reason": {"again"}})
		require.Equal(t, http.StatusConflict, resp.StatusCode, "the action no longer applies")
		require.Contains(t, body, "Not possible now")

		resp, _ = op.Post("/logout", url.Values{"csrf": {csrf}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		resp, _ = op.Get("/tsq/commands")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed out")
	})
}

func mustURL(t *testing.T, raw string) *url.URL {
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}

// Every page renders with data in it, and the live endpoints answer with their regions.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		ctx := context.Background()
		// Injected faults hit the next call of a step, whichever payment makes it: park first.
		stuck := f.ParkManagerPayment()
		parked, cmd := f.ParkRiskCommand()
		batch, err := f.Platform.CreateBatch(ctx, 5, servertest.Today, payments.TypePaymentManager, nil)
		require.NoError(t, err)
		big := f.Submit(servertest.BigPayment())
		f.WaitApproval(big.PaymentID)
		pending := f.Submit(servertest.PendingL2Payment())
		servertest.Eventually(t, 30*time.Second, "L2 to be pending", func() bool {
			list, err := f.Platform.ListPendingNetworkResponses(ctx, payments.ListParams{})
			require.NoError(t, err)
			return len(list) == 1
		})

		op := f.HTTPClient()
		op.Login(operatorToken)
		for path, want := range map[string][]string{
			"/":                                        {"Commands completed per second", "In flight per domain", "Batch progress", "<svg"},
			"/batches":                                 {shortID(batch.ID), "New batch"},
			"/batches/" + batch.ID.String():            {"Where the payments are", "Payments by status"},
			"/batches/new":                             {"Process type", "Permanent failure %", `for="field-bookRisk.failPermanentPct"`},
			"/payments":                                {shortID(stuck.PaymentID), "Filter"},
			"/payments?status=IN_TSQ":                  {shortID(stuck.PaymentID)},
			"/payments/" + stuck.PaymentID.String():    {"Step timeline", "STEP_CHECK_BALANCE", "attempt 1 of 3", "Compensate and cancel…", "COMMAND_PARKED"},
			"/payments/" + parked.PaymentID.String():   {"bookRisk", "Command step", "COMMAND_PARKED", "Waiting on parked command"},
			"/payments/" + big.PaymentID.String():      {"manual risk approval", "Approve…"},
			"/payments/" + pending.PaymentID.String():  {"L2 pending for an operator", "Answer success…"},
			"/tsq/commands":                            {shortID(cmd.ID), `aria-current="page">Commands`},
			"/tsq/processes":                           {shortID(stuck.ExecutionID), "Compensate and cancel…"},
			"/commands/" + cmd.ID.String():             {"BookRisk", "History", "Retry…"},
			"/processes/" + stuck.ExecutionID.String(): {"open the payment", "Step timeline"},
			"/approvals":                               {shortID(big.PaymentID), "Approve…", "Reject…"},
			"/network":                                 {shortID(pending.PaymentID), "Answer success…", "Answer failure…"},
			"/tsq/processes/" + stuck.ExecutionID.String() + "/complete": {"State overrides (JSON object)"},
			"/tsq/processes/" + stuck.ExecutionID.String() + "/skip":     {"STEP_CHECK_BALANCE"},
			"/tsq/commands/" + cmd.ID.String() + "/complete":             {"Result (JSON)"},
		} {
			resp, body := op.Get(path)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
			for _, w := range want {
				require.Contains(t, body, w, path)
			}
			require.Contains(t, body, `<a class="skip-link" href="#main">`, path)
		}
		resp, _ := op.Get("/payments/" + batch.ID.String())
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		resp, body := op.Get("/no/such/page")
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Contains(t, body, "Page not found")
		resp, body = op.Get("/payments?batch=nope")
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		require.Contains(t, body, "Enter a batch id")

		for path, regions := range map[string][]string{
			"/live/overview":                                console.ExportOverviewRegions,
			"/live/batches":                                 {"batches-table"},
			"/live/batches/" + batch.ID.String():            {"batch-progress", "batch-items"},
			"/live/payments/" + stuck.PaymentID.String():    {"payment-status", "payment-timeline"},
			"/live/processes/" + stuck.ExecutionID.String(): console.ExportProcessRegions,
		} {
			resp, body := op.Get(path)
			require.Equal(t, http.StatusOK, resp.StatusCode, path)
			var live struct {
				Regions map[string]string `json:"regions"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &live), path)
			for _, r := range regions {
				require.NotEmpty(t, live.Regions[r], "%s: region %s", path, r)
			}
		}
		resp, _ = f.HTTPClient().Get("/live/overview")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

		resp, body = op.Get("/static/console.css")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, ":focus-visible")
	})
}

// The New batch form validates every field, loads a preset into its table, and asks for a
// confirmation and a reason before it creates the batch.
func TestConsoleNewBatchForm(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		op := f.HTTPClient()
		op.Login(operatorToken)
		_, body := op.Get("/batches/new")
		csrf := servertest.CSRFOf(t, body)
		require.Contains(t, body, `value="`+servertest.Today+`"`, "the day defaults to today")

		resp, body := op.Post("/batches/new", url.Values{"csrf": {csrf}, "processType": {"Other"}, "count": {"0"}, "day": {"23/11/2026"},
			"preset": {"custom"}, "bookFx.failTransientPct": {"150"}, "bookRisk.failPermanentPct": {"60"}, "bookRisk.failTransientPct": {"60"},
			"submitPayment.minDurationMs": {"x"}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		for _, want := range []string{`id="error-count"`, `id="error-day"`, `id="error-processType"`, `id="error-bookFx.failTransientPct"`,
			`id="error-bookRisk"`, "add up to 120", `id="error-submitPayment.minDurationMs"`, `value="150"`} {
			require.Contains(t, body, want)
		}

		resp, body = op.Post("/batches/new", url.Values{"csrf": {csrf}, "processType": {payments.TypePaymentStep}, "count": {"3"},
			"day": {servertest.Today}, "preset": {"chaos"}, "load": {"1"}})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, `name="awaitL4.failTransientPct" type="number" min="0" max="100" step="any" inputmode="decimal"
            value="15"`)
		require.Contains(t, body, `<option value="custom" selected>`)

		form := url.Values{"csrf": {csrf}, "processType": {payments.TypePaymentManager}, "count": {"3"}, "day": {servertest.Today},
			"preset": {"custom"}, "checkBalance.maxDurationMs": {"5"}}
		resp, body = op.Post("/batches/new", form)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, "Create this batch?")
		require.Contains(t, body, `name="checkBalance.maxDurationMs" value="5"`)
		form.Set("confirmed", "1")
		resp, body = op.Post("/batches/new", form)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "a reason is required")
		require.Contains(t, body, `id="error-reason"`)
		form.Set("reason", "end-of-day run")
		resp, _ = op.Post("/batches/new", form)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		location := resp.Header.Get("Location")
		require.True(t, strings.HasPrefix(location, "/batches/"), location)
		batches, err := f.Platform.ListBatches(context.Background(), payments.ListParams{})
		require.NoError(t, err)
		require.Len(t, batches, 1)
		require.Equal(t, 3, batches[0].Total)
		require.Equal(t, "custom", batches[0].Behavior)
		audit, err := f.Client.AuditLog(context.Background(), &driver.AuditLogListParams{EntityType: "batch"})
		require.NoError(t, err)
		require.Len(t, audit, 1)
		require.Equal(t, "alice@ops", audit[0].Actor)
		require.Equal(t, "end-of-day run", audit[0].Reason)
	})
}

func TestConsoleMoreActions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		ctx := context.Background()
		op := f.HTTPClient()
		op.Login(operatorToken)
		_, body := op.Get("/")
		csrf := servertest.CSRFOf(t, body)
		post := func(path string, form url.Values) (*http.Response, string) {
			form.Set("csrf", csrf)
			return op.Post(path, form)
		}

		stuck := f.ParkManagerPayment()
		complete := "/tsq/processes/" + stuck.ExecutionID.String() + "/complete"
		resp, body := post(complete, url.Values{"reason": {"done by phone"}, "stateOverrides": {`{"holdId": "H-1"}`}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "a payment needs evidence to be force-completed")
		require.Contains(t, body, "Say what shows the payment was made")
		resp, body = post(complete, url.Values{"reason": {"done by phone"}, "stateOverrides": {`{"evidence": "x", "nope": 1}`}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "unknown state fields are refused")
		require.Contains(t, body, `id="error-stateOverrides"`)
		resp, _ = post("/tsq/processes/"+stuck.ExecutionID.String()+"/compensate", url.Values{"reason": {"customer withdrew"},
			"return": {"/payments/" + stuck.PaymentID.String()}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/payments/"+stuck.PaymentID.String(), resp.Header.Get("Location"))
		f.WaitPayment(stuck.PaymentID, "CANCELLED")
		audit, err := f.Client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: stuck.ExecutionID.String()})
		require.NoError(t, err)
		require.Equal(t, "alice@ops", audit[0].Actor)
		require.Equal(t, "customer withdrew", audit[0].Reason)
		_, body = op.Get("/payments/" + stuck.PaymentID.String())
		require.Contains(t, body, "TSQ_CANCEL")
		require.Contains(t, body, "customer withdrew")

		big := f.Submit(servertest.BigPayment())
		approval := f.WaitApproval(big.PaymentID)
		resp, _ = post("/approvals/"+approval.ID.String()+"/reject", url.Values{"reason": {"sanctions hit"}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		f.WaitPayment(big.PaymentID, "COMPENSATED")
		_, body = op.Get("/payments/" + big.PaymentID.String())
		require.Contains(t, body, "RISK_REJECTED")
		require.Contains(t, body, "sanctions hit")
		resp, body = post("/approvals/"+approval.ID.String()+"/approve", url.Values{"reason": {"too late"}})
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Contains(t, body, "was rejected by alice@ops already")

		pending := f.Submit(servertest.PendingL2Payment())
		var answer string
		servertest.Eventually(t, 30*time.Second, "L2 to be pending", func() bool {
			list, err := f.Platform.ListPendingNetworkResponses(ctx, payments.ListParams{})
			require.NoError(t, err)
			if len(list) == 1 {
				answer = "/network/" + list[0].ID.String() + "/reject"
			}
			return answer != ""
		})
		resp, _ = post(answer, url.Values{"reason": {"beneficiary bank refused"}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		f.WaitPayment(pending.PaymentID, "COMPENSATED")
		_, body = op.Get("/payments/" + pending.PaymentID.String())
		require.Contains(t, body, "NETWORK_REJECT", "the answer is in the payment's audit log")
		resp, body = post(answer, url.Values{"reason": {"again"}})
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Contains(t, body, "answered already")

		// Skip: the process manager's FX step booked by phone.
		require.NoError(t, f.Platform.InjectFault(payments.Fault{Step: payments.StepBookFx, Class: payments.FaultPermanent, Times: 1}))
		fx := f.Submit(payments.PaymentRequest{DebitAccount: "CUST-EUR-001", CreditAccount: "BENE-USD-001", Amount: "1000.00",
			Currency: "EUR", CreditCurrency: "USD", ProcessType: payments.TypePaymentManager})
		servertest.Eventually(t, 30*time.Second, "BookFxContract to park", func() bool {
			parked, err := f.Client.TSQ().List(ctx, commandbus.TSQFilter{Domain: payments.DomainFx})
			require.NoError(t, err)
			return len(parked) == 1
		})
		f.Fake.Advance(f.Client.Config().CommandStepOr("", payments.DomainAccounts, "").Timeout.Std() + time.Second)
		f.WaitPayment(fx.PaymentID, "IN_TSQ")
		skip := "/tsq/processes/" + fx.ExecutionID.String() + "/skip"
		_, body = op.Get(skip)
		require.Contains(t, body, `value="STEP_BOOK_FX"`, "the step is filled in")
		resp, body = post(skip, url.Values{"reason": {"booked by phone"}, "step": {"STEP_CHECK_LIMIT"}, "result": {`{}`}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		require.Contains(t, body, `id="error-step"`)
		resp, _ = post(skip, url.Values{"reason": {"booked by phone"}, "step": {"STEP_BOOK_FX"},
			"result": {`{"contractId":"PHONE-1","rate":"1.08","buyAmount":"1080.00","buyCurrency":"USD"}`}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		f.WaitPayment(fx.PaymentID, "COMPLETED")
	})
}

// The sampler starts with the server and Close stops it: nothing is left running. Not parallel,
// so that no other test's goroutines run while it looks.
func TestConsoleCloseStopsSampler(t *testing.T) {
	client, err := commandbus.NewClient(dbtest.SQLite(t), nil)
	require.NoError(t, err)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv, err := New(Config{Client: client, Tokens: testTokens, ConsoleSampleInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	servertest.Eventually(t, 5*time.Second, "a sample", func() bool { return console.ExportSampleCount(srv.Console()) > 1 })
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close(), "Close is idempotent")
}

// The console counts a reason's characters as the API does, in Unicode code points: a reason of
// exactly 500 two-byte characters (1,000 bytes) is accepted and audited whole, 501 are refused,
// in the console and in the API alike.
func TestReasonCapCountsCharacters(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		_, cmds := f.parkRiskCommands(2)
		exact := strings.Repeat("é", commandbus.MaxReasonLength)
		require.Len(t, exact, 2*commandbus.MaxReasonLength, "two bytes per character")
		over := exact + "é"

		op := f.HTTPClient()
		op.Login(operatorToken)
		retry := "/tsq/commands/" + cmds[0].ID.String() + "/retry"
		_, body := op.Get(retry)
		csrf := servertest.CSRFOf(t, body)
		resp, body := op.Post(retry, url.Values{"csrf": {csrf}, "reason": {over}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		require.Contains(t, body, "Keep the reason to 500 characters or fewer; it has 501.")
		require.Equal(t, commandbus.StatusInTSQ, f.command(cmds[0].ID).Status, "the refused action changed nothing")
		resp, _ = op.Post(retry, url.Values{"csrf": {csrf}, "reason": {exact}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "500 characters are allowed, however many bytes")
		audit := f.audit("command", cmds[0].ID)
		require.Equal(t, exact, audit[0].Reason)

		api := func(reason string) *http.Response {
			payload, err := json.Marshal(map[string]string{"reason": reason})
			require.NoError(t, err)
			req, err := http.NewRequest(http.MethodPost, f.HTTP.URL+"/api/tsq/commands/"+cmds[1].ID.String()+"/retry", bytes.NewReader(payload))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+operatorToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp
		}
		require.Equal(t, http.StatusBadRequest, api(over).StatusCode)
		require.Equal(t, commandbus.StatusInTSQ, f.command(cmds[1].ID).Status)
		require.Less(t, api(exact).StatusCode, 300)
		require.Equal(t, exact, f.audit("command", cmds[1].ID)[0].Reason)
	})
}
