package console_test

import (
	"context"
	"encoding/json"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/onboarding"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/examples/payments/paymentsweb"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/orchestration"
	. "github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/workflow"
)

// The workflows the execution pages are tested with, beside the payments and the onboarding.
const (
	gateType   = "ConsoleGate"   // prepare → approval (signal gate "approve") → finish
	napType    = "ConsoleNap"    // nap (sleeps an hour on the fake clock) → wake
	parentType = "ConsoleParent" // child (a ConsoleGate) → after
)

// execFixture is a console fixture whose runtime runs the payment processes, the onboarding
// workflow and the test workflows.
type execFixture struct {
	*consoleFixture
	rt                *orchestration.Runtime
	onboarding        *onboarding.Flow
	gate, nap, parent *workflow.Manager
}

func setupExecConsole(t *testing.T, drv driver.Driver) *execFixture {
	t.Helper()
	fake := clock.NewFake(servertest.Start)
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	reg := prometheus.NewRegistry()
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger:            slog.New(slog.NewTextHandler(servertest.LogWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelError})),
		Clock:             fake,
		FetchPollInterval: ms(100),
		Domains:           payments.DefaultDomainConfigs(4),
		MetricsRegisterer: reg,
		Process: commandbus.ProcessConfig{
			PendingPollInterval: ms(50), RetryPollInterval: ms(50), TimeoutCheckInterval: ms(50),
			DeadlineCheckInterval: ms(100), ExecutionLease: commandbus.Duration(30 * time.Second),
		},
	})
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	f := &execFixture{rt: rt}
	f.onboarding, err = onboarding.Register(rt)
	require.NoError(t, err)
	noop := func(context.Context, *workflow.StepContext) (any, error) { return map[string]bool{"ok": true}, nil }
	f.gate, err = workflow.Register(rt, workflow.New(gateType, 1).Describe("Waits for an operator's approval").
		Step("prepare", noop).
		WaitSignal("approval", "approve", workflow.DependsOn("prepare")).
		Step("finish", noop, workflow.DependsOn("approval")))
	require.NoError(t, err)
	f.nap, err = workflow.Register(rt, workflow.New(napType, 1).
		Sleep("nap", time.Hour).
		Step("wake", noop, workflow.DependsOn("nap")))
	require.NoError(t, err)
	f.parent, err = workflow.Register(rt, workflow.New(parentType, 1).
		Child("child", gateType, func(*workflow.StepContext) (any, error) { return map[string]string{"from": "parent"}, nil }).
		Step("after", noop, workflow.DependsOn("child")))
	require.NoError(t, err)
	platform, err := payments.New(client, payments.Options{Runtime: rt, SimulatorPollInterval: 50 * time.Millisecond,
		CustomersPerCurrency: 3, BeneficiariesPerCurrency: 3, FXTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	srv, err := New(Config{Client: client, Runtime: rt, Extensions: []Extension{paymentsweb.New(platform)}, Tokens: testTokens,
		Gatherer: reg, ConsoleSampleInterval: 250 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	f.consoleFixture = &consoleFixture{&servertest.Fixture{T: t, Fake: fake, Client: client, Platform: platform, Server: srv, HTTP: hs}}
	return f
}

// startWorkflow starts an execution of m and waits until it has run as far as it can.
func (f *execFixture) startWorkflow(m *workflow.Manager, want driver.ExecutionStatus) uuid.UUID {
	f.T.Helper()
	id, err := m.Start(context.Background(), map[string]string{"by": "test"}, workflow.Immediate())
	require.NoError(f.T, err)
	f.waitExecution(id, want)
	return id
}

// waitExecution waits until the stored execution has status want.
func (f *execFixture) waitExecution(id uuid.UUID, want driver.ExecutionStatus) {
	f.T.Helper()
	servertest.Eventually(f.T, 30*time.Second, "execution "+id.String()+" to be "+string(want), func() bool {
		return f.execution(id).Status == want
	})
}

// The filters refuse what they cannot read with a 400 page naming the field; unknown pages and
// ids are 404s; a signal with bad JSON is refused and nothing is sent.
func TestConsoleExecutionFilters(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupExecConsole(t, drv)
		gate := f.startWorkflow(f.gate, driver.ExecutionWaitingForAsync)
		op := f.HTTPClient()
		op.Login(operatorToken)

		for path, want := range map[string]string{
			"/executions?status=BOGUS":                            `"BOGUS" is not an execution status`,
			"/executions?status=COMPLETED,nope":                   `"nope" is not an execution status`,
			"/executions?attr=region":                             `is not key=value`,
			"/executions?attr.=x":                                 `is not key=value`,
			"/executions?before=yesterday":                        "the page marker is not an execution id",
			"/executions?attr=" + strings.Repeat("k", 300) + "=v": "attribute",
		} {
			resp, body := op.Get(path)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, path)
			requireHTML(t, body, "There is a problem with the filter", path)
			requireHTML(t, textOf(body), want, path)
			requireNoHTML(t, body, `id="executions-table"`, path)
		}
		for path, want := range map[string]string{
			"/definitions/workflow/NoSuchFlow": "No workflow of type",
			"/executions/not-an-id":            "is not an execution id",
			"/executions/" + uuid.NewString():  "Not found",
		} {
			resp, body := op.Get(path)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
			requireHTML(t, body, want, path)
		}

		resp, body := op.Get("/executions?status=waiting_for_async&model=workflow&type=" + gateType)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		requireHTML(t, body, `data-id="`+gate.String()+`"`)
		resp, body = op.Get("/executions?status=COMPLETED&model=workflow")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		requireNoHTML(t, body, gate.String())
		resp, body = op.Get("/executions?attr.region=EU")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		requireHTML(t, body, `value="region=EU"`, "the attr.K=V parameters show in the form")
		requireHTML(t, body, "No executions match the filter")

		// The definitions count the executions by status and link to them; a process's execution
		// page links to its process page and back.
		resp, body = op.Get("/definitions")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		requireHTML(t, rowOf(t, body, "data-type", gateType), `href="/executions?model=workflow&amp;type=`+gateType+`&amp;status=WAITING_FOR_ASYNC"`)
		payment := f.Submit(servertest.DomesticPayment(payments.TypePaymentStep))
		f.WaitPayment(payment.PaymentID, "COMPLETED")
		resp, body = op.Get("/executions/" + payment.ExecutionID.String())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		requireHTML(t, body, `id="process-page"`)
		requireHTML(t, textOf(body), "COMPLETED")
		requireHTML(t, body, `class="timeline-bar" data-step="`)
		requireNoHTML(t, body, `id="action-suspend"`, "no actions on an ended execution")
		resp, body = op.Get("/processes/" + payment.ExecutionID.String())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		requireHTML(t, body, `href="/executions/`+payment.ExecutionID.String()+`" id="execution-page"`)

		// Paging: newest first, 50 a page, the next page older than the last row shown.
		inputs := make([]any, 55)
		for i := range inputs {
			inputs[i] = map[string]int{"n": i}
		}
		_, err := f.nap.StartMany(context.Background(), inputs)
		require.NoError(t, err)
		resp, body = op.Get("/executions?type=" + napType)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		first := rowIDs(body)
		require.Len(t, first, 50)
		next := nextPageRE.FindStringSubmatch(body)
		require.NotNil(t, next, "a link to the older executions")
		resp, body = op.Get(html.UnescapeString(next[1]))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		second := rowIDs(body)
		require.Len(t, second, 5)
		require.Less(t, second[0], first[len(first)-1], "the second page is older")
		requireNoHTML(t, body, `id="next-page"`)
		requireHTML(t, body, `id="first-page"`)

		// The page's live regions, and the header's search, which finds a workflow's page.
		resp, body = op.Get("/live/executions/" + gate.String())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var live struct {
			Regions map[string]string `json:"regions"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &live))
		require.Contains(t, live.Regions["execution-status"], "WAITING_FOR_ASYNC")
		require.Contains(t, live.Regions["execution-timeline"], `data-step="approval"`)
		require.Contains(t, live.Regions["execution-waits"], "approve")
		resp, _ = op.Get("/live/executions/" + uuid.NewString())
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		resp, body = op.Get("/search?q=" + gate.String())
		if resp.StatusCode == http.StatusSeeOther {
			require.Equal(t, "/executions/"+gate.String(), resp.Header.Get("Location"))
		} else {
			requireHTML(t, body, `href="/executions/`+gate.String()+`"`)
		}

		// Bad JSON in a signal's payload: refused next to its field, nothing sent.
		_, page := op.Get("/executions/" + gate.String() + "/signal?name=approve")
		resp, body = op.Post("/executions/"+gate.String()+"/signal", url.Values{"csrf": {servertest.CSRFOf(t, page)},
			"name": {"approve"}, "payload": {`{"ok": tru`}, "reason": {"approved by phone"}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		requireHTML(t, body, "This is not valid JSON")
		signals, err := f.rt.PendingSignals(context.Background(), gate)
		require.NoError(t, err)
		require.Empty(t, signals, "nothing was sent")
		require.Equal(t, driver.ExecutionWaitingForAsync, f.execution(gate).Status)

		// A viewer sees the pages but no actions, and is refused at the handler.
		viewer := f.HTTPClient()
		viewer.Login(viewerToken)
		resp, body = viewer.Get("/executions/" + gate.String())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		requireNoHTML(t, body, `id="action-suspend"`)
		resp, _ = viewer.Get("/executions/" + gate.String() + "/suspend")
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
	})
}

func TestConsoleExecutionsInBrowser(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupExecConsole(t, drv)
		t.Run("the definition page draws the onboarding DAG", func(t *testing.T) { browserDAG(t, f, browser) })
		t.Run("the executions list filters by model and status", func(t *testing.T) { browserExecutionList(t, f, browser) })
		t.Run("an operator sends the signal a gate waits for", func(t *testing.T) { browserSignal(t, f, browser) })
		t.Run("suspend then resume", func(t *testing.T) { browserSuspendResume(t, f, browser) })
		t.Run("cancel a timer", func(t *testing.T) { browserCancelTimer(t, f, browser) })
		t.Run("parent and child link to each other", func(t *testing.T) { browserChildren(t, f, browser) })
	})
}

func browserDAG(t *testing.T, f *execFixture, browser context.Context) {
	tb := f.openTab(t, browser, viewerToken)
	tb.visit("/definitions")
	require.Contains(t, tb.text(`#definitions-table tr[data-type="`+onboarding.Type+`"]`), "Verify an applicant")
	require.Equal(t, 1, tb.count(`#definitions-table tr[data-type="`+payments.TypePaymentStep+`"][data-model="process"]`))
	tb.submit(`#definitions-table tr[data-type="` + onboarding.Type + `"] a`)

	def := orchestration.Describe(f.onboarding.Manager)
	steps := 0
	for _, layer := range def.Topology.Layers {
		steps += len(layer)
	}
	require.Equal(t, 6, steps)
	require.Equal(t, steps, tb.count("#dag g.dag-step"), "one box per step")
	require.Equal(t, steps, tb.count("#dag g.dag-step rect"))
	require.Equal(t, len(def.Topology.Edges), tb.count("#dag path.dag-edge"), "one line per edge")
	require.Equal(t, 1, tb.count(`#dag path.dag-edge[data-from="verifyApplicant"][data-to="kyc"]`))
	require.Equal(t, 1, tb.count(`#dag path.dag-edge[data-from="openAccount"][data-to="sendWelcomePack"]`))
	// The parallel checks share a column, to the right of the verification.
	for _, s := range []string{"kyc", "sanctions", "creditCheck"} {
		require.Equal(t, 1, tb.count(`#dag g.dag-step[data-step="`+s+`"][data-layer="1"][data-kind="local"]`), s)
	}
	require.Equal(t, 1, tb.count(`#dag g.dag-step[data-step="verifyApplicant"][data-layer="0"]`))
	xOf := func(step string) float64 {
		x, err := chromeEval[float64](tb, `document.querySelector('#dag g[data-step="`+step+`"] rect').getBBox().x`)
		require.NoError(t, err)
		return x
	}
	require.Less(t, xOf("verifyApplicant"), xOf("kyc"), "layers go left to right")
	require.Equal(t, xOf("kyc"), xOf("sanctions"))
	require.Less(t, xOf("openAccount"), xOf("sendWelcomePack"))
	t.Logf("the onboarding DAG: %s", tb.screenshot("onboarding-dag"))

	tb.visit("/definitions/workflow/" + gateType)
	require.Equal(t, 1, tb.count(`#dag g.dag-step[data-step="approval"][data-kind="signal"]`))
	require.Contains(t, tb.text(`#steps-table tr[data-step="approval"]`), "signal approve")
	tb.visit("/definitions/workflow/" + parentType)
	require.Equal(t, 1, tb.count(`#dag g.dag-step[data-step="child"][data-kind="child"]`))
	tb.visit("/definitions/workflow/" + napType)
	require.Equal(t, 1, tb.count(`#dag g.dag-step[data-step="nap"][data-kind="sleep"]`))
	tb.visit("/definitions/process/" + payments.TypePaymentStep)
	require.Contains(t, tb.text("#code-definition"), "code is its definition")
	require.Equal(t, 0, tb.count("#dag"))
}

func browserExecutionList(t *testing.T, f *execFixture, browser context.Context) {
	payment := f.Submit(servertest.DomesticPayment(payments.TypePaymentStep))
	f.WaitPayment(payment.PaymentID, "COMPLETED")
	gate := f.startWorkflow(f.gate, driver.ExecutionWaitingForAsync)
	done, err := f.onboarding.Start(context.Background(), onboarding.Applicant{Name: "Ada", Email: "ada@example.com", Country: "GB"}, workflow.Immediate())
	require.NoError(t, err)
	f.waitExecution(done, driver.ExecutionCompleted)

	tb := f.openTab(t, browser, viewerToken)
	tb.visit("/")
	tb.submit(`nav a[href="/executions"]`)
	require.Equal(t, 1, tb.count(`#executions-table tr[data-id="`+payment.ExecutionID.String()+`"]`))
	require.Equal(t, 1, tb.count(`#executions-table tr[data-id="`+gate.String()+`"]`))

	tb.set("#field-model", "process")
	tb.submit("#filter-submit")
	require.Positive(t, tb.count(`#executions-table tbody tr`))
	require.Equal(t, tb.count(`#executions-table tbody tr`), tb.count(`#executions-table tbody tr[data-model="process"]`), "only processes")
	require.Equal(t, 1, tb.count(`#executions-table tr[data-id="`+payment.ExecutionID.String()+`"]`))

	tb.set("#field-model", "workflow")
	tb.fill("#field-status", "COMPLETED")
	tb.submit("#filter-submit")
	rows := tb.count(`#executions-table tbody tr`)
	require.Positive(t, rows)
	require.Equal(t, rows, tb.count(`#executions-table tbody tr[data-model="workflow"][data-status="COMPLETED"]`), "only completed workflows")
	require.Equal(t, 1, tb.count(`#executions-table tr[data-id="`+done.String()+`"]`))
	require.Equal(t, 0, tb.count(`#executions-table tr[data-id="`+gate.String()+`"]`), "the waiting gate is filtered out")

	tb.fill("#field-status", "NOT_A_STATUS")
	require.Equal(t, int64(http.StatusBadRequest), tb.submit("#filter-submit"))
	require.Contains(t, tb.text("#error-status"), `"NOT_A_STATUS" is not an execution status`)

	tb.visit("/executions/" + done.String())
	require.Equal(t, 6, tb.count("#timeline g.timeline-bar"), "a row per step")
	// The three checks of one layer overlap on the time axis.
	span := func(step string) (float64, float64) {
		x, err := chromeEval[float64](tb, `+document.querySelector('#timeline g[data-step="`+step+`"]').dataset.x`)
		require.NoError(t, err)
		w, err := chromeEval[float64](tb, `+document.querySelector('#timeline g[data-step="`+step+`"]').dataset.w`)
		require.NoError(t, err)
		return x, x + w
	}
	k0, k1 := span("kyc")
	s0, s1 := span("sanctions")
	v0, _ := span("verifyApplicant")
	require.LessOrEqual(t, v0, k0)
	require.True(t, k0 <= s1 && s0 <= k1, "kyc [%v,%v] and sanctions [%v,%v] overlap", k0, k1, s0, s1)
	t.Logf("an onboarding's execution page: %s", tb.screenshot("onboarding-execution"))
}

func browserSignal(t *testing.T, f *execFixture, browser context.Context) {
	gate := f.startWorkflow(f.gate, driver.ExecutionWaitingForAsync)
	tb := f.openTab(t, browser, operatorToken)
	tb.visit("/executions/" + gate.String())
	require.Contains(t, tb.text(`#waits-table tr[data-kind="SIGNAL"]`), "approve")
	require.Contains(t, tb.textContent(`#timeline g[data-step="prepare"]`), "prepare")

	tb.submit("#signal-approve")
	require.Equal(t, "approve", tb.value("#field-name"))
	tb.fill("#field-payload", `{"approved": tru`)
	tb.fill("#field-reason", "approved on the phone")
	require.Equal(t, int64(http.StatusUnprocessableEntity), tb.submit("#confirm-submit"))
	require.Contains(t, tb.text("#error-payload"), "not valid JSON")
	signals, err := f.rt.PendingSignals(context.Background(), gate)
	require.NoError(t, err)
	require.Empty(t, signals, "bad JSON sends nothing")
	require.Equal(t, driver.ExecutionWaitingForAsync, f.execution(gate).Status)

	tb.fill("#field-payload", `{"approved": true}`)
	tb.confirmAction("approved on the phone")
	tb.waitText(".flash-success", `Signal "approve" was sent`)
	f.waitExecution(gate, driver.ExecutionCompleted)
	inst, err := f.gate.Get(context.Background(), gate)
	require.NoError(t, err)
	for _, s := range inst.Steps {
		if s.ID == "approval" {
			require.JSONEq(t, `{"approved": true}`, string(s.Result), "the gate completed with the payload")
		}
	}
	entries := f.audit("execution", gate)
	require.NotEmpty(t, entries)
	require.Equal(t, "SIGNAL_SEND", entries[0].Action)
	require.Equal(t, "approved on the phone", entries[0].Reason)
	tb.waitText("#execution-state", "COMPLETED") // the live region updates without a reload
	require.Equal(t, 0, tb.count("#action-suspend"), "no actions on an ended execution")
	require.Contains(t, tb.text("#audit-title + p + *"), "approved on the phone", "the audit log shows the signal")
}

func browserSuspendResume(t *testing.T, f *execFixture, browser context.Context) {
	gate := f.startWorkflow(f.gate, driver.ExecutionWaitingForAsync)
	tb := f.openTab(t, browser, operatorToken)
	tb.visit("/executions/" + gate.String())
	tb.submit("#action-suspend")
	tb.confirmAction("customer asked us to pause")
	tb.waitText(".flash-success", "suspended")
	f.waitExecution(gate, driver.ExecutionSuspended)
	// The page shown after the action was rendered as the action returned: a runner that held
	// the execution then left it "suspend requested", and SUSPENDED only once it let go. Read
	// the settled state from a fresh page.
	tb.visit("/executions/" + gate.String())
	require.Contains(t, tb.text("#execution-state"), "SUSPENDED")

	tb.submit("#action-resume")
	tb.confirmAction("customer is ready again")
	tb.waitText(".flash-success", "resumed")
	f.waitExecution(gate, driver.ExecutionWaitingForAsync)
	tb.visit("/executions/" + gate.String()) // the settled state, as above
	require.Equal(t, 1, tb.count("#action-suspend"))
	actions := map[string]bool{}
	for _, e := range f.audit("execution", gate) {
		actions[e.Action] = true
	}
	require.True(t, actions["EXECUTION_SUSPEND"] && actions["EXECUTION_RESUME"], "audited: %v", actions)
}

func browserCancelTimer(t *testing.T, f *execFixture, browser context.Context) {
	nap := f.startWorkflow(f.nap, driver.ExecutionWaitingForAsync)
	timers, err := f.rt.Timers(context.Background(), nap)
	require.NoError(t, err)
	require.Len(t, timers, 1)
	tb := f.openTab(t, browser, operatorToken)
	tb.visit("/executions/" + nap.String())
	require.Equal(t, 1, tb.count(`#timers-table tr[data-timer="`+timers[0].TimerID+`"]`))
	tb.submit(`#timers-table tr[data-timer="` + timers[0].TimerID + `"] a`)
	tb.confirmAction("no need to wait an hour")
	tb.waitText(".flash-success", "was cancelled")
	f.waitExecution(nap, driver.ExecutionCompleted)
	timers, err = f.rt.Timers(context.Background(), nap)
	require.NoError(t, err)
	require.Empty(t, timers)
}

func browserChildren(t *testing.T, f *execFixture, browser context.Context) {
	parent := f.startWorkflow(f.parent, driver.ExecutionWaitingForAsync)
	var child *driver.ExecutionRow
	servertest.Eventually(t, 30*time.Second, "the child to start", func() bool {
		list, err := f.Client.Driver().Executor().ExecutionList(context.Background(), &driver.ExecutionListParams{ParentID: parent})
		require.NoError(t, err)
		if len(list) == 1 {
			child = list[0]
		}
		return child != nil
	})
	tb := f.openTab(t, browser, operatorToken)
	tb.visit("/executions/" + parent.String())
	tb.submit(`#children-table tr[data-id="` + child.ID.String() + `"] a`)
	require.Contains(t, tb.text("#parent-link"), parentType)
	tb.submit("#parent-link")
	require.Contains(t, tb.text("#execution-facts"), parent.String())
	// Cancelling the parent from its page cancels the child too.
	tb.submit("#action-cancel")
	tb.confirmAction("duplicate application")
	tb.waitText(".flash-success", "cancelled")
	f.waitExecution(parent, driver.ExecutionCancelled)
	f.waitExecution(child.ID, driver.ExecutionCancelled)
}

var (
	rowIDRE    = regexp.MustCompile(`<tr data-id="([0-9a-f-]{36})" data-model=`)
	nextPageRE = regexp.MustCompile(`<a href="([^"]+)" id="next-page"`)
)

// rowIDs are the execution ids an executions page lists, in order.
func rowIDs(body string) []string {
	var out []string
	for _, m := range rowIDRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// chromeEval evaluates a JavaScript expression in the tab.
func chromeEval[T any](tb *tab, expr string) (T, error) {
	return chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
}
