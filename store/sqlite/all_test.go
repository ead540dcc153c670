package sqlite

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// TestAcquireAllFailureUndone fails a statement of an acquire of several names after its first
// grant was written: the caller gets unavailable, and neither the database nor the writer's
// memory keeps any of its grants, nor the tokens it took; the same set is granted afterwards.
func TestAcquireAllFailureUndone(t *testing.T) {
	ctx := context.Background()
	var execs atomic.Int64
	var armed atomic.Bool
	clock := lease.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	s, err := Open(ctx, filepath.Join(t.TempDir(), "lk.db"), Options{Clock: clock, Fault: func(at string) error {
		// Every statement after the first grant's two (insert it, point its name at it).
		if armed.Load() && at == "exec" && execs.Add(1) > 2 {
			return sqlite3.Error{Code: sqlite3.ErrIoErr}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, err := s.Acquire(ctx, store.AcquireParams{Name: "other", Holder: "w", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p := store.AcquireAllParams{Names: []string{"a", "b", "c"}, Holder: "w", TTL: time.Minute, Owner: "key_a"}
	armed.Store(true)
	_, err = s.AcquireAll(ctx, p)
	armed.Store(false)
	if !lease.IsCode(err, lease.CodeUnavailable) {
		t.Fatalf("AcquireAll with a failing statement = %v, want unavailable", err)
	}
	if execs.Load() <= 2 {
		t.Fatalf("%d statements ran: the failure came before any grant was written", execs.Load())
	}
	for _, n := range p.Names {
		if _, err := s.Get(ctx, n); !lease.IsCode(err, lease.CodeNotFound) {
			t.Errorf("Get(%q) = %v, want not_found: a grant of the failed set was kept", n, err)
		}
		if _, ok := s.mem.names[n]; ok {
			t.Errorf("the writer's memory keeps %q after the failed set", n)
		}
	}
	if s.mem.token != before.Token || s.mem.owners["key_a"] != 0 {
		t.Errorf("memory after the failed set: last token %d, key_a holds %d; want %d and 0", s.mem.token, s.mem.owners["key_a"], before.Token)
	}
	ls, err := s.AcquireAll(ctx, p)
	if err != nil || len(ls) != 3 || ls[0].Token <= before.Token {
		t.Fatalf("AcquireAll after the failure = %v, %v; want all three", ls, err)
	}
}
