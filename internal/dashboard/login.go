package dashboard

import (
	"net/http"
	"strings"
	"time"

	"github.com/berthdev/berth/client"
	"github.com/berthdev/berth/internal/errcode"
)

// Cookie names. With Secure cookies they take the __Host- prefix, which a
// browser keeps only when Secure, host-only and Path=/: no subdomain (a
// preview host) can set or shadow them.
const (
	sessionCookie = "berth_session"
	loginCookie   = "berth_login" // the sign-in form's CSRF token
)

func (d *Dashboard) cookieName(name string) string {
	if d.cfg.InsecureCookies {
		return name
	}
	return "__Host-" + name
}

func (d *Dashboard) cookie(r *http.Request, name string) string {
	c, err := r.Cookie(d.cookieName(name))
	if err != nil {
		return ""
	}
	return c.Value
}

func (d *Dashboard) setCookie(w http.ResponseWriter, name, value string, maxAge time.Duration) {
	c := &http.Cookie{Name: d.cookieName(name), Value: value, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: !d.cfg.InsecureCookies}
	switch {
	case value == "":
		c.MaxAge = -1
	case maxAge > 0:
		c.MaxAge = int(maxAge.Seconds())
	}
	http.SetCookie(w, c)
}

// signIn is the sign-in page's data.
type signIn struct {
	Error string
}

// handleSignInPage shows the sign-in form, or sends a signed-in person to
// the sandboxes. The form carries a token that must match a cookie set
// here (a login CSRF defence: another site cannot sign a browser in with
// its own key).
func (d *Dashboard) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	if d.sessions.get(d.cookie(r, sessionCookie)) != nil {
		http.Redirect(w, r, "/ui/sandboxes", http.StatusSeeOther)
		return
	}
	d.showSignIn(w, r, http.StatusOK, "")
}

func (d *Dashboard) showSignIn(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok := randomToken()
	d.setCookie(w, loginCookie, tok, time.Hour)
	d.render(w, r, status, "signin", &session{csrf: tok}, signIn{Error: msg})
}

// handleLogin checks the key against the API (GET /v1/system, which any
// valid key may call) and, if the API takes it, starts a session.
func (d *Dashboard) handleLogin(w http.ResponseWriter, r *http.Request) {
	if err := checkOrigin(r); err != nil {
		d.fail(w, r, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if !equalToken(r.PostFormValue("csrf"), d.cookie(r, loginCookie)) {
		d.fail(w, r, errcode.CSRFInvalid.New("the sign-in form's token is missing or stale; reload the page and try again"))
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	if key == "" {
		d.showSignIn(w, r, http.StatusBadRequest, "Enter an API key.")
		return
	}
	if _, err := apiClient(r, key).System(forwarded(r)); err != nil {
		switch {
		case client.IsCode(err, errcode.Unauthenticated):
			d.showSignIn(w, r, http.StatusUnauthorized, "The daemon does not accept that key.")
		case client.IsCode(err, errcode.ResourceExhausted):
			d.showSignIn(w, r, http.StatusTooManyRequests, "Too many attempts; wait a minute and try again.")
		default:
			d.fail(w, r, err)
		}
		return
	}
	sid, _ := d.sessions.create(key)
	d.setCookie(w, sessionCookie, sid, 0) // a browser-session cookie; the daemon expires it
	d.setCookie(w, loginCookie, "", 0)
	http.Redirect(w, r, "/ui/sandboxes", http.StatusSeeOther)
}

func (d *Dashboard) handleLogout(rq *req) {
	d.sessions.end(rq.sid)
	d.setCookie(rq.w, sessionCookie, "", 0)
	rq.redirect("/")
}
