package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// checkHeldCount fails unless HeldCount("") answers what counting the open grants not past
// expiry answers, and meta.open_grants is the number of open grants.
func checkHeldCount(t *testing.T, s *Store, clock lease.Clock, step string) {
	t.Helper()
	got, err := s.HeldCount(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var want, open, saved int
	now := clock.Now().UnixMilli()
	for _, c := range []struct {
		v    *int
		q    string
		args []any
	}{
		{&want, `SELECT count(*) FROM grants WHERE ended_at IS NULL AND expires_at > ?`, []any{now}},
		{&open, `SELECT count(*) FROM grants WHERE ended_at IS NULL`, nil},
		{&saved, `SELECT value FROM meta WHERE key = 'open_grants'`, nil},
	} {
		if err := s.r.QueryRow(c.q, c.args...).Scan(c.v); err != nil {
			t.Fatal(err)
		}
	}
	if got != want || saved != open {
		t.Errorf("%s: HeldCount() = %d, counted %d; meta.open_grants %d, open grants %d", step, got, want, saved, open)
	}
}

// TestHeldCountKeptByTheWriter: the count of held leases, taken from the count of open grants
// the writer keeps, is what counting the grants gives after every way a grant opens or ends —
// acquire, a semaphore's slots, a session's leases, release, revoke, a session closed, expiry
// noticed late and by the sweeper, a restart that ends the leases expired while it was down,
// and an acquire whose commit fails.
func TestHeldCountKeptByTheWriter(t *testing.T) {
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	var failCommit atomic.Bool
	open := func() *Store {
		s, err := Open(ctx, path, Options{Clock: clock, Fault: func(step string) error {
			if step == "commit" && failCommit.Load() {
				return errors.New("disk full")
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	acquire := func(p store.AcquireParams) lease.Lease {
		t.Helper()
		if p.Holder == "" {
			p.Holder = "w"
		}
		l, err := s.Acquire(ctx, p)
		if err != nil {
			t.Fatalf("acquire %q: %v", p.Name, err)
		}
		return l
	}
	var ls []lease.Lease
	for _, name := range []string{"a", "b", "c", "d"} {
		ls = append(ls, acquire(store.AcquireParams{Name: name, TTL: time.Minute}))
	}
	short := acquire(store.AcquireParams{Name: "short", TTL: 10 * time.Second})
	for range 2 {
		acquire(store.AcquireParams{Name: "sem", Limit: 3, TTL: time.Minute})
	}
	sess, err := s.OpenSession(ctx, store.SessionParams{Holder: "w", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	acquire(store.AcquireParams{Name: "in-session", SessionID: sess.ID})
	checkHeldCount(t, s, clock, "acquired")

	if err := s.Release(ctx, "a", ls[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(ctx, "b", ls[1].Token, "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CloseSession(ctx, sess.ID, ""); err != nil {
		t.Fatal(err)
	}
	checkHeldCount(t, s, clock, "released, revoked, session closed")

	failCommit.Store(true)
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "e", Holder: "w", TTL: time.Minute}); err == nil {
		t.Fatal("acquire whose commit failed succeeded")
	}
	failCommit.Store(false)
	if err := s.Release(ctx, "c", ls[2].ID); err != nil {
		t.Fatal(err)
	}
	checkHeldCount(t, s, clock, "acquire whose commit failed, then a release")

	clock.Advance(20 * time.Second)
	checkHeldCount(t, s, clock, "one expired, not yet swept")
	if n, _, err := s.ExpireDue(ctx); err != nil || n != 1 {
		t.Fatalf("ExpireDue() = %d, %v; want 1", n, err)
	}
	checkHeldCount(t, s, clock, "swept")
	if _, err := s.Renew(ctx, "short", short.ID, 0, nil); err == nil {
		t.Fatal("renewed an expired lease")
	}

	// A lease that expires, then a write that persists a later time, and the server stops
	// before the sweeper records the expiry: the restart records it, without the writer's
	// memory, and the count must follow.
	acquire(store.AcquireParams{Name: "brief", TTL: 5 * time.Second})
	clock.Advance(10 * time.Second)
	acquire(store.AcquireParams{Name: "later", TTL: time.Minute})
	s.Close()
	s = open()
	defer func() { s.Close() }()
	if st, err := s.Get(ctx, "brief"); err != nil || st.Held {
		t.Fatalf("brief after the restart: held %v, %v; want its expiry recorded", st.Held, err)
	}
	checkHeldCount(t, s, clock, "restarted")
	acquire(store.AcquireParams{Name: "after", TTL: time.Minute})
	checkHeldCount(t, s, clock, "acquired after the restart")
}
