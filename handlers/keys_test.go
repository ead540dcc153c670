package handlers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"github.com/prometheus/client_golang/prometheus"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
)

// TestKeysAPI creates, lists and revokes a key through HTTP, and checks a revoked key stops
// working at once.
func TestKeysAPI(t *testing.T) {
	e := newServiceEnv(t, service.Config{})
	r, err := e.c.CreateKeyWithResponse(e.ctx, api.KeyRequest{Label: "billing", Role: api.Writer, Prefixes: &[]string{"billing-"}})
	if err != nil || r.JSON201 == nil {
		t.Fatalf("CreateKey = %v, %v", status(r), err)
	}
	secret, rec := r.JSON201.Key, r.JSON201.Record
	if !strings.HasPrefix(secret, auth.SecretPrefix) || len(secret) < 43 || rec.Role != api.Writer || rec.CreatedBy == nil {
		t.Errorf("created key = %q %+v, want a 256-bit lkk_ key, writer, with its creator", secret, rec)
	}
	if resp, b := e.bearerDo(secret, "POST", "/v1/leases/billing-nightly/acquire", `{"holder":"w","ttl_ms":60000}`, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire with the new key = %d %s", resp.StatusCode, b)
	}
	l, err := e.c.ListKeysWithResponse(e.ctx)
	if err != nil || l.JSON200 == nil || len(l.JSON200.Keys) != 2 {
		t.Fatalf("ListKeys = %v, %v; want the admin key and the new one", status(l), err)
	}
	if raw, _ := json.Marshal(l.JSON200); bytes.Contains(raw, []byte(secret)) {
		t.Error("ListKeys shows a secret")
	}
	for _, bad := range []string{
		`{"label":"","role":"reader"}`, `{"label":"x","role":"root"}`, `{"label":"x","role":"admin","prefixes":["a-"]}`,
		`{"label":"x","role":"reader","prefixes":["a/b"]}`, `{"label":"x","role":"reader","extra":1}`,
	} {
		resp, b := e.bearerDo(e.key, "POST", "/v1/keys", bad, nil)
		wantProblem(t, "CreateKey("+bad+")", resp, b, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
	}

	// A watch stream open under the key ends as soon as the key is revoked.
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	stream := e.watchAs(t, ctx, secret)
	ended := make(chan time.Time, 1)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
		}
		ended <- time.Now()
	}()
	revokedAt := time.Now()
	if d, err := e.c.RevokeKeyWithResponse(e.ctx, rec.Id); err != nil || d.StatusCode() != http.StatusNoContent {
		t.Fatalf("RevokeKey = %v, %v", status(d), err)
	}
	select {
	case at := <-ended:
		if at.Sub(revokedAt) > 2*time.Second {
			t.Errorf("the stream ended %v after the revocation", at.Sub(revokedAt))
		}
	case <-ctx.Done():
		t.Fatal("the revoked key's watch stream is still open")
	}
	resp, b := e.bearerDo(secret, "GET", "/v1/leases", "", nil)
	wantProblem(t, "list with a revoked key", resp, b, http.StatusUnauthorized, api.ProblemCodeUnauthenticated)

	// The last admin key cannot be revoked: that would lock everyone out.
	resp, b = e.bearerDo(e.key, "DELETE", "/v1/keys/"+keyID(t, e, e.key), "", nil)
	wantProblem(t, "revoke the last admin key", resp, b, http.StatusBadRequest, api.ProblemCodeInvalidRequest)
	resp, b = e.bearerDo(e.key, "DELETE", "/v1/keys/key_aaaaaaaaaaaaaaaa", "", nil)
	wantProblem(t, "revoke an unknown key", resp, b, http.StatusNotFound, api.ProblemCodeNotFound)
}

// TestRevokedKeyEndsItsWaits: an acquire waiting in line under a key ends as soon as the key
// is revoked, not when its wait_ms runs out, and its place in line is given up.
func TestRevokedKeyEndsItsWaits(t *testing.T) {
	e := newServiceEnv(t, service.Config{})
	r, err := e.c.CreateKeyWithResponse(e.ctx, api.KeyRequest{Label: "billing", Role: api.Writer, Prefixes: &[]string{"billing-"}})
	if err != nil || r.JSON201 == nil {
		t.Fatalf("CreateKey = %v, %v", status(r), err)
	}
	if resp, b := e.bearerDo(e.key, "POST", "/v1/leases/billing-nightly/acquire", `{"holder":"admin","ttl_ms":60000}`, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire = %d %s", resp.StatusCode, b)
	}
	answered := make(chan int, 1)
	go func() {
		resp, _ := e.bearerDo(r.JSON201.Key, "POST", "/v1/leases/billing-nightly/acquire", `{"holder":"w","ttl_ms":60000,"wait_ms":30000}`, nil)
		answered <- resp.StatusCode
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		g, err := e.c.GetLeaseWithResponse(e.ctx, "billing-nightly")
		if err == nil && g.JSON200 != nil && g.JSON200.Waiters == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the key's acquire never waited in line")
		}
	}
	revokedAt := time.Now()
	if d, err := e.c.RevokeKeyWithResponse(e.ctx, r.JSON201.Record.Id); err != nil || d.StatusCode() != http.StatusNoContent {
		t.Fatalf("RevokeKey = %v, %v", status(d), err)
	}
	select {
	case code := <-answered:
		if code == http.StatusOK {
			t.Errorf("the revoked key's waiting acquire was granted")
		}
		if d := time.Since(revokedAt); d > 2*time.Second {
			t.Errorf("the waiting acquire ended %v after the revocation", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked key's acquire still waits in line")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		g, err := e.c.GetLeaseWithResponse(e.ctx, "billing-nightly")
		if err == nil && g.JSON200 != nil && g.JSON200.Waiters == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the revoked key's acquire kept its place in line")
		}
	}
}

// TestIdempotencyKeyBelongsToItsCaller replays a victim's Idempotency-Key and public fields
// with another API key: the replay must not hand back the victim's lease_id.
func TestIdempotencyKeyBelongsToItsCaller(t *testing.T) {
	e := newEnv(t)
	victim := servicetest.Key(t, e.store, auth.Writer)
	attacker := servicetest.Key(t, e.store, auth.Writer)
	body := `{"holder":"billing-worker","ttl_ms":60000}`
	idem := map[string]string{"Idempotency-Key": "nightly-2026-12-01-run"}
	resp, b := e.bearerDo(victim, "POST", "/v1/leases/job/acquire", body, idem)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("victim acquire = %d %s", resp.StatusCode, b)
	}
	var granted api.Lease
	json.Unmarshal(b, &granted)
	// The victim's own retry gets the grant back.
	if resp, b := e.bearerDo(victim, "POST", "/v1/leases/job/acquire", body, idem); resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(*granted.LeaseId)) {
		t.Fatalf("victim retry = %d %s, want the same grant", resp.StatusCode, b)
	}
	resp, b = e.bearerDo(attacker, "POST", "/v1/leases/job/acquire", body, idem)
	if bytes.Contains(b, []byte(*granted.LeaseId)) {
		t.Fatalf("the attacker's replay got the victim's lease_id: %s", b)
	}
	wantProblem(t, "replay by another key", resp, b, http.StatusConflict, api.ProblemCodeLeaseHeld)
}

// TestIdempotencyKeyOfSetBelongsToItsCaller: the same for POST /v1/acquire: another API key
// replaying a victim's Idempotency-Key and body never gets the victim's lease_ids.
func TestIdempotencyKeyOfSetBelongsToItsCaller(t *testing.T) {
	e := newEnv(t)
	victim := servicetest.Key(t, e.store, auth.Writer)
	attacker := servicetest.Key(t, e.store, auth.Writer)
	body := `{"names":["ledger-a","ledger-b"],"holder":"billing-worker","ttl_ms":60000}`
	idem := map[string]string{"Idempotency-Key": "nightly-2026-12-01-set"}
	resp, b := e.bearerDo(victim, "POST", "/v1/acquire", body, idem)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("victim acquire = %d %s", resp.StatusCode, b)
	}
	var granted api.Grants
	json.Unmarshal(b, &granted)
	if resp, b := e.bearerDo(victim, "POST", "/v1/acquire", body, idem); resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(*granted.Leases[1].LeaseId)) {
		t.Fatalf("victim retry = %d %s, want the same grants", resp.StatusCode, b)
	}
	resp, b = e.bearerDo(attacker, "POST", "/v1/acquire", body, idem)
	for _, l := range granted.Leases {
		if bytes.Contains(b, []byte(*l.LeaseId)) {
			t.Fatalf("the attacker's replay got the victim's lease_id of %s: %s", l.Name, b)
		}
	}
	wantProblem(t, "replay by another key", resp, b, http.StatusConflict, api.ProblemCodeLeaseHeld)
}

// TestPerKeyLimits checks the request rate and the caps on what one key may hold.
func TestPerKeyLimits(t *testing.T) {
	t.Run("Rate", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		e := newServiceEnv(t, service.Config{Registry: reg, Auth: handlers.AuthConfig{Rate: rate.Limit(0.5), Burst: 3}})
		key := servicetest.Key(t, e.store, auth.Reader)
		for i := range 3 {
			if resp, b := e.bearerDo(key, "GET", "/v1/leases", "", nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("request %d within the burst = %d %s", i+1, resp.StatusCode, b)
			}
		}
		resp, b := e.bearerDo(key, "GET", "/v1/leases", "", nil)
		wantProblem(t, "request over the rate", resp, b, http.StatusTooManyRequests, api.ProblemCodeRateLimited)
		if resp.Header.Get("Retry-After") != "2" {
			t.Errorf("Retry-After = %q, want 2 (one request every 2 s)", resp.Header.Get("Retry-After"))
		}
		// Counted by key id, for the alert that names the key.
		keys, err := e.store.Keys(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			want := 0.0
			if k.Role == auth.Reader {
				want = 1
			}
			if got := metric(t, reg, "leasekeeper_rate_limited_total", map[string]string{"key": k.ID}); got != want {
				t.Errorf("leasekeeper_rate_limited_total{key=%s (%s)} = %v, want %v", k.ID, k.Role, got, want)
			}
		}
		// Admin keys and other keys are not slowed by it.
		if resp, _ := e.bearerDo(e.key, "GET", "/v1/leases", "", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("admin request = %d while another key is limited", resp.StatusCode)
		}
	})
	e := newServiceEnv(t, service.Config{Auth: handlers.AuthConfig{MaxHeldPerKey: 2, MaxWaitsPerKey: 1, MaxWatchesPerKey: 1, MaxSessionsPerKey: 1}})
	w := servicetest.Key(t, e.store, auth.Writer)
	t.Run("Leases", func(t *testing.T) {
		for _, n := range []string{"w-1", "w-2"} {
			if resp, b := e.bearerDo(w, "POST", "/v1/leases/"+n+"/acquire", `{"holder":"w","ttl_ms":60000}`, nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("acquire %s = %d %s", n, resp.StatusCode, b)
			}
		}
		resp, b := e.bearerDo(w, "POST", "/v1/leases/w-3/acquire", `{"holder":"w","ttl_ms":60000}`, nil)
		wantProblem(t, "third lease of a key capped at 2", resp, b, http.StatusTooManyRequests, api.ProblemCodeTooManyLeases)
		wantRetryAfter(t, "third lease of a key capped at 2", resp)
	})
	t.Run("Waits", func(t *testing.T) {
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/leases/w-1/acquire", strings.NewReader(`{"holder":"x","ttl_ms":60000,"wait_ms":60000}`))
			req.Header.Set("Authorization", "Bearer "+w)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		waitFor(t, "a waiter on w-1", func() bool { return e.state("w-1").Waiters == 1 })
		resp, b := e.bearerDo(w, "POST", "/v1/leases/w-2/acquire", `{"holder":"x","ttl_ms":60000,"wait_ms":1000}`, nil)
		wantProblem(t, "second wait of a key capped at 1", resp, b, http.StatusTooManyRequests, api.ProblemCodeTooManyWaiters)
		wantRetryAfter(t, "second wait of a key capped at 1", resp)
	})
	t.Run("Watches", func(t *testing.T) {
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		e.watchAs(t, ctx, w)
		resp, b := e.bearerDo(w, "GET", "/v1/watch?prefix="+url.QueryEscape("w-"), "", nil)
		wantProblem(t, "second watch of a key capped at 1", resp, b, http.StatusTooManyRequests, api.ProblemCodeTooManyWatchers)
		wantRetryAfter(t, "second watch of a key capped at 1", resp)
	})
	t.Run("Sessions", func(t *testing.T) {
		const open = `{"holder":"w","ttl_ms":60000}`
		if resp, b := e.bearerDo(w, "POST", "/v1/sessions", open, nil); resp.StatusCode != http.StatusCreated {
			t.Fatalf("first session = %d %s", resp.StatusCode, b)
		}
		resp, b := e.bearerDo(w, "POST", "/v1/sessions", open, nil)
		wantProblem(t, "second session of a key capped at 1", resp, b, http.StatusTooManyRequests, api.ProblemCodeTooManySessions)
		wantRetryAfter(t, "second session of a key capped at 1", resp)
		for i := range 2 { // an admin key is not capped
			if resp, b := e.bearerDo(e.key, "POST", "/v1/sessions", open, nil); resp.StatusCode != http.StatusCreated {
				t.Fatalf("admin session %d = %d %s", i, resp.StatusCode, b)
			}
		}
	})
}
