package payments_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/examples/payments"
)

// The commands a payment sends and the states its processes keep write amounts with their
// currency's minor units, and read back to the same values.
func TestPayloadAmountsKeepTheCurrencyMinorUnits(t *testing.T) {
	t.Parallel()
	hundred := decimal.NewFromInt(100)
	details := payments.PaymentDetails{PaymentID: uuid.New(), Amount: hundred, Currency: "EUR", CreditCurrency: "JPY"}
	for _, tc := range []struct {
		name    string
		value   any
		decoded any
		want    map[string]string
	}{
		{"CheckBalance", payments.CheckBalance{Amount: hundred, Currency: "EUR"}, &payments.CheckBalance{}, map[string]string{"amount": "100.00"}},
		{"CheckDailyLimit", payments.CheckDailyLimit{Amount: hundred, Currency: "JPY"}, &payments.CheckDailyLimit{}, map[string]string{"amount": "100"}},
		{"BookRisk", payments.BookRisk{Amount: decimal.RequireFromString("1.5"), Currency: "BHD"}, &payments.BookRisk{}, map[string]string{"amount": "1.500"}},
		{"BookFx", payments.BookFx{SellAmount: hundred, SellCurrency: "USD"}, &payments.BookFx{}, map[string]string{"sellAmount": "100.00"}},
		{"BookFxContract", payments.BookFxContract{SellAmount: hundred, SellCurrency: "GBP"}, &payments.BookFxContract{}, map[string]string{"sellAmount": "100.00"}},
		{"FxResult", payments.FxResult{BuyAmount: hundred, BuyCurrency: "CHF", Rate: decimal.RequireFromString("1.0850")}, &payments.FxResult{},
			map[string]string{"buyAmount": "100.00", "rate": "1.085"}},
		{"SubmitPayment", payments.SubmitPayment{DebitAmount: hundred, DebitCurrency: "EUR", CreditAmount: decimal.NewFromInt(16194), CreditCurrency: "JPY"},
			&payments.SubmitPayment{}, map[string]string{"debitAmount": "100.00", "creditAmount": "16194"}},
		{"StepState", payments.StepState{PaymentDetails: details, CreditAmount: decimal.NewFromInt(16194)}, &payments.StepState{},
			map[string]string{"amount": "100.00", "creditAmount": "16194"}},
		{"ManagerState", payments.ManagerState{PaymentDetails: details, CreditAmount: decimal.NewFromInt(16194)}, &payments.ManagerState{},
			map[string]string{"amount": "100.00", "creditAmount": "16194"}},
	} {
		data, err := json.Marshal(tc.value)
		require.NoError(t, err, tc.name)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(data, &fields))
		for name, want := range tc.want {
			require.Equal(t, want, fields[name], "%s.%s in %s", tc.name, name, data)
		}
		require.NoError(t, json.Unmarshal(data, tc.decoded))
		again, err := json.Marshal(tc.decoded)
		require.NoError(t, err)
		require.JSONEq(t, string(data), string(again), "%s reads back to the same values", tc.name)
	}

	// Omitted amounts stay omitted.
	data, err := json.Marshal(payments.ManagerState{PaymentDetails: details})
	require.NoError(t, err)
	require.NotContains(t, string(data), "creditAmount")
}
