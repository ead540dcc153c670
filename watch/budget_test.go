package watch

import (
	"testing"
	"time"
)

// TestWriteBudgetStretchesTheInterval: with many watchers each one is written to less often,
// so that all of them together stay within the budget; with few, the coalescing interval holds.
func TestWriteBudgetStretchesTheInterval(t *testing.T) {
	h := NewHub(nil, Options{Coalesce: 20 * time.Millisecond, WriteBudget: 5000})
	for _, c := range []struct {
		watchers int
		want     time.Duration
	}{
		{0, 20 * time.Millisecond},
		{10, 20 * time.Millisecond},
		{100, 20 * time.Millisecond},
		{500, 100 * time.Millisecond},
		{1000, 200 * time.Millisecond},
	} {
		h.mu.Lock()
		h.watchers = c.watchers
		h.mu.Unlock()
		if got := h.interval(); got != c.want {
			t.Errorf("%d watchers: interval %v, want %v", c.watchers, got, c.want)
		}
	}
	if d := NewHub(nil, Options{}).opts.WriteBudget; d != 5000 {
		t.Errorf("default write budget %d, want 5000", d)
	}
}
