package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// testSessionList: sessions come by ref, a page at a time; Open leaves out closed and expired
// ones, Owner the other keys'.
func testSessionList(t *testing.T, e *env) {
	var want []string
	open := func(holder, owner string, ttl time.Duration) lease.Session {
		ss, err := e.s.OpenSession(e.ctx, store.SessionParams{Holder: holder, TTL: ttl, Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ss.Ref)
		return ss
	}
	closed := open("w1", "key_a", time.Minute)
	short := open("w2", "key_a", 5*time.Second)
	kept := open("w3", "key_b", time.Minute)
	open("w4", "key_a", time.Minute)
	if _, err := e.s.CloseSession(e.ctx, closed.ID, "key_a"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(6 * time.Second) // short expires
	list := func(f store.SessionFilter) []string {
		t.Helper()
		var refs []string
		for {
			f.Limit = 2
			page, err := e.s.Sessions(e.ctx, f)
			if err != nil {
				t.Fatalf("Sessions(%+v) = %v", f, err)
			}
			for _, ss := range page.Items {
				refs = append(refs, ss.Ref)
			}
			if page.Next == "" {
				return refs
			}
			f.Cursor = page.Next
		}
	}
	slices.Sort(want)
	if got := list(store.SessionFilter{}); !slices.Equal(got, want) {
		t.Errorf("Sessions() = %v, want %v", got, want)
	}
	got := list(store.SessionFilter{Open: true})
	if len(got) != 2 || slices.Contains(got, closed.Ref) || slices.Contains(got, short.Ref) {
		t.Errorf("Sessions(open) = %v, want the two open ones (not %s closed nor %s expired)", got, closed.Ref, short.Ref)
	}
	if got := list(store.SessionFilter{Owner: "key_b"}); !slices.Equal(got, []string{kept.Ref}) {
		t.Errorf("Sessions(owner key_b) = %v, want [%s]", got, kept.Ref)
	}
	if _, err := e.s.Sessions(e.ctx, store.SessionFilter{Cursor: "!!"}); !lease.IsCode(err, lease.CodeInvalid) {
		t.Errorf("Sessions(bad cursor) = %v, want invalid_request", err)
	}
}
