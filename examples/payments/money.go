package payments

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/shopspring/decimal"
	"golang.org/x/text/currency"

	"github.com/commandbus/commandbus/internal/input"
	"github.com/commandbus/commandbus/money"
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
	if msg := input.Identifier.Check(code); msg != "" {
		return "", errors.New(msg)
	}
	unit, err := currency.ParseISO(code)
	if err != nil {
		return "", fmt.Errorf("%s is not an ISO 4217 currency code", input.Quote(code))
	}
	iso := unit.String()
	if _, ok := referenceRates[iso]; !ok {
		return "", fmt.Errorf("%s is not supported (supported: %s)", iso, strings.Join(Currencies, ", "))
	}
	return iso, nil
}

// MinorUnits is the number of decimal places of a currency (2 for USD, 0 for JPY): its ISO 4217
// exponent, as money.MinorUnits says.
func MinorUnits(code string) int32 { return money.MinorUnits(code) }

// plainDecimal is an amount as the API takes it: digits, optionally a point and more digits. No
// sign, exponent, spaces or thousands separators; at most 18 digits before the point.
var plainDecimal = regexp.MustCompile(`^[0-9]{1,18}(\.[0-9]{1,18})?$`)

// ParseAmount parses a positive plain decimal ("1250.50") with at most the currency's minor
// units of decimal places ("10.5" is refused in JPY, "10.123" in USD). Exponents ("1e30"),
// signs and spaces are refused.
func ParseAmount(text, code string) (decimal.Decimal, error) {
	if strings.HasPrefix(text, "-") && plainDecimal.MatchString(text[1:]) {
		return decimal.Decimal{}, fmt.Errorf("must be positive, got %s", input.Quote(text))
	}
	if !plainDecimal.MatchString(text) {
		return decimal.Decimal{}, fmt.Errorf("%s is not a plain decimal number such as 1250.50 (digits and an optional decimal point; no sign, exponent or separators)", input.Quote(text))
	}
	amount, err := decimal.NewFromString(text)
	if err != nil {
		return decimal.Decimal{}, fmt.Errorf("%s is not a decimal number", input.Quote(text))
	}
	if !amount.IsPositive() {
		return decimal.Decimal{}, fmt.Errorf("must be positive, got %s", text)
	}
	if _, fraction, ok := strings.Cut(text, "."); ok && code != "" && int32(len(fraction)) > MinorUnits(code) {
		return decimal.Decimal{}, fmt.Errorf("%s has at most %d decimal places, got %s", code, MinorUnits(code), input.Quote(text))
	}
	return amount, nil
}

// DefaultMaxAmounts bound one payment per currency when Options.MaxAmounts says nothing for
// it: about ten million US dollars in each currency.
var DefaultMaxAmounts = map[string]decimal.Decimal{
	"USD": decimal.NewFromInt(10_000_000),
	"EUR": decimal.NewFromInt(10_000_000),
	"GBP": decimal.NewFromInt(10_000_000),
	"CHF": decimal.NewFromInt(10_000_000),
	"JPY": decimal.NewFromInt(1_500_000_000),
}

// maxAmount is the largest amount one payment may have in a currency.
func (o Options) maxAmount(code string) (decimal.Decimal, bool) {
	if m, ok := o.MaxAmounts[code]; ok {
		return m, true
	}
	m, ok := DefaultMaxAmounts[code]
	return m, ok
}

func (o Options) checkMaxAmounts() error {
	var errs []error
	for code, m := range o.MaxAmounts {
		if _, ok := referenceRates[code]; !ok {
			errs = append(errs, fmt.Errorf("payments: MaxAmounts has %s, which the platform does not support (supported: %s)", code, strings.Join(Currencies, ", ")))
		} else if !m.IsPositive() {
			errs = append(errs, fmt.Errorf("payments: MaxAmounts[%s] must be positive, got %s", code, m))
		}
	}
	return errors.Join(errs...)
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
