package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/cli"
)

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// worker --metrics-addr serves /metrics without a token, /healthz and /readyz on an internal
// address; /readyz fails as soon as the shutdown begins.
func TestWorkerServesProbesAndMetrics(t *testing.T) {
	t.Parallel()
	db, configFile := migratedSQLite(t, teamConfig)
	s := runService(t, cli.Config{}, "worker", "--config", configFile, "--database", db, "--metrics-addr", "127.0.0.1:0")
	require.NotEmpty(t, s.MetricsAddr)
	require.Nil(t, s.Server, "a worker serves no API")
	base := "http://" + s.MetricsAddr

	status, body := get(t, base+"/metrics", "")
	require.Equal(t, http.StatusOK, status, "metrics need no token on the internal address")
	require.Contains(t, body, "go_goroutines")
	require.Contains(t, body, "commandbus_")
	status, body = get(t, base+"/healthz", "")
	require.Equal(t, http.StatusOK, status, body)
	status, body = get(t, base+"/readyz", "")
	require.Equal(t, http.StatusOK, status, body)
	require.JSONEq(t, `{"status":"ready"}`, body)
	status, _ = get(t, base+"/api/tsq/commands", "")
	require.Equal(t, http.StatusNotFound, status, "nothing else is served there")

	s.BeginShutdown()
	status, body = get(t, base+"/readyz", "")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Contains(t, body, `"code":"NOT_READY"`)
	require.Contains(t, body, "shutting down")
	status, _ = get(t, base+"/healthz", "")
	require.Equal(t, http.StatusOK, status, "alive while it drains")
}

// serve takes its tokens from a mounted file named by COMMANDBUS_SERVER_TOKENS_FILE, one given as
// a SHA-256 digest only; the configuration file has none.
func TestServeTakesTokensFromAFileInTheEnvironment(t *testing.T) {
	// t.Setenv: not parallel.
	const secret = "a-viewer-token-kept-as-digest"
	sum := sha256.Sum256([]byte(secret))
	tokens := filepath.Join(t.TempDir(), "tokens.yml")
	require.NoError(t, os.WriteFile(tokens, []byte("- subject: ci\n  role: viewer\n  token-sha256: "+hex.EncodeToString(sum[:])+"\n"), 0o600))
	t.Setenv("COMMANDBUS_SERVER_TOKENS_FILE", tokens)
	db, configFile := migratedSQLite(t, "domains:\n  greetings: {}\nshutdown-timeout: 5s\n")
	s := runService(t, cli.Config{}, "serve", "--config", configFile, "--database", db, "--addr", "127.0.0.1:0")

	status, body := get(t, "http://"+s.Addr+"/api/tsq/commands", secret)
	require.Equal(t, http.StatusOK, status, body)
	status, _ = get(t, "http://"+s.Addr+"/api/tsq/commands", hex.EncodeToString(sum[:]))
	require.Equal(t, http.StatusUnauthorized, status, "the digest itself is no token")
}
