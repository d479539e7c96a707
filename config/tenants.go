package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/orchestration"
)

// TenantsConfig configures capacity-limited admission (package tenant): which execution types
// wait for a free slot of their tenant, the tiers' limits and the admission dispatcher. Its
// zero value changes nothing: no type is capacity-limited, the stored tier limits apply (FREE
// 1, PRO 5, ENTERPRISE 20 unless changed) and the dispatcher runs with its defaults.
type TenantsConfig struct {
	// CapacityLimited lists the execution types (a process type, a workflow, saga or TCC
	// definition) whose executions are admitted only into a free slot of their tenant; they
	// need a tenant id. Default: none.
	CapacityLimited []string `yaml:"capacity-limited"`
	// TierLimits sets tiers' limits (executions active at once per tenant) when the client
	// starts, creating the tiers it names: {FREE: 1, PRO: 5, ENTERPRISE: 20}. A tier name is
	// upper-case letters, digits and '_' (a name from the environment is upper-cased). Tiers it
	// leaves out keep their stored limits. Default: none changed.
	TierLimits map[string]int `yaml:"tier-limits"`
	// PollInterval is how often the admission dispatcher runs when nothing wakes it (a slot
	// freed under a locked tenant row wakes it at once). Default (0): 1s.
	PollInterval commandbus.Duration `yaml:"poll-interval"`
	// Batch is how many tenants one dispatcher round serves at most, round-robin. Default (0):
	// 100.
	Batch int `yaml:"batch"`
	// PerTenant caps what one round admits per tenant. Default (0): all its free slots.
	PerTenant int `yaml:"per-tenant"`
	// UnknownDefinitionCheck makes this instance end FAILED (UNKNOWN_DEFINITION) the queued
	// executions of a type it does not register. Turn it off on an instance that does not
	// register every capacity-limited type of the deployment. Default: true.
	UnknownDefinitionCheck *bool `yaml:"unknown-definition-check"`
	// UnknownDefinitionCheckInterval is how often that check runs. Default (0): 10s.
	UnknownDefinitionCheckInterval commandbus.Duration `yaml:"unknown-definition-check-interval"`
	// MaxTenantGauges bounds the tenants that get per-tenant active and queued gauges (the
	// busiest first), so metric cardinality stays bounded; negative means none. Default (0):
	// tenant.DefaultMaxTenantGauges.
	MaxTenantGauges int `yaml:"max-tenant-gauges"`
}

var (
	tierNameRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,31}$`)
	typeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`)
)

// Admission returns the orchestration runtime's admission configuration (tier names
// upper-cased). Pass it as orchestration.Config.Admission.
func (t TenantsConfig) Admission() orchestration.AdmissionConfig {
	out := orchestration.AdmissionConfig{
		CapacityLimited:                append([]string(nil), t.CapacityLimited...),
		PollInterval:                   time.Duration(t.PollInterval),
		Batch:                          t.Batch,
		PerTenant:                      t.PerTenant,
		UnknownDefinitionCheckInterval: time.Duration(t.UnknownDefinitionCheckInterval),
		MaxTenantGauges:                t.MaxTenantGauges,
	}
	if t.UnknownDefinitionCheck != nil && !*t.UnknownDefinitionCheck {
		out.UnknownDefinitionCheckInterval = -1
	}
	if len(t.TierLimits) > 0 {
		out.TierLimits = make(map[string]int, len(t.TierLimits))
		for tier, n := range t.TierLimits {
			out.TierLimits[strings.ToUpper(tier)] = n
		}
	}
	return out
}

// validate returns the problems of the tenants section, each naming its key.
func (t TenantsConfig) validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]bool{}
	for i, typ := range t.CapacityLimited {
		switch {
		case !typeNameRE.MatchString(typ):
			add("tenants.capacity-limited[%d]: %q is not an execution type name", i, typ)
		case seen[typ]:
			add("tenants.capacity-limited[%d]: %q is listed twice", i, typ)
		}
		seen[typ] = true
	}
	tiers := map[string]bool{}
	for _, tier := range sortedKeys(t.TierLimits) {
		up := strings.ToUpper(tier)
		if !tierNameRE.MatchString(up) {
			add("tenants.tier-limits.%s: not a tier name (a letter, then letters, digits or _, up to 32)", tier)
		} else if tiers[up] {
			add("tenants.tier-limits.%s: tier %s is written more than once (names are case-insensitive)", tier, up)
		}
		tiers[up] = true
		if n := t.TierLimits[tier]; n < 0 {
			add("tenants.tier-limits.%s: must not be negative, got %d", tier, n)
		}
	}
	if t.Batch < 0 {
		add("tenants.batch: must not be negative, got %d", t.Batch)
	}
	if t.PerTenant < 0 {
		add("tenants.per-tenant: must not be negative, got %d", t.PerTenant)
	}
	return errs
}
