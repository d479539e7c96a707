package config_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/config"
)

func writeSecret(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// server.tokens, a list, is set whole from one variable holding a YAML sequence; it replaces the
// file's list.
func TestParseConfigTokensFromEnvironment(t *testing.T) {
	t.Parallel()
	hash := digest("ci-viewer-token-0123456789")
	cfg := mustParseConfig(t, "server:\n  tokens:\n    - {subject: old, token: old-token-0123456789, role: operator}\n",
		"COMMANDBUS_SERVER_TOKENS=[{subject: ops, token: operator-token-0123456789, role: operator}, {subject: ci, token-sha256: "+hash+", role: viewer}]")
	require.Equal(t, []config.TokenConfig{
		{Subject: "ops", Token: "operator-token-0123456789", Role: "operator"},
		{Subject: "ci", TokenSHA256: hash, Role: "viewer"},
	}, cfg.Server.Tokens)
}

// COMMANDBUS_<KEY>_FILE reads a key's value from a file (a mounted secret): a list as YAML, a
// scalar as its text without the trailing newline.
func TestParseConfigKeysFromFiles(t *testing.T) {
	t.Parallel()
	tokens := writeSecret(t, "tokens.yml", "- subject: ops\n  token: operator-token-0123456789\n  role: operator\n")
	url := writeSecret(t, "database-url", "postgres://app:s3cret@db/payments\n")
	cfg := mustParseConfig(t, "", "COMMANDBUS_SERVER_TOKENS_FILE="+tokens, "COMMANDBUS_DATABASE_URL_FILE="+url)
	require.Equal(t, []config.TokenConfig{{Subject: "ops", Token: "operator-token-0123456789", Role: "operator"}}, cfg.Server.Tokens)
	require.Equal(t, "postgres://app:s3cret@db/payments", cfg.Database.URL)
}

// A token's secret can sit in its own file; the configuration names the file.
func TestParseConfigTokenFile(t *testing.T) {
	t.Parallel()
	secret := writeSecret(t, "ops-token", "operator-token-0123456789\n")
	cfg := mustParseConfig(t, "server:\n  tokens:\n    - {subject: ops, token-file: "+secret+", role: operator}\n")
	require.Equal(t, "operator-token-0123456789", cfg.Server.Tokens[0].Token)
	require.Equal(t, secret, cfg.Server.Tokens[0].TokenFile)
}

func TestParseConfigSecretProblems(t *testing.T) {
	t.Parallel()
	short := writeSecret(t, "short", "short\n")
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name    string
		yaml    string
		environ []string
		wantErr string
	}{
		{name: "the file of a variable is missing", environ: []string{"COMMANDBUS_DATABASE_URL_FILE=" + missing},
			wantErr: "COMMANDBUS_DATABASE_URL_FILE: database.url: open " + missing},
		{name: "a key set twice", environ: []string{"COMMANDBUS_DATABASE_URL=sqlite://a.db", "COMMANDBUS_DATABASE_URL_FILE=" + short},
			wantErr: "COMMANDBUS_DATABASE_URL_FILE: database.url is set by COMMANDBUS_DATABASE_URL too; set it once"},
		{name: "a list item's problem names the item", environ: []string{"COMMANDBUS_SERVER_TOKENS=[{subject: ops, token: operator-token-0123456789, role: admin}]"},
			wantErr: `server.tokens[0].role: must be viewer or operator, got "admin"`},
		{name: "an unknown key in a list item", environ: []string{"COMMANDBUS_SERVER_TOKENS=[{subject: ops, secret: x, role: viewer}]"},
			wantErr: `COMMANDBUS_SERVER_TOKENS: server.tokens[0]: unknown key "secret"`},
		{name: "a list that is not YAML", environ: []string{"COMMANDBUS_SERVER_TOKENS=[{subject: ops"},
			wantErr: "COMMANDBUS_SERVER_TOKENS: server.tokens: want a YAML list"},
		{name: "a token file too short", yaml: "server:\n  tokens:\n    - {subject: ops, token-file: " + short + ", role: viewer}\n",
			wantErr: "server.tokens[0].token-file: " + short + " must hold at least 16 characters"},
		{name: "a token file missing", yaml: "server:\n  tokens:\n    - {subject: ops, token-file: " + missing + ", role: viewer}\n",
			wantErr: "server.tokens[0].token-file: open " + missing},
		{name: "two secrets for one token", yaml: "server:\n  tokens:\n    - {subject: ops, token: operator-token-0123456789, token-sha256: " + digest("x") + ", role: viewer}\n",
			wantErr: "server.tokens[0]: give the secret as token, token-file or token-sha256, only one"},
		{name: "a digest that is not hex", yaml: "server:\n  tokens:\n    - {subject: ops, token-sha256: not-a-digest, role: viewer}\n",
			wantErr: "server.tokens[0].token-sha256: want 64 hex digits"},
		{name: "a trusted proxy that is no address", yaml: "server:\n  trusted-proxies: [10.0.0.0/8, proxy.local]\n",
			wantErr: `server.trusted-proxies[1]: not a CIDR prefix or address: "proxy.local"`},
		{name: "a drain delay as long as the budget", yaml: "server:\n  shutdown-budget: 10s\n  drain-delay: 10s\n",
			wantErr: "server.drain-delay (10s) must be shorter than server.shutdown-budget (10s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorContains(t, parseConfigError(t, tt.yaml, tt.environ...), tt.wantErr)
		})
	}
}

func TestServerConfigTrustedProxiesAndShutdownDefaults(t *testing.T) {
	t.Parallel()
	cfg := mustParseConfig(t, "server:\n  trusted-proxies: [10.0.0.0/8, 192.168.1.7, '::1']\n",
		"COMMANDBUS_SERVER_DRAIN_DELAY=3s", "COMMANDBUS_SERVER_SECURE_COOKIES=true")
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("::1/128")},
		cfg.Server.TrustedProxyPrefixes())
	require.True(t, cfg.Server.SecureCookies)
	withDefaults := cfg.WithDefaults()
	require.Equal(t, commandbus.Duration(25*time.Second), withDefaults.Server.ShutdownBudget, "below Kubernetes' 30s grace period")
	require.Equal(t, commandbus.Duration(3*time.Second), withDefaults.Server.DrainDelay)
}

// The README's variables for the proxies and the shutdown set what they say.
func TestParseConfigServerKeysFromEnvironment(t *testing.T) {
	t.Parallel()
	cfg := mustParseConfig(t, "", "COMMANDBUS_SERVER_TRUSTED_PROXIES=[10.0.0.0/8, 192.168.0.1]",
		"COMMANDBUS_SERVER_SHUTDOWN_BUDGET=20s", "COMMANDBUS_SERVER_DRAIN_DELAY=5s")
	require.Equal(t, []string{"10.0.0.0/8", "192.168.0.1"}, cfg.Server.TrustedProxies)
	require.Equal(t, commandbus.Duration(20*time.Second), cfg.Server.ShutdownBudget)
	require.Equal(t, commandbus.Duration(5*time.Second), cfg.Server.DrainDelay)
}
