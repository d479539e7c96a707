// Package servertest is the test fixture the server's tests and the console's tests share: a
// payments platform on a fake clock with fast pollers, served with its console by a real HTTP
// server, and a cookie-keeping HTTP client to drive it. It is imported only by tests.
package servertest

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
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/examples/payments/paymentsweb"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/schedule/scheduleweb"
	"github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/workflow"
)

// Start is the fake clock's start: the day batches default to.
var Start = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

// Today is Start's date as the console writes it.
const Today = "2026-11-23"

// LogWriter writes each log line to a test's log.
type LogWriter struct{ T testing.TB }

// Write logs p, trimmed, to the test's log.
func (w LogWriter) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Options are what differs between the fixtures of the packages that use Setup.
type Options struct {
	// Tokens are the server's accepted tokens.
	Tokens []server.Token
	// ReviewTrigger, if set, is the event that starts the review workflow's first step.
	ReviewTrigger string
	// Schedules adds a passive scheduler (Fixture.Sched) and its web extension.
	Schedules bool
	// TracerProvider, if set, is the client's (and so the server's) tracer provider.
	TracerProvider trace.TracerProvider
}

// Fixture is a payments platform on a fake clock with fast pollers, served with its console by a
// real HTTP server.
type Fixture struct {
	T        *testing.T
	Fake     *clock.Fake
	Client   *commandbus.Client
	Platform *payments.Platform
	// Review is a workflow beside the payments: prepare, wait for the signal "approved", sleep an
	// hour, done.
	Review *workflow.Manager
	// Sched manages the schedules (the platform declares its daily run) without firing them; nil
	// unless Options.Schedules.
	Sched  *schedule.Scheduler
	Server *server.Server
	HTTP   *httptest.Server
	// Registry holds the client's metrics; the server exposes it on /metrics.
	Registry *prometheus.Registry
}

// Setup starts a Fixture on drv; the test's cleanup stops it.
func Setup(t *testing.T, drv driver.Driver, opts Options) *Fixture {
	t.Helper()
	fake := clock.NewFake(Start)
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	noJitter := 0.0
	domains := payments.DefaultDomainConfigs(8)
	for _, d := range domains {
		d.MaxAttempts = 3
		d.Retry = commandbus.RetryPolicy{InitialDelay: ms(100), MaxDelay: ms(500), Jitter: &noJitter}
	}
	reg := prometheus.NewRegistry()
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger:            slog.New(slog.NewTextHandler(LogWriter{t}, &slog.HandlerOptions{Level: slog.LevelError})),
		Clock:             fake,
		FetchPollInterval: ms(100), // notifications wake the workers; polling is the fallback
		Domains:           domains,
		MetricsRegisterer: reg,
		TracerProvider:    opts.TracerProvider,
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
	def := workflow.New("ReviewFlow", 1).Describe("a review with a sign-off and a cooling-off period").
		Step("prepare", noop)
	if opts.ReviewTrigger != "" {
		def = def.TriggeredBy(opts.ReviewTrigger)
	}
	review, err := workflow.Register(platform.Runtime(), def.
		WaitSignal("approve", "approved", workflow.DependsOn("prepare")).
		Sleep("coolOff", time.Hour, workflow.DependsOn("approve")).
		Step("done", noop, workflow.DependsOn("coolOff")))
	require.NoError(t, err)
	extensions := []server.Extension{paymentsweb.New(platform)}
	var sched *schedule.Scheduler
	if opts.Schedules {
		sched, err = schedule.New(platform.Runtime(), schedule.Config{Passive: true})
		require.NoError(t, err)
		extensions = append(extensions, scheduleweb.New(sched))
	}
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	srv, err := server.New(server.Config{Client: client, Runtime: platform.Runtime(), Extensions: extensions, Tokens: opts.Tokens, Gatherer: reg,
		ConsoleSampleInterval: 250 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &Fixture{T: t, Fake: fake, Client: client, Platform: platform, Review: review, Sched: sched, Server: srv, HTTP: hs, Registry: reg}
}

// Eventually polls cond until it holds or the timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Submit submits a payment; a nil behavior is the happy one.
func (f *Fixture) Submit(req payments.PaymentRequest) *payments.PaymentResult {
	f.T.Helper()
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = uuid.NewString()
	}
	res, err := f.Platform.SubmitPayment(context.Background(), req)
	require.NoError(f.T, err)
	return res
}

// DomesticPayment is a GBP payment of the given process type.
func DomesticPayment(typ string) payments.PaymentRequest {
	return payments.PaymentRequest{DebitAccount: "CUST-GBP-001", CreditAccount: "BENE-GBP-002", Amount: "250.50",
		Currency: "GBP", ProcessType: typ}
}

// BigPayment is above the approval threshold: the step process waits for a risk approval.
func BigPayment() payments.PaymentRequest {
	return payments.PaymentRequest{DebitAccount: "CUST-USD-001", CreditAccount: "BENE-USD-001", Amount: "75000", Currency: "USD",
		ProcessType: payments.TypePaymentStep,
		Behavior:    &payments.Behavior{Name: "manual approval", Steps: map[string]payments.StepBehavior{payments.StepAwaitRiskApproval: {PendingPct: 100}}}}
}

// PendingL2Payment leaves its L2 confirmation pending for an operator.
func PendingL2Payment() payments.PaymentRequest {
	req := DomesticPayment(payments.TypePaymentStep)
	req.Behavior = &payments.Behavior{Name: "pending L2", Steps: map[string]payments.StepBehavior{payments.StepAwaitL2: {PendingPct: 100}}}
	return req
}

// WaitApproval waits until a payment's risk approval is pending and returns it.
func (f *Fixture) WaitApproval(paymentID uuid.UUID) *payments.Approval {
	f.T.Helper()
	var found *payments.Approval
	Eventually(f.T, 30*time.Second, "a pending approval for payment "+paymentID.String(), func() bool {
		list, err := f.Platform.ListApprovals(context.Background(), payments.ApprovalFilter{Status: payments.ApprovalPending})
		require.NoError(f.T, err)
		for _, a := range list {
			if a.PaymentID == paymentID {
				found = a
			}
		}
		return found != nil
	})
	return found
}

// PaymentStatus is a payment's status.
func (f *Fixture) PaymentStatus(id uuid.UUID) string {
	f.T.Helper()
	v, err := f.Platform.GetPayment(context.Background(), id)
	require.NoError(f.T, err)
	return v.Status
}

// WaitPayment waits until a payment's status is want.
func (f *Fixture) WaitPayment(id uuid.UUID, want string) {
	f.T.Helper()
	Eventually(f.T, 30*time.Second, "payment "+id.String()+" to be "+want, func() bool { return f.PaymentStatus(id) == want })
}

// ParkRiskCommand makes a step-process payment whose BookRisk command fails permanently: the
// command waits in the command TSQ and the payment waits for its reply.
func (f *Fixture) ParkRiskCommand() (payment *payments.PaymentResult, command *commandbus.CommandRow) {
	f.T.Helper()
	require.NoError(f.T, f.Platform.InjectFault(payments.Fault{Step: payments.StepBookRisk, Class: payments.FaultPermanent, Times: 1}))
	payment = f.Submit(DomesticPayment(payments.TypePaymentStep))
	Eventually(f.T, 30*time.Second, "BookRisk to park in the command TSQ", func() bool {
		list, err := f.Client.ListCommands(context.Background(), &commandbus.ListParams{CorrelationID: payment.ExecutionID,
			Statuses: []commandbus.Status{commandbus.StatusInTSQ}})
		require.NoError(f.T, err)
		if len(list) == 1 {
			command = list[0]
		}
		return command != nil
	})
	return payment, command
}

// ParkManagerPayment makes a process-manager payment stop in the process TSQ: its CheckBalance
// command fails permanently and its PARKED reply parks the payment (COMMAND_PARKED) at once.
func (f *Fixture) ParkManagerPayment() *payments.PaymentResult {
	f.T.Helper()
	require.NoError(f.T, f.Platform.InjectFault(payments.Fault{Step: payments.StepCheckBalance, Class: payments.FaultPermanent, Times: 1}))
	res := f.Submit(DomesticPayment(payments.TypePaymentManager))
	Eventually(f.T, 30*time.Second, "CheckBalance to park in the command TSQ", func() bool {
		list, err := f.Client.ListCommands(context.Background(), &commandbus.ListParams{CorrelationID: res.ExecutionID,
			Statuses: []commandbus.Status{commandbus.StatusInTSQ}})
		require.NoError(f.T, err)
		return len(list) == 1
	})
	f.WaitPayment(res.PaymentID, "IN_TSQ")
	return res
}

// Browserless is an HTTP client with a cookie jar that does not follow redirects.
type Browserless struct {
	T      *testing.T
	Base   string
	Client *http.Client
}

// HTTPClient is a new Browserless for the fixture's server.
func (f *Fixture) HTTPClient() *Browserless {
	jar, err := cookiejar.New(nil)
	require.NoError(f.T, err)
	return &Browserless{T: f.T, Base: f.HTTP.URL, Client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Do sends req and returns the response with its body read.
func (b *Browserless) Do(req *http.Request) (*http.Response, string) {
	b.T.Helper()
	resp, err := b.Client.Do(req)
	require.NoError(b.T, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(b.T, err)
	return resp, string(body)
}

// Get gets path.
func (b *Browserless) Get(path string) (*http.Response, string) {
	b.T.Helper()
	req, err := http.NewRequest(http.MethodGet, b.Base+path, nil)
	require.NoError(b.T, err)
	return b.Do(req)
}

// Post sends a form as a same-origin browser would; headers are name, value pairs.
func (b *Browserless) Post(path string, form url.Values, headers ...string) (*http.Response, string) {
	b.T.Helper()
	req, err := http.NewRequest(http.MethodPost, b.Base+path, strings.NewReader(form.Encode()))
	require.NoError(b.T, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.Base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return b.Do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// CSRFOf is the CSRF token of a page's form.
func CSRFOf(t testing.TB, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	require.NotNil(t, m, "the page has no CSRF field")
	return m[1]
}

// Login signs in with token through the sign-in form.
func (b *Browserless) Login(token string) {
	b.T.Helper()
	_, body := b.Get("/login")
	resp, _ := b.Post("/login", url.Values{"csrf": {CSRFOf(b.T, body)}, "token": {token}, "next": {"/"}})
	require.Equal(b.T, http.StatusSeeOther, resp.StatusCode)
}
