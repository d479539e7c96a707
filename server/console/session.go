package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// Console sessions are opaque and server-side: the cookie holds a random id, the database (table
// console_session) the id's SHA-256, who signed in and the digest of the token they used. Every
// replica reads the same table, so a session works on any of them and a sign-out ends it on all.
// The role is the token's current one: removing a token from the configuration ends its sessions.

// sessionIDBytes is the entropy of a session id.
const sessionIDBytes = 32

// hashSessionID is the form a session id is stored and looked up in.
func hashSessionID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// authenticate finds the principal of a console request: its bearer token, or the live session
// its cookie names.
func (c *Console) authenticate(r *http.Request) (Principal, bool) {
	if token, ok := httpx.BearerToken(r); ok {
		return c.tokens.Lookup(token)
	}
	ck, err := r.Cookie(httpx.SessionCookie)
	if err != nil || ck.Value == "" {
		return Principal{}, false
	}
	row, err := c.client.Driver().Executor().ConsoleSessionGet(r.Context(),
		&driver.ConsoleSessionGetParams{IDHash: hashSessionID(ck.Value), Now: c.client.Now()})
	if err != nil {
		if !errors.Is(err, driver.ErrNotFound) {
			c.logger.Error("console: reading the session failed", "request_id", httpx.LogID(r.Context()), "error", err)
		}
		return Principal{}, false
	}
	digest, err := hex.DecodeString(row.TokenDigest)
	if err != nil {
		return Principal{}, false
	}
	p, ok := c.tokens.LookupDigest(string(digest))
	if !ok {
		return Principal{}, false // the token was removed from the configuration
	}
	return p, true
}

// startSession records a session for the principal of token and returns its id, for the cookie.
// Expired sessions are deleted on the way.
func (c *Console) startSession(ctx context.Context, p Principal, token string) (string, error) {
	raw := make([]byte, sessionIDBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(raw)
	now := c.client.Now()
	exec := c.client.Driver().Executor()
	if _, err := exec.ConsoleSessionDeleteExpired(ctx, now); err != nil {
		c.logger.Warn("console: deleting expired sessions failed", "error", err)
	}
	sum := sha256.Sum256([]byte(token))
	err := exec.ConsoleSessionInsert(ctx, &driver.ConsoleSessionInsertParams{IDHash: hashSessionID(id), Subject: p.Subject,
		TokenDigest: hex.EncodeToString(sum[:]), CreatedAt: now, ExpiresAt: now.Add(sessionLifetime)})
	if err != nil {
		return "", err
	}
	return id, nil
}

// endSession revokes the session r's cookie names, on every replica.
func (c *Console) endSession(r *http.Request) error {
	ck, err := r.Cookie(httpx.SessionCookie)
	if err != nil || ck.Value == "" {
		return nil
	}
	_, err = c.client.Driver().Executor().ConsoleSessionDelete(r.Context(), hashSessionID(ck.Value))
	return err
}

// secure reports whether r reached the deployment over HTTPS, so its cookies may be Secure: a TLS
// connection to this server, X-Forwarded-Proto: https from a trusted proxy, or the
// SecureCookies option.
func (c *Console) secure(r *http.Request) bool {
	if c.secureCookies || r.TLS != nil {
		return true
	}
	if len(c.trustedProxies) == 0 || !strings.EqualFold(firstForwardedProto(r), "https") {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range c.trustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// firstForwardedProto is the scheme the client used as the nearest proxy reports it.
func firstForwardedProto(r *http.Request) string {
	v := r.Header.Get("X-Forwarded-Proto")
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:] // the proxy in front of us appends its own view last
	}
	return strings.TrimSpace(v)
}

// consoleKey is the key that signs the sign-in form's nonce and flash messages. Every replica with
// the same tokens derives the same key, so a form or a message made by one is accepted by
// another; nobody without the tokens' digests can derive it. With no token nobody can sign in,
// and a random key serves.
func consoleKey(tokens *httpx.Tokens) []byte {
	digests := tokens.Digests()
	if len(digests) == 0 {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		return key
	}
	m := hmac.New(sha256.New, []byte("commandbus console key v1"))
	for _, d := range digests {
		m.Write([]byte(d))
	}
	return m.Sum(nil)
}

// sessionCookie is the session cookie for id (empty and expired: deleted).
func (c *Console) sessionCookie(r *http.Request, id string) *http.Cookie {
	maxAge := int(sessionLifetime / time.Second)
	if id == "" {
		maxAge = -1
	}
	return &http.Cookie{Name: httpx.SessionCookie, Value: id, Path: "/", MaxAge: maxAge, HttpOnly: true, Secure: c.secure(r),
		SameSite: http.SameSiteStrictMode}
}
