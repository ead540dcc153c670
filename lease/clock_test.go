package lease_test

import (
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

// fakeElapsed is a monotonic elapsed-time source tests move by hand.
type fakeElapsed struct {
	mu sync.Mutex
	d  time.Duration
}

func (f *fakeElapsed) elapsed() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.d
}

func (f *fakeElapsed) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.d += d
}

func TestAnchoredClockAnchor(t *testing.T) {
	tests := []struct {
		name        string
		wall, floor time.Time
		want        time.Time
	}{
		{"OK/WallAfterFloor", t0, t0.Add(-time.Hour), t0},
		{"OK/WallBeforeFloor", t0.Add(-time.Hour), t0, t0},
		{"OK/NoFloor", t0, time.Time{}, t0},
		{"OK/FloorEqualsWall", t0, t0, t0},
		{"OK/TruncatedToMillisecond", t0.Add(1234567 * time.Nanosecond), time.Time{}, t0.Add(time.Millisecond)},
		{"OK/FloorTruncated", t0, t0.Add(time.Second + 999*time.Microsecond), t0.Add(time.Second)},
		{"OK/NonUTCWall", t0.In(time.FixedZone("X", 5*3600)), time.Time{}, t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &fakeElapsed{d: 3 * time.Second} // a monotonic source need not start at zero
			c := lease.NewAnchoredClock(tt.wall, tt.floor, e.elapsed)
			got := c.Now()
			if !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Errorf("Now() = %v, want %v in UTC", got, tt.want)
			}
			if got.Before(tt.floor.Truncate(time.Millisecond)) {
				t.Errorf("Now() = %v, earlier than the floor %v", got, tt.floor)
			}
		})
	}
}

// TestAnchoredClockIgnoresWallSteps: after the anchor, only the monotonic source moves the
// clock. The "wall clock" steps backwards and forwards (NTP, date -s) while the monotonic time
// advances; the server clock follows the monotonic time exactly.
func TestAnchoredClockIgnoresWallSteps(t *testing.T) {
	wall := t0
	e := &fakeElapsed{}
	c := lease.NewAnchoredClock(wall, time.Time{}, e.elapsed)
	steps := []struct {
		wallStep, mono time.Duration
	}{
		{-time.Hour, time.Second},
		{24 * time.Hour, 0},
		{-48 * time.Hour, 500 * time.Millisecond},
		{time.Minute, 2 * time.Second},
	}
	var mono time.Duration
	prev := c.Now()
	for i, s := range steps {
		wall = wall.Add(s.wallStep)
		e.advance(s.mono)
		mono += s.mono
		got := c.Now()
		if want := t0.Add(mono); !got.Equal(want) {
			t.Errorf("step %d (wall %v to %v, monotonic +%v): Now() = %v, want %v", i, s.wallStep, wall, s.mono, got, want)
		}
		if got.Before(prev) {
			t.Errorf("step %d: Now() = %v went back from %v", i, got, prev)
		}
		prev = got
	}
}

func TestSinceStart(t *testing.T) {
	el := lease.SinceStart()
	a := el()
	if a < 0 || a > time.Second {
		t.Fatalf("SinceStart()() = %v right away, want near 0", a)
	}
	for range 100 {
		b := el()
		if b < a {
			t.Fatalf("SinceStart()() went back from %v to %v", a, b)
		}
		a = b
	}
	c := lease.NewAnchoredClock(t0, time.Time{}, el)
	if d := c.Now().Sub(t0); d < 0 || d > time.Second {
		t.Errorf("NewAnchoredClock(t0, SinceStart()).Now() - t0 = %v, want in [0, 1s]", d)
	}
}

func TestFakeClock(t *testing.T) {
	c := lease.NewFakeClock(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now() = %v, want %v", got, t0)
	}
	c.Advance(1500 * time.Millisecond)
	c.Advance(-500 * time.Millisecond)
	if got := c.Now(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("Now() after +1.5s -0.5s = %v, want %v", got, t0.Add(time.Second))
	}
	c.Set(t0.Add(-time.Hour))
	if got := c.Now(); !got.Equal(t0.Add(-time.Hour)) {
		t.Errorf("Now() after Set = %v, want %v", got, t0.Add(-time.Hour))
	}
	var _ lease.Clock = c
	var _ lease.Clock = (*lease.AnchoredClock)(nil)
}
