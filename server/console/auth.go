package console

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/commandbus/commandbus/server/internal/httpx"
)

// sessionLifetime bounds a console session; the operator signs in again after it.
const sessionLifetime = 12 * time.Hour

// loginForm is the sign-in page's data.
type loginForm struct {
	Next      string
	LoginCSRF string
	Errors    map[string]string
}

// loginNonce returns the sign-in form's nonce cookie, setting a fresh one when there is none.
// The form's CSRF token is the nonce signed with the server key (a signed double-submit
// cookie), since there is no session yet to bind it to.
func (c *Console) loginNonce(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(loginCookie); err == nil && len(ck.Value) >= 16 {
		return ck.Value
	}
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	nonce := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: nonce, Path: "/login", MaxAge: 3600,
		HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
	return nonce
}

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, next string, errs map[string]string) {
	if p, ok := c.authenticate(r); ok {
		r = r.WithContext(httpx.WithPrincipal(r.Context(), p))
	}
	pg := c.newPage(w, r, "Sign in", "login")
	pg.Data = loginForm{Next: localPath(next, "/"), LoginCSRF: c.mac("login", c.loginNonce(w, r)), Errors: errs}
	c.render(w, r, status, "login.html", pg)
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.renderLogin(w, r, http.StatusOK, r.URL.Query().Get("next"), nil)
}

// login checks the token against the console's tokens and starts a server-side session: the
// cookie (HttpOnly, SameSite=Strict, Secure over HTTPS) holds only the session's opaque id.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if err := c.origin.Check(r); err != nil {
		c.errorPage(w, r, http.StatusForbidden, "Request refused", "The sign-in request came from another site.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		c.renderLogin(w, r, http.StatusBadRequest, "", map[string]string{"token": "The form could not be read; try again."})
		return
	}
	next := r.PostFormValue("next")
	ck, err := r.Cookie(loginCookie)
	if err != nil || !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(c.mac("login", ck.Value))) {
		c.renderLogin(w, r, http.StatusForbidden, next, map[string]string{"token": "The sign-in form expired; enter the token again."})
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		c.renderLogin(w, r, http.StatusUnprocessableEntity, next, map[string]string{"token": "Enter your token."})
		return
	}
	p, ok := c.tokens.Lookup(token)
	if !ok {
		c.logger.Warn("console: sign-in with an unknown token", "remote", r.RemoteAddr)
		c.renderLogin(w, r, http.StatusUnauthorized, next, map[string]string{"token": "This token is not valid. Check it and try again."})
		return
	}
	id, err := c.startSession(r.Context(), p, token)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	http.SetCookie(w, c.sessionCookie(r, id))
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/login", MaxAge: -1, HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
	c.logger.Info("console: signed in", "subject", p.Subject, "role", p.Role)
	c.redirectWith(w, r, localPath(next, "/"), "success", "Signed in as "+p.Subject+" ("+p.Role+").")
}

// logout revokes the session in the database, so its id is refused by every replica even if
// the cookie were kept, and deletes the cookie.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if err := c.endSession(r); err != nil {
		c.failed(w, r, err)
		return
	}
	p, _ := httpx.PrincipalFrom(r.Context())
	c.logger.Info("console: signed out", "subject", p.Subject)
	http.SetCookie(w, c.sessionCookie(r, ""))
	c.redirectWith(w, r, "/login", "success", "Signed out.")
}
