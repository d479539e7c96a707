package money_test

import (
	"encoding/json"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/money"
)

func TestMinorUnits(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]int32{"EUR": 2, "USD": 2, "JPY": 0, "BHD": 3, "KWD": 3, "eur": 2, "???": money.DefaultMinorUnits} {
		require.Equal(t, want, money.MinorUnits(code), code)
	}
}

func TestFormatKeepsTheCurrencyPlaces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ amount, code, want string }{
		{"100", "EUR", "100.00"},
		{"100.00", "EUR", "100.00"},
		{"100.5", "USD", "100.50"},
		{"100", "JPY", "100"},
		{"1.5", "BHD", "1.500"},
		{"0.001", "KWD", "0.001"},
		{"100.125", "EUR", "100.125"}, // never rounds money away
		{"100.1200", "EUR", "100.12"},
	} {
		require.Equal(t, tc.want, money.Format(decimal.RequireFromString(tc.amount), tc.code), "%s %s", tc.amount, tc.code)
	}
}

func TestAmountJSON(t *testing.T) {
	t.Parallel()
	data, err := json.Marshal(map[string]money.Amount{"eur": money.New(decimal.RequireFromString("100"), "EUR"),
		"jpy": money.New(decimal.NewFromInt(100), "JPY")})
	require.NoError(t, err)
	require.JSONEq(t, `{"eur":"100.00","jpy":"100"}`, string(data))

	var back struct {
		A money.Amount `json:"a"`
		B money.Amount `json:"b"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"a":"100.00","b":12.5}`), &back))
	require.Equal(t, "100.00", back.A.String())
	require.Equal(t, "12.5", back.B.String())
	require.True(t, back.A.Decimal().Equal(decimal.NewFromInt(100)))
	require.Error(t, json.Unmarshal([]byte(`{"a":"ten"}`), &back))

	type withOmit struct {
		A money.Amount `json:"a,omitzero"`
	}
	data, err = json.Marshal(withOmit{})
	require.NoError(t, err)
	require.Equal(t, `{}`, string(data))
}
