package storetest

import (
	"cmp"
	"encoding/base64"
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
	checkHeld(t, e, filters, map[string]bool{"nothing-matches": true})

	for _, f := range []store.HeldFilter{{Order: "holder"}, {State: "free"}, {Cursor: "!"},
		{Order: store.OrderExpiry, Cursor: store.EncodeCursor("name:alpha")}, {Order: store.OrderLate, Cursor: store.EncodeCursor("late:x:1")}} {
		_, err := e.s.Held(e.ctx, f)
		wantCode(t, fmt.Sprintf("Held(%+v)", f), err, lease.CodeInvalid)
	}
}

// testHeldSubstrings checks the filters on a part of a name or holder where an index of their
// pieces could go wrong: case, LIKE's wildcards and escape character, a semaphore's slots,
// characters of several bytes, parts of one or two characters (shorter than a trigram),
// pieces that every match has but not together, a piece repeated, and grants that ended.
func testHeldSubstrings(t *testing.T, e *env) {
	for i, l := range [][2]string{
		{"Case-Mixed", "Oncall-Team"}, {"case-lower", "oncall-team"}, {"disc-1", "50%_off"}, {"disc-2", "50xyoff"},
		{"und-1", "a_b"}, {"und-2", "axb"}, {"bs-1", `back\slash`}, {"bs-2", "backslash"},
		{"mb-1", "José-ü"}, {"mb-2", "日本語ワーカー"}, {"mb-3", "Jose-u"}, {"abcXbcd", "abcXbcd"}, {"abcdx", "xabcdx"},
		{"rep-1", "aaaa"}, {"rep-2", "aaXaa"},
	} {
		e.acquire(l[0], l[1], time.Duration(60+i)*time.Second)
	}
	for i := range 2 {
		if _, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "pool", Holder: fmt.Sprintf("slot-%d", i), TTL: time.Minute, Limit: 3}); err != nil {
			t.Fatal(err)
		}
	}
	e.acquire("short-needle", "needle-short", time.Second) // expires unswept
	gone := e.acquire("gone-needle", "needle-gone", time.Hour)
	if err := e.s.Release(e.ctx, "gone-needle", gone.ID); err != nil {
		t.Fatal(err)
	}
	e.acquire("gone-needle", "other", time.Hour) // the name again, by another holder
	e.clock.Advance(2 * time.Second)
	var filters []store.HeldFilter
	for _, c := range []string{"case", "Case", "CASE", "ase-", "ol#", "#1", "pool#", "a", "z", "ab", "abcd", "bcd", "needle", "-needle", "%", "_", "-"} {
		filters = append(filters, store.HeldFilter{Contains: c})
	}
	for _, h := range []string{"%", "_", "%_", "50%", "a_b", `\`, `k\s`, "é", "ü", "日本", "本語ワ", "José", "sé-ü", "Jos", "Onc", "onc", "ONC",
		"aaa", "aaaa", "aaaaa", "needle", "x", "slot-1", "lot-", "abcd"} {
		filters = append(filters, store.HeldFilter{Holder: h})
	}
	filters = append(filters, store.HeldFilter{Contains: "case", Holder: "onc"}, store.HeldFilter{Contains: "ab", Holder: "abcd"},
		store.HeldFilter{Contains: "1", Holder: "_"})
	checkHeld(t, e, filters, map[string]bool{"%": true, "_": true, "CASE": true, "ONC": true, "aaaaa": true, "z": true, "needle": true, "-needle": true})
}

// checkHeld reads each filter's pages in every order with a small limit and compares them
// with what List says is held: every row once, in order, with the count of all of them. A
// filter whose Contains or Holder is in empty may match nothing; any other must match.
func checkHeld(t *testing.T, e *env, filters []store.HeldFilter, empty map[string]bool) {
	t.Helper()
	all, err := e.s.List(e.ctx, store.LeaseFilter{State: "held", Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	for _, f := range filters {
		for _, order := range []string{store.OrderName, store.OrderExpiry, store.OrderLate, store.OrderNewest} {
			f.Order = order
			want := heldOracle(all.Items, f, now)
			if len(want) == 0 && !empty[f.Contains] && !empty[f.Holder] {
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

// testHeldNotUTF8: a filter, a prefix or a cursor whose text is not UTF-8 is invalid_request
// on both backends (PostgreSQL refuses such bytes in a statement; SQLite would match nothing),
// and changes nothing.
func testHeldNotUTF8(t *testing.T, e *env) {
	e.acquire("job", "w", time.Minute)
	bad := "a\xa9b"
	notUTF8 := base64.RawURLEncoding.EncodeToString([]byte(bad))
	for _, f := range []store.HeldFilter{{Contains: bad}, {Holder: bad}, {Prefix: bad}, {Cursor: notUTF8},
		{Order: store.OrderExpiry, Cursor: base64.RawURLEncoding.EncodeToString([]byte("expiry:1:\xff"))}} {
		_, err := e.s.Held(e.ctx, f)
		wantCode(t, fmt.Sprintf("Held(%+v)", f), err, lease.CodeInvalid)
	}
	_, err := e.s.List(e.ctx, store.LeaseFilter{Prefix: bad})
	wantCode(t, "List(prefix not UTF-8)", err, lease.CodeInvalid)
	_, err = e.s.List(e.ctx, store.LeaseFilter{Cursor: notUTF8})
	wantCode(t, "List(cursor not UTF-8)", err, lease.CodeInvalid)
	p, err := e.s.Held(e.ctx, store.HeldFilter{})
	if err != nil || p.Total != 1 {
		t.Fatalf("Held() = %+v, %v, want the one lease", p, err)
	}
}
