package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/process"
	. "github.com/commandbus/commandbus/server"
)

// The operator's queues, without a browser: what each row says, one incident in one place,
// search, bulk actions, the dead-letter page, network levels and a batch waiting for operators.

func TestConsoleQueueRowsSayWhatTheyAreAbout(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		ctx := context.Background()
		stuck := f.ParkManagerPayment()
		f.Fake.Advance(31 * time.Second) // the parked rows' age
		parked, cmd := f.ParkRiskCommand()
		big := f.Submit(servertest.BigPayment())
		f.WaitApproval(big.PaymentID)
		batch, err := f.Platform.CreateBatch(ctx, 2, servertest.Today, payments.TypePaymentStep,
			&payments.Behavior{Name: "pending L2", Steps: map[string]payments.StepBehavior{payments.StepAwaitL2: {PendingPct: 100}}})
		require.NoError(t, err)
		var pending []*payments.PendingNetworkResponse
		servertest.Eventually(t, 30*time.Second, "both L2s to be pending", func() bool {
			pending, err = f.Platform.ListPendingNetworkResponses(ctx, payments.ListParams{})
			require.NoError(t, err)
			return len(pending) == 2
		})
		stuckCmds, err := f.Client.ListCommands(ctx, &commandbus.ListParams{CorrelationID: stuck.ExecutionID,
			Statuses: []commandbus.Status{commandbus.StatusInTSQ}})
		require.NoError(t, err)
		require.Len(t, stuckCmds, 1)

		op := f.HTTPClient()
		op.Login(operatorToken)
		_, body := op.Get("/tsq/commands")
		row := rowOf(t, body, "data-id", cmd.ID.String())
		text := textOf(row)
		for _, want := range []string{"BookRisk", "EXTERNAL_PERMANENT_FAILURE", "Payment " + shortID(parked.PaymentID), "250.50 GBP",
			"CUST-GBP-001 → BENE-GBP-002", "in the process TSQ"} {
			require.Contains(t, text, want)
		}
		require.Contains(t, row, `href="/payments/`+parked.PaymentID.String()+`"`)
		require.Contains(t, row, parkedKey(t, f, parked.PaymentID), "the payment's reference")
		// The command of a process that waits in the process TSQ links to that row.
		requireHTML(t, body, `id="command-`+cmd.ID.String()+`"`, "the process TSQ's links land on the command's row")
		row = rowOf(t, body, "data-id", stuckCmds[0].ID.String())
		require.Contains(t, row, `href="/tsq/processes#process-`+stuck.ExecutionID.String()+`"`)
		require.Contains(t, textOf(row), "31s", "its age in the queue (the clock moved 31s since it parked)")

		_, body = op.Get("/tsq/processes")
		row = rowOf(t, body, "data-id", stuck.ExecutionID.String())
		text = textOf(row)
		for _, want := range []string{"COMMAND_PARKED", "Payment " + shortID(stuck.PaymentID), "250.50 GBP", "CUST-GBP-001 → BENE-GBP-002",
			"Waiting on parked command CheckBalance: EXTERNAL_PERMANENT_FAILURE", "Root cause: simulated checkBalance: permanent failure"} {
			require.Contains(t, text, want)
		}
		require.Contains(t, row, `href="/tsq/commands#command-`+stuckCmds[0].ID.String()+`"`)
		require.Contains(t, row, `href="/tsq/commands/`+stuckCmds[0].ID.String()+`/retry?return=/tsq/processes"`)

		_, body = op.Get("/approvals")
		text = textOf(rowOf(t, body, "data-payment", big.PaymentID.String()))
		require.Contains(t, text, "75,000.00 USD")
		require.Contains(t, text, "CUST-USD-001 → BENE-USD-001")

		_, body = op.Get("/network")
		for _, n := range pending {
			row = rowOf(t, body, "data-id", n.ID.String())
			v, err := f.Platform.GetPayment(ctx, n.PaymentID)
			require.NoError(t, err)
			require.Contains(t, row, `href="/batches/`+batch.ID.String()+`"`, "the batch")
			require.Contains(t, row, `href="/payments/`+n.PaymentID.String()+`"`)
			require.Contains(t, textOf(row), FormatMoney(v.Amount.Decimal(), v.Currency))
			require.Contains(t, textOf(row), v.DebitAccount+" → "+v.CreditAccount)
		}

		// The batch waits for nothing but operators: it says so, and the payment's levels say
		// which one waits.
		// The simulator records a pending L2 while the runner may still be applying L1, and the
		// second payment's pending answer may be recorded a moment after the first waits: wait
		// for both payments to settle at L2, each with its answer left to an operator.
		servertest.Eventually(t, 30*time.Second, "the batch page to say both wait for an operator's network answer", func() bool {
			_, body = op.Get("/batches/" + batch.ID.String())
			return strings.Contains(body, "WAITING_FOR_OPERATORS") &&
				strings.Contains(textOf(body), "Nothing moves until an operator acts: every unfinished payment waits for one (2 for a network answer)")
		})
		_, body = op.Get("/batches")
		require.Contains(t, rowOf(t, body, "data-id", batch.ID.String()), "WAITING_FOR_OPERATORS")
		// The pending answer is recorded before the runner applies L1: wait until the payment
		// page shows it waiting at L2.
		servertest.Eventually(t, 30*time.Second, "the payment to wait at L2", func() bool {
			_, body = op.Get("/payments/" + pending[0].PaymentID.String())
			return strings.Contains(textOf(rowOf(t, body, "data-level", "2")), "WAITING FOR OPERATOR")
		})
		for level, want := range map[string]string{"1": "RECEIVED", "2": "WAITING FOR OPERATOR", "3": "NOT REACHED", "4": "NOT REACHED"} {
			require.Contains(t, textOf(rowOf(t, body, "data-level", level)), want, "L"+level)
		}
		for _, n := range pending {
			require.NoError(t, f.Platform.RespondNetwork(ctx, n.ID, payments.AnswerAccept, "alice@ops", "confirmed"))
		}
		servertest.Eventually(t, 30*time.Second, "the batch to succeed", func() bool {
			b, err := f.Platform.GetBatch(ctx, batch.ID)
			require.NoError(t, err)
			return b.Status == payments.BatchSucceeded
		})
		_, body = op.Get("/batches/" + batch.ID.String())
		requireNoHTML(t, body, "WAITING_FOR_OPERATORS")
	})
}

func parkedKey(t *testing.T, f *consoleFixture, paymentID uuid.UUID) string {
	v, err := f.Platform.GetPayment(context.Background(), paymentID)
	require.NoError(t, err)
	return v.IdempotencyKey
}

// A parked command of a process shows on the process's page and its payment's at once, with
// its root cause and its actions; its operator actions are in the payment's audit log; retrying
// it from the payment resumes the payment.
func TestConsoleIncidentInOnePlace(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		parked, cmd := f.ParkRiskCommand()
		// The process parks with its command at once, naming it.
		f.WaitPayment(parked.PaymentID, "IN_TSQ")
		require.Equal(t, process.CodeCommandParked, f.execution(parked.ExecutionID).ErrorCode)
		op := f.HTTPClient()
		op.Login(operatorToken)
		paymentPage := "/payments/" + parked.PaymentID.String()
		for _, path := range []string{paymentPage, "/processes/" + parked.ExecutionID.String()} {
			resp, body := op.Get(path)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			text := textOf(body)
			require.Contains(t, text, "Waiting on parked command BookRisk: EXTERNAL_PERMANENT_FAILURE", path)
			require.Contains(t, text, "Root cause: simulated bookRisk: permanent failure", path)
			requireHTML(t, body, `href="/tsq/commands#command-`+cmd.ID.String()+`"`, path)
			requireHTML(t, body, `href="/tsq/commands/`+cmd.ID.String()+`/retry?return=`+strings.ToLower(url.QueryEscape(path))+`"`, path)
		}
		_, body := op.Get("/live" + paymentPage)
		requireHTML(t, body, "Waiting on parked command", "the live region brings it without a reload")

		_, body = op.Get(paymentPage)
		resp, _ := op.Post("/tsq/commands/"+cmd.ID.String()+"/retry", url.Values{"csrf": {servertest.CSRFOf(t, body)},
			"reason": {"risk engine restarted"}, "return": {paymentPage}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, paymentPage, resp.Header.Get("Location"))
		f.WaitPayment(parked.PaymentID, "COMPLETED")
		require.Equal(t, "TSQ_RETRY", f.audit("command", cmd.ID)[0].Action)
		_, body = op.Get(paymentPage)
		text := textOf(body)
		require.Contains(t, text, "command …"+cmd.ID.String()[28:]+" TSQ_RETRY alice@ops risk engine restarted",
			"the command's action is in the payment's audit log")
		require.Contains(t, text, "DLQ_PARK")
		require.NotContains(t, text, "Waiting on parked command")
	})
}

// Search from the header by payment id, idempotency key, account, execution id, command id or
// batch id lands on the right page; nothing found says so.
func TestConsoleSearch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		ctx := context.Background()
		parked, cmd := f.ParkRiskCommand()
		key := parkedKey(t, f, parked.PaymentID)
		batch, err := f.Platform.CreateBatch(ctx, 1, servertest.Today, payments.TypePaymentManager, nil)
		require.NoError(t, err)
		op := f.HTTPClient()
		op.Login(operatorToken)
		_, body := op.Get("/")
		requireHTML(t, body, `<form method="get" action="/search"`, "the header has the search box")

		payment := "/payments/" + parked.PaymentID.String()
		for q, want := range map[string]string{
			parked.PaymentID.String():                         payment,
			"  " + strings.ToUpper(parked.PaymentID.String()): payment,
			key:                         payment,
			parked.ExecutionID.String(): payment,
			cmd.ID.String():             "/commands/" + cmd.ID.String(),
			batch.ID.String():           "/batches/" + batch.ID.String(),
		} {
			resp, _ := op.Get("/search?q=" + url.QueryEscape(q))
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, q)
			require.Equal(t, want, resp.Header.Get("Location"), q)
		}

		resp, body := op.Get("/search?q=cust-gbp-001")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		text := textOf(body)
		require.Contains(t, text, "Account CUST-GBP-001")
		require.Contains(t, rowOf(t, body, "data-id", parked.PaymentID.String()), shortID(parked.PaymentID))
		require.Equal(t, 1, strings.Count(body, `data-id="`+parked.PaymentID.String()+`"`), "listed once")
		resp, body = op.Get("/search?q=BENE-CHF-003")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, textOf(body), "No payments from or to BENE-CHF-003 yet.")

		for _, q := range []string{"no-such-thing", uuid.NewString()} {
			resp, body = op.Get("/search?q=" + url.QueryEscape(q))
			require.Equal(t, http.StatusNotFound, resp.StatusCode, q)
			require.Contains(t, textOf(body), "Nothing found for “"+q+"”.")
		}
		resp, body = op.Get("/search?q=" + strings.Repeat("x", 201))
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		requireHTML(t, body, "at most 200 characters")
		resp, _ = f.HTTPClient().Get("/search?q=x")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed in only")
	})
}

// Bulk actions: retry or cancel the ticked (or every filtered) item with one reason, each
// audited on its own, with what was done and what was refused and why; operators only, CSRF
// protected.
func TestConsoleBulkActions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		pays, cmds := f.parkRiskCommands(3)
		a, b, c := cmds[0].ID.String(), cmds[1].ID.String(), cmds[2].ID.String()
		bulk := "/tsq/commands/bulk"

		viewer := f.HTTPClient()
		viewer.Login(viewerToken)
		resp, _ := viewer.Get(bulk + "?action=retry&id=" + a)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		_, body := viewer.Get("/tsq/commands")
		requireNoHTML(t, body, `id="bulk-form"`, "no bulk form for a viewer")

		op := f.HTTPClient()
		op.Login(operatorToken)
		_, body = op.Get("/tsq/commands")
		requireHTML(t, body, `name="id" value="`+a+`" form="bulk-form"`)
		csrf := servertest.CSRFOf(t, body)
		resp, body = op.Get(bulk + "?action=retry&id=" + a + "&id=" + b)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		requireHTML(t, body, "Retry 2 commands")
		requireHTML(t, body, `name="id" value="`+a+`"`)
		requireHTML(t, body, `name="id" value="`+b+`"`)
		requireNoHTML(t, body, `name="id" value="`+c+`"`)
		resp, body = op.Get(bulk + "?action=retry")
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		requireHTML(t, body, "Nothing selected")
		resp, _ = op.Get(bulk + "?action=retry&id=nope")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		resp, _ = op.Get(bulk + "?action=delete&id=" + a)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		resp, body = op.Get(bulk + "?action=cancel&all=1&error=EXTERNAL_PERMANENT_FAILURE")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		requireHTML(t, body, "Cancel 3 commands", "every command matching the filter")

		form := url.Values{"action": {"retry"}, "id": {a, b, c}, "reason": {"risk engine back after the outage"}}
		resp, _ = op.Post(bulk, form)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "no CSRF token")
		form.Set("csrf", csrf)
		form.Set("reason", " ")
		resp, body = op.Post(bulk, form)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		requireHTML(t, body, `id="error-reason"`)
		for _, cmd := range cmds {
			require.Equal(t, commandbus.StatusInTSQ, f.command(cmd.ID).Status, "a refused form changes nothing")
		}

		// One of them is retried on its own first: the bulk action refuses it and says why.
		_, err := f.Client.TSQ().Retry(context.Background(), cmds[2].ID, commandbus.OperatorAction{Actor: "bob@ops", Reason: "one first"})
		require.NoError(t, err)
		form.Set("reason", "risk engine back after the outage")
		resp, body = op.Post(bulk, form)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		text := textOf(body)
		require.Contains(t, text, "2 commands retried, 1 refused")
		require.Contains(t, textOf(rowOf(t, body, "data-id", c)), "it no longer applies")
		for i, cmd := range cmds[:2] {
			require.NotEqual(t, commandbus.StatusInTSQ, f.command(cmd.ID).Status)
			audit := f.audit("command", cmd.ID)
			require.Equal(t, "TSQ_RETRY", audit[0].Action)
			require.Equal(t, "alice@ops", audit[0].Actor)
			require.Equal(t, "risk engine back after the outage", audit[0].Reason)
			f.WaitPayment(pays[i].PaymentID, "COMPLETED")
		}
		audit := f.audit("command", cmds[2].ID)
		require.Equal(t, "bob@ops", audit[0].Actor, "the refused one was not acted on again")

		// Processes: compensate and cancel every COMMAND_PARKED park at once.
		one, two := f.ParkManagerPayment(), f.ParkManagerPayment()
		resp, body = op.Get("/tsq/processes/bulk?action=compensate&all=1&error=COMMAND_PARKED")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		requireHTML(t, body, "Compensate and cancel 2 processes")
		resp, body = op.Post("/tsq/processes/bulk", url.Values{"csrf": {csrf}, "action": {"compensate"},
			"id": {one.ExecutionID.String(), two.ExecutionID.String()}, "reason": {"customers withdrew"}})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, textOf(body), "2 processes compensated and cancelled, 0 refused")
		for _, p := range []*payments.PaymentResult{one, two} {
			f.WaitPayment(p.PaymentID, "CANCELLED")
			audit := f.audit("execution", p.ExecutionID)
			require.Equal(t, "TSQ_CANCEL", audit[0].Action)
			require.Equal(t, "customers withdrew", audit[0].Reason)
		}
		require.NoError(t, f.Platform.CheckInvariants(context.Background()))
	})
}

// The dead-letter page lists each record (parked by, attempts, error) with the payment, and
// resubmits; the overview's DLQ card links to it.
func TestConsoleDLQPage(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		ctx := context.Background()
		parked, cmd := f.ParkRiskCommand()
		entry, err := f.Client.DLQ().Get(ctx, cmd.ID)
		require.NoError(t, err)
		op := f.HTTPClient()
		op.Login(operatorToken)
		_, body := op.Get("/")
		requireHTML(t, body, `href="/dlq"`)
		resp, body := op.Get("/dlq")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		text := textOf(rowOf(t, body, "data-id", cmd.ID.String()))
		for _, want := range []string{"BookRisk", entry.ParkedBy, "EXTERNAL_PERMANENT_FAILURE", "simulated bookRisk: permanent failure",
			"Payment " + shortID(parked.PaymentID), "250.50 GBP"} {
			require.Contains(t, text, want)
		}
		require.NotEmpty(t, entry.ParkedBy)
		require.Contains(t, text, " 1 ", "attempts")

		resubmit := "/dlq/" + cmd.ID.String() + "/resubmit"
		resp, body = op.Get(resubmit)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, textOf(body), "Parked by "+entry.ParkedBy)
		resp, _ = op.Post(resubmit, url.Values{"csrf": {servertest.CSRFOf(t, body)}, "reason": {"risk engine fixed"}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/dlq", resp.Header.Get("Location"))
		_, err = f.Client.DLQ().Get(ctx, cmd.ID)
		require.ErrorIs(t, err, commandbus.ErrNotFound, "the record is gone")
		require.Equal(t, "DLQ_RESUBMIT", f.audit("command", cmd.ID)[0].Action)
		f.WaitPayment(parked.PaymentID, "COMPLETED")
		resp, body = op.Post(resubmit, url.Values{"csrf": {servertest.CSRFOf(t, body)}, "reason": {"again"}})
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		requireHTML(t, body, "no dead-letter record any more")
		_, body = op.Get("/dlq")
		requireHTML(t, body, `id="dlq-empty"`)
	})
}

var (
	dlqRowRE    = regexp.MustCompile(`<tr data-id="([^"]+)" id="dlq-`)
	firstPageRE = regexp.MustCompile(`<a href="([^"]+)" id="first-page"`)
)

// The dead-letter page shows a page of records with a link to the older ones: following the
// links shows every record once, most recently parked first; a marker it did not make is a 400.
func TestConsoleDLQPagesThroughOlderRecords(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		ctx := context.Background()
		var parked []string
		for range 3 {
			_, cmd := f.ParkRiskCommand()
			parked = append(parked, cmd.ID.String())
		}
		entries, err := f.Client.DLQ().List(ctx, commandbus.DLQFilter{})
		require.NoError(t, err)
		var newestFirst []string
		for _, e := range entries {
			newestFirst = append(newestFirst, e.CommandID.String())
		}
		require.ElementsMatch(t, parked, newestFirst)

		op := f.HTTPClient()
		op.Login(viewerToken)
		var seen []string
		path := "/dlq?limit=2"
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5, "the pages end")
			resp, body := op.Get(path)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			rows := dlqRowRE.FindAllStringSubmatch(body, -1)
			require.NotEmpty(t, rows)
			for _, m := range rows {
				seen = append(seen, m[1])
			}
			if pages > 0 {
				first := firstPageRE.FindStringSubmatch(body)
				require.NotNil(t, first, "a later page links to the newest records")
				require.Equal(t, "/dlq", html.UnescapeString(first[1]))
			}
			next := nextPageRE.FindStringSubmatch(body)
			if next == nil {
				require.Equal(t, 1, pages, "three records at two a page: two pages")
				break
			}
			require.Len(t, rows, 2, "a page before the last is full")
			path = html.UnescapeString(next[1])
			require.Contains(t, path, "before=")
			require.Contains(t, path, "limit=2", "the next page keeps the page size")
		}
		require.Equal(t, newestFirst, seen, "every record once, most recently parked first")

		for _, bad := range []string{"/dlq?before=nope", "/dlq?before=1_" + uuid.NewString() + "x", "/dlq?limit=0", "/dlq?limit=201"} {
			resp, body := op.Get(bad)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
			requireHTML(t, body, `id="dlq-bad-page"`, bad)
		}
	})
}
