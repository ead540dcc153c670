package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{0, 64 * mb, 100},           // nothing measured yet: GOGC's default
		{8 * mb, 64 * mb, 800},      // goal 8 + 64 MB
		{64 * mb, 64 * mb, 100},     // the floor is the live heap
		{128 * mb, 64 * mb, 50},     // the floor still
		{400 * mb, 64 * mb, 25},     // a million leases: goal a quarter above the live heap
		{4096 * mb, 64 * mb, 25},    // however large
		{1024, 64 * mb, maxPercent}, // a nearly empty heap: capped
		{8 * mb, 0, 25},             // no floor
	} {
		if got := Percent(c.live, c.floor); got != c.want {
			t.Errorf("Percent(live %d, floor %d) = %d, want %d", c.live, c.floor, got, c.want)
		}
	}
}

// TestStartFollowsCollections: after each collection GOGC is set again to what Percent asks
// for the live heap then (here the cap: the floor is far above any heap of this test); stop
// gives back the GOGC found at start and collections no longer change it.
func TestStartFollowsCollections(t *testing.T) {
	before := debug.SetGCPercent(73)
	defer debug.SetGCPercent(before)
	stop := Start(1 << 40)
	for round := range 3 {
		debug.SetGCPercent(55) // as if something else had changed it since the last cycle
		if !waitGOGC(maxPercent) {
			t.Fatalf("round %d: GOGC stayed %d after collections, want %d", round, gogc(), maxPercent)
		}
	}
	stop()
	if cur := gogc(); cur != 73 {
		t.Errorf("GOGC after stop = %d, want 73, as found at start", cur)
	}
	debug.SetGCPercent(55)
	if waitGOGC(maxPercent) || gogc() != 55 {
		t.Errorf("GOGC = %d after stop and collections, want 55 left alone", gogc())
	}
}

// gogc reads GOGC.
func gogc() int {
	cur := debug.SetGCPercent(-1)
	debug.SetGCPercent(cur)
	return cur
}

// waitGOGC collects until GOGC is want, for a second at most: a finalizer runs on its own
// goroutine after the cycle that found its object unreachable.
func waitGOGC(want int) bool {
	for range 100 {
		runtime.GC()
		if gogc() == want {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func TestMachineLimit(t *testing.T) {
	for _, c := range []struct {
		files map[string]string
		want  int64
	}{
		{map[string]string{"/sys/fs/cgroup/memory.max": "1073741824\n"}, 1073741824 / 10 * 9},
		{map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, 0},
		{map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "524288000"}, 524288000 / 10 * 9},
		{map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"}, 0},
		{nil, 0},
	} {
		read := func(name string) ([]byte, error) {
			if v, ok := c.files[name]; ok {
				return []byte(v), nil
			}
			return nil, os.ErrNotExist
		}
		if got := MachineLimit(read); got != c.want {
			t.Errorf("MachineLimit(%v) = %d, want %d", c.files, got, c.want)
		}
	}
}
