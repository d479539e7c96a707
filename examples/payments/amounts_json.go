package payments

import (
	"encoding/json"
	"strconv"

	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus/money"
)

// The command payloads and process states carry amounts as decimals next to their currency. A
// decimal encodes with its own String, which drops trailing zeros ("100.00" becomes "100"); these
// encoders write each amount with its currency's minor units instead (money.Format), so the
// commands on the wire, the states in the API and the console say "100.00 EUR". Decoding is
// unchanged: a decimal reads either form.

// amountField is one amount of a payload: its JSON name, value and currency.
type amountField struct {
	name     string
	value    decimal.Decimal
	currency string
}

// encodeWithAmounts encodes plain (a type without a MarshalJSON of its own) and rewrites the
// given amounts, those it encoded, with their currency's minor units.
func encodeWithAmounts(plain any, amounts ...amountField) ([]byte, error) {
	data, err := json.Marshal(plain)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, err
	}
	for _, a := range amounts {
		if _, ok := fields[a.name]; ok {
			fields[a.name] = json.RawMessage(strconv.Quote(money.Format(a.value, a.currency)))
		}
	}
	return json.Marshal(fields)
}

// MarshalJSON writes the amount with its currency's minor units.
func (c CheckBalance) MarshalJSON() ([]byte, error) {
	type plain CheckBalance
	return encodeWithAmounts(plain(c), amountField{"amount", c.Amount, c.Currency})
}

// MarshalJSON writes the amount with its currency's minor units.
func (c CheckDailyLimit) MarshalJSON() ([]byte, error) {
	type plain CheckDailyLimit
	return encodeWithAmounts(plain(c), amountField{"amount", c.Amount, c.Currency})
}

// MarshalJSON writes the amount with its currency's minor units.
func (c BookRisk) MarshalJSON() ([]byte, error) {
	type plain BookRisk
	return encodeWithAmounts(plain(c), amountField{"amount", c.Amount, c.Currency})
}

// MarshalJSON writes the amount sold with its currency's minor units.
func (c BookFx) MarshalJSON() ([]byte, error) {
	type plain BookFx
	return encodeWithAmounts(plain(c), amountField{"sellAmount", c.SellAmount, c.SellCurrency})
}

// MarshalJSON writes the amount sold with its currency's minor units.
func (c BookFxContract) MarshalJSON() ([]byte, error) { return BookFx(c).MarshalJSON() }

// MarshalJSON writes the amount bought with its currency's minor units.
func (r FxResult) MarshalJSON() ([]byte, error) {
	type plain FxResult
	return encodeWithAmounts(plain(r), amountField{"buyAmount", r.BuyAmount, r.BuyCurrency})
}

// MarshalJSON writes the debit and credit amounts with their currencies' minor units.
func (c SubmitPayment) MarshalJSON() ([]byte, error) {
	type plain SubmitPayment
	return encodeWithAmounts(plain(c), amountField{"debitAmount", c.DebitAmount, c.DebitCurrency},
		amountField{"creditAmount", c.CreditAmount, c.CreditCurrency})
}

// MarshalJSON writes the payment's amount and the credited amount with their currencies' minor
// units.
func (s StepState) MarshalJSON() ([]byte, error) {
	type plain StepState
	return encodeWithAmounts(plain(s), amountField{"amount", s.Amount, s.Currency},
		amountField{"creditAmount", s.CreditAmount, s.CreditCurrency})
}

// MarshalJSON writes the payment's amount and the credited amount with their currencies' minor
// units.
func (s ManagerState) MarshalJSON() ([]byte, error) {
	type plain ManagerState
	return encodeWithAmounts(plain(s), amountField{"amount", s.Amount, s.Currency},
		amountField{"creditAmount", s.CreditAmount, s.CreditCurrency})
}
