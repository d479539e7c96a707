// Package httpx holds what the REST API (package server) and the operator console (package
// server/console) both need: bearer tokens and the principal they name, problem documents and
// JSON replies, and the text rule for operator-supplied JSON.
package httpx

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// The roles a token can carry.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
)

// SessionCookie is the console's session cookie; it holds the opaque id of a server-side
// session (table console_session), never a token.
const SessionCookie = "commandbus_session"

// Token is one bearer token the API and console accept; packages server and console export it
// as their Token. A deployment's configuration file lists them under server.tokens
// (config.TokenConfig, which converts to Token).
type Token struct {
	// Subject names who holds the token; it is recorded on every action taken with it.
	Subject string
	// Token is the secret: at least 16 characters. Give it or SHA256.
	Token string
	// SHA256 is the hex SHA-256 digest of the secret, for a deployment that keeps only digests in
	// its configuration. Give it or Token.
	SHA256 string
	// Role is RoleViewer or RoleOperator.
	Role string
}

// Principal is who a token names: the subject operator actions are audited with, and its role.
type Principal struct {
	Subject string
	Role    string
}

type principalKey struct{}

// Tokens are the accepted bearer tokens, keyed by their SHA-256 so lookups compare digests in
// constant time.
type Tokens struct {
	byDigest map[string]Principal
}

// NewTokens validates and indexes tokens: each needs a subject, a secret of at least 16
// characters or the 64 hex digits of its SHA-256, and the role viewer or operator.
func NewTokens(tokens []Token) (*Tokens, error) {
	out := map[string]Principal{}
	for i, t := range tokens {
		if t.Subject == "" || (t.Role != RoleViewer && t.Role != RoleOperator) {
			return nil, fmt.Errorf("server: token %d needs a subject and the role viewer or operator", i)
		}
		var sum []byte
		switch {
		case t.Token != "" && t.SHA256 != "":
			return nil, fmt.Errorf("server: token %d (%s) gives both Token and SHA256; give one", i, t.Subject)
		case t.SHA256 != "":
			raw, err := hex.DecodeString(t.SHA256)
			if err != nil || len(raw) != sha256.Size {
				return nil, fmt.Errorf("server: token %d (%s): SHA256 must be 64 hex digits", i, t.Subject)
			}
			sum = raw
		case len(t.Token) < 16:
			return nil, fmt.Errorf("server: token %d (%s) needs a secret of at least 16 characters or its SHA256", i, t.Subject)
		default:
			d := sha256.Sum256([]byte(t.Token))
			sum = d[:]
		}
		out[string(sum)] = Principal{Subject: t.Subject, Role: t.Role}
	}
	return &Tokens{byDigest: out}, nil
}

// Digests returns the SHA-256 digests of the tokens, sorted.
func (ts *Tokens) Digests() []string {
	out := make([]string, 0, len(ts.byDigest))
	for d := range ts.byDigest {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// LookupDigest finds the principal of a token by its SHA-256 digest (raw bytes as a string), in
// constant time as Lookup does.
func (ts *Tokens) LookupDigest(sum string) (Principal, bool) {
	var found Principal
	ok := false
	for digest, p := range ts.byDigest {
		if subtle.ConstantTimeCompare([]byte(digest), []byte(sum)) == 1 {
			found, ok = p, true
		}
	}
	return found, ok
}

// Lookup finds the principal of a token.
func (ts *Tokens) Lookup(token string) (Principal, bool) {
	if token == "" {
		return Principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	return ts.LookupDigest(string(sum[:]))
}

// BearerToken returns the token of an "Authorization: Bearer <token>" header. The scheme is
// case-insensitive (RFC 7235), so "bearer" and "BEARER" work as "Bearer" does.
func BearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// WithPrincipal returns ctx carrying the authenticated principal p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom is the principal WithPrincipal put in ctx.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Subject is the authenticated subject of r ("" when none); operator actions are audited with it.
func Subject(r *http.Request) string {
	p, _ := PrincipalFrom(r.Context())
	return p.Subject
}

// CanAct reports whether the principal in ctx has the operator role.
func CanAct(ctx context.Context) bool {
	p, ok := PrincipalFrom(ctx)
	return ok && p.Role == RoleOperator
}
