package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/commandbus/commandbus"
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

// indexTokens keys tokens by their SHA-256 so lookups compare digests in constant time.
func indexTokens(tokens []commandbus.TokenConfig) (map[string]principal, error) {
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

// authenticate finds the principal of a request's bearer token (or its session cookie).
func (s *Server) authenticate(r *http.Request) (principal, bool) {
	token := ""
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		token = strings.TrimPrefix(h, "Bearer ")
	} else if c, err := r.Cookie(sessionCookie); err == nil {
		token = c.Value
	}
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

const sessionCookie = "commandbus_session"

func (s *Server) require(role string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="commandbus"`)
			writeProblem(w, http.StatusUnauthorized, "UNAUTHENTICATED", "A valid bearer token is required.", "")
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
