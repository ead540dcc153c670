package dashboard_test

import (
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/internal/logtest"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// A rate so slow that no token comes back within a test: only the burst counts.
const noRefill = 1e-6

func newSignInServer(t *testing.T, change func(*handlers.Config)) *dashServer {
	t.Helper()
	return newDashServerWith(t, filepath.Join(t.TempDir(), "leasekeeper.db"), change)
}

// TestSignInRate checks that sign-ins are held to a rate per client address, right keys or
// wrong, and to the rate of the key that signs in.
func TestSignInRate(t *testing.T) {
	t.Run("PerAddress", func(t *testing.T) {
		s := newSignInServer(t, func(c *handlers.Config) { c.Auth.SignInRate, c.Auth.SignInBurst = noRefill, 3 })
		reader := servicetest.Key(t, s.store, auth.Reader)
		b := newBrowser(t, s)
		for i := range 3 {
			if resp := b.signIn("lkk_wrong", "/"); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("wrong sign-in %d of the burst = %d, want 401", i+1, resp.StatusCode)
			}
		}
		resp := b.signIn(reader, "/")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("sign-in past the address's burst = %d (Retry-After %q), want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if b.cookie != nil {
			t.Error("a sign-in refused for its rate set a session cookie")
		}
	})
	t.Run("PerKey", func(t *testing.T) {
		s := newSignInServer(t, func(c *handlers.Config) { c.Auth.Rate, c.Auth.Burst = noRefill, 2 })
		reader := servicetest.Key(t, s.store, auth.Reader)
		for i := range 2 {
			if resp := newBrowser(t, s).signIn(reader, "/"); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("sign-in %d within the key's burst = %d, want 303", i+1, resp.StatusCode)
			}
		}
		b := newBrowser(t, s)
		if resp := b.signIn(reader, "/"); resp.StatusCode != http.StatusTooManyRequests || b.cookie != nil {
			t.Fatalf("sign-in past the key's burst = %d (cookie %v), want 429 and no session", resp.StatusCode, b.cookie)
		}
		// An admin key is not rate-limited, here as elsewhere.
		if resp := newBrowser(t, s).signIn(s.key, "/"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("admin sign-in = %d, want 303", resp.StatusCode)
		}
	})
}

// TestDashboardSessionsPerKey checks that a key keeps only its newest dashboard sessions.
func TestDashboardSessionsPerKey(t *testing.T) {
	s := newSignInServer(t, func(c *handlers.Config) { c.Auth.MaxDashboardSessionsPerKey = 2 })
	reader := servicetest.Key(t, s.store, auth.Reader)
	var bs []*browser
	for range 3 {
		s.clock.Advance(time.Second)
		b := newBrowser(t, s)
		if resp := b.signIn(reader, "/"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in = %d", resp.StatusCode)
		}
		bs = append(bs, b)
	}
	for i, b := range bs {
		if got, want := b.signedIn(), i > 0; got != want {
			t.Errorf("session %d of 3 with 2 kept: signed in = %v, want %v", i+1, got, want)
		}
	}
}

// TestRefusedSignInLog checks that a flood of wrong keys does not write a line each.
func TestRefusedSignInLog(t *testing.T) {
	var sink logtest.Sink
	s := newSignInServer(t, func(c *handlers.Config) { c.Logger = sink.Logger() })
	b := newBrowser(t, s)
	const tries = 40
	start := time.Now()
	for range tries {
		if resp := b.signIn("lkk_wrong", "/"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong sign-in = %d, want 401", resp.StatusCode)
		}
	}
	// The log's limiter lets 10 through at once and one a second after.
	lines := 0
	for _, r := range sink.Records(t, "WARN") {
		if r["msg"] == "dashboard sign-in refused" {
			lines++
		}
	}
	if most := 10 + int(time.Since(start).Seconds()) + 1; lines == 0 || lines > most || lines >= tries {
		t.Errorf("%d refused sign-ins logged %d WARN lines, want 1 to %d", tries, lines, most)
	}
}

// TestSecureBehindTrustedProxy checks that X-Forwarded-Proto: https makes the session cookie
// Secure and adds HSTS only when it comes from a listed proxy.
func TestSecureBehindTrustedProxy(t *testing.T) {
	for _, c := range []struct {
		name    string
		proxies []netip.Prefix
		secure  bool
	}{
		{"TrustedProxy", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, true},
		{"OtherProxy", []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}, false},
		{"NoProxy", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSignInServer(t, func(cfg *handlers.Config) { cfg.TrustedProxies = c.proxies })
			b := newBrowser(t, s)
			resp, _ := b.do("POST", "/signin", url.Values{"key": {s.key}, "next": {"/"}},
				map[string]string{"Sec-Fetch-Site": "same-origin", "X-Forwarded-Proto": "https"})
			ck := sessionCookie(resp)
			if ck == nil || ck.Secure != c.secure {
				t.Errorf("sign-in with X-Forwarded-Proto: https = %d, cookie %v; want Secure %v", resp.StatusCode, ck, c.secure)
			}
			if hsts := resp.Header.Get("Strict-Transport-Security"); (hsts != "") != c.secure {
				t.Errorf("Strict-Transport-Security = %q, want set %v", hsts, c.secure)
			}
		})
	}
}
