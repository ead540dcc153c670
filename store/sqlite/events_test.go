package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// published collects what OnCommit was given.
type published struct {
	mu  sync.Mutex
	evs []lease.Event
}

func (p *published) add(evs []lease.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evs = append(p.evs, evs...)
}

// checkEventsStored fails unless the events table holds exactly the events published, in seq
// order, column for column.
func checkEventsStored(t *testing.T, s *Store, p *published) {
	t.Helper()
	ctx := context.Background()
	var stored []lease.Event
	var after int64
	for {
		page, err := s.Events(ctx, store.EventFilter{AfterSeq: after, Limit: store.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, page.Items...)
		if len(page.Items) == 0 || page.Next == "" {
			break
		}
		after = page.Items[len(page.Items)-1].Seq
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.evs) == 0 {
		t.Fatal("no event was published: the test checks nothing")
	}
	if diff := cmp.Diff(p.evs, stored); diff != "" {
		t.Errorf("the events table differs from the events published (-published +stored):\n%s", diff)
	}
}

// TestEventsOfBatchesStored: one operation recording more events than one INSERT writes (an
// expiry sweep), and batches of many operations, store every event they publish, each in its
// columns, in seq order.
func TestEventsOfBatchesStored(t *testing.T) {
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	var p published
	s, err := Open(ctx, filepath.Join(t.TempDir(), "leasekeeper.db"), Options{Clock: clock, OnCommit: p.add})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 2*eventChunk + 7
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			l, err := s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("n%d", i), Holder: fmt.Sprint("w", i), TTL: time.Minute,
				LockDelay: time.Duration(i) * time.Millisecond, Metadata: []byte(fmt.Sprintf(`{"i":%d}`, i))})
			if err == nil && i%2 == 0 {
				_, err = s.Renew(ctx, l.Name, l.ID, 2*time.Minute, nil)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	clock.Advance(3 * time.Minute)
	if got, _, err := s.ExpireDue(ctx); err != nil || got != n {
		t.Fatalf("ExpireDue() = %d, %v; want %d expired", got, err, n)
	}
	checkEventsStored(t, s, &p)
}

// runOps runs fns as one batch, as the leader of a group commit does.
func runOps(t *testing.T, s *Store, fns ...func(context.Context, *txn) error) []*op {
	t.Helper()
	var batch []*op
	for _, fn := range fns {
		batch = append(batch, &op{ctx: context.Background(), fn: fn, done: make(chan struct{})})
	}
	s.lock <- struct{}{}
	defer func() { <-s.lock }()
	if committed, failure := s.commit(batch); !committed || failure != nil {
		t.Fatalf("commit() = %v, %v; want committed", committed, failure)
	}
	return batch
}

func storedSeqs(t *testing.T, s *Store) []int64 {
	t.Helper()
	rows, err := s.r.Query(`SELECT seq FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			t.Fatal(err)
		}
		out = append(out, seq)
	}
	return out
}

func recordN(names ...string) func(context.Context, *txn) error {
	return func(ctx context.Context, t *txn) error {
		for _, n := range names {
			if err := t.record(ctx, lease.Event{Type: lease.EventRenewed, Name: n, Holder: "w", At: ms(t.now)}); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestFailedOperationLeavesNoEvents: an operation that fails after recording events is rolled
// back (the batch runs again, each operation in a savepoint) without them, and the operations
// after it take its seqs; the others' events are all stored.
func TestFailedOperationLeavesNoEvents(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "leasekeeper.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	boom := func(ctx context.Context, t *txn) error {
		recordN("x", "y")(ctx, t)
		return errors.New("boom")
	}
	batch := runOps(t, s, recordN("a", "b"), boom, recordN("c"))
	if got := storedSeqs(t, s); !cmp.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("stored seqs = %v, want [1 2 3] (the failed operation's two left out)", got)
	}
	if batch[1].err == nil || len(batch[1].events) != 0 || len(batch[2].events) != 1 || batch[2].events[0].Seq != 3 {
		t.Errorf("the failed operation: %v, %d events; the next one's events %+v", batch[1].err, len(batch[1].events), batch[2].events)
	}
}

// TestPruneInBatchSeesEarlierEvents: a prune keeping the newest rows counts the events of the
// operations before it in its batch, as if each had run alone.
func TestPruneInBatchSeesEarlierEvents(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "leasekeeper.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runOps(t, s, recordN("a", "b", "c", "d", "e"), func(ctx context.Context, t *txn) error {
		return prune(ctx, t, store.Retention{Rows: 2})
	}, recordN("f"))
	if got := storedSeqs(t, s); !cmp.Equal(got, []int64{4, 5, 6}) {
		t.Errorf("stored seqs after pruning to 2 rows in the batch = %v, want [4 5 6]", got)
	}
}
