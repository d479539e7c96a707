package payments

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
)

func TestRollIsDeterministicAndFollowsPercentages(t *testing.T) {
	t.Parallel()
	b := StepBehavior{FailPermanentPct: 10, FailTransientPct: 20, FailBusinessRulePct: 10, TimeoutPct: 10, PendingPct: 10, MinDurationMs: 5, MaxDurationMs: 10}
	counts := map[Outcome]int{}
	for i := range 10000 {
		key := "k" + string(rune(i))
		r := b.roll(7, key)
		require.Equal(t, r, b.roll(7, key), "the same seed and key roll the same")
		require.GreaterOrEqual(t, r.Delay.Milliseconds(), int64(5))
		require.LessOrEqual(t, r.Delay.Milliseconds(), int64(10))
		counts[r.Outcome]++
	}
	for outcome, want := range map[Outcome]int{OutcomePermanent: 1000, OutcomeTransient: 2000, OutcomeBusiness: 1000, OutcomeTimeout: 1000, OutcomePending: 1000, OutcomeSuccess: 4000} {
		require.InDelta(t, want, counts[outcome], float64(want)*0.15, "%s", outcome)
	}
	require.Equal(t, OutcomeSuccess, StepBehavior{}.roll(1, "x").Outcome)
}

func TestPresetsAndParsing(t *testing.T) {
	t.Parallel()
	for _, name := range []string{PresetHappy, PresetRealistic, PresetChaos} {
		b, err := Preset(name)
		require.NoError(t, err)
		require.NoError(t, b.Validate(), name)
	}
	_, err := Preset("sunny")
	require.Error(t, err)

	dir := t.TempDir()
	yamlFile := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(yamlFile, []byte("name: flaky fx\nseed: 9\nsteps:\n  bookFx:\n    failTransientPct: 25\n    maxDurationMs: 30\n"), 0o600))
	b, err := LoadBehavior(yamlFile)
	require.NoError(t, err)
	require.Equal(t, "flaky fx", b.Name)
	require.Equal(t, 25.0, b.Step(StepBookFx).FailTransientPct)
	b, err = ParseBehavior([]byte(`{"name":"j","steps":{"awaitL1":{"pendingPct":100}}}`))
	require.NoError(t, err)
	require.Equal(t, 100.0, b.Step(StepAwaitL1).PendingPct)

	_, err = ParseBehavior([]byte(`{"steps":{"bookFx":{"failTransientPct":80,"timeoutPct":30,"minDurationMs":9,"maxDurationMs":3},"nope":{}}}`))
	require.Error(t, err)
	var verrs []*commandbus.ValidationError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var v *commandbus.ValidationError
		require.True(t, errors.As(e, &v))
		verrs = append(verrs, v)
	}
	require.Len(t, verrs, 3, "every problem at once: over 100%%, durations, unknown step")
	_, err = ParseBehavior([]byte(`{"stepz":{}}`))
	require.Error(t, err, "unknown keys are rejected")
}

func TestMoney(t *testing.T) {
	t.Parallel()
	cur, err := ParseCurrency("eur")
	require.NoError(t, err)
	require.Equal(t, "EUR", cur)
	_, err = ParseCurrency("XYZ")
	require.Error(t, err)
	_, err = ParseCurrency("SEK")
	require.ErrorContains(t, err, "not supported")
	require.Equal(t, int32(0), MinorUnits("JPY"))
	require.Equal(t, int32(2), MinorUnits("USD"))
	_, err = ParseAmount("10.123", "USD")
	require.Error(t, err)
	a, err := ParseAmount("10.10", "USD")
	require.NoError(t, err)
	require.True(t, a.Equal(decimal.RequireFromString("10.1")))
	_, err = ParseAmount("0", "USD")
	require.Error(t, err)
	_, err = ParseAmount("1e400000000000", "USD")
	require.Error(t, err)
}
