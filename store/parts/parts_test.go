package parts

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/heldsql"
)

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

// TestEachFindsAsMatch checks each, through the dictionary of holders, against Match read
// over every entry: holders that many grants share, holders past DictMost (added again for each
// grant, and some of the shared ones again after it), names whose part is rarer or commoner
// than the holder's, parts with a 0 byte (which a search of the string of entries finds across
// two of them), and grants that ended.
func TestEachFindsAsMatch(t *testing.T) {
	x := &Index{room: math.MaxUint32}
	holder := func(i int) string {
		switch {
		case i%3 == 0:
			return "worker-" + strconv.Itoa(i%17)
		case i%3 == 1 && i > 3*DictMost/2:
			return "late-" + strconv.Itoa(i%5) // a new holder once the map is full
		}
		return "own-" + strconv.Itoa(i) // each grant its own holder
	}
	n := 2*DictMost + 500
	for i := range n {
		x.add(int64(i+1), []byte(fmt.Sprintf("job-%06d", i)), []byte(holder(i)))
	}
	x.ended = make(bits, (n+63)/64)
	for i := 0; i < n; i += 7 {
		x.ended.set(i)
	}
	if len(x.holderID) != DictMost {
		t.Fatalf("the dictionary looks up %d holders, want DictMost (%d)", len(x.holderID), DictMost)
	}
	for _, f := range []store.HeldFilter{
		{Holder: "worker-1"}, {Holder: "worker-1", Contains: "0042"}, {Holder: "-1", Contains: "job-"},
		{Holder: "own-7"}, {Holder: "own-1300", Contains: "13"}, {Holder: "late-3"}, {Holder: "late-", Contains: "9999"},
		{Holder: "nobody"}, {Contains: "00001"}, {Holder: "0\x00own"}, {Contains: "0\x00job"}, {Holder: "-1", Contains: "1\x00"}, {Contains: "job-", Prefix: "job-0001"}, {Holder: "-", Contains: "5"},
	} {
		s := heldsql.New(heldsql.SQLite, f, 0, "g.token").Sift()
		var got, want []int
		x.each(s, func(i int, _ []byte) { got = append(got, i) })
		for i := range n {
			if !x.ended.has(i) && s.Match(entryOf(x.names, x.nameEnd, i), []byte(holder(i))) {
				want = append(want, i)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: each found %d entries, Match %d (first %v, want %v)", f, len(got), len(want), got[:min(len(got), 5)], want[:min(len(want), 5)])
		}
	}
}
