package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runToken runs `token args...` with stdin and returns stdout and the error.
func runToken(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newTokenCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

// `token hash` prints the digest token-sha256 takes, from stdin (one trailing newline dropped,
// as token-file does) or --token; a missing or too short token is a usage error.
func TestTokenHash(t *testing.T) {
	const token = "s3cret-token-for-the-ci-viewer"
	sum := sha256.Sum256([]byte(token))
	want := hex.EncodeToString(sum[:]) + "\n"

	out, err := runToken(t, token+"\n", "hash")
	require.NoError(t, err)
	require.Equal(t, want, out, "the newline echo adds is not part of the token")
	out, err = runToken(t, token, "hash")
	require.NoError(t, err)
	require.Equal(t, want, out)
	out, err = runToken(t, "ignored", "hash", "--token", token)
	require.NoError(t, err)
	require.Equal(t, want, out, "--token wins over stdin")

	_, err = runToken(t, "", "hash")
	require.Equal(t, ExitUsage, ExitCode(err))
	require.ErrorContains(t, err, "no token")
	_, err = runToken(t, "short\n", "hash")
	require.Equal(t, ExitUsage, ExitCode(err))
	require.ErrorContains(t, err, "at least 16 characters")
}

// `token generate` prints 32 random bytes as base64url, a new one each time; -o json adds the
// digest `token hash` would print.
func TestTokenGenerate(t *testing.T) {
	out, err := runToken(t, "", "generate")
	require.NoError(t, err)
	first := strings.TrimSuffix(out, "\n")
	raw, err := base64.RawURLEncoding.DecodeString(first)
	require.NoError(t, err, out)
	require.Len(t, raw, 32)
	out, err = runToken(t, "", "generate")
	require.NoError(t, err)
	require.NotEqual(t, first, strings.TrimSuffix(out, "\n"), "a new token each time")

	out, err = runToken(t, "", "generate", "-o", "json")
	require.NoError(t, err)
	var report tokenReport
	require.NoError(t, json.Unmarshal([]byte(out), &report), out)
	hashed, err := runToken(t, report.Token, "hash")
	require.NoError(t, err)
	require.Equal(t, report.SHA256+"\n", hashed)
}

// A generated token is the random source's bytes, and a failing source is an error, not a
// weak token.
func TestTokenGenerateUsesTheRandomSource(t *testing.T) {
	saved := tokenRandom
	t.Cleanup(func() { tokenRandom = saved })
	tokenRandom = bytes.NewReader(bytes.Repeat([]byte{0xfb}, 32))
	out, err := runToken(t, "", "generate")
	require.NoError(t, err)
	require.Equal(t, base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32))+"\n", out)
	tokenRandom = bytes.NewReader(make([]byte, 31))
	_, err = runToken(t, "", "generate")
	require.ErrorContains(t, err, "reading random bytes")
}
