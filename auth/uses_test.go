package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

type countingToucher struct {
	touched []string
	err     error
}

func (c *countingToucher) TouchKey(_ context.Context, id string) error {
	c.touched = append(c.touched, id)
	return c.err
}

// TestKeyUseWritesOncePerMinute: however often a key is used, its use is written at most once
// a minute; this process's own last use is kept in memory meanwhile.
func TestKeyUseWritesOncePerMinute(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := lease.NewFakeClock(t0)
	st := &countingToucher{}
	u := NewUses(st, clock)
	ctx := context.Background()
	use := func(id string) {
		t.Helper()
		if err := u.Used(ctx, id); err != nil {
			t.Fatalf("used(%q) = %v", id, err)
		}
	}
	for range 100 {
		use("key_a")
		clock.Advance(500 * time.Millisecond)
	}
	// 100 uses over 50 s: the first is written, none of the others.
	if len(st.touched) != 1 {
		t.Fatalf("TouchKey calls after 100 uses in 50 s = %d, want 1", len(st.touched))
	}
	if got, want := u.Last("key_a", t0), t0.Add(99*500*time.Millisecond); !got.Equal(want) {
		t.Errorf("last(key_a) = %v, want the newest use in memory, %v", got, want)
	}
	if got, want := u.Last("key_a", t0.Add(time.Hour)), t0.Add(time.Hour); !got.Equal(want) {
		t.Errorf("last(key_a) with a later stored use = %v, want the stored %v", got, want)
	}
	clock.Set(t0.Add(UseEvery))
	use("key_a")
	use("key_b")
	use("")
	if want := []string{"key_a", "key_a", "key_b"}; len(st.touched) != 3 || st.touched[1] != want[1] || st.touched[2] != want[2] {
		t.Errorf("TouchKey calls = %q, want %q: again a minute later, and each key on its own", st.touched, want)
	}

	// A failed write is tried again on the next use, not a minute later.
	st.err = errors.New("disk full")
	clock.Advance(2 * UseEvery)
	if err := u.Used(ctx, "key_b"); err == nil {
		t.Errorf("used() with a failing store = nil, want its error")
	}
	st.err = nil
	use("key_b")
	if n := len(st.touched); n != 5 {
		t.Errorf("TouchKey calls after a failed one = %d, want 5 (the failed write tried again)", n)
	}
}

// BenchmarkKeyUse is what every authenticated request adds to note its key's use: the clock,
// a lock and two map reads, the store touched once a minute at most.
func BenchmarkKeyUse(b *testing.B) {
	u := NewUses(&countingToucher{}, lease.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := u.Used(ctx, "key_a"); err != nil {
			b.Fatal(err)
		}
	}
}
