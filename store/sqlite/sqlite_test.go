package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
	"github.com/leasekeeper/leasekeeper/store/storetest"
)

// newDB opens stores whose Held sorts at most 3 matches read through a filter's index, so
// that the conformance cases take both of its plans, and reads the index of parts in every
// filter on a part of a name or holder.
func newDB(t *testing.T) storetest.Opener { return openerOf(t, sqlite.PartsAtOnce) }

// TestConformanceHeldSieve runs the cases of Held with the filters on a part sieved in SQL
// alone, as they are while the index of parts is being built.
func TestConformanceHeldSieve(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener { return openerOf(t, sqlite.PartsNever) }, storetest.Only("Held"))
}

func openerOf(t *testing.T, parts sqlite.PartsMode) storetest.Opener {
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	return func(clock lease.Clock) store.Store {
		s, err := sqlite.Open(context.Background(), path, sqlite.Options{Clock: clock, HeldNarrow: 3, HeldParts: parts})
		if err != nil {
			t.Fatalf("Open(%s) = %v", path, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

func TestConformance(t *testing.T) { storetest.Run(t, newDB) }
