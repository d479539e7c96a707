package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/config"
)

// DefaultServiceName is the service.name of the spans when neither tracing.service-name nor
// OTEL_SERVICE_NAME names one.
const DefaultServiceName = "commandbus"

// TracingEnabled reports whether cfg and the environment (getenv) turn trace export on:
// tracing.enabled, else OTEL_TRACES_EXPORTER=otlp; OTEL_SDK_DISABLED=true turns it off.
func TracingEnabled(cfg config.TracingConfig, getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if cfg.Enabled != nil {
		return *cfg.Enabled
	}
	return strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) == "otlp"
}

// StartTracing builds the tracer provider the binary's configuration asks for: an OTLP/HTTP
// exporter behind a batch processor, the service's resource and its sampler, installed as the
// global provider so the application's own spans join the same traces. When export is off it
// returns a nil provider (the library then uses the global no-op) and a shutdown that does
// nothing. Call shutdown on exit: it flushes the spans still batched.
func StartTracing(ctx context.Context, cfg config.TracingConfig, logger *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	noShutdown := func(context.Context) error { return nil }
	if !TracingEnabled(cfg, os.Getenv) {
		return nil, noShutdown, nil
	}
	var opts []otlptracehttp.Option
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil {
			return nil, nil, fmt.Errorf("tracing.endpoint: %w", err)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	}
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: creating the OTLP exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = os.Getenv("OTEL_SERVICE_NAME")
	}
	if name == "" {
		name = DefaultServiceName
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", name)))
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: describing the service: %w", err)
	}
	providerOpts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)}
	if cfg.SampleRatio != nil {
		providerOpts = append(providerOpts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*cfg.SampleRatio))))
	}
	tp := sdktrace.NewTracerProvider(providerOpts...)
	otel.SetTracerProvider(tp)
	logger.Info("exporting traces over OTLP/HTTP", "service_name", name, "endpoint", cfg.Endpoint)
	return tp, tp.Shutdown, nil
}
