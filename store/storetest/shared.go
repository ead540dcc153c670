package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// The cases of shared (read) leases: shared grants coexist, an exclusive grant excludes every
// other unexpired grant of the name (invariant RW1), and a shared grant's token never writes
// (RW2). Run adds them.
var sharedCases = []struct {
	name string
	fn   func(t *testing.T, e *env)
}{
	{"Shared/Coexist", testSharedCoexist},
	{"Shared/Names", testSharedNames},
	{"Shared/LockDelay", testSharedLockDelay},
	{"Shared/Revoke", testSharedRevoke},
	{"Shared/ErrSharedToken", testSharedToken},
	{"Shared/IdempotencyAndSessions", testSharedIdempotency},
	{"Shared/HandoverAsksEveryHolder", testSharedHandover},
	{"Shared/RestartKeepsExclusion", testSharedRestart},
	{"Shared/ConcurrentNeverBesideExclusive", testSharedConcurrent},
	{"Shared/TokenModes", testSharedTokenModes},
	{"Shared/EventsOfName", testSharedEventsOfName},
}

func (e *env) acquireMode(name, holder string, mode lease.Mode) (lease.Lease, error) {
	return e.s.Acquire(e.ctx, store.AcquireParams{Name: name, Holder: holder, TTL: 10 * time.Second, Mode: mode})
}

// testSharedCoexist: shared grants of a name coexist, each with its own lease ID, token and
// slot; an exclusive acquire is refused while any of them is held, and a shared one while an
// exclusive grant is; renew and release act on one grant by its own lease ID; the name's
// state lists the holders.
func testSharedCoexist(t *testing.T, e *env) {
	var rs []lease.Lease
	for i := range 3 {
		l, err := e.acquireMode("cfg", fmt.Sprintf("r%d", i), lease.ModeShared)
		if err != nil || l.Name != "cfg" || l.Mode != lease.ModeShared || l.Slot != i || i > 0 && (l.Token <= rs[i-1].Token || l.ID == rs[i-1].ID) {
			t.Fatalf("Acquire(shared) #%d = %+v, %v; want shared slot %d with its own ID and a higher token", i, l, err, i)
		}
		rs = append(rs, l)
	}
	_, err := e.acquireMode("cfg", "w", lease.ModeExclusive)
	if le := wantCode(t, "Acquire(exclusive) beside 3 shared", err, lease.CodeHeld); le.Holder != "r0" || !le.AvailableAt.Equal(rs[2].ExpiresAt) {
		t.Errorf("held error = holder %q available %v, want r0 and the last expiry %v", le.Holder, le.AvailableAt, rs[2].ExpiresAt)
	}
	st, err := e.s.Get(e.ctx, "cfg")
	if err != nil || st.Mode != lease.ModeShared || !st.Held || len(st.Holders) != 3 || st.Token != rs[2].Token || st.Holders[1].Holder != "r1" {
		t.Fatalf("Get(cfg) = %+v, %v; want shared, held by r0 r1 r2", st, err)
	}
	page, err := e.s.List(e.ctx, store.LeaseFilter{Prefix: "cfg", State: "held"})
	if err != nil || len(page.Items) != 3 || page.Items[0].Name != lease.SlotName("cfg", 0) || page.Items[0].Mode != lease.ModeShared {
		t.Errorf("List(cfg, held) = %+v, %v; want the 3 shared slots, saying so", page.Items, err)
	}
	e.clock.Advance(time.Second)
	if r, err := e.s.Renew(e.ctx, "cfg", rs[1].ID, 0, nil); err != nil || r.Token != rs[1].Token || r.Mode != lease.ModeShared {
		t.Errorf("Renew(r1) = %+v, %v; want r1's grant renewed, shared", r, err)
	}
	for _, l := range rs[:2] {
		if err := e.s.Release(e.ctx, "cfg", l.ID); err != nil {
			t.Fatalf("Release(%s) = %v", l.Holder, err)
		}
	}
	_, err = e.acquireMode("cfg", "w", lease.ModeExclusive)
	wantCode(t, "Acquire(exclusive) beside 1 shared", err, lease.CodeHeld)
	if err := e.s.Release(e.ctx, "cfg", rs[2].ID); err != nil {
		t.Fatal(err)
	}
	w, err := e.acquireMode("cfg", "w", lease.ModeExclusive)
	if err != nil || w.Mode == lease.ModeShared || w.Token <= rs[2].Token {
		t.Fatalf("Acquire(exclusive) once every shared grant is released = %+v, %v", w, err)
	}
	_, err = e.acquireMode("cfg", "r3", lease.ModeShared)
	if le := wantCode(t, "Acquire(shared) beside an exclusive grant", err, lease.CodeHeld); le.Holder != "w" {
		t.Errorf("held error names %q, want w", le.Holder)
	}
	if st, err := e.s.Get(e.ctx, "cfg"); err != nil || st.Mode == lease.ModeShared || st.Holder != "w" || !st.Held {
		t.Errorf("Get(cfg) while w holds it = %+v, %v; want exclusive, held by w", st, err)
	}
	_, err = e.s.Acquire(e.ctx, store.AcquireParams{Name: "cfg", Holder: "s", TTL: time.Second, Limit: 2})
	wantCode(t, "Acquire(limit 2) of an exclusive name", err, lease.CodeLimitMismatch)
	if err := e.s.Release(e.ctx, "cfg", w.ID); err != nil {
		t.Fatal(err)
	}
	r4, err := e.acquireMode("cfg", "r4", lease.ModeShared)
	if err != nil || r4.Slot != 0 {
		t.Fatalf("Acquire(shared) after the writer = %+v, %v; want slot 0 again", r4, err)
	}
	_, err = e.s.Acquire(e.ctx, store.AcquireParams{Name: "cfg", Holder: "s", TTL: time.Second, Limit: 2})
	wantCode(t, "Acquire(limit 2) of a shared name", err, lease.CodeLimitMismatch)
	var modes []lease.Mode
	for _, ev := range e.eventsOf("cfg") {
		if ev.Type == lease.EventAcquired {
			modes = append(modes, ev.Mode)
		}
	}
	if want := []lease.Mode{lease.ModeShared, lease.ModeShared, lease.ModeShared, "", lease.ModeShared}; !slices.Equal(modes, want) {
		t.Errorf("modes of the acquired events = %q, want %q", modes, want)
	}
}

// readers acquires n shared leases of name, held by r0, r1, ….
func (e *env) readers(name string, n int) []lease.Lease {
	e.t.Helper()
	var rs []lease.Lease
	for i := range n {
		l, err := e.acquireMode(name, fmt.Sprintf("r%d", i), lease.ModeShared)
		if err != nil {
			e.t.Fatalf("Acquire(%q, shared) #%d = %v", name, i, err)
		}
		rs = append(rs, l)
	}
	return rs
}

// eventsOf returns the events of name and its slots, in seq order.
func (e *env) eventsOf(name string) []lease.Event {
	e.t.Helper()
	var out []lease.Event
	f := store.EventFilter{Prefix: name, Limit: store.MaxLimit}
	for {
		p, err := e.s.Events(e.ctx, f)
		if err != nil {
			e.t.Fatalf("Events(prefix %q) = %v", name, err)
		}
		for _, ev := range p.Items {
			if parent, _, _ := lease.SlotOf(ev.Name); parent == name {
				out = append(out, ev)
			}
		}
		if p.Next == "" {
			return out
		}
		f.Cursor = p.Next
	}
}

// testSharedLockDelay: a shared grant that expires keeps exclusive acquires out for its lock
// delay; another shared acquire is not held up by it.
func testSharedLockDelay(t *testing.T, e *env) {
	r, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "cfg", Holder: "r0", TTL: 2 * time.Second, LockDelay: 5 * time.Second, Mode: lease.ModeShared})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(3 * time.Second) // expired at t0+2s, delayed to t0+7s
	_, err = e.acquireMode("cfg", "w", lease.ModeExclusive)
	if le := wantCode(t, "Acquire(exclusive) in a shared grant's lock delay", err, lease.CodeHeld); !le.AvailableAt.Equal(r.ExpiresAt.Add(5 * time.Second)) {
		t.Errorf("available at %v, want %v", le.AvailableAt, r.ExpiresAt.Add(5*time.Second))
	}
	r1, err := e.acquireMode("cfg", "r1", lease.ModeShared)
	if err != nil || r1.Slot != 1 {
		t.Fatalf("Acquire(shared) in another shared grant's lock delay = %+v, %v; want slot 1", r1, err)
	}
	if err := e.s.Release(e.ctx, "cfg", r1.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(4 * time.Second)
	if _, err := e.acquireMode("cfg", "w", lease.ModeExclusive); err != nil {
		t.Errorf("Acquire(exclusive) after the lock delay = %v", err)
	}
}

// testSharedRevoke: an admin revokes one shared grant by its token, or all of them.
func testSharedRevoke(t *testing.T, e *env) {
	rs := e.readers("cfg", 3)
	if err := e.s.Revoke(e.ctx, "cfg", rs[1].Token, "admin"); err != nil {
		t.Fatalf("Revoke(cfg, r1's token) = %v", err)
	}
	_, err := e.s.Renew(e.ctx, "cfg", rs[1].ID, 0, nil)
	wantCode(t, "Renew(revoked r1)", err, lease.CodeLost)
	for _, i := range []int{0, 2} {
		if _, err := e.s.Renew(e.ctx, "cfg", rs[i].ID, 0, nil); err != nil {
			t.Errorf("Renew(r%d) after r1 was revoked = %v", i, err)
		}
	}
	if err := e.s.Revoke(e.ctx, "cfg", 0, "admin"); err != nil {
		t.Fatalf("Revoke(cfg) = %v", err)
	}
	for _, l := range rs {
		_, err := e.s.Renew(e.ctx, "cfg", l.ID, 0, nil)
		wantCode(t, "Renew("+l.Holder+") after revoking every shared grant", err, lease.CodeLost)
	}
	if st, err := e.s.Get(e.ctx, "cfg"); err != nil || st.Held || st.Mode != lease.ModeShared || st.End != lease.EndRevoked {
		t.Errorf("Get(cfg) after the revoke = %+v, %v; want shared, free, revoked", st, err)
	}
	if _, err := e.acquireMode("cfg", "w", lease.ModeExclusive); err != nil {
		t.Errorf("Acquire(exclusive) after the revoke = %v", err)
	}
}

// testSharedToken: a fenced write that presents a shared grant's token is refused with
// shared_token, with or without Lease-Name and whatever the fence, recorded as a rejection,
// and changes nothing (readers do not write); the writer's token writes.
func testSharedToken(t *testing.T, e *env) {
	r, err := e.acquireMode("cfg", "r0", lease.ModeShared)
	if err != nil {
		t.Fatal(err)
	}
	for _, leaseName := range []string{"", "cfg"} {
		_, err := e.put("db", r.Token, leaseName, "from a reader")
		if le := wantCode(t, fmt.Sprintf("PutResource(shared token, lease %q)", leaseName), err, lease.CodeSharedToken); le.PresentedToken != r.Token {
			t.Errorf("presented token = %d, want %d", le.PresentedToken, r.Token)
		}
	}
	if _, err := e.s.GetResource(e.ctx, "db"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Errorf("GetResource(db) after refused writes = %v, want not_found", err)
	}
	rj, err := e.s.Rejections(e.ctx, store.RejectionFilter{Resource: "db"})
	// Newest first: the write with Lease-Name cfg, then the one put down to r0's slot.
	if err != nil || len(rj.Items) != 2 || rj.Items[0].PresentedToken != r.Token || rj.Items[0].Lease != "cfg" ||
		rj.Items[1].Lease != lease.SlotName("cfg", 0) || rj.Items[1].Holder != "r0" {
		t.Fatalf("Rejections(db) = %+v, %v; want the 2 refused writes of r0", rj.Items, err)
	}
	if err := e.s.Release(e.ctx, "cfg", r.ID); err != nil {
		t.Fatal(err)
	}
	// Ended, it is still a reader's token; the writer's writes.
	_, err = e.put("db", r.Token, "", "late reader")
	wantCode(t, "PutResource(released shared token)", err, lease.CodeSharedToken)
	w, err := e.acquireMode("cfg", "w", lease.ModeExclusive)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.put("db", w.Token, "cfg", "from the writer"); err != nil {
		t.Errorf("PutResource(exclusive token) = %v", err)
	}
}

// testSharedIdempotency: an idempotent shared acquire answers its retry with the same grant,
// and a key reused for another mode is refused; a shared grant under a session ends with it.
func testSharedIdempotency(t *testing.T, e *env) {
	p := store.AcquireParams{Name: "cfg", Holder: "r0", TTL: 10 * time.Second, IdempotencyKey: "k-1", Mode: lease.ModeShared}
	a, err := e.s.Acquire(e.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.s.Acquire(e.ctx, p)
	if err != nil || b.ID != a.ID || b.Token != a.Token || b.Mode != lease.ModeShared {
		t.Fatalf("retry = %+v, %v; want the first shared grant %d", b, err, a.Token)
	}
	q := p
	q.Mode = lease.ModeExclusive
	_, err = e.s.Acquire(e.ctx, q)
	wantCode(t, "Acquire(key reused for an exclusive acquire)", err, lease.CodeInvalid)

	ss := e.openSession("proc", 10*time.Second)
	l, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "cfg", Holder: "proc", SessionID: ss.ID, Mode: lease.ModeShared})
	if err != nil || l.Mode != lease.ModeShared || l.Session != ss.Ref {
		t.Fatalf("Acquire(shared, under a session) = %+v, %v", l, err)
	}
	if c, err := e.s.CloseSession(e.ctx, ss.ID, ""); err != nil || c.Leases != 1 {
		t.Fatalf("CloseSession = %+v, %v; want its shared grant released", c, err)
	}
	if st, _ := e.s.Get(e.ctx, "cfg"); len(st.Holders) != 1 || st.Holders[0].Token != a.Token {
		t.Errorf("holders after the session closed = %+v, want r0 alone", st.Holders)
	}
}

// testSharedRestart: shared grants survive a restart (stretched like any lease, invariant 5)
// and still keep an exclusive acquire out.
func testSharedRestart(t *testing.T, e *env) {
	r, err := e.acquireMode("cfg", "r0", lease.ModeShared)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(5 * time.Second)
	e.restart()
	_, err = e.acquireMode("cfg", "w", lease.ModeExclusive)
	wantCode(t, "Acquire(exclusive) after a restart beside a shared grant", err, lease.CodeHeld)
	if r1, err := e.acquireMode("cfg", "r1", lease.ModeShared); err != nil || r1.Slot != 1 {
		t.Errorf("Acquire(shared) after a restart = %+v, %v; want slot 1", r1, err)
	}
	if err := e.s.Release(e.ctx, "cfg", r.ID); err != nil {
		t.Errorf("Release(r0) after a restart = %v", err)
	}
}

// testSharedConcurrent: goroutines acquire one name in both modes at once and release it,
// over and over; the name's history, in commit (seq) order, never shows an exclusive grant
// beside any other open grant, nor a shared one beside an exclusive (RW1).
func testSharedConcurrent(t *testing.T, e *env) {
	const workers, rounds = 8, 15
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := map[lease.Mode]int{}
	// At least rounds each, and on until both modes were granted (a loaded machine's
	// scheduling can keep a writer out of every one of its first tries), up to a bound.
	both := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return granted[lease.ModeShared] > 0 && granted[lease.ModeExclusive] > 0
	}
	for i := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for r := 0; r < rounds || !both() && r < 50*rounds; r++ {
				mode := lease.ModeShared
				if rng.IntN(3) == 0 {
					mode = lease.ModeExclusive
				}
				l, err := e.acquireMode("rw", fmt.Sprintf("c%d", i), mode)
				if lease.IsCode(err, lease.CodeHeld) {
					continue
				}
				if err != nil {
					t.Errorf("Acquire(%s) = %v", mode, err)
					return
				}
				mu.Lock()
				granted[mode]++
				mu.Unlock()
				if err := e.s.Release(e.ctx, "rw", l.ID); err != nil {
					t.Errorf("Release(%d) = %v", l.Token, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := CheckModes(e.eventsOf("rw")); err != nil {
		t.Error(err)
	}
	if granted[lease.ModeShared] == 0 || granted[lease.ModeExclusive] == 0 {
		t.Errorf("granted %v: want grants in both modes", granted)
	}
}

// CheckModes checks a name's history (the events of the name and its slots, in seq order)
// for invariant RW1: an exclusive grant opens only while no other grant is open, and a shared
// one only while no exclusive grant is.
func CheckModes(evs []lease.Event) error {
	open := map[int64]bool{} // token → shared
	shared := func() (n int, excl int) {
		for _, s := range open {
			if s {
				n++
			} else {
				excl++
			}
		}
		return n, excl
	}
	for _, ev := range evs {
		switch ev.Type {
		case lease.EventAcquired:
			n, excl := shared()
			isShared := ev.Mode == lease.ModeShared
			if excl > 0 || !isShared && n > 0 {
				return fmt.Errorf("seq %d: %s grant %d of %q opened beside %d shared and %d exclusive open grants", ev.Seq, modeName(isShared), ev.Token, ev.Name, n, excl)
			}
			open[ev.Token] = isShared
		case lease.EventReleased, lease.EventExpired, lease.EventRevoked:
			delete(open, ev.Token)
		}
	}
	return nil
}

func modeName(shared bool) lease.Mode {
	if shared {
		return lease.ModeShared
	}
	return lease.ModeExclusive
}

// testSharedHandover: a handover request of a shared name asks every shared holder: each one's
// renewal carries it; a name nobody holds is not_held.
func testSharedHandover(t *testing.T, e *env) {
	rs := e.readers("cfg", 2)
	h, err := e.s.RequestHandover(e.ctx, "cfg", lease.Handover{To: "w", Reason: "migrate", By: "admin"})
	if err != nil || h.Token != rs[0].Token {
		t.Fatalf("RequestHandover(cfg) = %+v, %v; want r0's request first", h, err)
	}
	for _, l := range rs {
		r, err := e.s.Renew(e.ctx, "cfg", l.ID, 0, nil)
		if err != nil || r.Handover == nil || r.Handover.To != "w" || r.Handover.Token != l.Token {
			t.Errorf("Renew(%s) = %+v, %v; want the handover to w asked of its own grant", l.Holder, r.Handover, err)
		}
	}
	for _, l := range rs {
		if err := e.s.Release(e.ctx, "cfg", l.ID); err != nil {
			t.Fatal(err)
		}
	}
	_, err = e.s.RequestHandover(e.ctx, "cfg", lease.Handover{To: "w"})
	wantCode(t, "RequestHandover(cfg free)", err, lease.CodeNotHeld)
}

// testSharedNames: the names that take shared leases are those ever held shared (still after
// their readers left), not plain leases nor semaphores; a lookup is bounded.
func testSharedNames(t *testing.T, e *env) {
	r, err := e.acquireMode("cfg", "r", lease.ModeShared)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.Release(e.ctx, "cfg", r.ID); err != nil {
		t.Fatal(err)
	}
	e.acquire("plain", "p", time.Minute)
	if _, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "sem", Holder: "s", TTL: time.Minute, Limit: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.SharedNames(e.ctx, []string{"cfg", "plain", "sem", "never"})
	if err != nil || len(got) != 1 || !got["cfg"] {
		t.Errorf("SharedNames = %v, %v; want cfg alone", got, err)
	}
	_, err = e.s.SharedNames(e.ctx, make([]string, store.MaxLimit+1))
	wantCode(t, "SharedNames of too many", err, lease.CodeInvalid)
}

// testSharedTokenModes: a token's grant tells a reader's token from a writer's (and from a
// semaphore slot's, which writes), for a grant held or ended, so that the fence helpers refuse a
// reader's token as PutResource does.
func testSharedTokenModes(t *testing.T, e *env) {
	r := e.readers("cfg", 2)
	if err := e.s.Release(e.ctx, "cfg", r[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Release(e.ctx, "cfg", r[1].ID); err != nil {
		t.Fatal(err)
	}
	w, err := e.acquireMode("cfg", "w", lease.ModeExclusive)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.acquireSlot("pool", "p", 2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.s.TokenGrants(e.ctx, []int64{r[0].Token, r[1].Token, w.Token, s.Token, w.Token + 1000})
	if err != nil {
		t.Fatalf("TokenGrants() = %v", err)
	}
	want := map[int64]store.TokenGrant{
		r[0].Token: {Name: lease.SlotName("cfg", 0), Holder: "r0", Shared: true, AcquiredAt: r[0].AcquiredAt},
		r[1].Token: {Name: lease.SlotName("cfg", 1), Holder: "r1", Shared: true, AcquiredAt: r[1].AcquiredAt},
		w.Token:    {Name: "cfg", Holder: "w", AcquiredAt: w.AcquiredAt},
		s.Token:    {Name: lease.SlotName("pool", 0), Holder: "p", AcquiredAt: s.AcquiredAt},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TokenGrants() differs (-want +got):\n%s", diff)
	}
}

// testSharedEventsOfName: the events of a name with slots (taken shared, or a semaphore) are its
// own and its slots', in one seq order, each under its own name and readers' marked shared, page
// by page either way; names that only start alike are not among them, and without Slots the
// name's own events alone.
func testSharedEventsOfName(t *testing.T, e *env) {
	r := e.readers("cfg", 2)
	for _, l := range r {
		if err := e.s.Release(e.ctx, "cfg", l.ID); err != nil {
			t.Fatal(err)
		}
	}
	w, err := e.acquireMode("cfg", "w", lease.ModeExclusive)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.Release(e.ctx, "cfg", w.ID); err != nil {
		t.Fatal(err)
	}
	r2 := e.readers("cfg", 1)
	e.acquire("cfg2", "other", time.Minute)
	e.acquire("cf", "other", time.Minute)
	if _, err := e.acquireMode("cfg-x", "other", lease.ModeShared); err != nil {
		t.Fatal(err)
	}
	type ev struct {
		Type  lease.EventType
		Name  string
		Token int64
		Mode  lease.Mode
	}
	shared := lease.ModeShared
	want := []ev{
		{lease.EventAcquired, "cfg#0", r[0].Token, shared}, {lease.EventAcquired, "cfg#1", r[1].Token, shared},
		{lease.EventReleased, "cfg#0", r[0].Token, shared}, {lease.EventReleased, "cfg#1", r[1].Token, shared},
		{lease.EventAcquired, "cfg", w.Token, ""}, {lease.EventReleased, "cfg", w.Token, ""},
		{lease.EventAcquired, "cfg#0", r2[0].Token, shared},
	}
	read := func(f store.EventFilter) []ev {
		t.Helper()
		var out []ev
		for {
			p, err := e.s.Events(e.ctx, f)
			if err != nil {
				t.Fatalf("Events(%+v) = %v", f, err)
			}
			for _, x := range p.Items {
				mode := x.Mode
				if mode == lease.ModeExclusive {
					mode = ""
				}
				out = append(out, ev{x.Type, x.Name, x.Token, mode})
			}
			if p.Next == "" {
				return out
			}
			f.Cursor = p.Next
		}
	}
	for _, limit := range []int{0, 2} {
		if diff := cmp.Diff(want, read(store.EventFilter{Name: "cfg", Slots: true, Limit: limit})); diff != "" {
			t.Errorf("Events(cfg with slots, limit %d) differs (-want +got):\n%s", limit, diff)
		}
		newest := slices.Clone(want)
		slices.Reverse(newest)
		if diff := cmp.Diff(newest, read(store.EventFilter{Name: "cfg", Slots: true, Limit: limit, Newest: true})); diff != "" {
			t.Errorf("Events(cfg with slots, newest first, limit %d) differs (-want +got):\n%s", limit, diff)
		}
	}
	if diff := cmp.Diff(want[4:6], read(store.EventFilter{Name: "cfg"})); diff != "" {
		t.Errorf("Events(cfg without slots) differs (-want +got):\n%s", diff)
	}
	s, err := e.acquireSlot("pool", "p", 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]ev{{lease.EventAcquired, "pool#0", s.Token, ""}}, read(store.EventFilter{Name: "pool", Slots: true})); diff != "" {
		t.Errorf("Events(pool with slots) differs (-want +got):\n%s", diff)
	}
}
