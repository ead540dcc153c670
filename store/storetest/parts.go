package storetest

import (
	"context"
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
