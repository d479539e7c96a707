package payments

import (
	"fmt"
	"sort"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus/config"
)

// ConfigOptions returns the platform options that a deployment's configuration file sets:
// simulator.poll-interval (SimulatorPollInterval), payments.max-amounts (MaxAmounts, codes
// upper-cased) and fx.url (FXAPIURL). Every other field is zero, that is, its default; the caller
// sets the rest. The command-steps entries need no option: the processes read them from the
// client's configuration when they send each step.
func ConfigOptions(cfg *config.File) (Options, error) {
	var o Options
	if cfg == nil {
		return o, nil
	}
	o.SimulatorPollInterval = cfg.Simulator.PollInterval.Std()
	o.FXAPIURL = cfg.FX.URL
	codes := make([]string, 0, len(cfg.Payments.MaxAmounts))
	for code := range cfg.Payments.MaxAmounts {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	for _, code := range codes {
		amount, err := decimal.NewFromString(cfg.Payments.MaxAmounts[code])
		if err != nil {
			return Options{}, fmt.Errorf("payments.max-amounts.%s: %w", code, err)
		}
		if o.MaxAmounts == nil {
			o.MaxAmounts = map[string]decimal.Decimal{}
		}
		o.MaxAmounts[strings.ToUpper(code)] = amount
	}
	if err := o.checkMaxAmounts(); err != nil {
		return Options{}, err
	}
	return o, nil
}
