package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/config"
)

// The tracing keys read from the file, and each overridden from the environment.
func TestParseConfigTracing(t *testing.T) {
	t.Parallel()
	cfg := mustParseConfig(t, `
tracing:
  enabled: false
  endpoint: http://otel-collector:4318
  service-name: payments-worker
  sample-ratio: 0.25
`, "COMMANDBUS_TRACING_ENABLED=true", "COMMANDBUS_TRACING_SAMPLE_RATIO=0.5")
	half := 0.5
	require.Equal(t, config.TracingConfig{Enabled: boolPtr(true), Endpoint: "http://otel-collector:4318",
		ServiceName: "payments-worker", SampleRatio: &half}, cfg.Tracing)

	require.Equal(t, config.TracingConfig{}, mustParseConfig(t, "domains: {}\n").Tracing, "off by default")
}

// A bad endpoint and a ratio outside [0, 1] are reported together, naming their keys.
func TestParseConfigTracingInvalid(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte(`
tracing:
  endpoint: otel-collector:4318
  sample-ratio: 2
`), nil)
	require.Error(t, err)
	require.ErrorContains(t, err, "tracing.endpoint: want an http:// or https:// URL")
	require.ErrorContains(t, err, "tracing.sample-ratio: must be between 0 and 1, got 2")
}
