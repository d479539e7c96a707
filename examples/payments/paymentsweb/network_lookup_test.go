package paymentsweb_test

import (
	"context"
	"database/sql"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/server"
)

const operatorToken = "operator-token-0123456789"

// addPendingBefore writes n pending network confirmations of unknown payments, created before
// at, into the platform's table on drv's database: they list ahead of any created at at.
func addPendingBefore(t *testing.T, drv driver.Driver, at time.Time, n int) {
	t.Helper()
	var db *sql.DB
	table := "pay_network_pending"
	switch d := drv.(type) {
	case interface{ Pool() *pgxpool.Pool }:
		db = stdlib.OpenDBFromPool(d.Pool())
		t.Cleanup(func() { _ = db.Close() })
		table = `"` + strings.ReplaceAll(drv.Schema(), `"`, `""`) + `".` + table
	case interface{ DB() *sql.DB }:
		db = d.DB()
	default:
		t.Fatalf("driver %T has no database handle", drv)
	}
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	for i := range n {
		_, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (id, payment_id, execution_id, level, status, created_at)
			VALUES ($1, $2, $3, 2, 'PENDING', $4)`, uuid.NewString(), uuid.NewString(), uuid.NewString(), at.UnixMicro()-int64(n-i))
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
}

// A pending network confirmation is found by its id, for its answer and on its payment's page,
// however many others wait ahead of it in the list; the overview does not pass its cap off as
// the count of pending confirmations.
func TestPendingResponseFoundBeyondTheFirstThousand(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := servertest.Setup(t, drv, servertest.Options{Tokens: []server.Token{{Subject: "alice@ops", Token: operatorToken, Role: server.RoleOperator}}})
		ctx := context.Background()
		res := f.Submit(servertest.PendingL2Payment())
		var pending *payments.PendingNetworkResponse
		servertest.Eventually(t, 30*time.Second, "L2 to be pending", func() bool {
			list, err := f.Platform.ListPendingNetworkResponses(ctx, payments.ListParams{})
			require.NoError(t, err)
			if len(list) == 1 {
				pending = list[0]
			}
			return pending != nil
		})
		require.Equal(t, res.PaymentID, pending.PaymentID)
		addPendingBefore(t, drv, pending.CreatedAt, 1000)

		op := f.HTTPClient()
		op.Login(operatorToken)
		resp, body := op.Get("/network/" + pending.ID.String() + "/accept")
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.NotContains(t, body, "not pending any more")
		require.Contains(t, body, "/payments/"+res.PaymentID.String(), "the confirmation names its payment")

		resp, body = op.Get("/payments/" + res.PaymentID.String())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, "/network/"+pending.ID.String()+"/accept", "the payment's page offers the answer")

		// The overview counts a thousand and says there are more, instead of passing a cap off as the count.
		resp, body = op.Get("/")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Regexp(t, `id="count-network">1,?000</span>\s*<a class="card-unit" href="/network">or more pending</a>`, body)
		require.Regexp(t, `id="count-approvals">0</span>\s*<a class="card-unit" href="/approvals">pending</a>`, body)
	})
}
