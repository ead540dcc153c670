package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// testTriage: the summary's counts are of held leases under the prefix only: expiring within
// the window, late to renew, stretched by a restart, and pending handovers of held leases.
func testTriage(t *testing.T, e *env, databaseClock bool) {
	triage := func(prefix string) store.Triage {
		t.Helper()
		got, err := e.s.Triage(e.ctx, prefix, time.Minute)
		if err != nil {
			t.Fatalf("Triage(%q) = %v", prefix, err)
		}
		return got
	}
	counts := func(x store.Triage) [3]int { return [3]int{x.Soon, x.Late, x.Stretched} }
	a := e.acquire("a-job", "w1", 10*time.Second)
	b := e.acquire("a-long", "w2", 2*time.Minute)
	x := e.acquire("x-job", "w3", 30*time.Second)
	e.clock.Advance(6 * time.Second)
	// a-job: 4 s left, 6 s since its renewal of a 10 s ttl; x-job: 24 s left; a-long: neither.
	if got := counts(triage("")); got != [3]int{2, 1, 0} {
		t.Errorf("Triage(all) soon, late, stretched = %v, want [2 1 0]", got)
	}
	if got := counts(triage("x-")); got != [3]int{1, 0, 0} {
		t.Errorf("Triage(x-) soon, late, stretched = %v, want [1 0 0]", got)
	}
	if _, err := e.s.Renew(e.ctx, "a-job", a.ID, 0, nil); err != nil {
		t.Fatal(err)
	}
	if got := counts(triage("a-")); got != [3]int{1, 0, 0} {
		t.Errorf("Triage(a-) after a renewal = %v, want [1 0 0] (renewed: not late, 10 s left)", got)
	}
	h, err := e.s.RequestHandover(e.ctx, "a-long", lease.Handover{To: "w9", Reason: "deploy", By: "ops (key_1)"})
	if err != nil {
		t.Fatal(err)
	}
	if got := triage("a-").Handovers; !cmp.Equal(got, []lease.Handover{h}) {
		t.Errorf("Triage(a-).Handovers = %+v, want [%+v]", got, h)
	}
	if got := triage("x-").Handovers; len(got) != 0 {
		t.Errorf("Triage(x-).Handovers = %+v, want none: a-long is outside the prefix", got)
	}
	// An expired lease the sweeper has not recorded yet counts for nothing.
	e.clock.Advance(11 * time.Second)
	if got := counts(triage("a-")); got != [3]int{0, 0, 0} {
		t.Errorf("Triage(a-) after a-job expired = %v, want [0 0 0]", got)
	}
	if err := e.s.Release(e.ctx, "a-long", b.ID); err != nil {
		t.Fatal(err)
	}
	if got := triage("").Handovers; len(got) != 0 {
		t.Errorf("Triage().Handovers after the release = %+v, want none: a request goes with its grant", got)
	}
	e.restart()
	want := 1 // x-job: 7 s left at the restart, stretched to a full ttl
	if databaseClock {
		want = 0
	}
	if got := triage("").Stretched; got != want {
		t.Errorf("Triage().Stretched after a restart = %d, want %d", got, want)
	}
	// A lease granted after the restart was not stretched; one that ends is no longer held.
	e.acquire("x-new", "w4", time.Minute)
	for _, prefix := range []string{"", "x-"} {
		if got := triage(prefix).Stretched; got != want {
			t.Errorf("Triage(%q).Stretched with a lease granted after the restart = %d, want %d", prefix, got, want)
		}
	}
	if err := e.s.Release(e.ctx, "x-job", x.ID); err != nil {
		t.Fatal(err)
	}
	if got := triage("").Stretched; got != 0 {
		t.Errorf("Triage().Stretched after the stretched lease's release = %d, want 0", got)
	}
}
