package payments

import (
	"fmt"
	"strings"

	"github.com/shopspring/decimal"
	"golang.org/x/text/currency"
)

// Currencies are the ISO 4217 currencies the reference platform keeps accounts in.
var Currencies = []string{"USD", "EUR", "GBP", "CHF", "JPY"}

// referenceRates are US dollars per unit of each currency: the risk engine uses them to compare
// amounts with the approval threshold, the batch generator to size amounts, and the simulated FX
// API quotes around them.
var referenceRates = map[string]decimal.Decimal{
	"USD": decimal.NewFromInt(1),
	"EUR": decimal.RequireFromString("1.0850"),
	"GBP": decimal.RequireFromString("1.2700"),
	"CHF": decimal.RequireFromString("1.1300"),
	"JPY": decimal.RequireFromString("0.006700"),
}

// ParseCurrency checks an ISO 4217 code and that the platform supports it, returning the code
// in upper case.
func ParseCurrency(code string) (string, error) {
	unit, err := currency.ParseISO(strings.TrimSpace(code))
	if err != nil {
		return "", fmt.Errorf("%q is not an ISO 4217 currency code", code)
	}
	iso := unit.String()
	if _, ok := referenceRates[iso]; !ok {
		return "", fmt.Errorf("%s is not supported (supported: %s)", iso, strings.Join(Currencies, ", "))
	}
	return iso, nil
}

// MinorUnits is the number of decimal places of a currency (2 for USD, 0 for JPY).
func MinorUnits(code string) int32 {
	unit, err := currency.ParseISO(code)
	if err != nil {
		return 2
	}
	scale, _ := currency.Standard.Rounding(unit)
	return int32(scale)
}

// ParseAmount parses a positive decimal amount with at most the currency's minor units.
func ParseAmount(text, code string) (decimal.Decimal, error) {
	amount, err := decimal.NewFromString(strings.TrimSpace(text))
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("%q is not a decimal number", text)
	}
	if !amount.IsPositive() {
		return decimal.Decimal{}, fmt.Errorf("must be positive, got %s", amount)
	}
	if code != "" && -amount.Exponent() > MinorUnits(code) && !amount.Equal(amount.Round(MinorUnits(code))) {
		return decimal.Decimal{}, fmt.Errorf("%s has at most %d decimal places, got %s", code, MinorUnits(code), amount)
	}
	return amount, nil
}

// roundTo rounds an amount to a currency's minor units.
func roundTo(amount decimal.Decimal, code string) decimal.Decimal {
	return amount.Round(MinorUnits(code))
}

// toUSD converts with the reference rates, for threshold checks and reporting.
func toUSD(amount decimal.Decimal, code string) decimal.Decimal {
	rate, ok := referenceRates[code]
	if !ok {
		return amount
	}
	return amount.Mul(rate)
}

// fromUSD converts a dollar amount into a currency with the reference rates, rounded.
func fromUSD(usd decimal.Decimal, code string) decimal.Decimal {
	rate, ok := referenceRates[code]
	if !ok {
		return usd
	}
	return roundTo(usd.Div(rate), code)
}
