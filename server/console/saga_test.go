package console_test

import (
	"context"
	"errors"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/saga"
	"github.com/commandbus/commandbus/server/console"
)

// sagaFixture is a console over a runtime that runs one saga, transfer: debit → hold → credit,
// where credit fails with a business error and hold's compensation fails on its first attempt,
// so the saga parks with COMPENSATION_FAILED until an operator retries it.
type sagaFixture struct {
	*consoleFixture
	transfers *saga.Manager
	mu        sync.Mutex
	undone    map[string]int
}

func setupSagaConsole(t *testing.T, drv driver.Driver) *sagaFixture {
	t.Helper()
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger:            slog.New(slog.NewTextHandler(servertest.LogWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelError})),
		MetricsRegisterer: prometheus.NewRegistry(),
		Process:           commandbus.ProcessConfig{PendingPollInterval: ms(50), RetryPollInterval: ms(50)},
	})
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	f := &sagaFixture{undone: map[string]int{}}
	ok := func(context.Context, *saga.StepContext) (any, error) { return map[string]bool{"ok": true}, nil }
	undo := func(ctx context.Context, sc *saga.StepContext) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.undone[sc.Step]++
		if sc.Step == "hold" && f.undone[sc.Step] == 1 {
			return errors.New("the hold service is down")
		}
		return nil
	}
	f.transfers, err = saga.Register(rt, saga.New("ConsoleTransfer", 1).Policy(saga.StrictSequential).
		Step("debit", ok, saga.Compensate(undo)).
		Step("hold", ok, saga.DependsOn("debit"), saga.Compensate(undo)).
		Step("credit", func(context.Context, *saga.StepContext) (any, error) {
			return nil, commandbus.BusinessRule("ACCOUNT_CLOSED", "the payee's account is closed")
		}, saga.DependsOn("hold")))
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	c, err := console.New(console.Options{Client: client, Runtime: rt, Tokens: testTokens, Gatherer: prometheus.NewRegistry()})
	require.NoError(t, err)
	mux := http.NewServeMux()
	c.Register(mux)
	require.NoError(t, c.Start())
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	f.consoleFixture = &consoleFixture{&servertest.Fixture{T: t, Client: client, HTTP: hs}}
	return f
}

// parkedTransfer starts a transfer and waits until it parks with COMPENSATION_FAILED.
func (f *sagaFixture) parkedTransfer() uuid.UUID {
	f.T.Helper()
	id, err := f.transfers.Start(context.Background(), map[string]int{"amount": 100})
	require.NoError(f.T, err)
	servertest.Eventually(f.T, 30*time.Second, "the transfer to park", func() bool {
		r, err := f.transfers.Result(context.Background(), id)
		require.NoError(f.T, err)
		return r.Status == string(driver.ExecutionWaitingForTSQ)
	})
	return id
}

// The execution page shows a saga's compensation path: the policy and the failure that started
// it, each compensation in the order it ran with its outcome, and which failed.
func TestConsoleSagaCompensationPath(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupSagaConsole(t, drv)
		id := f.parkedTransfer()
		viewer := f.HTTPClient()
		viewer.Login(viewerToken)
		resp, body := viewer.Get("/executions/" + id.String())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		text := html.UnescapeString(body)
		require.Contains(t, text, `id="compensation-policy">STRICT_SEQUENTIAL`)
		require.Contains(t, text, "ACCOUNT_CLOSED: step \"credit\" failed")
		require.Contains(t, text, `<dd id="compensation-failed" class="error-text">hold</dd>`)
		require.Contains(t, text, `<dd id="compensation-done">debit</dd>`)
		hold := strings.Index(text, `<tr data-step="hold" data-outcome="bad"`)
		debit := strings.Index(text, `<tr data-step="debit" data-outcome="ok"`)
		require.Positive(t, hold)
		require.Greater(t, debit, hold, "hold (completed last) is compensated first")
		require.Contains(t, text, "the hold service is down")

		// The operator's retry runs hold's compensation again: the path ends complete.
		f.mu.Lock()
		f.undone = map[string]int{"hold": 1} // the next hold compensation succeeds
		f.mu.Unlock()
		require.NoError(t, f.transfers.Retry(context.Background(), id, commandbus.OperatorAction{Actor: "ops", Reason: "service back"}))
		_, body = viewer.Get("/executions/" + id.String())
		require.Contains(t, html.UnescapeString(body), `<dd id="compensation-done">debit → hold</dd>`)
	})
}

// In a browser: an operator finds the failed compensation on the saga's page, retries it there,
// and the page's live region shows the path complete.
func TestConsoleSagaCompensationInBrowser(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupSagaConsole(t, drv)
		id := f.parkedTransfer()
		tb := f.openTab(t, browser, operatorToken)
		tb.visit("/executions/" + id.String())
		require.Contains(t, tb.text("#compensation-policy"), "STRICT_SEQUENTIAL")
		require.Equal(t, "hold", tb.text("#compensation-failed"))
		require.Equal(t, 2, tb.count("#compensation-table tbody tr"))
		require.Equal(t, 1, tb.count(`#compensation-table tr[data-step="hold"][data-outcome="bad"][data-order="0"]`), "hold first, failed")
		require.Equal(t, 1, tb.count(`#compensation-table tr[data-step="debit"][data-outcome="ok"][data-order="1"]`), "then debit, compensated")
		require.Contains(t, tb.text(`#compensation-table tr[data-step="hold"]`), "the hold service is down")
		t.Logf("a saga parked with a failed compensation: %s", tb.screenshot("saga-compensation-failed"))

		tb.submit("#action-retry")
		tb.confirmAction("the hold service is back")
		tb.waitText(".flash-success", "was retried")
		tb.waitText("#compensation-done", "debit → hold") // the live region updates without a reload
		require.Equal(t, 0, tb.count("#compensation-failed"))
		require.Equal(t, 1, tb.count(`#compensation-table tr[data-step="hold"][data-outcome="ok"][data-order="2"]`))
		tb.waitText("#execution-state", "COMPENSATED")
		r, err := f.transfers.Result(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, []string{"debit", "hold"}, r.CompensatedSteps)
	})
}

// The New batch form offers the payment saga; a batch created with it runs to the end.
func TestConsoleBatchFormRunsPaymentSagas(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		op := f.HTTPClient()
		op.Login(operatorToken)
		_, body := op.Get("/batches/new")
		require.Contains(t, body, `<option value="`+payments.TypePaymentSaga+`"`)
		form := url.Values{"csrf": {servertest.CSRFOf(t, body)}, "processType": {payments.TypePaymentSaga}, "count": {"3"}, "day": {servertest.Today},
			"preset": {payments.PresetHappy}, "confirmed": {"1"}, "reason": {"saga run"}}
		resp, _ := op.Post("/batches/new", form)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		batches, err := f.Platform.ListBatches(context.Background(), payments.ListParams{})
		require.NoError(t, err)
		require.Len(t, batches, 1)
		require.Equal(t, payments.TypePaymentSaga, batches[0].ProcessType)
		servertest.Eventually(t, 60*time.Second, "the saga batch to succeed", func() bool {
			b, err := f.Platform.GetBatch(context.Background(), batches[0].ID)
			require.NoError(t, err)
			return b.Status == payments.BatchSucceeded
		})
		require.NoError(t, f.Platform.CheckInvariants(context.Background()))
	})
}
