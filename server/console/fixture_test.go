package console_test

import (
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/examples/payments/paymentsweb"
	"github.com/commandbus/commandbus/internal/clock"
	. "github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/server/console"
	"github.com/commandbus/commandbus/workflow"
)

const (
	operatorToken = "operator-token-0123456789"
	viewerToken   = "viewer-token-0123456789ab"
)

var testTokens = []console.Token{
	{Subject: "alice@ops", Token: operatorToken, Role: RoleOperator},
	{Subject: "victor@audit", Token: viewerToken, Role: RoleViewer},
}

// consoleStart is the fake clock's start: the day batches default to.
var consoleStart = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

const consoleToday = "2026-11-23"

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// consoleFixture is a payments platform on a fake clock with fast pollers, served with its
// console by a real HTTP server.
type consoleFixture struct {
	t        *testing.T
	fake     *clock.Fake
	client   *commandbus.Client
	platform *payments.Platform
	// review is a workflow beside the payments: prepare, wait for the signal "approved", sleep an
	// hour, done.
	review *workflow.Manager
	server *Server
	http   *httptest.Server
}

func setupConsole(t *testing.T, drv driver.Driver) *consoleFixture {
	t.Helper()
	fake := clock.NewFake(consoleStart)
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	noJitter := 0.0
	domains := payments.DefaultDomainConfigs(8)
	for _, d := range domains {
		d.MaxAttempts = 3
		d.Retry = commandbus.RetryPolicy{InitialDelay: ms(100), MaxDelay: ms(500), Jitter: &noJitter}
	}
	reg := prometheus.NewRegistry()
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger:            slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelError})),
		Clock:             fake,
		FetchPollInterval: ms(100), // notifications wake the workers; polling is the fallback
		Domains:           domains,
		MetricsRegisterer: reg,
		Process: commandbus.ProcessConfig{
			PendingPollInterval: ms(50), RetryPollInterval: ms(50), TimeoutCheckInterval: ms(50),
			DeadlineCheckInterval: ms(100), ExecutionLease: commandbus.Duration(30 * time.Second),
		},
	})
	require.NoError(t, err)
	platform, err := payments.New(client, payments.Options{SimulatorPollInterval: 50 * time.Millisecond,
		CustomersPerCurrency: 3, BeneficiariesPerCurrency: 3, FXTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
	review, err := workflow.Register(platform.Runtime(), workflow.New("ReviewFlow", 1).Describe("a review with a sign-off and a cooling-off period").
		Step("prepare", noop).
		WaitSignal("approve", "approved", workflow.DependsOn("prepare")).
		Sleep("coolOff", time.Hour, workflow.DependsOn("approve")).
		Step("done", noop, workflow.DependsOn("coolOff")))
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	srv, err := New(Config{Client: client, Runtime: platform.Runtime(), Extensions: []Extension{paymentsweb.New(platform)}, Tokens: testTokens, Gatherer: reg,
		ConsoleSampleInterval: 250 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &consoleFixture{t: t, fake: fake, client: client, platform: platform, review: review, server: srv, http: hs}
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// submit submits a payment; a nil behavior is the happy one.
func (f *consoleFixture) submit(req payments.PaymentRequest) *payments.PaymentResult {
	f.t.Helper()
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = uuid.NewString()
	}
	res, err := f.platform.SubmitPayment(context.Background(), req)
	require.NoError(f.t, err)
	return res
}

func domesticPayment(typ string) payments.PaymentRequest {
	return payments.PaymentRequest{DebitAccount: "CUST-GBP-001", CreditAccount: "BENE-GBP-002", Amount: "250.50",
		Currency: "GBP", ProcessType: typ}
}

// bigPayment is above the approval threshold: the step process waits for a risk approval.
func bigPayment() payments.PaymentRequest {
	return payments.PaymentRequest{DebitAccount: "CUST-USD-001", CreditAccount: "BENE-USD-001", Amount: "75000", Currency: "USD",
		ProcessType: payments.TypePaymentStep,
		Behavior:    &payments.Behavior{Name: "manual approval", Steps: map[string]payments.StepBehavior{payments.StepAwaitRiskApproval: {PendingPct: 100}}}}
}

// pendingL2Payment leaves its L2 confirmation pending for an operator.
func pendingL2Payment() payments.PaymentRequest {
	req := domesticPayment(payments.TypePaymentStep)
	req.Behavior = &payments.Behavior{Name: "pending L2", Steps: map[string]payments.StepBehavior{payments.StepAwaitL2: {PendingPct: 100}}}
	return req
}

// waitApproval waits until a payment's risk approval is pending and returns it.
func (f *consoleFixture) waitApproval(paymentID uuid.UUID) *payments.Approval {
	f.t.Helper()
	var found *payments.Approval
	eventually(f.t, 30*time.Second, "a pending approval for payment "+paymentID.String(), func() bool {
		list, err := f.platform.ListApprovals(context.Background(), payments.ApprovalPending, 0)
		require.NoError(f.t, err)
		for _, a := range list {
			if a.PaymentID == paymentID {
				found = a
			}
		}
		return found != nil
	})
	return found
}

func (f *consoleFixture) paymentStatus(id uuid.UUID) string {
	f.t.Helper()
	v, err := f.platform.GetPayment(context.Background(), id)
	require.NoError(f.t, err)
	return v.Status
}

func (f *consoleFixture) waitPayment(id uuid.UUID, want string) {
	f.t.Helper()
	eventually(f.t, 30*time.Second, "payment "+id.String()+" to be "+want, func() bool { return f.paymentStatus(id) == want })
}

// parkRiskCommand makes a step-process payment whose BookRisk command fails permanently: the
// command waits in the command TSQ and the payment waits for its reply.
func (f *consoleFixture) parkRiskCommand() (payment *payments.PaymentResult, command *commandbus.CommandRow) {
	f.t.Helper()
	require.NoError(f.t, f.platform.InjectFault(payments.Fault{Step: payments.StepBookRisk, Class: payments.FaultPermanent, Times: 1}))
	payment = f.submit(domesticPayment(payments.TypePaymentStep))
	eventually(f.t, 30*time.Second, "BookRisk to park in the command TSQ", func() bool {
		list, err := f.client.ListCommands(context.Background(), &commandbus.ListParams{CorrelationID: payment.ExecutionID,
			Statuses: []commandbus.Status{commandbus.StatusInTSQ}})
		require.NoError(f.t, err)
		if len(list) == 1 {
			command = list[0]
		}
		return command != nil
	})
	return payment, command
}

// parkManagerPayment makes a process-manager payment stop in the process TSQ: its CheckBalance
// command fails permanently and its PARKED reply parks the payment (COMMAND_PARKED) at once.
func (f *consoleFixture) parkManagerPayment() *payments.PaymentResult {
	f.t.Helper()
	require.NoError(f.t, f.platform.InjectFault(payments.Fault{Step: payments.StepCheckBalance, Class: payments.FaultPermanent, Times: 1}))
	res := f.submit(domesticPayment(payments.TypePaymentManager))
	eventually(f.t, 30*time.Second, "CheckBalance to park in the command TSQ", func() bool {
		list, err := f.client.ListCommands(context.Background(), &commandbus.ListParams{CorrelationID: res.ExecutionID,
			Statuses: []commandbus.Status{commandbus.StatusInTSQ}})
		require.NoError(f.t, err)
		return len(list) == 1
	})
	f.waitPayment(res.PaymentID, "IN_TSQ")
	return res
}

// browserless is an HTTP client with a cookie jar that does not follow redirects.
type browserless struct {
	t      *testing.T
	base   string
	client *http.Client
}

func (f *consoleFixture) httpClient() *browserless {
	jar, err := cookiejar.New(nil)
	require.NoError(f.t, err)
	return &browserless{t: f.t, base: f.http.URL, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browserless) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.client.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp, string(body)
}

func (b *browserless) get(path string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.base+path, nil)
	require.NoError(b.t, err)
	return b.do(req)
}

// post sends a form as a same-origin browser would.
func (b *browserless) post(path string, form url.Values, headers ...string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return b.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t testing.TB, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	require.NotNil(t, m, "the page has no CSRF field")
	return m[1]
}

// login signs in with token through the sign-in form.
func (b *browserless) login(token string) {
	b.t.Helper()
	_, body := b.get("/login")
	resp, _ := b.post("/login", url.Values{"csrf": {csrfOf(b.t, body)}, "token": {token}, "next": {"/"}})
	require.Equal(b.t, http.StatusSeeOther, resp.StatusCode)
}

// parkRiskCommands makes n step-process payments whose BookRisk commands fail permanently: the
// commands wait in the command TSQ and the payments wait for their replies.
func (f *consoleFixture) parkRiskCommands(n int) (pays []*payments.PaymentResult, cmds []*commandbus.CommandRow) {
	f.t.Helper()
	require.NoError(f.t, f.platform.InjectFault(payments.Fault{Step: payments.StepBookRisk, Class: payments.FaultPermanent, Times: n}))
	for range n {
		pays = append(pays, f.submit(domesticPayment(payments.TypePaymentStep)))
	}
	for _, p := range pays {
		var cmd *commandbus.CommandRow
		eventually(f.t, 30*time.Second, "BookRisk to park in the command TSQ", func() bool {
			list, err := f.client.ListCommands(context.Background(), &commandbus.ListParams{CorrelationID: p.ExecutionID,
				Statuses: []commandbus.Status{commandbus.StatusInTSQ}})
			require.NoError(f.t, err)
			if len(list) == 1 {
				cmd = list[0]
			}
			return cmd != nil
		})
		cmds = append(cmds, cmd)
	}
	return pays, cmds
}

// networkErrorPayment makes a step-process payment whose L1 confirmation comes back as a
// permanent network error: the payment parks in the process TSQ with NETWORK_ERROR after its
// risk booking and submission, which compensation must undo.
func (f *consoleFixture) networkErrorPayment() *payments.PaymentResult {
	f.t.Helper()
	req := domesticPayment(payments.TypePaymentStep)
	req.Behavior = &payments.Behavior{Name: "L1 network error", Steps: map[string]payments.StepBehavior{payments.StepAwaitL1: {FailPermanentPct: 100}}}
	res := f.submit(req)
	f.waitPayment(res.PaymentID, "IN_TSQ")
	row, err := f.client.Driver().Executor().ExecutionGet(context.Background(), res.ExecutionID)
	require.NoError(f.t, err)
	require.Equal(f.t, "NETWORK_ERROR", row.ErrorCode)
	return res
}

// execution reads an execution back from the database.
func (f *consoleFixture) execution(id uuid.UUID) *driver.ExecutionRow {
	f.t.Helper()
	row, err := f.client.Driver().Executor().ExecutionGet(context.Background(), id)
	require.NoError(f.t, err)
	return row
}

// command reads a command back from the database.
func (f *consoleFixture) command(id uuid.UUID) *commandbus.CommandRow {
	f.t.Helper()
	row, err := f.client.GetCommand(context.Background(), id)
	require.NoError(f.t, err)
	return row
}

// audit reads the audit log of one entity, newest first.
func (f *consoleFixture) audit(entityType string, id uuid.UUID) []*commandbus.AuditLogEntry {
	f.t.Helper()
	entries, err := f.client.AuditLog(context.Background(), &driver.AuditLogListParams{EntityType: entityType, EntityID: id.String()})
	require.NoError(f.t, err)
	return entries
}

// requireCompensated checks in the database that a cancelled payment's process ran the
// compensations of what it did: the compensation of each named step succeeded in its log (the
// log names a compensation by its step) and its command, of the given type, completed.
func (f *consoleFixture) requireCompensated(execID uuid.UUID, compensations map[string]string) {
	f.t.Helper()
	ctx := context.Background()
	eventually(f.t, 30*time.Second, "the compensations to finish", func() bool {
		return f.execution(execID).Status == driver.ExecutionCancelled
	})
	log, err := f.client.Driver().Executor().ExecutionLogList(ctx, execID)
	require.NoError(f.t, err)
	succeeded := map[string]bool{}
	for _, e := range log {
		if e.EntryType == "COMPENSATION" && e.StepStatus == "COMPENSATION_SUCCESS" {
			succeeded[e.Name] = true
		}
	}
	cmds, err := f.client.ListCommands(ctx, &commandbus.ListParams{CorrelationID: execID})
	require.NoError(f.t, err)
	completed := map[string]bool{}
	for _, c := range cmds {
		if c.Status == commandbus.StatusCompleted {
			completed[c.Type] = true
		}
	}
	for name, commandType := range compensations {
		require.True(f.t, succeeded[name], "compensation %s succeeded in the log (log: %v)", name, succeeded)
		require.True(f.t, completed[commandType], "the %s command completed", commandType)
	}
	require.NoError(f.t, f.platform.CheckInvariants(ctx))
}

var (
	blockTagRE = regexp.MustCompile(`(?i)</?(td|th|tr|p|div|li|br|dt|dd|h[1-6]|section|table|ul|ol)\b[^>]*>`)
	tagRE      = regexp.MustCompile(`<[^>]*>`)
	spaceRE    = regexp.MustCompile(`\s+`)
)

// textOf is a page's text as a reader sees it: tags dropped (blocks apart), spaces collapsed,
// entities decoded.
func textOf(body string) string {
	text := tagRE.ReplaceAllString(blockTagRE.ReplaceAllString(body, " "), "")
	return strings.TrimSpace(spaceRE.ReplaceAllString(html.UnescapeString(text), " "))
}

// rowOf returns the table row whose opening tag has attr="value" (data-id, data-payment, …).
func rowOf(t testing.TB, body, attr, value string) string {
	t.Helper()
	start := strings.Index(body, attr+`="`+value+`"`)
	require.GreaterOrEqual(t, start, 0, "no row with %s=%s", attr, value)
	start = strings.LastIndex(body[:start], "<tr")
	end := strings.Index(body[start:], "</tr>")
	require.GreaterOrEqual(t, end, 0)
	return body[start : start+end]
}

// requireHTML fails unless a page holds want; on failure it shows the page's text, not its
// markup.
func requireHTML(t testing.TB, body, want string, msg ...any) {
	t.Helper()
	if !strings.Contains(body, want) {
		text := textOf(body)
		t.Fatalf("the page does not contain %q %v; its text: %s", want, msg, text[:min(len(text), 3000)])
	}
}

// requireNoHTML fails if a page holds unwanted.
func requireNoHTML(t testing.TB, body, unwanted string, msg ...any) {
	t.Helper()
	if strings.Contains(body, unwanted) {
		t.Fatalf("the page contains %q %v", unwanted, msg)
	}
}

// shortID is how the console shows an id.
func shortID(v any) string { return console.ExportShortID(v) }
