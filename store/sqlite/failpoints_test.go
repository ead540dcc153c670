package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// TestFailpoints fails each step of a write (BEGIN, a statement, COMMIT — where an fsync error
// surfaces) while a batch of operations runs: no operation of a failed batch is acknowledged
// or left half-applied (in the database or in the writer's memory), its callers get
// unavailable (503), and the next batch succeeds.
func TestFailpoints(t *testing.T) {
	for _, step := range []string{"begin", "exec", "commit"} {
		t.Run(step, func(t *testing.T) {
			ctx := context.Background()
			var armed atomic.Bool
			clock := lease.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
			s, err := Open(ctx, filepath.Join(t.TempDir(), "lk.db"), Options{Clock: clock, Fault: func(at string) error {
				if armed.Load() && at == step {
					return sqlite3.Error{Code: sqlite3.ErrIoErr}
				}
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			held, err := s.Acquire(ctx, store.AcquireParams{Name: "held", Holder: "w", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.PutResource(ctx, store.ResourceWrite{Name: "res", Token: held.Token, Value: []byte("v1")}); err != nil {
				t.Fatal(err)
			}

			armed.Store(true)
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Go(func() {
					switch i % 4 {
					case 0:
						_, errs[i] = s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("new-%d", i), Holder: "w", TTL: time.Minute})
					case 1:
						_, errs[i] = s.Renew(ctx, "held", held.ID, 2*time.Minute, nil)
					case 2:
						_, errs[i] = s.PutResource(ctx, store.ResourceWrite{Name: "res", Token: held.Token, Value: []byte(fmt.Sprint("v", i))})
					case 3:
						errs[i] = s.Release(ctx, "held", held.ID)
					}
				})
			}
			wg.Wait()
			for i, err := range errs {
				if !lease.IsCode(err, lease.CodeUnavailable) {
					t.Errorf("operation %d during a failing %s = %v, want unavailable", i, step, err)
				}
			}
			// Nothing of the failed batches is in the database or the writer's memory.
			st, err := s.Get(ctx, "held")
			if err != nil || !st.Held || st.TTL != time.Minute {
				t.Errorf("held after the failed batches = %+v, %v; want held with its 1 min ttl", st, err)
			}
			for i := 0; i < len(errs); i += 4 {
				if _, err := s.Get(ctx, fmt.Sprintf("new-%d", i)); !lease.IsCode(err, lease.CodeNotFound) {
					t.Errorf("Get(new-%d) = %v, want not_found: a failed acquire was applied", i, err)
				}
			}
			if r, err := s.GetResource(ctx, "res"); err != nil || string(r.Value) != "v1" || r.Version != 1 {
				t.Errorf("res after the failed batches = %q v%d, %v; want v1 at version 1", r.Value, r.Version, err)
			}
			if err := s.Ping(ctx); err == nil {
				t.Errorf("Ping while writes fail = nil, want the store not ready")
			}
			checkMemory(t, s)

			// The fault is gone: the next batch succeeds, and the store is ready again.
			armed.Store(false)
			l, err := s.Acquire(ctx, store.AcquireParams{Name: "after", Holder: "w", TTL: time.Minute})
			if err != nil || l.Token <= held.Token {
				t.Fatalf("Acquire after the fault = %+v, %v; want a grant above %d", l, err, held.Token)
			}
			if err := s.Release(ctx, "held", held.ID); err != nil {
				t.Errorf("Release after the fault = %v", err)
			}
			if err := s.Ping(ctx); err != nil {
				t.Errorf("Ping after a write succeeded = %v", err)
			}
			checkMemory(t, s)
		})
	}
}

// checkMemory compares the writer's memory with a fresh load from the database (and each name
// it holds with that name's row), and returns what the memory held.
func checkMemory(t *testing.T, s *Store) mem {
	t.Helper()
	s.lock <- struct{}{}
	defer func() { <-s.lock }()
	live := s.mem
	if err := s.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name := range live.names {
		c, err := scanCur(s.w.QueryRow(stmtSQL[stCur], name))
		if err != nil {
			t.Errorf("name %q in memory: %v", name, err)
			continue
		}
		s.mem.names[name] = c
	}
	for o, n := range live.owners {
		if n == 0 {
			delete(live.owners, o)
		}
	}
	if diff := cmp.Diff(s.mem, live, cmp.AllowUnexported(mem{}, cur{}, fenceRow{})); diff != "" {
		t.Errorf("the writer's memory differs from the database (-database +memory):\n%s", diff)
	}
	return live
}
