package auth_test

import (
	"strings"
	"testing"

	"golang.org/x/time/rate"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
)

var (
	writer = auth.Principal{KeyID: "k1", Label: "w", Role: auth.Writer, Prefixes: []string{"billing-"}}
	other  = auth.Principal{KeyID: "k2", Label: "w2", Role: auth.Writer}
	admin  = auth.Principal{KeyID: "k0", Label: "a", Role: auth.Admin}
)

// TestGateRate checks the per-key request rate: a key gets its burst, then rate_limited; each
// key has its own; admin keys and keys off are not limited; a forgotten key starts afresh.
func TestGateRate(t *testing.T) {
	// A rate so low that no token comes back while the test runs: no clock to wait for.
	g := auth.NewGate(auth.Limits{Rate: 1e-9, Burst: 2})
	for i := range 2 {
		if err := g.AllowRate(writer); err != nil {
			t.Fatalf("AllowRate(writer) #%d = %v, want nil within the burst", i+1, err)
		}
	}
	if err := g.AllowRate(writer); !lease.IsCode(err, lease.CodeRateLimited) {
		t.Errorf("AllowRate(writer) past the burst = %v, want %s", err, lease.CodeRateLimited)
	}
	if err := g.AllowRate(other); err != nil {
		t.Errorf("AllowRate(other key) = %v, want nil: each key has its own rate", err)
	}
	for _, p := range []auth.Principal{admin, auth.Anonymous} {
		for range 5 {
			if err := g.AllowRate(p); err != nil {
				t.Fatalf("AllowRate(%s) = %v, want nil: not limited", p.Actor(), err)
			}
		}
	}
	g.Forget(writer.KeyID)
	if err := g.AllowRate(writer); err != nil {
		t.Errorf("AllowRate(writer) after Forget = %v, want nil", err)
	}
	if err := auth.NewGate(auth.Limits{}).AllowRate(writer); err != nil {
		t.Errorf("AllowRate with Rate 0 = %v, want nil", err)
	}
	for _, c := range []struct {
		rate float64
		want int
	}{{0, 1}, {0.5, 2}, {1, 1}, {0.3, 4}, {1000, 1}} {
		if got := auth.NewGate(auth.Limits{Rate: rate.Limit(c.rate)}).RetryAfterRate(); got != c.want {
			t.Errorf("RetryAfterRate() at %g/s = %d, want %d", c.rate, got, c.want)
		}
	}
}

// TestGateHold checks the caps on long requests: waits and watches are counted apart, per key,
// and a released hold frees its place; admins are not capped.
func TestGateHold(t *testing.T) {
	g := auth.NewGate(auth.Limits{MaxWaits: 2, MaxWatches: 1})
	var done []func()
	for i := range 2 {
		d, err := g.Hold(writer, auth.HoldWait)
		if err != nil {
			t.Fatalf("Hold(wait) #%d = %v, want nil under the cap", i+1, err)
		}
		done = append(done, d)
	}
	if _, err := g.Hold(writer, auth.HoldWait); !lease.IsCode(err, lease.CodeTooManyWaiters) {
		t.Errorf("Hold(wait) past the cap = %v, want %s", err, lease.CodeTooManyWaiters)
	}
	w, err := g.Hold(writer, auth.HoldWatch)
	if err != nil {
		t.Fatalf("Hold(watch) with waits at their cap = %v, want nil: counted apart", err)
	}
	if _, err := g.Hold(writer, auth.HoldWatch); !lease.IsCode(err, lease.CodeTooManyWatchers) {
		t.Errorf("Hold(watch) past the cap = %v, want %s", err, lease.CodeTooManyWatchers)
	}
	if d, err := g.Hold(other, auth.HoldWait); err != nil {
		t.Errorf("Hold(wait) by another key = %v, want nil: each key has its own", err)
	} else {
		d()
	}
	done[0]()
	d, err := g.Hold(writer, auth.HoldWait)
	if err != nil {
		t.Errorf("Hold(wait) after one ended = %v, want nil", err)
	} else {
		d()
	}
	w()
	done[1]()
	for range 5 {
		if _, err := g.Hold(admin, auth.HoldWatch); err != nil {
			t.Fatalf("Hold(watch) by an admin = %v, want nil: not capped", err)
		}
	}
}

// TestGateCaps checks what the caps on stored things are for each caller: the configured ones
// for a non-admin key, none for an admin key or with keys off.
func TestGateCaps(t *testing.T) {
	q := lease.Quota{Resources: 3, Bytes: 100}
	g := auth.NewGate(auth.Limits{MaxHeld: 7, MaxSessions: 5, ResourceQuota: q})
	if got := g.MaxHeld(writer); got != 7 {
		t.Errorf("MaxHeld(writer) = %d, want 7", got)
	}
	if got := g.MaxSessions(writer); got != 5 {
		t.Errorf("MaxSessions(writer) = %d, want 5", got)
	}
	if got := g.Quota(writer); got != q {
		t.Errorf("Quota(writer) = %+v, want %+v", got, q)
	}
	for _, p := range []auth.Principal{admin, auth.Anonymous} {
		if g.MaxHeld(p) != 0 || g.MaxSessions(p) != 0 || g.Quota(p) != (lease.Quota{}) {
			t.Errorf("caps of %s = %d, %d, %+v, want none", p.Actor(), g.MaxHeld(p), g.MaxSessions(p), g.Quota(p))
		}
	}
}

// TestIdempotencyKey checks the Idempotency-Key's format and that what is stored depends on
// the calling key, the lease name and the server's secret.
func TestIdempotencyKey(t *testing.T) {
	secret := []byte("server secret")
	const k = "0123456789abcdef-retry"
	if got, err := auth.IdempotencyKey(secret, writer, "job", ""); got != "" || err != nil {
		t.Errorf("IdempotencyKey(\"\") = %q, %v, want \"\", nil", got, err)
	}
	for name, bad := range map[string]string{"Short": "0123456789abcde", "Long": strings.Repeat("x", 256),
		"Control": "0123456789abcdef\x01", "NonASCII": "0123456789abcdefé"} {
		t.Run("Err"+name, func(t *testing.T) {
			if _, err := auth.IdempotencyKey(secret, writer, "job", bad); !lease.IsCode(err, lease.CodeInvalid) {
				t.Errorf("IdempotencyKey(%q) = %v, want %s", bad, err, lease.CodeInvalid)
			}
		})
	}
	for _, ok := range []string{strings.Repeat("x", 16), strings.Repeat("~", 255)} {
		if _, err := auth.IdempotencyKey(secret, writer, "job", ok); err != nil {
			t.Errorf("IdempotencyKey(%d characters) = %v, want nil", len(ok), err)
		}
	}
	base, _ := auth.IdempotencyKey(secret, writer, "job", k)
	if again, _ := auth.IdempotencyKey(secret, writer, "job", k); again != base {
		t.Errorf("IdempotencyKey twice = %q, %q, want the same", base, again)
	}
	if strings.Contains(base, k) {
		t.Errorf("IdempotencyKey = %q holds the client's key", base)
	}
	for what, got := range map[string]string{
		"another calling key": must(auth.IdempotencyKey(secret, other, "job", k)),
		"another lease name":  must(auth.IdempotencyKey(secret, writer, "job2", k)),
		"another secret":      must(auth.IdempotencyKey([]byte("other secret"), writer, "job", k)),
	} {
		if got == base {
			t.Errorf("IdempotencyKey with %s = the same %q, want another", what, got)
		}
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
