package watch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// emptyStore is a store with no history: every event a test's streams see comes from the
// hub's memory.
type emptyStore struct{}

func (emptyStore) Events(context.Context, store.EventFilter) (store.Page[lease.Event], error) {
	return store.Page[lease.Event]{}, nil
}
func (emptyStore) LatestSeq(context.Context) (int64, error) { return 0, nil }

// TestCommitWakesOnlyItsWatchers: a commit wakes the streams whose prefix starts one of its
// events' names, and no other: a thousand watchers of one lease each are not all woken by
// every commit. Every stream that is not woken has nothing to read.
func TestCommitWakesOnlyItsWatchers(t *testing.T) {
	h := NewHub(emptyStore{}, Options{})
	prefixes := []string{"", "jobs/", "jobs/a", "jobs/ab", "jobs/b", "other/", "jobs/a/x"}
	streams := map[string]*Stream{}
	for _, p := range prefixes {
		s, err := h.Open(context.Background(), p, "")
		if err != nil {
			t.Fatal(err)
		}
		h.register(s)
		streams[p] = s
	}
	woken := func() map[string]bool {
		out := map[string]bool{}
		for p, s := range streams {
			select {
			case <-s.wake:
				out[p] = true
			default:
			}
		}
		return out
	}
	for _, tc := range []struct {
		names []string
		want  []string
	}{
		{[]string{"jobs/a"}, []string{"", "jobs/", "jobs/a"}},
		{[]string{"jobs/ab", "jobs/ab"}, []string{"", "jobs/", "jobs/a", "jobs/ab"}},
		{[]string{"other/x", "jobs/b1"}, []string{"", "jobs/", "jobs/b", "other/"}},
		{[]string{"zzz"}, []string{""}},
	} {
		var evs []lease.Event
		for i, n := range tc.names {
			evs = append(evs, lease.Event{Seq: int64(100*len(tc.names) + i), Name: n})
		}
		h.ObserveEvents(evs)
		got := woken()
		for _, p := range tc.want {
			if !got[p] {
				t.Errorf("commit of %q did not wake the watcher of %q", tc.names, p)
			}
			delete(got, p)
		}
		for p := range got {
			t.Errorf("commit of %q woke the watcher of %q", tc.names, p)
		}
	}
	// A stream that ends is forgotten, and so are the prefix lengths nobody watches.
	for _, p := range prefixes {
		h.unregister(streams[p])
	}
	if len(h.byPrefix) != 0 || len(h.lens) != 0 || h.watchers != 0 {
		t.Errorf("after every stream ended: byPrefix %v, lens %v, watchers %d; want all empty", h.byPrefix, h.lens, h.watchers)
	}
}

// TestQuietWatcherStaysInMemory: a watcher of a quiet prefix is not woken by others' commits,
// so its position falls behind the ring's horizon; it still reads from memory as long as no
// event of its prefix has left the ring since, and reads the store once one has (or when its
// position is older than anything memory ever held).
func TestQuietWatcherStaysInMemory(t *testing.T) {
	h := NewHub(emptyStore{}, Options{})
	early, err := h.Open(context.Background(), "early.", "")
	if err != nil {
		t.Fatal(err)
	}
	h.register(early) // before any commit: what came before the first is only in the store
	seq := int64(100)
	commit := func(names ...string) {
		var evs []lease.Event
		for _, n := range names {
			seq++
			evs = append(evs, lease.Event{Seq: seq, Name: n})
		}
		h.ObserveEvents(evs)
	}
	commit("busy/0")
	quiet, err := h.Open(context.Background(), "quiet.", "")
	if err != nil {
		t.Fatal(err)
	}
	h.register(quiet)
	pos := seq
	for i := range 2 * recentCap {
		commit(fmt.Sprintf("busy/%d", i)) // the ring rolls over, nothing of quiet.'s
	}
	commit("quiet.a")
	var got []string
	visit := func(e *lease.Event, _ []byte) error { got = append(got, e.Name); return nil }
	if _, inMemory, _ := h.fromMemory(pos, "quiet.", visit); !inMemory || len(got) != 1 || got[0] != "quiet.a" {
		t.Errorf("quiet watcher behind the horizon: in memory %v, events %v; want memory and [quiet.a]", inMemory, got)
	}
	// Now an event of its prefix leaves the ring before a watcher at pos reads it.
	for i := range recentCap {
		commit(fmt.Sprintf("busy/x%d", i))
	}
	got = nil
	if _, inMemory, _ := h.fromMemory(pos, "quiet.", visit); inMemory || len(got) != 0 {
		t.Errorf("an event of its prefix left the ring: in memory %v, events %v; want the store", inMemory, got)
	}
	if _, inMemory, _ := h.fromMemory(50, "early.", visit); inMemory {
		t.Error("a position older than the first commit memory saw was served from memory")
	}
}

// TestOwnEventsMatchTheRing: a watched prefix reads exactly the events of the ring a scan of
// the whole ring finds for it, in order, whatever came before: prefixes watched before the
// first commit, after events of theirs were already in the ring, given up and watched again,
// while the ring rolls over many times in commits of several events.
func TestOwnEventsMatchTheRing(t *testing.T) {
	h := NewHub(emptyStore{}, Options{MaxWatchers: 100})
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "a/1", "a/2", "ab", "b", "b/1", "jobs/x", "jobs/xy", "z"}
	prefixes := []string{"", "a", "a/", "a/1", "b", "jobs/", "jobs/x", "jobs/xy", "q", "z"}
	open := map[string][]*Stream{}
	watch := func(p string) {
		s, err := h.Open(context.Background(), p, "")
		if err != nil {
			t.Fatal(err)
		}
		h.register(s)
		open[p] = append(open[p], s)
	}
	watch("a") // before any commit
	seq := int64(10)
	check := func(round int) {
		t.Helper()
		for p := range open {
			after := h.horizon + int64(rng.IntN(h.n+1)) // from before the ring's oldest to its newest
			var got, want []int64
			_, inMemory, _ := h.fromMemory(after, p, func(e *lease.Event, _ []byte) error { got = append(got, e.Seq); return nil })
			if !inMemory {
				t.Fatalf("round %d, prefix %q after %d (horizon %d): not served from memory", round, p, after, h.horizon)
			}
			for i := range h.n {
				if e := h.at(i); e.Seq > after && strings.HasPrefix(e.Name, p) {
					want = append(want, e.Seq)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, prefix %q after %d: read %d events %v…, the ring holds %d %v…", round, p, after, len(got), head(got), len(want), head(want))
			}
		}
	}
	for round := range 3000 {
		evs := make([]lease.Event, 1+rng.IntN(8))
		for i := range evs {
			seq++
			evs[i] = lease.Event{Seq: seq, Name: names[rng.IntN(len(names))]}
		}
		h.ObserveEvents(evs)
		switch p := prefixes[rng.IntN(len(prefixes))]; {
		case rng.IntN(10) == 0:
			watch(p)
		case rng.IntN(10) == 0 && len(open[p]) > 0:
			h.unregister(open[p][0])
			if open[p] = open[p][1:]; len(open[p]) == 0 {
				delete(open, p)
			}
		}
		if round%50 == 0 {
			check(round)
		}
	}
	check(-1)
	for p, l := range h.mine {
		if n := len(l.live()); n > recentCap || len(l.at) > 2*n+64 {
			t.Errorf("prefix %q keeps %d positions of %d in its array; want at most the ring's %d, and at most 2×+64 in all", p, n, len(l.at), recentCap)
		}
	}
}

func head(s []int64) []int64 { return s[:min(len(s), 5)] }
