// Package money renders amounts to their currency's minor units, the ISO 4217 exponent: 100
// euros are "100.00", 100 yen "100", 1.5 Bahraini dinars "1.500". A decimal's own String drops
// trailing zeros ("100.00" becomes "100"), which reads as a different amount to a person and
// breaks clients that compare strings; every place commandbus shows or sends money goes through
// this package instead (REST JSON, console, CLI, command payloads).
package money

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/shopspring/decimal"
	"golang.org/x/text/currency"
)

// DefaultMinorUnits are the decimal places of a code ISO 4217 does not know.
const DefaultMinorUnits int32 = 2

// MinorUnits is the number of decimal places of an ISO 4217 currency (2 for EUR and USD, 0 for
// JPY, 3 for BHD and KWD), from the Unicode CLDR data of golang.org/x/text. A code it does not
// know has DefaultMinorUnits.
func MinorUnits(code string) int32 {
	unit, err := currency.ParseISO(code)
	if err != nil {
		return DefaultMinorUnits
	}
	scale, _ := currency.Standard.Rounding(unit)
	return int32(scale)
}

// places is how many decimal places amount is shown with in a currency of minor units: the
// minor units, or more when the amount has more that are not zero (an FX conversion before
// rounding), so that showing money never rounds it away.
func places(amount decimal.Decimal, minor int32) int32 {
	if exp := -amount.Exponent(); exp > minor && !amount.Equal(amount.Round(minor)) {
		return exp
	}
	return minor
}

// Format writes amount with its currency's minor units: Format(100, "EUR") is "100.00",
// Format(100, "JPY") is "100". Places beyond the minor units that are not zero are kept, never
// rounded away. No grouping, no currency code: a plain decimal a client can parse.
func Format(amount decimal.Decimal, code string) string {
	return amount.StringFixed(places(amount, MinorUnits(code)))
}

// Amount is a sum of money that keeps its decimal places when written: it encodes to JSON as a
// string with its currency's minor units ("100.00" for 100 EUR), where a decimal.Decimal would
// write "100". Its zero value is zero with no places. Decoding keeps the places the text has.
type Amount struct {
	value  decimal.Decimal
	places int32
}

// New returns amount in a currency: written with the currency's minor units (MinorUnits), or
// more places when amount has more that are not zero.
func New(amount decimal.Decimal, code string) Amount {
	return Amount{value: amount, places: places(amount, MinorUnits(code))}
}

// Decimal is the amount's value.
func (a Amount) Decimal() decimal.Decimal { return a.value }

// IsZero reports a zero amount (so `json:",omitzero"` leaves it out).
func (a Amount) IsZero() bool { return a.value.IsZero() }

// Places is the number of decimal places the amount is written with.
func (a Amount) Places() int32 { return a.places }

// String writes the amount with its places: "100.00".
func (a Amount) String() string { return a.value.StringFixed(a.places) }

// MarshalJSON writes the amount as a JSON string with its places: "100.00".
func (a Amount) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(a.String())), nil }

// UnmarshalJSON reads a JSON string or number, keeping the decimal places it is written with.
func (a *Amount) UnmarshalJSON(data []byte) error {
	text := string(bytes.Trim(data, `"`))
	if text == "null" {
		*a = Amount{}
		return nil
	}
	value, err := decimal.NewFromString(text)
	if err != nil {
		return fmt.Errorf("money: %q is not a decimal amount", text)
	}
	*a = Amount{value: value, places: max(0, -value.Exponent())}
	return nil
}

// OpenAPISchema is the amount's schema in an OpenAPI document: a string holding a plain decimal.
func (Amount) OpenAPISchema() map[string]any {
	return map[string]any{"type": "string", "format": "decimal", "pattern": `^-?[0-9]+(\.[0-9]+)?$`,
		"description": "a plain decimal with the currency's minor units (ISO 4217): 100.00 EUR, 100 JPY, 1.500 BHD", "example": "1250.50"}
}
