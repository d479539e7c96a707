package paymentsweb_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/server"
)

const viewerToken = "viewer-token-0123456789ab"

var (
	listRowRE   = regexp.MustCompile(`<tr data-id="([^"]+)"`)
	nextPageRE  = regexp.MustCompile(`<a href="([^"]+)" id="next-page"`)
	firstPageRE = regexp.MustCompile(`<a href="([^"]+)" id="first-page"`)
)

// walkConsolePages follows a console list's next links from path and returns the ids of its
// rows in the order shown. Every page before the last is full (size rows) and links on with
// marker; every later page links back to a first page that shows the first page's rows again.
func walkConsolePages(t *testing.T, op *servertest.Browserless, path, marker string, size int) []string {
	t.Helper()
	var seen, firstRows []string
	for pages := 0; ; pages++ {
		require.Less(t, pages, 20, "%s: the pages end", path)
		resp, body := op.Get(path)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		var rows []string
		for _, m := range listRowRE.FindAllStringSubmatch(body, -1) {
			rows = append(rows, m[1])
		}
		seen = append(seen, rows...)
		first := firstPageRE.FindStringSubmatch(body)
		if pages == 0 {
			firstRows = rows
			require.Nil(t, first, "%s: the first page links to no first page", path)
		} else {
			require.NotNil(t, first, "%s: a later page links to the first", path)
			_, firstBody := op.Get(html.UnescapeString(first[1]))
			var again []string
			for _, m := range listRowRE.FindAllStringSubmatch(firstBody, -1) {
				again = append(again, m[1])
			}
			require.Equal(t, firstRows, again, "%s: the first-page link shows the first page", path)
		}
		next := nextPageRE.FindStringSubmatch(body)
		if next == nil {
			require.LessOrEqual(t, len(rows), size, path)
			return seen
		}
		require.Len(t, rows, size, "%s: a page with a next page is full", path)
		path = html.UnescapeString(next[1])
		require.Contains(t, path, marker+"=", "the next page resumes after a marker")
	}
}

// idStrings returns ids as the pages write them.
func idStrings[T any](rows []T, id func(T) uuid.UUID) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = id(r).String()
	}
	return out
}

// The console's payments, batch, batches, approvals and network pages are read a page at a
// time: a full page links to the next, every row appears once and in the list's order, the
// filters carry over, and a marker the page did not make (or a bad page size) is a 400 page.
func TestConsoleListPagesPageThroughEveryRow(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := servertest.Setup(t, drv, servertest.Options{Tokens: []server.Token{{Subject: "victor@audit", Token: viewerToken, Role: server.RoleViewer}}})
		ctx := context.Background()

		batch, err := f.Platform.CreateBatch(ctx, 51, "", payments.TypePaymentStep, nil) // a default page and one
		require.NoError(t, err)
		for range 3 {
			f.WaitPayment(f.Submit(servertest.DomesticPayment(payments.TypePaymentManager)).PaymentID, "COMPLETED")
		}
		for range 3 {
			f.WaitApproval(f.Submit(servertest.BigPayment()).PaymentID)
		}
		for range 3 {
			f.Submit(servertest.PendingL2Payment())
		}
		servertest.Eventually(t, 30*time.Second, "three pending L2 confirmations", func() bool {
			list, err := f.Platform.ListPendingNetworkResponses(ctx, payments.ListParams{})
			require.NoError(t, err)
			return len(list) == 3
		})
		for range 2 {
			f.Fake.Advance(time.Second) // batches are ordered by time
			_, err := f.Platform.CreateBatch(ctx, 1, "", payments.TypePaymentStep, nil)
			require.NoError(t, err)
		}

		op := f.HTTPClient()
		op.Login(viewerToken)
		paymentID := func(v *payments.PaymentView) uuid.UUID { return v.ID }

		all, err := f.Platform.ListPayments(ctx, payments.PaymentFilter{Limit: payments.MaxListRows})
		require.NoError(t, err)
		require.Len(t, all, 51+3+3+3+2)
		require.Equal(t, idStrings(all, paymentID), walkConsolePages(t, op, "/payments", "before", 50),
			"every payment once, newest first, 50 a page by default")

		ofBatch, err := f.Platform.ListPayments(ctx, payments.PaymentFilter{BatchID: batch.ID, Limit: payments.MaxListRows})
		require.NoError(t, err)
		require.Len(t, ofBatch, 51)
		require.Equal(t, idStrings(ofBatch, paymentID), walkConsolePages(t, op, "/payments?batch="+batch.ID.String()+"&limit=20", "before", 20),
			"the batch filter carries over to every page")
		require.Equal(t, idStrings(ofBatch, paymentID), walkConsolePages(t, op, "/batches/"+batch.ID.String()+"?limit=20", "before", 20),
			"the batch page lists its payments a page at a time")

		// Filtered by a process status, the list is read by process: the marker names it.
		completed, err := f.Platform.ListPayments(ctx, payments.PaymentFilter{Status: "COMPLETED", ProcessType: payments.TypePaymentManager, Limit: payments.MaxListRows})
		require.NoError(t, err)
		require.Len(t, completed, 3)
		require.Equal(t, idStrings(completed, paymentID),
			walkConsolePages(t, op, "/payments?status=COMPLETED&processType="+payments.TypePaymentManager+"&limit=2", "before", 2))

		batches, err := f.Platform.ListBatches(ctx, payments.ListParams{})
		require.NoError(t, err)
		require.Len(t, batches, 3)
		require.Equal(t, idStrings(batches, func(b *payments.BatchView) uuid.UUID { return b.ID }), walkConsolePages(t, op, "/batches?limit=2", "before", 2))

		approvals, err := f.Platform.ListApprovals(ctx, payments.ApprovalFilter{})
		require.NoError(t, err)
		require.Len(t, approvals, 3)
		require.Equal(t, idStrings(approvals, func(a *payments.Approval) uuid.UUID { return a.ID }), walkConsolePages(t, op, "/approvals?limit=2", "after", 2),
			"pending approvals once each, oldest first")

		pending, err := f.Platform.ListPendingNetworkResponses(ctx, payments.ListParams{})
		require.NoError(t, err)
		require.Equal(t, idStrings(pending, func(n *payments.PendingNetworkResponse) uuid.UUID { return n.ID }), walkConsolePages(t, op, "/network?limit=2", "after", 2),
			"pending network responses once each, oldest first")

		// The live regions refresh the page shown, not the first one.
		_, body := op.Get("/batches?limit=2")
		next := nextPageRE.FindStringSubmatch(body)
		require.NotNil(t, next)
		resp, body := op.Get("/live" + html.UnescapeString(next[1]))
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		var live struct {
			Regions map[string]string `json:"regions"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &live))
		require.Contains(t, live.Regions["batches-table"], `data-id="`+batches[2].ID.String()+`"`)
		require.NotContains(t, live.Regions["batches-table"], `data-id="`+batches[0].ID.String()+`"`)
		_, body = op.Get(html.UnescapeString(next[1]))
		require.Contains(t, body, `data-live-url="`+html.EscapeString("/live"+html.UnescapeString(next[1]))+`"`)

		// Markers the pages did not make, and page sizes out of range, are 400 pages that link
		// back to the first page.
		noProcess := strconv.FormatInt(all[0].CreatedAt.UnixMicro(), 10) + "/" + all[0].ID.String() + "/"
		for _, bad := range []string{
			"/payments?before=nope", "/payments?before=1/" + uuid.NewString() + "x/", "/payments?limit=0", "/payments?limit=1001",
			"/payments?status=COMPLETED&before=" + noProcess,
			"/batches?before=nope", "/batches?limit=201",
			"/batches/" + batch.ID.String() + "?before=nope", "/batches/" + batch.ID.String() + "?status=COMPLETED&before=" + noProcess,
			"/approvals?after=nope", "/approvals?after=1/2", "/approvals?limit=x",
			"/network?after=nope", "/network?limit=1001",
		} {
			resp, body := op.Get(bad)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
			require.Contains(t, body, `id="bad-page"`, bad)
			require.NotRegexp(t, listRowRE, body, "%s: no rows on a page that cannot be read", bad)
		}
		for _, bad := range []string{"/live/batches?before=nope", "/live/batches/" + batch.ID.String() + "?before=nope"} {
			resp, _ := op.Get(bad)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
		}
	})
}
