package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// The roles a token can carry.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
)

type principal struct {
	Subject string
	Role    string
}

type principalKey struct{}

// Token is one bearer token the API and console accept. A deployment's configuration file lists
// them under server.tokens (config.TokenConfig, which converts to Token).
type Token struct {
	// Subject names who holds the token; it is recorded on every action taken with it.
	Subject string
	// Token is the secret: at least 16 characters.
	Token string
	// Role is RoleViewer or RoleOperator.
	Role string
}

// indexTokens keys tokens by their SHA-256 so lookups compare digests in constant time.
func indexTokens(tokens []Token) (map[string]principal, error) {
	out := map[string]principal{}
	for i, t := range tokens {
		if t.Subject == "" || len(t.Token) < 16 || (t.Role != RoleViewer && t.Role != RoleOperator) {
			return nil, fmt.Errorf("server: token %d needs a subject, at least 16 characters and the role viewer or operator", i)
		}
		sum := sha256.Sum256([]byte(t.Token))
		out[string(sum[:])] = principal{Subject: t.Subject, Role: t.Role}
	}
	return out, nil
}

// bearerToken returns the token of an "Authorization: Bearer <token>" header. The scheme is
// case-insensitive (RFC 7235), so "bearer" and "BEARER" work as "Bearer" does.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// lookup finds the principal of a token.
func (s *Server) lookup(token string) (principal, bool) {
	if token == "" {
		return principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	for digest, p := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(digest), sum[:]) == 1 {
			return p, true
		}
	}
	return principal{}, false
}

// authenticate finds the principal of a console request: its bearer token, or the session
// cookie the console's sign-in set. Console pages check the Origin and a CSRF token on every
// form they accept, which is what makes a cookie safe there.
func (s *Server) authenticate(r *http.Request) (principal, bool) {
	if token, ok := bearerToken(r); ok {
		return s.lookup(token)
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		return s.lookup(c.Value)
	}
	return principal{}, false
}

const sessionCookie = "commandbus_session"

// require guards a REST route: it takes the bearer token only. A browser attaches the console's
// session cookie to any request for this origin, a cross-site one included, so accepting the
// cookie here would let another site act with an operator's session.
func (s *Server) require(role string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		p, known := s.lookup(token)
		if !ok || !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="commandbus"`)
			detail := "Send the header Authorization: Bearer <token> with a token from server.tokens."
			if ok {
				detail = "The bearer token is not one of server.tokens."
			} else if _, err := r.Cookie(sessionCookie); err == nil {
				detail = "The REST API takes a bearer token in the Authorization header; the console's session cookie is not accepted here."
			}
			writeProblem(w, http.StatusUnauthorized, "UNAUTHENTICATED", "A valid bearer token is required.", detail)
			return
		}
		if role == RoleOperator && p.Role != RoleOperator {
			writeProblem(w, http.StatusForbidden, "FORBIDDEN", "This action needs the operator role.", "token subject "+p.Subject+" has role "+p.Role)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

func (s *Server) viewer(next http.HandlerFunc) http.HandlerFunc { return s.require(RoleViewer, next) }

func (s *Server) operator(next http.HandlerFunc) http.HandlerFunc {
	return s.require(RoleOperator, next)
}

// subject is the authenticated subject; operator actions are audited with it.
func subject(r *http.Request) string {
	if p, ok := r.Context().Value(principalKey{}).(principal); ok {
		return p.Subject
	}
	return ""
}

func roleOf(r *http.Request) string {
	if p, ok := r.Context().Value(principalKey{}).(principal); ok {
		return p.Role
	}
	return ""
}
