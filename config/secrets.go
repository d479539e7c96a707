package config

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// FileSuffix ends the name of an environment variable whose value is read from the file it
// names: COMMANDBUS_DATABASE_URL_FILE=/run/secrets/database-url sets database.url to the file's
// content (without its trailing newline), so a secret need not sit in the environment.
const FileSuffix = "_FILE"

// readSecretFile reads a secret from path, dropping one trailing newline (an editor's or echo's).
func readSecretFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSuffix(string(data), "\n")
	return strings.TrimSuffix(s, "\r"), nil
}

// readTokenFiles reads the secret of every token given as token-file into its Token.
func (f *File) readTokenFiles() []error {
	var problems []error
	for i := range f.Server.Tokens {
		t := &f.Server.Tokens[i]
		if t.TokenFile == "" {
			continue
		}
		if t.Token != "" {
			problems = append(problems, fmt.Errorf("server.tokens[%d]: give the secret as token, token-file or token-sha256, only one", i))
			continue
		}
		secret, err := readSecretFile(t.TokenFile)
		if err != nil {
			problems = append(problems, fmt.Errorf("server.tokens[%d].token-file: %w", i, err))
			continue
		}
		t.Token = secret
	}
	return problems
}

// ParseTrustedProxy reads one entry of server.trusted-proxies: a CIDR prefix (10.0.0.0/8) or a
// single address (10.0.0.7, which is 10.0.0.7/32).
func ParseTrustedProxy(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not a CIDR prefix or address: %q", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a CIDR prefix or address: %q", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// TrustedProxyPrefixes returns server.trusted-proxies parsed; call it on a validated File.
func (s ServerConfig) TrustedProxyPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(s.TrustedProxies))
	for _, p := range s.TrustedProxies {
		if prefix, err := ParseTrustedProxy(p); err == nil {
			out = append(out, prefix)
		}
	}
	return out
}
