package storetest

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

func (e *env) acquireAll(holder string, names ...string) ([]lease.Lease, error) {
	return e.s.AcquireAll(e.ctx, store.AcquireAllParams{Names: names, Holder: holder, TTL: 10 * time.Second})
}

// testAcquireAllOK: every name is granted, in the order asked, each with its own lease ID and a
// token above the one before; each lease is then renewed and released on its own.
func testAcquireAllOK(t *testing.T, e *env) {
	before := e.acquire("before", "w", time.Second)
	ls, err := e.acquireAll("w", "c", "a", "b")
	if err != nil {
		t.Fatalf("AcquireAll(c, a, b) = %v, want every name", err)
	}
	var names []string
	ids := map[string]bool{}
	last := before.Token
	for _, l := range ls {
		names = append(names, l.Name)
		ids[l.ID] = true
		if l.Token <= last || l.Holder != "w" || !l.ExpiresAt.Equal(t0.Add(10*time.Second)) {
			t.Errorf("lease %+v: want token above %d, holder w, expiry t0+10s", l, last)
		}
		last = l.Token
	}
	if want := []string{"c", "a", "b"}; !slices.Equal(names, want) || len(ids) != 3 {
		t.Fatalf("AcquireAll names = %v with %d distinct lease IDs, want %v with 3", names, len(ids), want)
	}
	for _, l := range ls {
		if st, err := e.s.Get(e.ctx, l.Name); err != nil || !st.Held || st.Token != l.Token {
			t.Errorf("Get(%q) = %+v, %v; want held with token %d", l.Name, st, err, l.Token)
		}
	}
	if _, err := e.s.Renew(e.ctx, "a", ls[1].ID, 0, nil); err != nil {
		t.Errorf("Renew(a) by its own lease ID = %v", err)
	}
	_, err = e.s.Renew(e.ctx, "a", ls[0].ID, 0, nil)
	wantCode(t, "Renew(a) with c's lease ID", err, lease.CodeLost)
	if err := e.s.Release(e.ctx, "c", ls[0].ID); err != nil {
		t.Fatalf("Release(c) = %v", err)
	}
	if st, _ := e.s.Get(e.ctx, "b"); !st.Held {
		t.Errorf("b after c's release = %+v, want still held", st)
	}
}

// testAcquireAllHeld: a held name (or one in its lock delay) refuses the whole set, naming it,
// and the other names are left untouched: never granted, no event.
func testAcquireAllHeld(t *testing.T, e *env) {
	b := e.acquire("b", "other", 10*time.Second)
	_, err := e.acquireAll("w", "a", "b", "c")
	le := wantCode(t, "AcquireAll(a, b held, c)", err, lease.CodeHeld)
	if !slices.Equal(le.Held, []string{"b"}) || le.Holder != "other" || !le.AvailableAt.Equal(b.ExpiresAt) {
		t.Errorf("refusal = %+v; want Held [b], holder other, available at %v", le, b.ExpiresAt)
	}
	for _, n := range []string{"a", "c"} {
		_, err := e.s.Get(e.ctx, n)
		wantCode(t, fmt.Sprintf("Get(%q) after a refused AcquireAll", n), err, lease.CodeNotFound)
		if evs := e.events(n); len(evs) != 0 {
			t.Errorf("events of %q = %v, want none", n, types(evs))
		}
	}
	if st, _ := e.s.Get(e.ctx, "b"); !st.Held || st.Token != b.Token || len(e.events("b")) != 1 {
		t.Errorf("b = %+v with events %v, want still held by token %d, one event", st, types(e.events("b")), b.Token)
	}
	// A name in its lock delay refuses too; once every name is free, all are granted.
	if _, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "d", Holder: "other", TTL: time.Second, LockDelay: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(11 * time.Second) // b and d expired; d is in its lock delay until t0+6s... past it now
	if _, err := e.acquireAll("w", "a", "b", "c", "d"); err != nil {
		t.Fatalf("AcquireAll after b and d expired = %v, want every name", err)
	}
	if _, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "e", Holder: "other", TTL: time.Second, LockDelay: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second)
	_, err = e.acquireAll("w", "e", "f")
	if le := wantCode(t, "AcquireAll(e in its lock delay, f)", err, lease.CodeHeld); !slices.Equal(le.Held, []string{"e"}) {
		t.Errorf("Held = %v, want [e]", le.Held)
	}
	if _, err := e.s.Get(e.ctx, "f"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Errorf("Get(f) = %v, want not_found: refused with e", err)
	}
}

// testAcquireAllSemaphore: a name held as a semaphore refuses the set with limit_mismatch, and
// nothing is granted.
func testAcquireAllSemaphore(t *testing.T, e *env) {
	if _, err := e.acquireSlot("pool", "w0", 2); err != nil {
		t.Fatal(err)
	}
	_, err := e.acquireAll("w", "a", "pool")
	wantCode(t, "AcquireAll(a, pool held as a semaphore)", err, lease.CodeLimitMismatch)
	if _, err := e.s.Get(e.ctx, "a"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Errorf("Get(a) = %v, want not_found", err)
	}
}

// testAcquireAllSession: under a session every lease is the session's, and closing it releases
// them all; a closed session grants none.
func testAcquireAllSession(t *testing.T, e *env) {
	ss := e.openSession("proc", 10*time.Second)
	ls, err := e.s.AcquireAll(e.ctx, store.AcquireAllParams{Names: []string{"a", "b"}, Holder: "proc", SessionID: ss.ID})
	if err != nil || len(ls) != 2 {
		t.Fatalf("AcquireAll under a session = %v, %v", ls, err)
	}
	for _, l := range ls {
		if l.Session != ss.Ref || !l.ExpiresAt.Equal(ss.ExpiresAt) {
			t.Errorf("lease %q: session %q expires %v, want %s and %v", l.Name, l.Session, l.ExpiresAt, ss.Ref, ss.ExpiresAt)
		}
	}
	closed, err := e.s.CloseSession(e.ctx, ss.ID, "")
	if err != nil || closed.Leases != 2 {
		t.Fatalf("CloseSession() = %+v, %v; want both leases released", closed, err)
	}
	for _, n := range []string{"a", "b"} {
		if st, _ := e.s.Get(e.ctx, n); st.Held || st.End != lease.EndReleased {
			t.Errorf("%s after the close = %+v, want released", n, st)
		}
	}
	_, err = e.s.AcquireAll(e.ctx, store.AcquireAllParams{Names: []string{"c", "d"}, Holder: "proc", SessionID: ss.ID})
	wantCode(t, "AcquireAll(closed session)", err, lease.CodeSessionLost)
	if _, err := e.s.Get(e.ctx, "c"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Errorf("Get(c) = %v, want not_found", err)
	}
}

// testAcquireAllMaxHeld: a key's cap counts every grant of the set: a set that would take it
// past the cap is refused whole.
func testAcquireAllMaxHeld(t *testing.T, e *env) {
	p := store.AcquireAllParams{Names: []string{"a1"}, Holder: "w", TTL: time.Minute, Owner: "key_a", MaxHeld: 3}
	if _, err := e.s.AcquireAll(e.ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Names = []string{"a2", "a3", "a4"}
	_, err := e.s.AcquireAll(e.ctx, p)
	wantCode(t, "AcquireAll(3 more for a key capped at 3 holding 1)", err, lease.CodeTooManyLeases)
	if _, err := e.s.Get(e.ctx, "a2"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Errorf("Get(a2) = %v, want not_found", err)
	}
	p.Names = []string{"a2", "a3"}
	if _, err := e.s.AcquireAll(e.ctx, p); err != nil {
		t.Errorf("AcquireAll(2 more, up to the cap) = %v", err)
	}
}

// testAcquireAllConcurrent: many clients acquire overlapping sets and single names at once.
// CheckAllOrNothing over the events and the answers: every grant of a set is in one run of
// events with all its names, no name's grant was made without the rest of its set, and each
// name's history keeps mutual exclusion.
func testAcquireAllConcurrent(t *testing.T, e *env) {
	names := []string{"n0", "n1", "n2", "n3", "n4"}
	var mu sync.Mutex
	var sets []Granted
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				set := []string{names[(g+i)%5], names[(g+2*i+1)%5], names[(g+3)%5]}
				slices.Sort(set)
				set = slices.Compact(set)
				if g%4 == 0 {
					set = set[:1] // single names join in through the one-name path
				}
				var ls []lease.Lease
				var err error
				if len(set) == 1 && g%8 == 0 {
					var l lease.Lease
					l, err = e.s.Acquire(e.ctx, store.AcquireParams{Name: set[0], Holder: fmt.Sprintf("g%d", g), TTL: time.Second})
					ls = []lease.Lease{l}
				} else {
					ls, err = e.s.AcquireAll(e.ctx, store.AcquireAllParams{Names: set, Holder: fmt.Sprintf("g%d", g), TTL: time.Second})
				}
				if err != nil {
					if !lease.IsCode(err, lease.CodeHeld) {
						t.Errorf("AcquireAll(%v) = %v", set, err)
					}
					e.clock.Advance(100 * time.Millisecond)
					continue
				}
				mu.Lock()
				sets = append(sets, Granted{Asked: set, Leases: ls})
				mu.Unlock()
				for _, l := range ls {
					if i%4 != 0 { // the others expire
						e.s.Release(e.ctx, l.Name, l.ID)
					}
				}
			}
		}()
	}
	wg.Wait()
	page := e.expireAndReadAll(t)
	if len(sets) < 8 {
		t.Fatalf("only %d sets granted: the case shows nothing", len(sets))
	}
	t.Logf("%d sets granted, %d events", len(sets), len(page.Items))
	if err := CheckAllOrNothing(page.Items, sets); err != nil {
		t.Error(err)
	}
}

// Granted is what one acquire of several names asked for and the leases it answered.
type Granted struct {
	Asked  []string
	Leases []lease.Lease
}

// CheckAllOrNothing checks a history of acquires of several names (evs, every event, oldest
// first) against the calls that were granted: each call received a lease on every name it
// asked for, in its order; every acquired event is a grant some call received; every call's
// grants are acquired events of one run (one transaction: nothing of another between them); and
// each name's history keeps the rules of CheckHistory.
func CheckAllOrNothing(evs []lease.Event, granted []Granted) error {
	setOf := map[int64]int{} // token → the call that received it
	for i, g := range granted {
		var got []string
		for _, l := range g.Leases {
			setOf[l.Token] = i
			got = append(got, l.Name)
		}
		if !slices.Equal(got, g.Asked) {
			return fmt.Errorf("call %d asked for %v and received leases on %v", i, g.Asked, got)
		}
	}
	byName := map[string][]lease.Event{}
	seen := map[int][]int{} // call → positions of its acquired events
	for pos, ev := range evs {
		byName[ev.Name] = append(byName[ev.Name], ev)
		if ev.Type != lease.EventAcquired {
			continue
		}
		i, ok := setOf[ev.Token]
		if !ok {
			return fmt.Errorf("seq %d: %q was granted token %d, which no call received (a set granted in part?)", ev.Seq, ev.Name, ev.Token)
		}
		seen[i] = append(seen[i], pos)
	}
	for i, g := range granted {
		p := seen[i]
		if len(p) != len(g.Leases) {
			return fmt.Errorf("call %d (%d names) has %d acquired events", i, len(g.Leases), len(p))
		}
		for k := 1; k < len(p); k++ {
			for _, ev := range evs[p[k-1]+1 : p[k]] {
				if ev.Type != lease.EventExpired { // an expiry its own transaction recorded
					return fmt.Errorf("call %d: %s of %q token %d between its grants", i, ev.Type, ev.Name, ev.Token)
				}
			}
		}
	}
	byParent := map[string][]lease.Event{} // a name's events with its shared slots'
	for n, h := range byName {
		if err := CheckHistory(h); err != nil {
			return fmt.Errorf("history of %q: %w", n, err)
		}
		parent, _, _ := lease.SlotOf(n)
		byParent[parent] = append(byParent[parent], h...)
	}
	for n, h := range byParent {
		slices.SortFunc(h, func(a, b lease.Event) int { return cmp.Compare(a.Seq, b.Seq) })
		if err := CheckModes(h); err != nil {
			return fmt.Errorf("history of %q with its readers: %w", n, err)
		}
	}
	return nil
}

func (e *env) acquireAllMode(mode lease.Mode, holder string, names ...string) ([]lease.Lease, error) {
	return e.s.AcquireAll(e.ctx, store.AcquireAllParams{Names: names, Holder: holder, TTL: 10 * time.Second, Mode: mode})
}

// testAcquireAllShared: a shared set grants every name as a shared lease (its slot's), beside
// other readers of the names, single or in sets; a name held exclusive refuses the set, naming
// it, and grants no other name; an exclusive set is refused while a name is read, and granted
// once its readers let go (RW1 for every name of a set).
func testAcquireAllShared(t *testing.T, e *env) {
	single, err := e.acquireMode("b", "r0", lease.ModeShared)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := e.acquireAllMode(lease.ModeShared, "r1", "a", "b")
	if err != nil {
		t.Fatalf("AcquireAll(a, b) shared beside a reader of b = %v", err)
	}
	r2, err := e.acquireAllMode(lease.ModeShared, "r2", "b", "a")
	if err != nil {
		t.Fatalf("AcquireAll(b, a) shared beside readers = %v", err)
	}
	tokens := map[int64]bool{single.Token: true}
	for _, ls := range [][]lease.Lease{r1, r2} {
		for _, l := range ls {
			if l.Mode != lease.ModeShared || tokens[l.Token] {
				t.Errorf("lease %+v: want a shared grant, with a token of its own", l)
			}
			tokens[l.Token] = true
		}
	}
	if r1[0].Name != "a" || r1[1].Name != "b" || r2[0].Name != "b" || r2[1].Name != "a" {
		t.Errorf("names = %s %s, %s %s; want in the order asked", r1[0].Name, r1[1].Name, r2[0].Name, r2[1].Name)
	}
	if st, err := e.s.Get(e.ctx, "b"); err != nil || !st.Held || st.Mode != lease.ModeShared || len(st.Holders) != 3 {
		t.Errorf("Get(b) = %+v, %v; want held shared by 3", st, err)
	}
	_, err = e.acquireMode("a", "w", lease.ModeExclusive)
	wantCode(t, "Acquire(a) exclusive while read by a set", err, lease.CodeHeld)
	_, err = e.acquireAllMode(lease.ModeExclusive, "w", "c", "a")
	if le := wantCode(t, "AcquireAll(c, a) exclusive while a is read", err, lease.CodeHeld); !slices.Equal(le.Held, []string{"a"}) {
		t.Errorf("Held = %v, want [a]", le.Held)
	}

	x := e.acquire("x", "w", 10*time.Second)
	_, err = e.acquireAllMode(lease.ModeShared, "r3", "d", "x", "a")
	if le := wantCode(t, "AcquireAll(d, x, a) shared with x held exclusive", err, lease.CodeHeld); !slices.Equal(le.Held, []string{"x"}) || le.Holder != "w" {
		t.Errorf("refusal = %+v, want Held [x], holder w", le)
	}
	for _, n := range []string{"c", "d"} {
		if _, err := e.s.Get(e.ctx, n); !lease.IsCode(err, lease.CodeNotFound) {
			t.Errorf("Get(%s) = %v, want not_found: a refused set grants nothing", n, err)
		}
	}
	if st, _ := e.s.Get(e.ctx, "a"); len(st.Holders) != 2 {
		t.Errorf("a after refused sets = %+v, want its 2 readers only", st)
	}

	for _, l := range append(append(r1, r2...), single) {
		if err := e.s.Release(e.ctx, l.Name, l.ID); err != nil {
			t.Fatalf("Release(%s token %d) = %v", l.Name, l.Token, err)
		}
	}
	if err := e.s.Release(e.ctx, "x", x.ID); err != nil {
		t.Fatal(err)
	}
	w, err := e.acquireAllMode(lease.ModeExclusive, "w", "a", "b", "x")
	if err != nil {
		t.Fatalf("AcquireAll(a, b, x) exclusive once every reader left = %v", err)
	}
	if w[0].Mode == lease.ModeShared {
		t.Errorf("lease %+v: want the exclusive grant of a", w[0])
	}
	_, err = e.acquireAllMode(lease.ModeShared, "r4", "b")
	wantCode(t, "AcquireAll(b) shared while b is written", err, lease.CodeHeld)
	for _, n := range []string{"a", "b"} {
		if err := CheckModes(e.eventsOf(n)); err != nil {
			t.Errorf("history of %s: %v", n, err)
		}
	}
}

// testAcquireAllSharedRefused: a refused shared set writes nothing of the names it would have
// read: a name never used stays unknown, and a plain name does not become a shared one.
func testAcquireAllSharedRefused(t *testing.T, e *env) {
	e.acquire("held", "w", 10*time.Second)
	e.acquire("plain", "p", time.Second)
	e.clock.Advance(2 * time.Second) // plain is free again
	_, err := e.acquireAllMode(lease.ModeShared, "r", "fresh", "plain", "held")
	wantCode(t, "AcquireAll(fresh, plain, held) shared with held held", err, lease.CodeHeld)
	got, err := e.s.SharedNames(e.ctx, []string{"fresh", "plain", "held"})
	if err != nil || len(got) != 0 {
		t.Errorf("SharedNames after a refused shared set = %v, %v; want none", got, err)
	}
	if _, err := e.s.Get(e.ctx, "fresh"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Errorf("Get(fresh) = %v, want not_found", err)
	}
	if st, err := e.s.Get(e.ctx, "plain"); err != nil || st.Mode == lease.ModeShared {
		t.Errorf("Get(plain) = %+v, %v; want a plain name", st, err)
	}
}

// testAcquireAllSharedSession: a shared set under a session: every read lease is the
// session's, and closing it releases them all.
func testAcquireAllSharedSession(t *testing.T, e *env) {
	ss := e.openSession("proc", 10*time.Second)
	ls, err := e.s.AcquireAll(e.ctx, store.AcquireAllParams{Names: []string{"a", "b"}, Holder: "proc", SessionID: ss.ID, Mode: lease.ModeShared})
	if err != nil || len(ls) != 2 {
		t.Fatalf("AcquireAll shared under a session = %v, %v", ls, err)
	}
	for _, l := range ls {
		if l.Session != ss.Ref || l.Mode != lease.ModeShared || !l.ExpiresAt.Equal(ss.ExpiresAt) {
			t.Errorf("lease %+v: want shared, session %s, expiry %v", l, ss.Ref, ss.ExpiresAt)
		}
	}
	if closed, err := e.s.CloseSession(e.ctx, ss.ID, ""); err != nil || closed.Leases != 2 {
		t.Fatalf("CloseSession() = %+v, %v; want both leases released", closed, err)
	}
	for _, n := range []string{"a", "b"} {
		if st, _ := e.s.Get(e.ctx, n); st.Held {
			t.Errorf("%s after the close = %+v, want free", n, st)
		}
	}
	if _, err := e.acquireAllMode(lease.ModeExclusive, "w", "a", "b"); err != nil {
		t.Errorf("AcquireAll(a, b) exclusive after the session closed = %v", err)
	}
}

// testAcquireAllIdempotency: a retry with the same Idempotency-Key and request answers the same
// leases (tokens, lease IDs), making no grant and no event; the same key with another request
// (other names, order, holder, mode) is invalid_request and grants nothing; once one of the
// grants has ended the retry is lease_lost. The key works the same for a shared set.
func testAcquireAllIdempotency(t *testing.T, e *env) {
	p := store.AcquireAllParams{Names: []string{"b", "a"}, Holder: "w", TTL: 10 * time.Second, IdempotencyKey: "k-all-1"}
	first, err := e.s.AcquireAll(e.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	again, err := e.s.AcquireAll(e.ctx, p)
	if err != nil {
		t.Fatalf("AcquireAll(retry) = %v, want the first grants", err)
	}
	if len(again) != 2 {
		t.Fatalf("retry = %+v, want two leases", again)
	}
	for i := range first {
		if again[i].Name != first[i].Name || again[i].Token != first[i].Token || again[i].ID != first[i].ID {
			t.Errorf("retry lease %d = %s token %d, want %s token %d with the same lease ID", i, again[i].Name, again[i].Token, first[i].Name, first[i].Token)
		}
	}
	if evs := e.events("a"); len(evs) != 1 {
		t.Errorf("events of a = %v, want the one grant", types(evs))
	}
	for _, c := range []struct {
		what   string
		change func(p *store.AcquireAllParams)
	}{
		{"other holder", func(p *store.AcquireAllParams) { p.Holder = "w2" }},
		{"other order", func(p *store.AcquireAllParams) { p.Names = []string{"a", "b"} }},
		{"other names", func(p *store.AcquireAllParams) { p.Names = []string{"c", "d"} }},
		{"more names", func(p *store.AcquireAllParams) { p.Names = []string{"b", "a", "c"} }},
		{"other mode", func(p *store.AcquireAllParams) { p.Mode = lease.ModeShared }},
	} {
		q := p
		c.change(&q)
		_, err := e.s.AcquireAll(e.ctx, q)
		wantCode(t, "AcquireAll(key reused: "+c.what+")", err, lease.CodeInvalid)
	}
	if _, err := e.s.Get(e.ctx, "c"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Errorf("Get(c) = %v, want not_found: a refused reuse of the key grants nothing", err)
	}
	// The ID of the retry is the grant's own: it releases it.
	if err := e.s.Release(e.ctx, "a", again[1].ID); err != nil {
		t.Fatalf("Release(a) by the retry's lease ID = %v", err)
	}
	_, err = e.s.AcquireAll(e.ctx, p)
	wantCode(t, "AcquireAll(retry after a's release)", err, lease.CodeLost)
	if st, _ := e.s.Get(e.ctx, "a"); st.Held {
		t.Errorf("a after the refused retry = %+v, want free: a retry makes no grant", st)
	}

	r := store.AcquireAllParams{Names: []string{"r1", "r2"}, Holder: "r", TTL: 10 * time.Second, IdempotencyKey: "k-all-2", Mode: lease.ModeShared}
	first, err = e.s.AcquireAll(e.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	again, err = e.s.AcquireAll(e.ctx, r)
	if err != nil || len(again) != 2 || again[0].Token != first[0].Token || again[1].ID != first[1].ID || again[1].Mode != lease.ModeShared {
		t.Errorf("shared retry = %+v, %v; want the first shared grants", again, err)
	}
	if st, _ := e.s.Get(e.ctx, "r1"); len(st.Holders) != 1 {
		t.Errorf("r1 after the shared retry = %+v, want one reader", st)
	}
}

// testAcquireAllConcurrentModes: many clients read and write overlapping sets (and single
// names) at once. CheckAllOrNothing over the events and the answers: no set granted in part,
// each name's history keeps mutual exclusion, and an exclusive grant never opens beside
// another grant of its name, shared or not (RW1); every call ends (no deadlock), and both
// modes are granted.
func testAcquireAllConcurrentModes(t *testing.T, e *env) {
	names := []string{"m0", "m1", "m2", "m3"}
	var mu sync.Mutex
	var sets []Granted
	granted := map[lease.Mode]int{}
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 27))
			// At least 10 rounds each, and on until the grants the checks below ask for were
			// made (on a loaded machine every writer's try can meet readers), up to a bound.
			enough := func() bool {
				mu.Lock()
				defer mu.Unlock()
				return granted[lease.ModeShared] >= 4 && granted[lease.ModeExclusive] >= 1
			}
			for r := 0; r < 10 || !enough() && r < 500; r++ {
				set := []string{names[rng.IntN(4)], names[rng.IntN(4)], names[rng.IntN(4)]}
				set = slices.Compact(slices.Sorted(slices.Values(set)))
				rng.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
				mode := lease.ModeShared
				if rng.IntN(2) == 0 {
					mode = lease.ModeExclusive
				}
				holder := fmt.Sprintf("g%d", g)
				var ls []lease.Lease
				var err error
				if g%5 == 0 {
					var l lease.Lease
					set = set[:1]
					l, err = e.s.Acquire(e.ctx, store.AcquireParams{Name: set[0], Holder: holder, TTL: time.Second, Mode: mode})
					ls = []lease.Lease{l}
				} else {
					ls, err = e.s.AcquireAll(e.ctx, store.AcquireAllParams{Names: set, Holder: holder, TTL: time.Second, Mode: mode})
				}
				if err != nil {
					if !lease.IsCode(err, lease.CodeHeld) {
						t.Errorf("AcquireAll(%v, %s) = %v", set, mode, err)
					}
					e.clock.Advance(100 * time.Millisecond)
					continue
				}
				mu.Lock()
				sets = append(sets, Granted{Asked: set, Leases: ls})
				granted[mode]++
				mu.Unlock()
				if rng.IntN(8) != 0 { // the others expire
					for _, l := range ls {
						e.s.Release(e.ctx, l.Name, l.ID)
					}
				}
			}
		})
	}
	wg.Wait()
	page := e.expireAndReadAll(t)
	t.Logf("%d calls granted (%v), %d events", len(sets), granted, len(page.Items))
	if granted[lease.ModeShared] < 4 || granted[lease.ModeExclusive] < 1 {
		t.Fatalf("granted %v: the case shows nothing", granted)
	}
	if err := CheckAllOrNothing(page.Items, sets); err != nil {
		t.Error(err)
	}
}

// expireAndReadAll lets every grant expire, sweeps, and returns the whole history, which must fit
// on one page.
func (e *env) expireAndReadAll(t *testing.T) store.Page[lease.Event] {
	t.Helper()
	e.clock.Advance(time.Hour)
	if _, _, err := e.s.ExpireDue(e.ctx); err != nil {
		t.Fatal(err)
	}
	page, err := e.s.Events(e.ctx, store.EventFilter{Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if page.Next != "" {
		t.Fatal("more events than one page: make the case smaller")
	}
	return page
}
