package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/testwait"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/heldsql"
	"github.com/leasekeeper/leasekeeper/store/parts"
)

// partsStore opens a store whose index of parts works in mode, with its settings changed by
// tune (when set) before its keeper starts.
func partsStore(t *testing.T, mode PartsMode, tune func(*parts.Keeper)) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "parts.db"), Options{
		Clock: lease.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), HeldParts: mode, Reserve: -1, tuneParts: tune})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func acquirePart(t *testing.T, s *Store, name, holder string) lease.Lease {
	t.Helper()
	l, err := s.Acquire(context.Background(), store.AcquireParams{Name: name, Holder: holder, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// siftOf is the Sift of a filter on contains and holder, by name.
func siftOf(s *Store, contains, holder string) heldsql.Sift {
	return heldsql.New(heldsql.SQLite, store.HeldFilter{Contains: contains, Holder: holder, Order: store.OrderName},
		s.clock.Now().UnixMilli(), grantCols).Sift()
}

// candidates lists what the index of parts finds for contains and holder, at most most.
func candidates(t *testing.T, s *Store, contains, holder string, most int) (tokens []int64, listed bool) {
	t.Helper()
	found, err := s.parts.Sift(context.Background(), siftOf(s, contains, holder), most)
	if err != nil {
		t.Fatal(err)
	}
	return found.Tokens, found.Listed
}

// wantCandidates checks that the index of parts answers and lists exactly the tokens want.
func wantCandidates(t *testing.T, s *Store, contains, holder string, want ...lease.Lease) {
	t.Helper()
	got, ok := candidates(t, s, contains, holder, 10)
	if !ok {
		t.Fatalf("candidates(%q, %q) = %v, not listed; want an answer", contains, holder, got)
	}
	var tokens []int64
	for _, l := range want {
		tokens = append(tokens, int64(l.Token))
	}
	slices.Sort(got)
	slices.Sort(tokens)
	if !slices.Equal(got, tokens) {
		t.Errorf("candidates(%q, %q) = %v, want %v", contains, holder, got, tokens)
	}
}

// TestPartsFindsEveryOpenGrant checks the index of parts: it finds a part in the names and
// holders of the grants of its build (read a chunk at a time), in those acquired since (past
// its mark, read a chunk at a time), in both at once; a grant that ended is found no more, and
// a rebuild drops those when they outnumber the open ones; it lists no more than it is asked
// for.
func TestPartsFindsEveryOpenGrant(t *testing.T) {
	s := partsStore(t, PartsAtOnce, nil)
	s.parts.Chunk, s.parts.Slack = 2, 0
	first := acquirePart(t, s, "a-needle", "h-1")
	held := acquirePart(t, s, "plain", "needle-h")
	third := acquirePart(t, s, "m", "h-0") // the build reads two chunks of 2
	wantCandidates(t, s, "needle", "", first)
	var since []lease.Lease
	for _, name := range []string{"b-needle", "c-needle", "d-needle", "e-needle", "f"} {
		since = append(since, acquirePart(t, s, name, "h-2"))
	}
	wantCandidates(t, s, "needle", "", append([]lease.Lease{first}, since[:4]...)...)
	wantCandidates(t, s, "", "needle", held)
	wantCandidates(t, s, "needle", "h-2", since[:4]...)
	wantCandidates(t, s, "", "h-", append([]lease.Lease{first, third}, since...)...)
	if got, ok := candidates(t, s, "needle", "", 4); ok {
		t.Errorf("candidates(needle) of at most 4 = %v; want too many", got)
	}
	// A grant that ended is no candidate, of the build or since.
	for _, l := range []lease.Lease{first, since[0]} {
		if err := s.Release(context.Background(), l.Name, l.ID); err != nil {
			t.Fatal(err)
		}
	}
	wantCandidates(t, s, "needle", "", since[1:4]...)
	x := s.parts.Built()
	for _, l := range since[1:] {
		if err := s.Release(context.Background(), l.Name, l.ID); err != nil {
			t.Fatal(err)
		}
	}
	wantCandidates(t, s, "needle", "")
	wantCandidates(t, s, "", "needle", held)
	if y := s.parts.Built(); y == x || y.Len() != 2 {
		t.Errorf("the index after 6 of 8 grants ended: %d entries, rebuilt %v; want a rebuild of 2", y.Len(), y != x)
	}
}

// TestPartsFullAnswersNothing checks that an index whose names outgrow its offsets' room
// answers nothing (Held sieves in SQL), and goes on catching up.
func TestPartsFullAnswersNothing(t *testing.T) {
	s := partsStore(t, PartsAtOnce, nil)
	s.parts.Chunk, s.parts.Room = 2, 12
	a := acquirePart(t, s, "a-needle", "h")
	acquirePart(t, s, "b", "h")
	wantCandidates(t, s, "needle", "", a) // 11 bytes of names with their 0s
	for _, name := range []string{"c-needle", "d", "e"} {
		acquirePart(t, s, name, "h")
	}
	if found, err := s.parts.Sift(context.Background(), siftOf(s, "needle", ""), 10); found.Listed || found.Counted || err != nil {
		t.Errorf("sift of an index past its room = %+v, %v; want no answer", found, err)
	}
	p, err := s.Held(context.Background(), store.HeldFilter{Contains: "needle", Order: store.OrderName, Limit: 10})
	if err != nil || p.Total != 2 {
		t.Errorf("Held(needle) past the room = %+v, %v; want a-needle and c-needle", p, err)
	}
}

// TestPartsBuiltAtOpen checks the default mode: the keeper builds the index when the store
// opens, before any filter; then each filter catches it up itself (the keeper waits an hour
// here): the grants opened since are found and those ended since are not, and it counts; a
// filter that finds more grants opened since than a chunk leaves them to the keeper and
// sieves in SQL, and one that finds more events since than it reads lists but does not count.
func TestPartsBuiltAtOpen(t *testing.T) {
	built := make(chan struct{}, 1)
	s := partsStore(t, PartsBackground, func(p *parts.Keeper) {
		p.OnSwap, p.Every, p.Chunk, p.Events = func() { built <- struct{}{} }, time.Hour, 4, 8
	})
	if !s.parts.Keeping() {
		t.Fatal("no keeper runs once the store is open: the first filter would wait for a build")
	}
	testwait.Receive(t, built, time.Minute)
	a := acquirePart(t, s, "a-needle", "h")
	b := acquirePart(t, s, "b-needle", "h")
	acquirePart(t, s, "c", "h")
	wantCandidates(t, s, "needle", "", a, b)
	if err := s.Release(context.Background(), "a-needle", a.ID); err != nil {
		t.Fatal(err)
	}
	found, err := s.parts.Sift(context.Background(), siftOf(s, "needle", ""), 10)
	if err != nil || !found.Listed || !found.Counted || found.Open != 1 || !slices.Equal(found.Tokens, []int64{int64(b.Token)}) {
		t.Errorf("sift(needle) after a-needle's release = %+v, %v; want b-needle, counted 1", found, err)
	}
	p, err := s.Held(context.Background(), store.HeldFilter{Contains: "needle", Order: store.OrderName, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 1 || len(p.Items) != 1 || p.Items[0].Name != "b-needle" {
		t.Errorf("Held(needle) = %+v, want b-needle alone", p)
	}
	var d lease.Lease
	for _, name := range []string{"d-needle", "e", "f", "g"} {
		if l := acquirePart(t, s, name, "h"); name == "d-needle" {
			d = l
		}
	}
	if got, ok := candidates(t, s, "needle", "", 10); ok {
		t.Errorf("candidates with 4 grants opened since, a chunk of 4 = %v; want none yet", got)
	}
	wantCandidates(t, s, "needle", "", b, d)
	// 9 events past the index's seq, more than the 8 a filter reads: it lists, it does not
	// count, then the next filter reads the rest.
	for _, l := range []lease.Lease{b, d} {
		for range 4 {
			if _, err := s.Renew(context.Background(), l.Name, l.ID, 0, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Release(context.Background(), "b-needle", b.ID); err != nil {
		t.Fatal(err)
	}
	if found, err := s.parts.Sift(context.Background(), siftOf(s, "needle", ""), 10); err != nil || !found.Listed || found.Counted {
		t.Errorf("sift(needle) with 9 events since, 8 read = %+v, %v; want a list, no count", found, err)
	}
	if found, err := s.parts.Sift(context.Background(), siftOf(s, "needle", ""), 10); err != nil || !found.Counted || found.Open != 1 {
		t.Errorf("sift(needle) when the rest is read = %+v, %v; want d-needle counted", found, err)
	}
}

// TestHeldReadsThePartsIndex checks that Held answers a filter on a part from the index of
// parts once it is built, not by a sieve of grants_open_name: without that index, which the
// sieve names, Held still answers (grants acquired since the build included), and a store that
// sieves in SQL fails.
func TestHeldReadsThePartsIndex(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []PartsMode{PartsAtOnce, PartsNever} {
		s := partsStore(t, mode, nil)
		acquirePart(t, s, "a-needle", "h")
		acquirePart(t, s, "b", "h")
		f := store.HeldFilter{Contains: "needle", Order: store.OrderName, Limit: 10}
		if _, err := s.Held(ctx, f); err != nil {
			t.Fatal(err)
		}
		if _, err := s.w.Exec(`DROP INDEX grants_open_name`); err != nil {
			t.Fatal(err)
		}
		acquirePart(t, s, "c-needle", "h")
		p, err := s.Held(ctx, f)
		if mode == PartsNever {
			if err == nil {
				t.Errorf("Held(needle) sieving in SQL without grants_open_name = %+v; want an error (the check proves nothing)", p)
			}
			continue
		}
		if err != nil || p.Total != 2 || len(p.Items) != 2 || p.Items[1].Name != "c-needle" {
			t.Errorf("Held(needle) without grants_open_name = %+v, %v; want a-needle and c-needle from the index of parts", p, err)
		}
	}
}

// TestPartsUnderConcurrentWrites runs filters on a part while writers acquire and release and
// the keeper catches up and rebuilds as often as it can (for the race detector), then checks
// that Held counts exactly the open grants whose names contain the part.
func TestPartsUnderConcurrentWrites(t *testing.T) {
	s := partsStore(t, PartsBackground, func(p *parts.Keeper) { p.Every, p.Chunk, p.Events, p.Slack = time.Millisecond, 4, 5, 0 })
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 60 {
				l, err := s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("n-%d-%d", w, i), Holder: "h", TTL: time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				if i%3 != 0 {
					if err := s.Release(ctx, l.Name, l.ID); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			if _, err := s.Held(ctx, store.HeldFilter{Contains: "-1", Order: store.OrderName, Limit: 5}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	// Held of "-1": n-0-1x and n-1-1x..., n-1-* and n-0-1, of the i divisible by 3.
	want := 0
	for w := range 2 {
		for i := 0; i < 60; i += 3 {
			if strings.Contains(fmt.Sprintf("n-%d-%d", w, i), "-1") {
				want++
			}
		}
	}
	p, err := s.Held(ctx, store.HeldFilter{Contains: "-1", Order: store.OrderName, Limit: 5})
	if err != nil || p.Total != want {
		t.Errorf("Held(-1) after the writers = total %d, %v; want %d", p.Total, err, want)
	}
}

// TestPartsPlans checks that the index of parts is built by a walk of grants_open_name from a
// key on and caught up through a range of grants_open_newest, with no sort, and its ends
// through a range of the events' seqs.
func TestPartsPlans(t *testing.T) {
	s := partsStore(t, PartsNever, nil)
	if got, want := queryPlan(t, s.r, partsAfter, "a", "b", 1, 2), "SEARCH grants USING INDEX grants_open_name ((name,holder)>(?,?))"; got != want {
		t.Errorf("plan of the build: %s, want %s", got, want)
	}
	if got, want := queryPlan(t, s.r, partsSince, 1, 2), "SEARCH grants USING INDEX grants_open_newest (token>?)"; got != want {
		t.Errorf("plan of the catch-up: %s, want %s", got, want)
	}
	if got, want := queryPlan(t, s.r, partsEnds, 1, 2), "SEARCH events USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"; got != want {
		t.Errorf("plan of the ends: %s, want %s", got, want)
	}
}

// BuildParts builds an index of parts, paced, and drops it, as the keeper's build does
// (benchmarks).
func (s *Store) BuildParts(ctx context.Context) error {
	return s.parts.Build(ctx)
}

// PartsReady reports whether the keeper has built the index of parts (benchmarks).
func (s *Store) PartsReady() bool {
	return s.parts.Built() != nil
}

// SetHeldParts sets Options.HeldParts while no Held runs (benchmarks).
func (s *Store) SetHeldParts(mode PartsMode) { s.parts.SetMode(mode) }

// TestPartsBuildPacedByWrites: the keeper's build pauses after a chunk only when the database
// took writes since the chunk before (a token issued or an event recorded), so that a start's
// build, with no client yet, reads on at once, and one beside the writer's commits gives them
// the cores.
func TestPartsBuildPacedByWrites(t *testing.T) {
	var paused []time.Duration
	var afterChunk func()
	s := partsStore(t, PartsNever, func(p *parts.Keeper) {
		p.Chunk = 4
		p.AfterChunk = func() {
			if afterChunk != nil {
				afterChunk()
			}
		}
		p.Paused = func(d time.Duration) { paused = append(paused, d) }
	})
	for i := range 20 {
		acquirePart(t, s, fmt.Sprintf("job-%02d", i), "w")
	}
	ctx := context.Background()
	if err := s.parts.Build(ctx); err != nil {
		t.Fatal(err)
	}
	if len(paused) != 0 {
		t.Errorf("a build with no write beside it paused %d times, want none", len(paused))
	}
	chunks := 0
	afterChunk = func() {
		if chunks++; chunks == 2 {
			acquirePart(t, s, "written-beside", "w")
		}
	}
	if err := s.parts.Build(ctx); err != nil {
		t.Fatal(err)
	}
	if chunks < 4 || len(paused) != 1 {
		t.Errorf("a build of %d chunks with one acquire beside it paused %d times, want once (after that chunk)", chunks, len(paused))
	}
}
