package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
)

// pagedRow is what the paging tests read of a listed row: its id and the keys lists order by.
type pagedRow struct {
	ID          uuid.UUID `json:"id"`
	ExecutionID uuid.UUID `json:"executionId"`
	CreatedAt   time.Time `json:"createdAt"`
	RequestedAt time.Time `json:"requestedAt"`
}

// at is the time a row is listed by.
func (r pagedRow) at() time.Time {
	if r.RequestedAt.IsZero() {
		return r.CreatedAt
	}
	return r.RequestedAt
}

// walkPages follows a list's cursors through the documented client, limit rows a page, runs
// between once after the first page, and returns the rows in the order read.
func walkPages(t *testing.T, api *servertest.Documented, path string, limit int, between func()) []pagedRow {
	t.Helper()
	var rows []pagedRow
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 50, "the cursors end")
		q := url.Values{"limit": {itoa(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		status, body := api.Call(t, "GET", path+sep+q.Encode(), nil, viewerToken)
		require.Equal(t, http.StatusOK, status, string(body))
		var p struct {
			Items   []pagedRow `json:"items"`
			Next    string     `json:"next"`
			HasMore bool       `json:"hasMore"`
		}
		require.NoError(t, json.Unmarshal(body, &p))
		require.NotNil(t, p.Items, "items is a list, never null")
		rows = append(rows, p.Items...)
		if pages == 0 && between != nil {
			between()
		}
		if !p.HasMore {
			require.Empty(t, p.Next, "the last page has no next")
			return rows
		}
		require.Len(t, p.Items, limit, "a page before the last is full")
		require.NotEmpty(t, p.Next)
		cursor = p.Next
	}
}

// idsOf returns the rows' ids in order.
func idsOf(rows []pagedRow) []uuid.UUID {
	out := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// requireOnceEach checks that rows hold no id twice and every id of want once.
func requireOnceEach(t *testing.T, want []uuid.UUID, rows []pagedRow) {
	t.Helper()
	seen := map[uuid.UUID]int{}
	for _, r := range rows {
		seen[r.ID]++
		require.Equal(t, 1, seen[r.ID], "row %s is listed once", r.ID)
	}
	for _, id := range want {
		require.Equal(t, 1, seen[id], "row %s, there before paging began, is listed", id)
	}
}

// requireKeysetOrder checks that rows are in the list's order: by time, then id, descending
// (newest first) or ascending.
func requireKeysetOrder(t *testing.T, rows []pagedRow, descending bool) {
	t.Helper()
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b pagedRow) int {
		c := a.at().Compare(b.at())
		if c == 0 {
			c = strings.Compare(a.ID.String(), b.ID.String())
		}
		if descending {
			return -c
		}
		return c
	})
	require.Equal(t, idsOf(sorted), idsOf(rows), "rows in order by time, then id")
}

// requireProblemNames checks a 400 whose problem names field.
func requireProblemNames(t *testing.T, api *servertest.Documented, path, field string) {
	t.Helper()
	status, body := api.Call(t, "GET", path, nil, viewerToken)
	require.Equal(t, http.StatusBadRequest, status, "%s: %s", path, body)
	var p struct {
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(body, &p))
	var fields []string
	for _, e := range p.Errors {
		fields = append(fields, e.Field)
	}
	require.Equal(t, []string{field}, fields, "%s: the problem names %s", path, field)
}

// The payments lists are read in pages by keyset: every row once, in order, whatever is
// inserted meanwhile; a limit over the largest page and a cursor the list did not make are 400s.
func TestPaymentListsArePagedWithCursors(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		api := servertest.NewDocumented(t, f.HTTP.URL)
		ctx := context.Background()

		// Payments: a batch's are created together, at one time on the fake clock, so only their
		// ids order them; three more settle, for the list filtered by a process status.
		batch, err := f.Platform.CreateBatch(ctx, 4, "", payments.TypePaymentStep, nil)
		require.NoError(t, err)
		var completed []uuid.UUID
		for range 3 {
			res := f.Submit(servertest.DomesticPayment(payments.TypePaymentManager))
			f.WaitPayment(res.PaymentID, "COMPLETED")
			completed = append(completed, res.PaymentID)
		}
		var approvals []uuid.UUID
		for range 3 {
			approvals = append(approvals, f.WaitApproval(f.Submit(servertest.BigPayment()).PaymentID).ID)
		}
		var l2 []uuid.UUID
		for range 3 {
			l2 = append(l2, f.Submit(servertest.PendingL2Payment()).PaymentID)
		}
		var pending []uuid.UUID
		servertest.Eventually(t, 30*time.Second, "three pending L2 confirmations", func() bool {
			list, err := f.Platform.ListPendingNetworkResponses(ctx, payments.ListParams{})
			require.NoError(t, err)
			pending = pending[:0]
			for _, p := range list {
				if slices.Contains(l2, p.PaymentID) {
					pending = append(pending, p.ID)
				}
			}
			return len(pending) == len(l2)
		})
		batches := []uuid.UUID{batch.ID}
		for range 2 {
			f.Fake.Advance(time.Second) // these are ordered by time
			b, err := f.Platform.CreateBatch(ctx, 1, "", payments.TypePaymentStep, nil)
			require.NoError(t, err)
			batches = append(batches, b.ID)
		}

		all, err := f.Platform.ListPayments(ctx, payments.PaymentFilter{Limit: payments.MaxListRows})
		require.NoError(t, err)
		require.Len(t, all, 4+3+3+3+2)
		var before []uuid.UUID
		for _, p := range all {
			before = append(before, p.ID)
		}
		rows := walkPages(t, api, "/api/payments", 3, func() { f.Submit(servertest.DomesticPayment(payments.TypePaymentStep)) })
		requireOnceEach(t, before, rows)
		requireKeysetOrder(t, rows, true)

		rows = walkPages(t, api, "/api/payments?batch="+batch.ID.String(), 1, nil)
		require.Len(t, rows, 4, "the batch's payments, though created at one time")
		requireKeysetOrder(t, rows, true)

		rows = walkPages(t, api, "/api/payments?status=COMPLETED&processType="+payments.TypePaymentManager, 2, nil)
		requireOnceEach(t, completed, rows)
		require.Len(t, rows, 3)
		require.True(t, slices.IsSortedFunc(rows, func(a, b pagedRow) int { return strings.Compare(b.ExecutionID.String(), a.ExecutionID.String()) }),
			"filtered by a process status: newest process first")

		rows = walkPages(t, api, "/api/batches", 2, func() {
			_, err := f.Platform.CreateBatch(ctx, 1, "", payments.TypePaymentStep, nil)
			require.NoError(t, err)
		})
		requireOnceEach(t, batches, rows)
		requireKeysetOrder(t, rows, true)

		rows = walkPages(t, api, "/api/approvals", 2, func() { f.WaitApproval(f.Submit(servertest.BigPayment()).PaymentID) })
		requireOnceEach(t, approvals, rows)
		requireKeysetOrder(t, rows, false)

		rows = walkPages(t, api, "/api/network/pending", 2, nil)
		requireOnceEach(t, pending, rows)
		requireKeysetOrder(t, rows, false)

		// A cursor of another list: made by the server, but not naming a row of this one.
		foreign := base64.RawURLEncoding.EncodeToString([]byte("v1:" + uuid.NewString()))
		for path, most := range map[string]int{"/api/payments": 1000, "/api/batches": 200, "/api/approvals": 1000, "/api/network/pending": 1000} {
			requireProblemNames(t, api, path+"?limit="+itoa(most+1), "limit")
			requireProblemNames(t, api, path+"?cursor=bm9wZQ", "cursor")
			requireProblemNames(t, api, path+"?cursor="+foreign, "cursor")
		}
	})
}
