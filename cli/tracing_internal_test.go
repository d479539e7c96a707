package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/commandbus/commandbus/config"
)

type pingArgs struct{}

func (pingArgs) Kind() string { return "Ping" }

// With tracing.enabled the stack exports its spans over OTLP/HTTP to tracing.endpoint (the
// path /v1/traces added), and flushes those still batched when it stops.
func TestStackExportsTracesOverOTLP(t *testing.T) {
	var mu sync.Mutex
	var posts []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		if len(body) > 0 {
			posts = append(posts, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	enabled := true
	file := &config.File{}
	file.Database.URL = "sqlite://" + filepath.Join(t.TempDir(), "tracing.db")
	file.Tracing = config.TracingConfig{Enabled: &enabled, Endpoint: collector.URL, ServiceName: "cli-test"}
	s, err := StartStack(context.Background(), Config{}, StackOptions{File: file.WithDefaults(), Migrate: true})
	require.NoError(t, err)
	require.NotNil(t, s.Client.Config().TracerProvider, "the client traces with the exporting provider")
	_, err = s.Client.Send(context.Background(), "ops", pingArgs{}, nil)
	require.NoError(t, err)
	s.Stop(context.Background())

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, posts, "the send's span was exported when the stack stopped")
	require.Equal(t, "POST /v1/traces application/x-protobuf", posts[0])
}

// Export is off by default, follows OTEL_TRACES_EXPORTER=otlp when the file says nothing, and
// OTEL_SDK_DISABLED=true wins over everything.
func TestTracingEnabled(t *testing.T) {
	t.Parallel()
	on, off := true, false
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	require.False(t, TracingEnabled(config.TracingConfig{}, env()))
	require.True(t, TracingEnabled(config.TracingConfig{}, env("OTEL_TRACES_EXPORTER", "otlp")))
	require.False(t, TracingEnabled(config.TracingConfig{Enabled: &off}, env("OTEL_TRACES_EXPORTER", "otlp")))
	require.True(t, TracingEnabled(config.TracingConfig{Enabled: &on}, env()))
	require.False(t, TracingEnabled(config.TracingConfig{Enabled: &on}, env("OTEL_SDK_DISABLED", "true")))
}
