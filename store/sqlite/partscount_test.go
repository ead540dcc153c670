package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/testwait"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/heldsql"
	"github.com/leasekeeper/leasekeeper/store/parts"
	"github.com/leasekeeper/leasekeeper/store/storetest"
)

// boundPage is storetest.BoundPage on s at its clock, the page walking its order's index.
func boundPage(t *testing.T, s *Store) storetest.BoundPage {
	return func(f store.HeldFilter, after store.HeldKey, more, bound bool) ([]store.HeldKey, bool, error) {
		q := heldsql.New(s.dialect(), f, s.clock.Now().UnixMilli(), grantCols)
		found, err := s.parts.Sift(context.Background(), q.Sift().After(after, more), 0)
		if err != nil {
			return nil, false, err
		}
		if bound && found.Bounded {
			q = q.Bound(found.First, found.FirstToken)
		}
		page, args := q.Page(1<<30, after, more)
		rows, err := s.r.Query(page, named(args)...)
		if err != nil {
			return nil, false, err
		}
		defer rows.Close()
		var keys []store.HeldKey
		for rows.Next() {
			g, err := scanGrant(rows)
			if err != nil {
				return nil, false, err
			}
			keys = append(keys, store.HeldKey{Name: g.name, Token: g.token})
		}
		return keys, found.Bounded, rows.Err()
	}
}

// sqlCount is what Count of q answers.
func sqlCount(t *testing.T, s *Store, q heldsql.Query) int {
	t.Helper()
	var n int
	if err := s.r.QueryRow(q.Count(), named(q.Args)...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q.Count(), err)
	}
	return n
}

// countedAsSQL checks that the index of parts counts f (Count's first term) and that Count
// with that term answers what Count in SQL does, and so does Held; it returns the count.
func countedAsSQL(t *testing.T, s *Store, f store.HeldFilter, step string) int {
	t.Helper()
	f, _, _, err := store.CheckHeld(f)
	if err != nil {
		t.Fatal(err)
	}
	q := heldsql.New(s.dialect(), f, s.clock.Now().UnixMilli(), grantCols)
	found, err := s.parts.Sift(context.Background(), q.Sift(), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := sqlCount(t, s, q)
	if !found.Counted {
		t.Errorf("%s: Held(%+v): the index of parts did not count", step, f)
	} else if got := sqlCount(t, s, q.OpenCounted(found.Open)); got != want {
		t.Errorf("%s: Held(%+v) counted %d with the index of parts' %d open grants, %d in SQL", step, f, got, found.Open, want)
	}
	if p, err := s.Held(context.Background(), f); err != nil || p.Total != want {
		t.Errorf("%s: Held(%+v).Total = %d, %v; want %d", step, f, p.Total, err, want)
	}
	return want
}

// TestPartsCountEveryEnd checks that the index of parts counts exactly, for many candidates,
// across every way a grant ends between the keeper's passes, which each filter reads itself
// (the keeper waits an hour here): a release, of a grant of the build and of one appended
// since; an expiry, first unrecorded (past expiry but open: Count takes it off in SQL), then
// swept; a revoke; a session closed; a handover (asked, released, taken by its target); a
// semaphore's slot released and revoked.
func TestPartsCountEveryEnd(t *testing.T) {
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "parts.db")
	open := func(mode PartsMode, tune func(*parts.Keeper)) *Store {
		s, err := Open(ctx, path, Options{Clock: clock, HeldParts: mode, HeldNarrow: 2, Reserve: -1, tuneParts: tune})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The grants of the build: acquired before the store opens again.
	s := open(PartsNever, nil)
	leases := map[string]lease.Lease{}
	acquire := func(p store.AcquireParams) lease.Lease {
		t.Helper()
		if p.TTL == 0 {
			p.TTL = time.Hour
		}
		l, err := s.Acquire(ctx, p)
		if err != nil {
			t.Fatalf("acquire %q: %v", p.Name, err)
		}
		leases[p.Name] = l
		return l
	}
	for i := range 6 {
		acquire(store.AcquireParams{Name: fmt.Sprintf("job-built-%d", i), Holder: fmt.Sprintf("w-%d", i%2)})
	}
	s.Close()
	built := make(chan struct{}, 1)
	s = open(PartsBackground, func(p *parts.Keeper) { p.OnSwap, p.Every = func() { built <- struct{}{} }, time.Hour })
	defer s.Close()
	testwait.Receive(t, built, time.Minute)
	for i := range 4 {
		acquire(store.AcquireParams{Name: fmt.Sprintf("job-since-%d", i), Holder: fmt.Sprintf("w-%d", i%2)})
	}
	acquire(store.AcquireParams{Name: "job-short", Holder: "w-1", TTL: 10 * time.Second})
	acquire(store.AcquireParams{Name: "job-gone", Holder: "w-0"})
	acquire(store.AcquireParams{Name: "job-handed", Holder: "w-0"})
	ss, err := s.OpenSession(ctx, store.SessionParams{Holder: "w-1", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	acquire(store.AcquireParams{Name: "job-session-0", Holder: "w-1", SessionID: ss.ID})
	acquire(store.AcquireParams{Name: "job-session-1", Holder: "w-1", SessionID: ss.ID})
	var slots []lease.Lease
	for i := range 3 {
		l, err := s.Acquire(ctx, store.AcquireParams{Name: "job-pool", Holder: fmt.Sprintf("w-%d", i%2), TTL: time.Hour, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, l)
	}
	filters := []store.HeldFilter{
		{Contains: "job"}, {Holder: "w-"}, {Contains: "job", Holder: "w-1"}, {Contains: "since"}, {Contains: "pool"},
		{Contains: "job", Prefix: "job-s"}, {Holder: "w", Within: []string{"job-built", "job-pool"}},
	}
	check := func(step string) {
		t.Helper()
		for _, f := range filters {
			countedAsSQL(t, s, f, step)
		}
	}
	check("opened")
	if n := countedAsSQL(t, s, store.HeldFilter{Contains: "job"}, "opened"); n != 16 {
		t.Fatalf("Held(job) = %d, want 16 (the check checks little)", n)
	}
	for _, name := range []string{"job-built-0", "job-since-0"} {
		if err := s.Release(ctx, name, leases[name].ID); err != nil {
			t.Fatal(err)
		}
		check("released " + name)
	}
	clock.Advance(time.Minute)
	check("job-short past expiry, not yet recorded")
	if _, _, err := s.ExpireDue(ctx); err != nil {
		t.Fatal(err)
	}
	check("job-short's expiry recorded")
	if err := s.Revoke(ctx, "job-gone", 0, "admin"); err != nil {
		t.Fatal(err)
	}
	check("revoked job-gone")
	if _, err := s.CloseSession(ctx, ss.ID, ""); err != nil {
		t.Fatal(err)
	}
	check("session closed")
	h := leases["job-handed"]
	if _, err := s.RequestHandover(ctx, "job-handed", lease.Handover{To: "w-9", Reason: "deploy", By: "admin"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "job-handed", h.ID); err != nil {
		t.Fatal(err)
	}
	acquire(store.AcquireParams{Name: "job-handed", Holder: "w-9"})
	check("handed over")
	if err := s.Release(ctx, "job-pool", slots[0].ID); err != nil {
		t.Fatal(err)
	}
	check("a slot released")
	if err := s.Revoke(ctx, "job-pool", slots[1].Token, "admin"); err != nil {
		t.Fatal(err)
	}
	check("a slot revoked")
	if n := countedAsSQL(t, s, store.HeldFilter{Contains: "job"}, "the end"); n != 10 {
		t.Errorf("Held(job) at the end = %d, want 10", n)
	}
}

// TestPartsCountsNoEndPrunedUnread checks that when events past the index's seq were pruned
// before it read them (an end may be among them), the index does not count, and the keeper's
// next pass builds it again, which counts; in PartsAtOnce, the filter's own call rebuilds.
func TestPartsCountsNoEndPrunedUnread(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []PartsMode{PartsBackground, PartsAtOnce} {
		built := make(chan struct{}, 4)
		s := partsStore(t, mode, func(p *parts.Keeper) { p.OnSwap, p.Every = func() { built <- struct{}{} }, time.Hour })
		if mode == PartsBackground {
			testwait.Receive(t, built, time.Minute)
		}
		var ls []lease.Lease
		for i := range 4 {
			ls = append(ls, acquirePart(t, s, fmt.Sprintf("job-%d", i), "w"))
		}
		f := store.HeldFilter{Contains: "job"}
		if n := countedAsSQL(t, s, f, "opened"); n != 4 {
			t.Fatalf("Held(job) = %d, want 4", n)
		}
		// job-0's release, then an acquire, then every event but the newest pruned.
		if err := s.Release(ctx, "job-0", ls[0].ID); err != nil {
			t.Fatal(err)
		}
		acquirePart(t, s, "other", "w")
		if err := s.Prune(ctx, store.Retention{Rows: 1}); err != nil {
			t.Fatal(err)
		}
		if mode == PartsAtOnce {
			if n := countedAsSQL(t, s, f, "events pruned, "+fmt.Sprint(mode)); n != 3 {
				t.Errorf("Held(job) after job-0's release = %d, want 3", n)
			}
			continue
		}
		found, err := s.parts.Sift(ctx, siftOf(s, "job", ""), 0)
		if err != nil || found.Counted {
			t.Errorf("sift(job) after its events were pruned unread = %+v, %v; want no count", found, err)
		}
		if p, err := s.Held(ctx, f); err != nil || p.Total != 3 {
			t.Errorf("Held(job) after job-0's release = %+v, %v; want 3 (from SQL)", p, err)
		}
		if err := s.parts.Pass(); err != nil {
			t.Fatal(err)
		}
		if n := countedAsSQL(t, s, f, "built again"); n != 3 {
			t.Errorf("Held(job) after the keeper's pass = %d, want 3", n)
		}
	}
}

// TestPartsCountAsSQL compares the index of parts' count with the count in SQL (the oracle) for
// many filters on varied grants: semaphores' slots, names under scopes and prefixes, holders
// with '%', '_', '#', '\' and characters of several bytes, grants released, revoked, expired
// and swept, and expired not yet recorded. A part that is not valid UTF-8 is left to SQL.
func TestPartsCountAsSQL(t *testing.T) {
	s := partsStore(t, PartsAtOnce, nil)
	clock := s.clock.(*lease.FakeClock)
	ctx := context.Background()
	ls := storetest.SeedParts(t, s)
	for _, i := range []int{1, 7} {
		if err := s.Release(ctx, ls[i].Name, ls[i].ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Revoke(ctx, ls[2].Name, 0, "admin"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if _, _, err := s.ExpireDue(ctx); err != nil { // team-b.x1 and a-b
		t.Fatal(err)
	}
	// Expire, not yet recorded: job-0011's grant.
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "job-0011-late", Holder: "w-1", TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)

	parts := []string{"", "job", "team", "a", "_", "x1", "pool", "sem", "#", "o", "-0", ".", "A", "ü"}
	holderParts := []string{"", "w", "_", "%", "%_", "é", "日本", "#", "slot", "Oncall", `\`, "-1", "\x00"}
	prefixes := []string{"", "team-", "team-a.", "job-00", "zz", "pool"}
	scopes := [][]string{nil, {"team-a.", "job-001"}, {"pool", "x"}}
	checked, counts := 0, map[int]bool{}
	for _, f := range storetest.PartsFilters(parts, holderParts, prefixes, scopes) {
		q := heldsql.New(s.dialect(), f, clock.Now().UnixMilli(), grantCols)
		found, err := s.parts.Sift(ctx, q.Sift(), 0)
		if err != nil || !found.Counted {
			t.Fatalf("sift(%+v) = %+v, %v; want a count", f, found, err)
		}
		want := sqlCount(t, s, q)
		if got := sqlCount(t, s, q.OpenCounted(found.Open)); got != want {
			t.Errorf("Held(%+v): %d with the index of parts' %d open grants, %d in SQL", f, got, found.Open, want)
		}
		checked++
		counts[want] = true
	}
	if len(counts) < 5 {
		t.Errorf("the %d filters gave only the counts %v: the check checks little", checked, counts)
	}
	storetest.BoundedPages(t, storetest.PartsFilters([]string{"", "job", "a", "sem", "#", "-0", "x1"},
		[]string{"", "w", "-1", "%", "\x00"}, []string{"", "job-00", "pool"}, [][]string{nil, {"team-a.", "job-001"}}), boundPage(t, s))
	for _, f := range []store.HeldFilter{{Contains: "\xa9"}, {Holder: "\xc3"}, {Holder: "w", State: store.HeldLate}} {
		q := heldsql.New(s.dialect(), f, clock.Now().UnixMilli(), grantCols)
		if found, err := s.parts.Sift(ctx, q.Sift(), 0); err != nil || found.Counted {
			t.Errorf("sift(%+v) = %+v, %v; want it left to SQL", f, found, err)
		}
	}
}
