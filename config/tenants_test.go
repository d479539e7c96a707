package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/orchestration"
)

// The admission keys read from the file, overridden from the environment, and turned into the
// runtime's admission configuration.
func TestParseConfigTenants(t *testing.T) {
	t.Parallel()
	cfg := mustParseConfig(t, `
tenants:
  capacity-limited: [payment, onboarding]
  tier-limits: {FREE: 2, PRO: 8, GOLD: 50}
  poll-interval: 250ms
  batch: 40
  per-tenant: 3
  unknown-definition-check: false
  unknown-definition-check-interval: 30s
  max-tenant-gauges: 25
`, "COMMANDBUS_TENANTS_TIER_LIMITS_ENTERPRISE=30", "COMMANDBUS_TENANTS_BATCH=60")
	require.Equal(t, config.TenantsConfig{
		CapacityLimited: []string{"payment", "onboarding"},
		TierLimits:      map[string]int{"FREE": 2, "PRO": 8, "GOLD": 50, "enterprise": 30},
		PollInterval:    commandbus.Duration(250 * time.Millisecond), Batch: 60, PerTenant: 3,
		UnknownDefinitionCheck: boolPtr(false), UnknownDefinitionCheckInterval: commandbus.Duration(30 * time.Second),
		MaxTenantGauges: 25,
	}, cfg.Tenants)
	require.Equal(t, orchestration.AdmissionConfig{
		CapacityLimited: []string{"payment", "onboarding"},
		TierLimits:      map[string]int{"FREE": 2, "PRO": 8, "GOLD": 50, "ENTERPRISE": 30},
		PollInterval:    250 * time.Millisecond, Batch: 60, PerTenant: 3,
		UnknownDefinitionCheckInterval: -1, MaxTenantGauges: 25,
	}, cfg.Tenants.Admission(), "a tier named from the environment is upper-cased; the check turned off is a negative interval")

	empty := mustParseConfig(t, "domains: {}\n").Tenants
	require.Equal(t, config.TenantsConfig{}, empty, "nothing by default")
	require.Equal(t, orchestration.AdmissionConfig{}, empty.Admission(), "the runtime's defaults apply")
}

// Every bad admission key is reported at once, naming the key.
func TestParseConfigTenantsInvalid(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte(`
tenants:
  capacity-limited: [payment, "", payment]
  tier-limits: {FREE: -1, "9LIVES": 3, Pro: 2, PRO: 4}
  poll-interval: -1s
  batch: -2
  per-tenant: -3
`), nil)
	require.ErrorIs(t, err, commandbus.ErrInvalidConfig)
	for _, want := range []string{
		`tenants.capacity-limited[1]: "" is not an execution type name`,
		`tenants.capacity-limited[2]: "payment" is listed twice`,
		"tenants.tier-limits.FREE: must not be negative, got -1",
		"tenants.tier-limits.9LIVES: not a tier name",
		"tenants.tier-limits.Pro: tier PRO is written more than once",
		`tenants.poll-interval: duration "-1s" must not be negative`,
		"tenants.batch: must not be negative, got -2",
		"tenants.per-tenant: must not be negative, got -3",
	} {
		require.ErrorContains(t, err, want)
	}

	_, err = config.Parse([]byte("tenants:\n  tier-limits: {FREE: lots}\n"), nil)
	require.ErrorContains(t, err, "tier-limits", "a limit must be a number")
	_, err = config.Parse([]byte("tenants:\n  batches: 3\n"), nil)
	require.ErrorContains(t, err, "batches", "an unknown key is a problem")
}
