package dashboard_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/dashboard"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// browser is a client without a key, as a browser is: cookies are kept by hand.
type browser struct {
	t      *testing.T
	s      *dashServer
	hc     *http.Client
	cookie *http.Cookie
}

func newBrowser(t *testing.T, s *dashServer) *browser {
	return &browser{t: t, s: s, hc: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (b *browser) do(method, path string, form url.Values, header map[string]string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.s.url+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if b.cookie != nil {
		req.AddCookie(b.cookie)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

// signIn posts the sign-in form and keeps the session cookie; it returns the response.
func (b *browser) signIn(key, next string) *http.Response {
	b.t.Helper()
	resp, body := b.do("POST", "/signin", url.Values{"key": {key}, "next": {next}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	for _, c := range resp.Cookies() {
		if c.Name == dashboard.SessionCookie {
			b.cookie = c
		}
	}
	if resp.StatusCode == http.StatusSeeOther && b.cookie == nil {
		b.t.Fatalf("sign-in answered 303 without a session cookie; body %s", body)
	}
	return resp
}

// sessionCookie is the session cookie resp sets, or nil.
func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == dashboard.SessionCookie {
			return c
		}
	}
	return nil
}

// signedIn reports whether the overview opens (rather than sending the browser to sign in).
func (b *browser) signedIn() bool {
	b.t.Helper()
	resp, _ := b.do("GET", "/", nil, nil)
	switch resp.StatusCode {
	case http.StatusOK:
		return true
	case http.StatusSeeOther:
		if !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
			b.t.Fatalf("GET / = 303 to %q, want /signin", resp.Header.Get("Location"))
		}
		return false
	}
	b.t.Fatalf("GET / = %d", resp.StatusCode)
	return false
}

func TestDashboardSignIn(t *testing.T) {
	s := newDashServer(t)
	reader := servicetest.Key(t, s.store, auth.Reader)
	s.acquire("job", "worker-1", time.Hour, "")

	b := newBrowser(t, s)
	resp, _ := b.do("GET", "/leases/job", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?next=%2Fleases%2Fjob" {
		t.Fatalf("GET /leases/job without a session = %d to %q, want 303 to the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, body := b.do("GET", "/signin", nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="signin-form"`) {
		t.Fatalf("GET /signin = %d, want the form", resp.StatusCode)
	}
	if resp := b.signIn("lkk_wrong", "/"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("sign in with an unknown key = %d, want 401", resp.StatusCode)
	}
	if resp, _ := b.do("POST", "/signin", url.Values{"key": {reader}}, map[string]string{"Sec-Fetch-Site": "cross-site"}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site sign-in = %d, want 403", resp.StatusCode)
	}

	resp = b.signIn(reader, "/leases/job")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/leases/job" {
		t.Fatalf("sign in = %d to %q, want 303 to /leases/job", resp.StatusCode, resp.Header.Get("Location"))
	}
	c := b.cookie
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" || c.MaxAge != int((12*time.Hour).Seconds()) {
		t.Errorf("session cookie = %+v, want HttpOnly, SameSite=Strict, Path=/, 12 h, not Secure without TLS", c)
	}
	resp, body := b.do("GET", "/leases/job", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "test reader") {
		t.Fatalf("GET /leases/job signed in = %d, want the page naming the key", resp.StatusCode)
	}
	if strings.Contains(body, `data-testid="revoke-form"`) {
		t.Errorf("a reader's lease page shows the revoke form")
	}
	// Not even a well-formed revoke works for a reader.
	_, form := dashRevokeForm(t, s, "job")
	if resp, _ := b.do("POST", "/leases/job/revoke", form, map[string]string{"Sec-Fetch-Site": "same-origin"}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("revoke by a reader = %d, want 403", resp.StatusCode)
	}
	if !s.state("job").Held {
		t.Fatal("a reader revoked a lease")
	}
	// An open redirect is refused: next must be a path on this server.
	for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example"} {
		b2 := newBrowser(t, s)
		if resp := b2.signIn(reader, next); resp.Header.Get("Location") != "/" {
			t.Errorf("sign in with next=%q redirects to %q, want /", next, resp.Header.Get("Location"))
		}
	}

	t.Run("SignOut", func(t *testing.T) {
		b := newBrowser(t, s)
		b.signIn(reader, "/")
		if resp, _ := b.do("POST", "/signout", url.Values{}, map[string]string{"Sec-Fetch-Site": "same-origin"}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign out = %d, want 303", resp.StatusCode)
		}
		if b.signedIn() {
			t.Error("the session still works after signing out")
		}
	})
	t.Run("IdleExpiry", func(t *testing.T) {
		b := newBrowser(t, s)
		b.signIn(reader, "/")
		s.clock.Advance(59 * time.Minute)
		if !b.signedIn() {
			t.Fatal("the session ended before its idle time")
		}
		s.clock.Advance(59 * time.Minute) // used 59 min ago: still alive
		if !b.signedIn() {
			t.Fatal("a session in use ended at its idle time counted from sign-in")
		}
		s.clock.Advance(61 * time.Minute)
		if b.signedIn() {
			t.Error("the session outlived 61 min unused")
		}
	})
	t.Run("AbsoluteExpiry", func(t *testing.T) {
		b := newBrowser(t, s)
		b.signIn(reader, "/")
		for range 14 { // 14 × 50 min = 11 h 40 min, used all along
			s.clock.Advance(50 * time.Minute)
			if !b.signedIn() {
				t.Fatalf("the session ended before 12 h")
			}
		}
		s.clock.Advance(30 * time.Minute)
		if b.signedIn() {
			t.Error("the session outlived 12 h")
		}
	})
	t.Run("KeyRevoked", func(t *testing.T) {
		key := servicetest.Key(t, s.store, auth.Reader)
		b := newBrowser(t, s)
		b.signIn(key, "/")
		k, err := s.store.KeyByHash(context.Background(), auth.Hash(key))
		if err != nil {
			t.Fatal(err)
		}
		if resp, body := s.do("DELETE", "/v1/keys/"+k.ID, nil, nil); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("revoke key = %d %s", resp.StatusCode, body)
		}
		if b.signedIn() {
			t.Error("a revoked key's session still works")
		}
	})
}

// TestDashboardRevokeIsAudited checks that an admin's revoke names the admin on the lease page.
func TestDashboardRevokeIsAudited(t *testing.T) {
	s := newDashServer(t)
	s.acquire("job", "worker-1", time.Hour, "")
	action, form := dashRevokeForm(t, s, "job")
	if resp, body := s.revoke(action, form, map[string]string{"Sec-Fetch-Site": "same-origin"}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke = %d %s", resp.StatusCode, body)
	}
	_, doc := s.page("/leases/job", http.StatusOK, nil)
	if got := dashText(dashOne(t, doc, "actor")); !strings.HasPrefix(got, "by test admin (key_") {
		t.Errorf("actor on the lease page = %q, want the admin key's label and id", got)
	}
}

// TestSessionCookieSecureUnderTLS checks the Secure flag when the dashboard is served over TLS.
func TestSessionCookieSecureUnderTLS(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "lk.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := handlers.New(handlers.Config{Store: st, Clock: st.Clock(), Limits: lease.DefaultLimits(),
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Spec: leasekeeper.OpenAPI()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	hc := srv.Client()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.PostForm(srv.URL+"/signin", url.Values{"key": {servicetest.Key(t, st, auth.Reader)}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c := sessionCookie(resp)
	if c == nil || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie over TLS = %+v, want Secure, HttpOnly, SameSite=Strict", c)
	}
}

// TestAuthOff checks the experiment mode: no key needed, and every page says so.
func TestAuthOff(t *testing.T) {
	e := newDashServerWith(t, filepath.Join(t.TempDir(), "lk.db"), func(c *handlers.Config) { c.Auth.Off = true })
	resp, err := http.Post(e.url+"/v1/leases/job/acquire", "application/json", strings.NewReader(`{"holder":"w","ttl_ms":60000}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire without a key, auth off = %v, %v", resp, err)
	}
	resp.Body.Close()
	resp, body := e.do("GET", "/", nil, map[string]string{"Accept": "text/html"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-testid="auth-off"`) {
		t.Errorf("overview with auth off = %d, want the auth-off banner", resp.StatusCode)
	}
	e2 := newDashServer(t)
	if _, body := e2.do("GET", "/", nil, map[string]string{"Accept": "text/html"}); strings.Contains(string(body), `data-testid="auth-off"`) {
		t.Errorf("the auth-off banner shows with auth on")
	}
}
