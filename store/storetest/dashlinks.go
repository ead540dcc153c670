package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// testRejectionKey: a refused write and a reported rejection keep the key that sent them.
func testRejectionKey(t *testing.T, e *env) {
	a := e.acquire("job", "w1", time.Second)
	e.clock.Advance(2 * time.Second)
	b := e.acquire("job", "w2", time.Second)
	if _, err := e.s.PutResource(e.ctx, store.ResourceWrite{Name: "db", Token: b.Token, Value: []byte("v"), Owner: "key_b"}); err != nil {
		t.Fatalf("PutResource(b) = %v", err)
	}
	_, err := e.s.PutResource(e.ctx, store.ResourceWrite{Name: "db", Token: a.Token, Value: []byte("stale"), Owner: "key_a"})
	wantCode(t, "PutResource(stale)", err, lease.CodeStale)
	if _, err := e.s.RecordRejection(e.ctx, lease.Rejection{Resource: "orders", PresentedToken: a.Token, CurrentFence: b.Token,
		Source: lease.RejectionSourceExternal, KeyID: "key_x"}, nil); err != nil {
		t.Fatalf("RecordRejection() = %v", err)
	}
	p, err := e.s.Rejections(e.ctx, store.RejectionFilter{})
	if err != nil {
		t.Fatalf("Rejections() = %v", err)
	}
	var got []string
	for _, r := range p.Items {
		got = append(got, r.Resource+" by "+r.KeyID)
	}
	if diff := cmp.Diff([]string{"orders by key_x", "db by key_a"}, got); diff != "" {
		t.Errorf("Rejections() keys differ (-want +got):\n%s", diff)
	}
}

// testKeyLastUsed: TouchKey records a key's last use, which never goes back.
func testKeyLastUsed(t *testing.T, e *env) {
	k, _ := e.createKey("ops", auth.Reader)
	lastUsed := func() time.Time {
		t.Helper()
		keys, err := e.s.Keys(e.ctx)
		if err != nil || len(keys) != 1 {
			t.Fatalf("Keys() = %+v, %v; want one", keys, err)
		}
		return keys[0].LastUsed
	}
	if got := lastUsed(); !got.IsZero() {
		t.Fatalf("LastUsed of a new key = %v, want zero", got)
	}
	e.clock.Advance(time.Minute)
	if err := e.s.TouchKey(e.ctx, k.ID); err != nil {
		t.Fatalf("TouchKey() = %v", err)
	}
	if got, want := lastUsed(), t0.Add(time.Minute); !got.Equal(want) {
		t.Errorf("LastUsed = %v, want %v", got, want)
	}
	e.clock.Set(t0.Add(30 * time.Second)) // a clock that went back moves nothing
	if err := e.s.TouchKey(e.ctx, k.ID); err != nil {
		t.Fatalf("TouchKey(earlier) = %v", err)
	}
	if got, want := lastUsed(), t0.Add(time.Minute); !got.Equal(want) {
		t.Errorf("LastUsed after an earlier touch = %v, want still %v", got, want)
	}
	if err := e.s.TouchKey(e.ctx, "key_missing"); err != nil {
		t.Errorf("TouchKey(missing) = %v, want nil", err)
	}
}

// testLeaseResources: a lease finds the resources last written with its tokens (or its
// slots'), whoever wrote them, and a token finds its grant even when the write named no lease.
func testLeaseResources(t *testing.T, e *env) {
	a := e.acquire("job", "w1", time.Minute)
	s, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "pool", Holder: "p1", TTL: time.Minute, Limit: 2})
	if err != nil {
		t.Fatalf("Acquire(pool) = %v", err)
	}
	other := e.acquire("jobs", "w3", time.Minute)
	for _, w := range []struct {
		res   string
		token int64
		named string
	}{{"r2", a.Token, ""}, {"r1", a.Token, "job"}, {"r3", s.Token, ""}, {"r4", other.Token, ""}} {
		if _, err := e.put(w.res, w.token, w.named, "v"); err != nil {
			t.Fatalf("PutResource(%s) = %v", w.res, err)
		}
	}
	// A writer limited to r… cannot see the grant of job's token: the write is put down to no
	// lease, yet it was written under job's token.
	r, err := e.s.PutResource(e.ctx, store.ResourceWrite{Name: "r5", Token: a.Token, Value: []byte("v"), Scope: lease.Scope{"r"}})
	if err != nil || r.Lease != "" {
		t.Fatalf("PutResource(r5, scoped) = %+v, %v; want it put down to no lease", r, err)
	}
	names := func(name string, limit int) []string {
		t.Helper()
		rs, err := e.s.LeaseResources(e.ctx, name, limit)
		if err != nil {
			t.Fatalf("LeaseResources(%q) = %v", name, err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		limit int
		want  []string
	}{{"job", 0, []string{"r1", "r2", "r5"}}, {"job", 1, []string{"r1"}}, {"pool", 0, []string{"r3"}}, {"jobs", 0, []string{"r4"}}, {"nobody", 0, nil}} {
		if diff := cmp.Diff(c.want, names(c.name, c.limit)); diff != "" {
			t.Errorf("LeaseResources(%q, %d) differs (-want +got):\n%s", c.name, c.limit, diff)
		}
	}
	got, err := e.s.TokenGrants(e.ctx, []int64{a.Token, s.Token, lease.MaxToken})
	if err != nil {
		t.Fatalf("TokenGrants() = %v", err)
	}
	want := map[int64]store.TokenGrant{a.Token: {Name: "job", Holder: "w1", AcquiredAt: a.AcquiredAt},
		s.Token: {Name: lease.SlotName("pool", 0), Holder: "p1", AcquiredAt: s.AcquiredAt}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TokenGrants() differs (-want +got):\n%s", diff)
	}
	_, err = e.s.TokenGrants(e.ctx, make([]int64, store.MaxLimit+1))
	wantCode(t, "TokenGrants(too many)", err, lease.CodeInvalid)
}
