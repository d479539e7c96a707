package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	. "github.com/commandbus/commandbus/server"
)

func probe(t *testing.T, h http.Handler, path, token string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Code, string(body)
}

// /readyz pings the database and asks the instance's readiness (by default the workers'
// heartbeat): not ready before the client starts, ready once it runs, not ready again when the
// readiness check says so (a shutdown begun) or the database is gone.
func TestReadinessIsAPingAndTheWorkersHeartbeat(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		client, err := commandbus.NewClient(drv, &commandbus.Config{MetricsRegisterer: prometheus.NewRegistry(),
			Domains: map[string]*commandbus.DomainConfig{"probe": {}}})
		require.NoError(t, err)
		var shuttingDown error
		srv, err := New(Config{Client: client, Tokens: testTokens, Gatherer: prometheus.NewRegistry(),
			Readiness: func(context.Context) error {
				if shuttingDown != nil {
					return shuttingDown
				}
				return client.CheckWorkers()
			}})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, srv.Close()) })

		status, body := probe(t, srv, "/readyz", "")
		require.Equal(t, http.StatusServiceUnavailable, status, "not started")
		require.Contains(t, body, `"code":"NOT_READY"`)
		require.Contains(t, body, "not running")

		require.NoError(t, client.Start(context.Background()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = client.Stop(ctx)
		})
		status, body = probe(t, srv, "/readyz", "")
		require.Equal(t, http.StatusOK, status, body)

		shuttingDown = errors.New("shutting down")
		status, body = probe(t, srv, "/readyz", "")
		require.Equal(t, http.StatusServiceUnavailable, status)
		require.Contains(t, body, "shutting down")
	})
}

// The probe handler of a worker's internal address serves /metrics without a token.
func TestProbeHandler(t *testing.T) {
	t.Parallel()
	drv := dbtest.SQLite(t)
	reg := prometheus.NewRegistry()
	client, err := commandbus.NewClient(drv, &commandbus.Config{MetricsRegisterer: reg})
	require.NoError(t, err)
	_, err = NewProbeHandler(ProbeConfig{})
	require.ErrorContains(t, err, "Client is required")
	h, err := NewProbeHandler(ProbeConfig{Client: client, Gatherer: reg, Readiness: func(context.Context) error { return nil }})
	require.NoError(t, err)
	status, body := probe(t, h, "/metrics", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "commandbus_")
	status, _ = probe(t, h, "/healthz", "")
	require.Equal(t, http.StatusOK, status)
	status, body = probe(t, h, "/readyz", "")
	require.Equal(t, http.StatusOK, status, body)
	status, _ = probe(t, h, "/api/tsq/commands", "")
	require.Equal(t, http.StatusNotFound, status)
}

// A token configured by its SHA-256 digest authenticates with its secret, never with the digest.
func TestTokensBySHA256Digest(t *testing.T) {
	t.Parallel()
	const secret = "ci-viewer-secret-0123456789"
	sum := sha256.Sum256([]byte(secret))
	client, err := commandbus.NewClient(dbtest.SQLite(t), &commandbus.Config{MetricsRegisterer: prometheus.NewRegistry()})
	require.NoError(t, err)
	srv, err := New(Config{Client: client, Gatherer: prometheus.NewRegistry(),
		Tokens: []Token{{Subject: "ci", SHA256: hex.EncodeToString(sum[:]), Role: RoleViewer}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	status, body := probe(t, srv, "/api/tsq/commands", secret)
	require.Equal(t, http.StatusOK, status, body)
	status, _ = probe(t, srv, "/api/tsq/commands", hex.EncodeToString(sum[:]))
	require.Equal(t, http.StatusUnauthorized, status)

	_, err = New(Config{Client: client, Gatherer: prometheus.NewRegistry(), Tokens: []Token{{Subject: "ci", SHA256: "abc", Role: RoleViewer}}})
	require.ErrorContains(t, err, "SHA256 must be 64 hex digits")
	_, err = New(Config{Client: client, Gatherer: prometheus.NewRegistry(), Tokens: []Token{{Subject: "ci", Token: secret, SHA256: hex.EncodeToString(sum[:]), Role: RoleViewer}}})
	require.ErrorContains(t, err, "gives both Token and SHA256")
}
