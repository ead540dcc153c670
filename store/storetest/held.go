package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// testHeld checks every filter and order of Held, alone and together, against what List says
// is held, read page by page with a small limit: every row once, in order, with the count of
// all of them; a semaphore is one row.
func testHeld(t *testing.T, e *env) {
	renew := map[string]string{}
	for i, n := range []string{"alpha", "beta", "gamma", "delta", "team-a.x", "team-a.y", "team-b.z", "needle-1", "hay-needle"} {
		holder := []string{"worker-1", "worker-2", "oncall"}[i%3]
		ttl := time.Duration(50+i*10) * time.Second
		l := e.acquire(n, holder, ttl)
		renew[n] = l.ID
		e.clock.Advance(time.Second)
	}
	for i := range 3 {
		p := store.AcquireParams{Name: "pool", Holder: fmt.Sprintf("slot-%d", i), TTL: time.Duration(3-i) * time.Minute, Limit: 4}
		if _, err := e.s.Acquire(e.ctx, p); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
	}
	e.acquire("short", "worker-1", time.Second) // expires unswept
	gone := e.acquire("gone", "worker-2", time.Hour)
	if err := e.s.Release(e.ctx, "gone", gone.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(30 * time.Second)
	// beta renews: no longer late; the others of 30-50 s ttl are late or expiring.
	if _, err := e.s.Renew(e.ctx, "beta", renew["beta"], 0, nil); err != nil {
		t.Fatal(err)
	}

	all, err := e.s.List(e.ctx, store.LeaseFilter{State: "held", Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	filters := []store.HeldFilter{
		{},
		{Prefix: "team-"},
		{Within: []string{"team-a.", "needle"}},
		{Contains: "needle"},
		{Contains: "o"},
		{Holder: "oncall"},
		{Holder: "worker", Contains: "a"},
		{Contains: "pool"},
		{Holder: "slot-2"},
		{State: store.HeldExpiring},
		{State: store.HeldLate},
		{State: store.HeldLate, Holder: "worker"},
		{State: store.HeldExpiring, Prefix: "team-", Contains: "x"},
		{Contains: "nothing-matches"},
	}
	for _, f := range filters {
		for _, order := range []string{store.OrderName, store.OrderExpiry, store.OrderLate, store.OrderNewest} {
			f.Order = order
			want := heldOracle(all.Items, f, now)
			if len(want) == 0 && f.Contains != "nothing-matches" {
				t.Fatalf("filter %+v matches nothing: the case checks little", f)
			}
			var got []string
			f.Limit = 2
			for pages := 0; ; pages++ {
				p, err := e.s.Held(e.ctx, f)
				if err != nil {
					t.Fatalf("Held(%+v) = %v", f, err)
				}
				if p.Total != len(want) {
					t.Errorf("Held(%+v).Total = %d, want %d", f, p.Total, len(want))
				}
				for _, st := range p.Items {
					if !st.Held {
						t.Errorf("Held(%+v) lists %s, which is not held", f, st.Name)
					}
					got = append(got, st.Name)
				}
				if p.Next == "" || pages > 20 {
					break
				}
				f.Cursor = p.Next
			}
			f.Cursor = ""
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("Held(%+v) rows (-want +got):\n%s", f, diff)
			}
		}
	}

	for _, f := range []store.HeldFilter{{Order: "holder"}, {State: "free"}, {Cursor: "!"},
		{Order: store.OrderExpiry, Cursor: store.EncodeCursor("name:alpha")}, {Order: store.OrderLate, Cursor: store.EncodeCursor("late:x:1")}} {
		_, err := e.s.Held(e.ctx, f)
		wantCode(t, fmt.Sprintf("Held(%+v)", f), err, lease.CodeInvalid)
	}
}

// heldOracle is what Held must answer, worked out from every held lease: the filters, the
// order, and one row per semaphore at the first of its matching slots.
func heldOracle(held []lease.State, f store.HeldFilter, now time.Time) []string {
	var rows []lease.State
	for _, st := range held {
		_, _, slot := lease.SlotOf(st.Name)
		late := now.UnixMilli() > store.LateMark(st)
		switch {
		case !strings.HasPrefix(st.Name, f.Prefix),
			len(f.Within) > 0 && !slices.ContainsFunc(f.Within, func(p string) bool { return strings.HasPrefix(st.Name, p) }),
			!strings.Contains(st.Name, f.Contains), !strings.Contains(st.Holder, f.Holder),
			f.State == store.HeldExpiring && st.ExpiresAt.Sub(now) > store.ExpiringWithin,
			f.State == store.HeldLate && (slot || !late):
			continue
		}
		rows = append(rows, st)
	}
	slices.SortFunc(rows, func(a, b lease.State) int {
		ka, kb := store.KeyOf(f.Order, a), store.KeyOf(f.Order, b)
		if f.Order == store.OrderNewest {
			return cmp.Compare(kb.Token, ka.Token)
		}
		return cmp.Or(cmp.Compare(ka.Name, kb.Name), cmp.Compare(ka.N, kb.N), cmp.Compare(ka.Token, kb.Token))
	})
	var names []string
	seen := map[string]bool{}
	for _, st := range rows {
		if sem, _, ok := lease.SlotOf(st.Name); ok {
			if seen[sem] {
				continue
			}
			seen[sem] = true
		}
		names = append(names, st.Name)
	}
	return names
}
