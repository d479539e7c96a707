package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// Amounts keep their currency's minor units in the API and the console: a payment of 100 EUR
// reads back as "100.00" (a decimal's own String said "100"), 100 JPY as "100", and the console
// shows 100.00 EUR.
func TestAmountsKeepTheCurrencyMinorUnits(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		for _, tc := range []struct{ currency, sent, want string }{
			{"EUR", "100", "100.00"},
			{"EUR", "100.5", "100.50"},
			{"JPY", "100", "100"},
		} {
			body, err := json.Marshal(map[string]string{"idempotencyKey": uuid.NewString(), "debitAccount": "CUST-" + tc.currency + "-001",
				"creditAccount": "BENE-" + tc.currency + "-001", "amount": tc.sent, "currency": tc.currency, "processType": "PaymentManager"})
			require.NoError(t, err)
			x := send(t, "POST", f.HTTP.URL+"/api/payments", body, bearer(operatorToken))
			require.Less(t, x.resp.StatusCode, 300, "%s", x.respBody)
			var res struct {
				PaymentID   uuid.UUID `json:"paymentId"`
				ExecutionID uuid.UUID `json:"executionId"`
			}
			require.NoError(t, json.Unmarshal(x.respBody, &res))

			x = send(t, "GET", f.HTTP.URL+"/api/payments/"+res.PaymentID.String(), nil, bearer(viewerToken))
			require.Equal(t, http.StatusOK, x.resp.StatusCode, "%s", x.respBody)
			var view map[string]any
			require.NoError(t, json.Unmarshal(x.respBody, &view))
			require.Equal(t, tc.want, view["amount"], "%s %s reads back", tc.sent, tc.currency)

			x = send(t, "GET", f.HTTP.URL+"/api/payments?limit=1", nil, bearer(viewerToken))
			var list struct {
				Items []map[string]any `json:"items"`
			}
			require.NoError(t, json.Unmarshal(x.respBody, &list))
			require.Len(t, list.Items, 1)
			require.Equal(t, tc.want, list.Items[0]["amount"], "the list says the same")

			// The process's state, as the executions API shows it, says the same.
			x = send(t, "GET", f.HTTP.URL+"/api/executions/"+res.ExecutionID.String(), nil, bearer(viewerToken))
			require.Equal(t, http.StatusOK, x.resp.StatusCode, "%s", x.respBody)
			var exec struct {
				State map[string]any `json:"state"`
			}
			require.NoError(t, json.Unmarshal(x.respBody, &exec))
			require.Equal(t, tc.want, exec.State["amount"], "the state's amount: %s", x.respBody)

			if tc.currency == "EUR" {
				b := f.HTTPClient()
				b.Login(viewerToken)
				resp, page := b.Get("/payments/" + res.PaymentID.String())
				require.Equal(t, http.StatusOK, resp.StatusCode)
				require.Contains(t, page, `<span id="payment-amount">`+tc.want+` EUR</span>`)
			}
		}
	})
}
