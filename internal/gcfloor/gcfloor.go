// Package gcfloor gives the garbage collector a floor of headroom. With GOGC's default of 100,
// a server whose live heap is a few megabytes collects every few megabytes allocated: under
// load, many times a second, each time paying the fixed costs of a cycle (stacks, globals,
// the write barrier while it marks). Keeping the next heap goal at least a floor above the
// live heap makes a small server collect far less often, for at most the floor in memory.
// A large heap (a million leases: some 360 MB live) grows by a quarter of itself at most,
// not GOGC's whole (which doubled the process under load): it is collected more often, and
// the process stays within a quarter of its live data.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
)

// maxPercent caps the GOGC set, whatever the heap: a nearly empty heap would ask for more.
const maxPercent = 10_000

// minPercent is the GOGC of a heap far above the floor: the goal a quarter above the live heap.
const minPercent = 25

// Percent returns the GOGC that puts the next heap goal at live + max(live/4, floor): at
// least minPercent and at most maxPercent; GOGC's default, 100, before anything was measured.
func Percent(live, floor uint64) int {
	if live == 0 {
		return 100
	}
	return int(max(min(floor*100/live, maxPercent), minPercent))
}

// Start sets GOGC after every collection from the live heap it found (see Percent), until
// stop is called. The caller leaves it off when the operator chose GOGC.
func Start(floor uint64) (stop func()) {
	t := &tuner{floor: floor, prev: debug.SetGCPercent(100)}
	t.adjust()
	t.arm()
	return func() {
		if t.stopped.CompareAndSwap(false, true) {
			debug.SetGCPercent(t.prev)
		}
	}
}

type tuner struct {
	floor   uint64
	prev    int
	stopped atomic.Bool
	sample  [1]metrics.Sample
}

// sentinel is an object whose finalizer runs once per collection that finds it unreachable,
// that is, after every cycle: it adjusts GOGC and arms a new one. It is large enough not to be
// packed with other tiny objects (whose finalizers may never run).
type sentinel struct{ _ [16]byte }

func (t *tuner) arm() {
	runtime.SetFinalizer(new(sentinel), func(*sentinel) {
		if t.stopped.Load() {
			return
		}
		t.adjust()
		t.arm()
	})
}

// adjust runs on the finalizer goroutine, one call at a time.
func (t *tuner) adjust() {
	t.sample[0].Name = "/gc/heap/live:bytes"
	metrics.Read(t.sample[:])
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	debug.SetGCPercent(Percent(t.sample[0].Value.Uint64(), t.floor))
}

// cgroupFiles hold the memory a control group may use: version 2, then version 1.
var cgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// MachineLimit is the soft memory limit for a process in a control group with a memory cap
// (a container): nine tenths of the cap, read with readFile, leaving the rest to what the Go
// runtime does not count (SQLite's page cache, thread stacks). 0 when there is no cap.
func MachineLimit(readFile func(string) ([]byte, error)) int64 {
	for _, f := range cgroupFiles {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		// "max", or version 1's "no limit" (a huge number), is no cap.
		if err != nil || n <= 0 || n >= 1<<50 {
			return 0
		}
		return n / 10 * 9
	}
	return 0
}
