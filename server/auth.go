package server

import (
	"net/http"

	"github.com/commandbus/commandbus/server/internal/httpx"
)

// The roles a token can carry.
const (
	RoleViewer   = httpx.RoleViewer
	RoleOperator = httpx.RoleOperator
)

// Token is one bearer token the API and console accept: its Subject (who holds it, recorded on
// every action taken with it), the secret Token (at least 16 characters) and its Role
// (RoleViewer or RoleOperator). It is console.Token too.
type Token = httpx.Token

// require guards a REST route: it takes the bearer token only. A browser attaches the console's
// session cookie to any request for this origin, a cross-site one included, so accepting the
// cookie here would let another site act with an operator's session.
func (s *Server) require(role string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := httpx.BearerToken(r)
		p, known := s.tokens.Lookup(token)
		if !ok || !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="commandbus"`)
			detail := "Send the header Authorization: Bearer <token> with a token from server.tokens."
			if ok {
				detail = "The bearer token is not one of server.tokens."
			} else if _, err := r.Cookie(httpx.SessionCookie); err == nil {
				detail = "The REST API takes a bearer token in the Authorization header; the console's session cookie is not accepted here."
			}
			httpx.WriteProblem(w, http.StatusUnauthorized, "UNAUTHENTICATED", "A valid bearer token is required.", detail)
			return
		}
		if role == RoleOperator && p.Role != RoleOperator {
			httpx.WriteProblem(w, http.StatusForbidden, "FORBIDDEN", "This action needs the operator role.", "token subject "+p.Subject+" has role "+p.Role)
			return
		}
		next(w, r.WithContext(httpx.WithPrincipal(r.Context(), p)))
	}
}

func (s *Server) viewer(next http.HandlerFunc) http.HandlerFunc { return s.require(RoleViewer, next) }

func (s *Server) operator(next http.HandlerFunc) http.HandlerFunc {
	return s.require(RoleOperator, next)
}
