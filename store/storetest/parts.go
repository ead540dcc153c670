package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// SeedParts acquires, on s, the varied grants the backends' tests of the index of parts count
// (TestPartsCountAsSQL): plain names under prefixes and scopes, whose holders have '%', '_',
// '#', '\' and characters of several bytes, every fifth with a ttl of 5 s (to expire), and
// three semaphores with one, two and three held slots. It returns the plain leases, in order.
func SeedParts(t *testing.T, s store.Store) []lease.Lease {
	t.Helper()
	ctx := context.Background()
	names := []string{"team-a.x1", "team-a.y_2", "team-a.sem", "team-b:z", "team-b.x1", "job-0001", "job-0010", "job-0011",
		"job-0100", "a_b", "a-b", "A-B", "x1", "zz.9"}
	holders := []string{"w-1", "w_1", "w%1", "50%_off", "José-ü", "日本語ワーカー", "x#y", `back\slash`, "Oncall", "oncall", "w-1#2"}
	var ls []lease.Lease
	for i, n := range names {
		ttl := time.Hour
		if i%5 == 4 {
			ttl = 5 * time.Second
		}
		l, err := s.Acquire(ctx, store.AcquireParams{Name: n, Holder: holders[i%len(holders)], TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	for i, sem := range []string{"pool", "team-a.sem2", "job-0002"} {
		for j := range 1 + i {
			if _, err := s.Acquire(ctx, store.AcquireParams{Name: sem, Holder: holders[(i+j)%len(holders)], TTL: time.Hour, Limit: 3}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ls
}

// PartsFilters is every filter by name that combines a part of the name, a part of the holder
// (not both empty), a prefix and a scope of those given.
func PartsFilters(contains, holders, prefixes []string, scopes [][]string) []store.HeldFilter {
	var fs []store.HeldFilter
	for _, c := range contains {
		for _, h := range holders {
			if c == "" && h == "" {
				continue
			}
			for _, p := range prefixes {
				for _, w := range scopes {
					fs = append(fs, store.HeldFilter{Contains: c, Holder: h, Prefix: p, Within: w, Order: store.OrderName})
				}
			}
		}
	}
	return fs
}

// BoundPage lists the keys (name and token) of the rows of one page of the checked filter f
// after the key after (the first page when more is false), at most f.Limit + 1, with the
// page's walk of its order's index bounded by the index of parts (heldsql.Query.Bound) when
// bound, else not; bounded says that the index gave a bound.
type BoundPage func(f store.HeldFilter, after store.HeldKey, more, bound bool) (keys []store.HeldKey, bounded bool, err error)

// BoundedPages walks every page, three rows each, of each filter by name and by token (newest
// first), bounded and not, and checks that the two walks list the same rows: the grants the
// bound skips pass no filter (TestPartsCountAsSQL), and that a page with a row has a bound.
func BoundedPages(t *testing.T, filters []store.HeldFilter, page BoundPage) {
	t.Helper()
	pages := 0
	for _, f := range filters {
		for _, order := range []string{store.OrderName, store.OrderNewest} {
			f.Order, f.Limit = order, 3
			after, more := store.HeldKey{}, false
			for range 100 {
				want, _, err := page(f, after, more, false)
				if err != nil {
					t.Fatalf("Held(%+v) after %+v: %v", f, after, err)
				}
				got, b, err := page(f, after, more, true)
				if err != nil {
					t.Fatalf("Held(%+v) after %+v, bounded: %v", f, after, err)
				}
				if len(want) > 0 {
					pages++
					if !b {
						t.Errorf("Held(%+v) after %+v: the index of parts gave no bound, where %d grants pass", f, after, len(want))
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("Held(%+v) after %+v: %v with the bound of the index of parts, %v without", f, after, got, want)
				}
				if len(want) <= f.Limit {
					break
				}
				after, more = want[f.Limit-1], true
			}
		}
	}
	if pages < 100 {
		t.Errorf("only %d pages had a row: the check checks little", pages)
	}
}
