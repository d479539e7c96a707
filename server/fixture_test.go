package server_test

import (
	"context"
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
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/schedule/scheduleweb"
	. "github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/workflow"
)

// consoleStart is the fake clock's start: the day batches default to.
var consoleStart = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

const consoleToday = "2026-11-23"

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// consoleFixture is a payments platform on a fake clock with fast pollers, served with its
// console by a real HTTP server. The console's own tests (package server/console) have the full
// fixture; this is the part the REST API's tests use.
type consoleFixture struct {
	t        *testing.T
	fake     *clock.Fake
	client   *commandbus.Client
	platform *payments.Platform
	// review is a workflow beside the payments: prepare, wait for the signal "approved", sleep an
	// hour, done.
	review *workflow.Manager
	// sched manages the schedules (the platform declares its daily run) without firing them.
	sched  *schedule.Scheduler
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
		Step("prepare", noop).TriggeredBy("LoanApplied").
		WaitSignal("approve", "approved", workflow.DependsOn("prepare")).
		Sleep("coolOff", time.Hour, workflow.DependsOn("approve")).
		Step("done", noop, workflow.DependsOn("coolOff")))
	require.NoError(t, err)
	sched, err := schedule.New(platform.Runtime(), schedule.Config{Passive: true})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	srv, err := New(Config{Client: client, Runtime: platform.Runtime(), Extensions: []Extension{paymentsweb.New(platform), scheduleweb.New(sched)}, Tokens: testTokens, Gatherer: reg,
		ConsoleSampleInterval: 250 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &consoleFixture{t: t, fake: fake, client: client, platform: platform, review: review, sched: sched, server: srv, http: hs}
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

var (
	blockTagRE = regexp.MustCompile(`(?i)</?(td|th|tr|p|div|li|br|dt|dd|h[1-6]|section|table|ul|ol)\b[^>]*>`)
	tagRE      = regexp.MustCompile(`<[^>]*>`)
	spaceRE    = regexp.MustCompile(`\s+`)
)

// shortID is how the console shows an id.
