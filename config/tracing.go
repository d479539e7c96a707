package config

import (
	"fmt"
	"net/url"
)

// TracingConfig exports the spans of commandbus (package tracing) to an OpenTelemetry collector
// over OTLP/HTTP. The standard variables apply as well: OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG,
// OTEL_BSP_*; a key set here wins over its variable. OTEL_SDK_DISABLED=true turns export off
// whatever the file says.
type TracingConfig struct {
	// Enabled exports traces. Default: false, unless OTEL_TRACES_EXPORTER=otlp.
	Enabled *bool `yaml:"enabled"`
	// Endpoint is the collector's OTLP/HTTP base URL, as http://otel-collector:4318; /v1/traces
	// is added when the URL has no path. Default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
	// OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318.
	Endpoint string `yaml:"endpoint"`
	// ServiceName is the service.name of the spans. Default: OTEL_SERVICE_NAME, else commandbus.
	ServiceName string `yaml:"service-name"`
	// SampleRatio is the share of the traces started here that are recorded, from 0 to 1; a
	// trace started upstream follows the caller's decision (parent-based). Default:
	// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, else every trace.
	SampleRatio *float64 `yaml:"sample-ratio"`
}

func (t TracingConfig) validate() []error {
	var errs []error
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("tracing.endpoint: want an http:// or https:// URL such as http://otel-collector:4318, got %q", t.Endpoint))
		}
	}
	if r := t.SampleRatio; r != nil && (*r < 0 || *r > 1) {
		errs = append(errs, fmt.Errorf("tracing.sample-ratio: must be between 0 and 1, got %g", *r))
	}
	return errs
}
