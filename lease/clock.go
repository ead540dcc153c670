package lease

import (
	"sync"
	"time"
)

// Clock is the only source of time for expiry decisions and tokens. Read it once per operation.
type Clock interface {
	Now() time.Time
}

// AnchoredClock is the server clock of invariant 4: anchored once to the wall clock at start-up
// (never earlier than a persisted floor), then advanced only by a monotonic clock, so a step of
// the wall clock during the run (NTP, date -s) changes nothing.
type AnchoredClock struct {
	anchor  time.Time
	elapsed func() time.Duration
}

// NewAnchoredClock returns a clock that starts at max(wall, floor), truncated to the
// millisecond, and advances by elapsed, which must be monotonic and start near zero.
// Production code passes time.Now(), the newest persisted instant, and SinceStart().
func NewAnchoredClock(wall, floor time.Time, elapsed func() time.Duration) *AnchoredClock {
	anchor := wall
	if floor.After(anchor) {
		anchor = floor
	}
	return &AnchoredClock{anchor: anchor.UTC().Truncate(time.Millisecond).Add(-elapsed()), elapsed: elapsed}
}

// Now returns the anchor plus the monotonic time elapsed since the clock was made.
func (c *AnchoredClock) Now() time.Time { return c.anchor.Add(c.elapsed()) }

// SinceStart returns a monotonic elapsed-time function started now. time.Since on a reading
// taken by time.Now uses the monotonic clock, which wall-clock steps do not move.
func SinceStart() func() time.Duration {
	start := time.Now()
	return func() time.Duration { return time.Since(start) }
}

// FakeClock is a Clock for tests: it stands still until Set or Advance moves it.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a fake clock at t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the fake time by d (which may be negative, to test backward steps).
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the fake time to t.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
