package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// eventsByNameNames share prefixes, so that a query by name that matched a prefix would show;
// some are slots ("a#0"), so that a query of a name with its slots must merge them in.
var eventsByNameNames = []string{"a", "ab", "b", "a#0", "a#1", "ab#3"}

// recordBatches runs n batches of one to five operations, each recording events on two of
// eventsByNameNames, a second apart.
func recordBatches(t *testing.T, s *Store, clock *lease.FakeClock, n int) {
	t.Helper()
	names := eventsByNameNames
	for i := range n {
		var fns []func(context.Context, *txn) error
		for j := range i%5 + 1 {
			fns = append(fns, recordN(names[(i+j)%len(names)], names[(i*j+1)%len(names)]))
		}
		runOps(t, s, fns...)
		clock.Advance(time.Second)
	}
}

// allEvents reads every event oldest first, by seq (the path a query by name does not take).
func allEvents(t *testing.T, s *Store) []lease.Event {
	t.Helper()
	var all []lease.Event
	f := store.EventFilter{Limit: store.MaxLimit}
	for {
		page, err := s.Events(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Items...)
		if page.Next == "" {
			return all
		}
		f.Cursor = page.Next
	}
}

// checkEventsByName fails unless every query by name — oldest or newest first, page by page at
// several page sizes, with and without a since — answers what all the events filtered by that
// name are, and unless events_by_name holds exactly the events up to the mark, the mark is the
// writer's, and no more than the tail of events come after it.
func checkEventsByName(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	all := allEvents(t, s)
	if len(all) == 0 {
		t.Fatal("no events: the check checks nothing")
	}
	sinces := []time.Time{{}, all[len(all)/2].At}
	for _, name := range eventsByNameNames {
		for _, c := range []struct {
			since time.Time
			slots bool
		}{{sinces[0], false}, {sinces[1], false}, {sinces[0], true}, {sinces[1], true}} {
			since := c.since
			var want []lease.Event
			for _, e := range all {
				parent, _, slot := lease.SlotOf(e.Name)
				if (e.Name == name || c.slots && slot && parent == name) && !e.At.Before(since) {
					want = append(want, e)
				}
			}
			for _, newest := range []bool{false, true} {
				if newest {
					want = slices.Clone(want)
					slices.Reverse(want)
				}
				for _, limit := range []int{1, 3, 7, store.MaxLimit} {
					var got []lease.Event
					f := store.EventFilter{Name: name, Slots: c.slots, Newest: newest, Limit: limit, Since: since}
					for range len(all) + 2 {
						page, err := s.Events(ctx, f)
						if err != nil {
							t.Fatal(err)
						}
						got = append(got, page.Items...)
						if f.Cursor = page.Next; f.Cursor == "" {
							break
						}
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("Events(name %q, slots %v, newest %v, limit %d, since %v) differ from all events filtered (-want +got):\n%s",
							name, c.slots, newest, limit, since, diff)
					}
				}
			}
		}
	}
	var mark, orphans, missing, beyond int
	for _, c := range []struct {
		v *int
		q string
	}{
		{&mark, `SELECT value FROM meta WHERE key = 'events_indexed'`},
		{&orphans, `SELECT count(*) FROM events_by_name b WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.seq = b.seq AND e.name = b.name)`},
		{&missing, `SELECT count(*) FROM events e WHERE e.seq <= (SELECT value FROM meta WHERE key = 'events_indexed')
			AND NOT EXISTS (SELECT 1 FROM events_by_name b WHERE b.name = e.name AND b.seq = e.seq)`},
		{&beyond, `SELECT count(*) FROM events_by_name WHERE seq > (SELECT value FROM meta WHERE key = 'events_indexed')`},
	} {
		if err := s.r.QueryRow(c.q).Scan(c.v); err != nil {
			t.Fatal(err)
		}
	}
	if orphans != 0 || missing != 0 || beyond != 0 {
		t.Errorf("events_by_name: %d entries without their event, %d events up to the mark missing, %d entries past the mark; want none",
			orphans, missing, beyond)
	}
	if int64(mark) != s.mem.indexed || s.mem.seq-s.mem.indexed > s.tail {
		t.Errorf("mark %d, the writer's %d, last seq %d: want the same mark and at most %d events after it",
			mark, s.mem.indexed, s.mem.seq, s.tail)
	}
}

// TestEventsByNameAcrossTheMark: with a tail of 8 events, most of a name's events are found
// through events_by_name and the newest few by seq; queries by name answer the same as all
// events filtered, across pruning by rows and by age and a restart.
func TestEventsByNameAcrossTheMark(t *testing.T) {
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	open := func() *Store {
		s, err := Open(ctx, path, Options{Clock: clock, EventTail: 8})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	recordBatches(t, s, clock, 60)
	if s.mem.indexed == 0 || s.mem.indexed == s.mem.seq {
		t.Fatalf("mark %d of %d events: want events on both sides of it", s.mem.indexed, s.mem.seq)
	}
	checkEventsByName(t, s)

	if err := s.Prune(ctx, store.Retention{Rows: 50}); err != nil {
		t.Fatal(err)
	}
	if n := len(allEvents(t, s)); n != 50 {
		t.Fatalf("%d events after pruning to 50", n)
	}
	checkEventsByName(t, s)

	s.Close()
	s = open()
	defer func() { s.Close() }()
	recordBatches(t, s, clock, 30)
	checkEventsByName(t, s)

	var kept []lease.Event // recordN's events are recorded at their time
	for _, e := range allEvents(t, s) {
		if !e.At.Before(clock.Now().Add(-20 * time.Second)) {
			kept = append(kept, e)
		}
	}
	if err := s.Prune(ctx, store.Retention{Age: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(kept, allEvents(t, s)); diff != "" || len(kept) == 0 {
		t.Errorf("events after pruning those older than 20 s differ from those recorded since (-want +got):\n%s", diff)
	}
	checkEventsByName(t, s)
}

// TestIndexFailureLeavesEventsForLater: when adding events to events_by_name fails, the
// batch's operations still commit (the batch runs again in savepoints, without it) and a later
// batch indexes them.
func TestIndexFailureLeavesEventsForLater(t *testing.T) {
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	var failIndex atomic.Bool
	var failures atomic.Int64
	s, err := Open(ctx, filepath.Join(t.TempDir(), "leasekeeper.db"), Options{Clock: clock, EventTail: 8,
		Fault: func(step string) error {
			if step == "index" && failIndex.Load() {
				failures.Add(1)
				return errors.New("disk full")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	failIndex.Store(true)
	recordBatches(t, s, clock, 4)
	if failures.Load() == 0 || s.mem.indexed != 0 {
		t.Fatalf("%d index failures, mark %d: want failures and nothing indexed", failures.Load(), s.mem.indexed)
	}
	if n := len(allEvents(t, s)); int64(n) != s.mem.seq {
		t.Fatalf("%d events stored, %d recorded: a failed index lost operations", n, s.mem.seq)
	}
	failIndex.Store(false)
	recordBatches(t, s, clock, 1)
	checkEventsByName(t, s)
}

// TestEventsByNameMigration: a database whose events were indexed by name the old way (before
// migration 0011) answers queries by name the same after it: the migration fills
// events_by_name with every event and puts the mark at the newest.
func TestEventsByNameMigration(t *testing.T) {
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	s, err := Open(ctx, path, Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	recordBatches(t, s, clock, 20)
	s.Close()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE INDEX events_name ON events (name, seq)`, `DELETE FROM meta WHERE key = 'events_indexed'`, `DROP INDEX grants_open_late`, `DROP INDEX grants_open_newest`,
		`DROP TABLE events_by_name`, `DELETE FROM meta WHERE key = 'open_grants'`, `CREATE INDEX events_recorded ON events (recorded_at)`, `DROP INDEX grants_ended`, `DROP INDEX names_token`, `DROP INDEX grants_session`, `DROP INDEX lease_sessions_owner_open`, `DROP INDEX resources_owner`, `ALTER TABLE resources DROP COLUMN owner`, `ALTER TABLE grants DROP COLUMN shared`, `ALTER TABLE semaphores DROP COLUMN shared`, `CREATE INDEX grants_open_session ON grants (session) WHERE ended_at IS NULL AND session <> ''`, `DROP INDEX resources_grant`, `ALTER TABLE resources DROP COLUMN grant_name`, `ALTER TABLE keys DROP COLUMN last_used`, `ALTER TABLE rejections DROP COLUMN key_id`, `DELETE FROM goose_db_version WHERE version_id >= 11`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err = Open(ctx, path, Options{Clock: clock, EventTail: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.mem.indexed != s.mem.seq {
		t.Errorf("mark %d after the migration, last seq %d: want every event indexed", s.mem.indexed, s.mem.seq)
	}
	checkEventsByName(t, s)
}
