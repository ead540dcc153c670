package parts

import "testing"

// TestEntryAt checks the galloping search of the entry a match falls in against a walk from
// the entry it starts at.
func TestEntryAt(t *testing.T) {
	for n := range 40 {
		var ends []uint32
		for i := range n {
			ends = append(ends, uint32(3*i+i%4+1))
		}
		last := 0
		if n > 0 {
			last = int(ends[n-1])
		}
		for i := 0; i <= n; i++ {
			from := 0
			if i > 0 {
				from = int(ends[i-1]) + 1
			}
			for at := from; at <= last+1; at++ {
				want := i
				for want < n && int(ends[want]) < at {
					want++
				}
				if got := entryAt(ends, i, at); got != want {
					t.Fatalf("entryAt(%v, %d, %d) = %d, want %d", ends, i, at, got, want)
				}
			}
		}
	}
}
