package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// The idempotency key of a payment comes in the body or the IETF Idempotency-Key header. A
// repeat with the key and the same body replays the first answer (status and body) and creates
// nothing; with another body it is a 409 naming the fields that differ. Every answer matches the
// OpenAPI document.
func TestSubmitPaymentIdempotency(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		doc := loadAPIDoc(t, f.HTTP.URL)
		ctx := context.Background()
		post := func(body string, key string) *exchange {
			t.Helper()
			headers := bearer(operatorToken)
			if key != "" {
				headers["Idempotency-Key"] = key
			}
			x := send(t, "POST", f.HTTP.URL+"/api/payments", []byte(body), headers)
			require.True(t, doc.checkResponse(t, x))
			return x
		}
		paymentsWithKey := func(key string) int {
			list, err := f.Platform.ListPayments(ctx, payments.PaymentFilter{Limit: 1000})
			require.NoError(t, err)
			n := 0
			for _, v := range list {
				if v.IdempotencyKey == key {
					n++
				}
			}
			return n
		}
		const body = `{"debitAccount":"CUST-EUR-001","creditAccount":"BENE-EUR-001","amount":"100.00","currency":"EUR","processType":"PaymentManager"}`

		// The header alone, as a structured-field string.
		key := uuid.NewString()
		first := post(body, `"`+key+`"`)
		require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, first.resp.StatusCode, "%s", first.respBody)
		require.Empty(t, first.resp.Header.Get("Idempotent-Replayed"))
		var res payments.PaymentResult
		require.NoError(t, json.Unmarshal(first.respBody, &res))
		view, err := f.Platform.GetPayment(ctx, res.PaymentID)
		require.NoError(t, err)
		require.Equal(t, key, view.IdempotencyKey)

		// The same request again, the key bare this time: the first answer, nothing new.
		f.WaitPayment(res.PaymentID, "COMPLETED") // the state moved on; the answer does not
		again := post(body, key)
		require.Equal(t, first.resp.StatusCode, again.resp.StatusCode)
		require.Equal(t, string(first.respBody), string(again.respBody))
		require.Equal(t, "true", again.resp.Header.Get("Idempotent-Replayed"))
		require.Equal(t, 1, paymentsWithKey(key))

		// The key in the body instead, same payment: the same answer.
		withBodyKey := `{"idempotencyKey":"` + key + `",` + body[1:]
		require.Equal(t, string(first.respBody), string(post(withBodyKey, "").respBody))

		// Another amount under the key: 409 naming the field and the payment; nothing new.
		other := post(`{"idempotencyKey":"`+key+`","debitAccount":"CUST-EUR-001","creditAccount":"BENE-EUR-001","amount":"100.01","currency":"EUR","processType":"PaymentManager"}`, "")
		require.Equal(t, http.StatusConflict, other.resp.StatusCode, "%s", other.respBody)
		p := problemOf(t, other)
		require.Equal(t, "IDEMPOTENCY_KEY_REUSED", p.Code)
		require.Equal(t, res.PaymentID.String(), p.ExistingID)
		require.Len(t, p.Errors, 1)
		require.Equal(t, "amount", p.Errors[0].Field)
		require.Contains(t, p.Detail, "amount")
		require.Equal(t, 1, paymentsWithKey(key))

		// Header and body disagree: 400 naming the header; no key at all: 400 naming the field.
		x := send(t, "POST", f.HTTP.URL+"/api/payments", []byte(`{"idempotencyKey":"one",`+body[1:]), map[string]string{
			"Authorization": "Bearer " + operatorToken, "Idempotency-Key": "two"})
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, "Idempotency-Key", problemOf(t, x).Errors[0].Field)
		x = post(body, "")
		require.Equal(t, http.StatusBadRequest, x.resp.StatusCode)
		require.Equal(t, "idempotencyKey", problemOf(t, x).Errors[0].Field)
		require.Zero(t, paymentsWithKey("one")+paymentsWithKey("two"))
	})
}
