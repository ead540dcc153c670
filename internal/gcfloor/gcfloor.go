// Package gcfloor gives the garbage collector a floor of headroom. With GOGC's default of 100,
// a server whose live heap is a few megabytes collects every few megabytes allocated: under
// load, many times a second, each time paying the fixed costs of a cycle (stacks, globals,
// the write barrier while it marks). Keeping the next heap goal at least a floor above the
// live heap makes a small server collect far less often, for at most the floor in memory;
// a large heap (a million leases) keeps GOGC's own proportion, and so its memory.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// maxPercent caps the GOGC set, whatever the heap: a nearly empty heap would ask for more.
const maxPercent = 10_000

// Percent returns the GOGC that puts the next heap goal at live + max(live, floor): at least
// 100, GOGC's default, and at most maxPercent.
func Percent(live, floor uint64) int {
	if live == 0 || floor <= live {
		return 100
	}
	return int(min(floor*100/live, maxPercent))
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
