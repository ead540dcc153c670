package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
	"github.com/leasekeeper/leasekeeper/store/storetest"
)

// dbNow reads the database's clock.
func dbNow(t *testing.T, url string) time.Time {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var now time.Time
	if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// TestDatabaseClock runs the production path: without a test clock, a grant is dated and
// tokened by the database's clock, and the store's Clock follows it.
func TestDatabaseClock(t *testing.T) {
	url := srv.NewDatabase(t)
	s := open(t, url, nil, postgres.Options{})
	ctx := context.Background()
	before := dbNow(t, url).Truncate(time.Millisecond)
	l, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	after := dbNow(t, url)
	if l.AcquiredAt.Before(before) || l.AcquiredAt.After(after) {
		t.Errorf("AcquiredAt = %v, want the database's time in [%v, %v]", l.AcquiredAt, before, after)
	}
	if l.Token < l.AcquiredAt.UnixMicro() {
		t.Errorf("Token = %d, want ≥ the database's µs %d", l.Token, l.AcquiredAt.UnixMicro())
	}
	if !l.ExpiresAt.Equal(l.AcquiredAt.Add(time.Minute)) {
		t.Errorf("ExpiresAt = %v, want AcquiredAt + ttl", l.ExpiresAt)
	}
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w2", TTL: time.Minute}); !lease.IsCode(err, lease.CodeHeld) {
		t.Errorf("Acquire(held) = %v, want lease_held", err)
	}
	if d := s.Clock().Now().Sub(dbNow(t, url)); d < -time.Second || d > time.Second {
		t.Errorf("Clock() is %v from the database's clock, want within 1 s", d)
	}
}

// TestReplicasContend: 48 clients on three replicas (stores on one database, deciding by its
// clock) contend on a few names with short leases; every name's history has strictly growing
// tokens and no overlap, and tokens grow across names in seq order too.
func TestReplicasContend(t *testing.T) {
	url := srv.NewDatabase(t)
	var replicas []*postgres.Store
	for range 3 {
		replicas = append(replicas, open(t, url, nil, postgres.Options{}))
	}
	ctx := context.Background()
	names := []string{"x", "y", "z"}
	var grants atomic.Int64
	var wg sync.WaitGroup
	for g := range 48 {
		s := replicas[g%len(replicas)]
		wg.Go(func() {
			for i := range 15 {
				name := names[(g+i)%len(names)]
				l, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: fmt.Sprintf("g%d", g), TTL: 20 * time.Millisecond})
				if err != nil {
					if !lease.IsCode(err, lease.CodeHeld) {
						t.Errorf("Acquire() = %v", err)
					}
					time.Sleep(2 * time.Millisecond)
					continue
				}
				grants.Add(1)
				switch i % 3 {
				case 0:
					s.Release(ctx, name, l.ID)
				case 1:
					s.Renew(ctx, name, l.ID, 0, nil)
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(50 * time.Millisecond)
	if _, _, err := replicas[1].ExpireDue(ctx); err != nil {
		t.Fatal(err)
	}
	if grants.Load() < 10 {
		t.Errorf("%d grants, want contention with many", grants.Load())
	}
	for _, n := range names {
		p, err := replicas[0].Events(ctx, store.EventFilter{Name: n, Limit: store.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		if err := storetest.CheckHistory(p.Items); err != nil {
			t.Errorf("history of %q: %v", n, err)
		}
	}
	all, err := replicas[0].Events(ctx, store.EventFilter{Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for _, e := range all.Items {
		if e.Type != lease.EventAcquired {
			continue
		}
		if e.Token <= last {
			t.Fatalf("acquired token %d at seq %d after token %d: tokens must grow in commit order", e.Token, e.Seq, last)
		}
		last = e.Token
	}
}

// TestEventsInCommitOrder: writers on two replicas while a reader on a third follows the events
// by seq; it must see every seq, one after the other (trap: a seq given at insert time can
// commit after a higher one, and a reader past the higher one would skip it for good).
func TestEventsInCommitOrder(t *testing.T) {
	// Pools larger than the writers: the negative control (seq taken outside the transaction,
	// see mutations.md) needs a second connection per writer.
	url := srv.NewDatabase(t) + "&pool_max_conns=16"
	writers := []*postgres.Store{open(t, url, nil, postgres.Options{}), open(t, url, nil, postgres.Options{})}
	reader := open(t, url, nil, postgres.Options{})
	// Until the reader has read a busy stream (or a deadline no busy machine reaches): a count,
	// not a time, so that a slow machine reads as many events as a fast one.
	const want = 300
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 8 {
		s := writers[g%len(writers)]
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				// Distinct names: writers do not wait for each other on a name's row.
				l, err := s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("n%d-%d", g, i), Holder: "w", TTL: time.Minute})
				if err == nil {
					s.Release(ctx, l.Name, l.ID)
				}
			}
		})
	}
	var seen, after int64
	for ctx.Err() == nil && seen < want {
		p, err := reader.Events(context.Background(), store.EventFilter{AfterSeq: after, Limit: store.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Items {
			if e.Seq != after+1 {
				t.Fatalf("read seq %d after %d: an event committed out of seq order was skipped", e.Seq, after)
			}
			after = e.Seq
			seen++
		}
	}
	cancel()
	wg.Wait()
	if seen < want {
		t.Errorf("read %d events in 2 minutes, want %d", seen, want)
	}
}

// TestUnreachable: a database that cannot be reached is unavailable (503), not internal.
func TestUnreachable(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://postgres@/x?host=/nonexistent&port=1&connect_timeout=2", postgres.Options{})
	if !lease.IsCode(err, lease.CodeUnavailable) {
		t.Errorf("Open(unreachable) = %v, want code unavailable", err)
	}
}

// collector keeps the events a store's OnCommit was given.
type collector struct {
	mu   sync.Mutex
	seqs []int64
}

func (c *collector) observe(evs []lease.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range evs {
		c.seqs = append(c.seqs, e.Seq)
	}
}

func (c *collector) snapshot() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.seqs...)
}

// TestOnCommitSeesEveryReplica: each replica's commit hook (which feeds its watchers and its
// line of waiters) is given every replica's events, once each, in seq order. The pools are
// smaller than the writers: publishing must never wait for a connection that a writer waiting
// to publish holds.
func TestOnCommitSeesEveryReplica(t *testing.T) {
	url := srv.NewDatabase(t) + "&pool_max_conns=2"
	cs := []*collector{{}, {}}
	replicas := []*postgres.Store{
		open(t, url, nil, postgres.Options{OnCommit: cs[0].observe}),
		open(t, url, nil, postgres.Options{OnCommit: cs[1].observe}),
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 6 {
		s := replicas[g%2]
		wg.Go(func() {
			for i := range 20 {
				l, err := s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("n%d-%d", g, i), Holder: "w", TTL: time.Minute})
				if err != nil {
					t.Errorf("Acquire() = %v", err)
					return
				}
				s.Release(ctx, l.Name, l.ID)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("writers stuck for 30 s: a deadlock between publishing and the pool")
	}
	want := 6 * 20 * 2
	deadline := time.Now().Add(10 * time.Second)
	for i, c := range cs {
		var got []int64
		for {
			if got = c.snapshot(); len(got) >= want || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if len(got) != want {
			t.Errorf("replica %d was given %d events, want %d", i, len(got), want)
		}
		for j, seq := range got {
			if seq != int64(j+1) {
				t.Fatalf("replica %d was given seq %d at position %d, want %d (every seq once, in order)", i, seq, j, j+1)
			}
		}
	}
}

// TestDatabaseClockStepsBack: the database's clock steps back an hour (an NTP correction, or a
// failover to a standby whose clock is an hour behind): tokens issued before, by the clock an
// hour ahead, are made here by moving the last token and a held grant an hour forward. New
// tokens still grow past every token issued, and the held lease stays held.
func TestDatabaseClockStepsBack(t *testing.T) {
	url := srv.NewDatabase(t)
	s := open(t, url, nil, postgres.Options{})
	ctx := context.Background()
	held, err := s.Acquire(ctx, store.AcquireParams{Name: "held", Holder: "w1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const hourMs = int64(time.Hour / time.Millisecond)
	var last int64
	if err := conn.QueryRow(ctx, `UPDATE tokens SET last = last + $1 RETURNING last`, hourMs*1000).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE grants SET acquired_at = acquired_at + $1, renewed_at = renewed_at + $1,
		expires_at = expires_at + $1`, hourMs); err != nil {
		t.Fatal(err)
	}
	l, err := s.Acquire(ctx, store.AcquireParams{Name: "fresh", Holder: "w2", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= last {
		t.Errorf("token after the clock stepped back = %d, want > %d, the last issued", l.Token, last)
	}
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "held", Holder: "w3", TTL: time.Minute}); !lease.IsCode(err, lease.CodeHeld) {
		t.Errorf("Acquire(held, granted by the clock an hour ahead) = %v, want lease_held", err)
	}
	if _, err := s.Renew(ctx, "held", held.ID, 0, nil); err != nil {
		t.Errorf("Renew(held) by its holder = %v, want renewed", err)
	}
}

// TestStartPublishesOnlyNewEvents: a replica that starts after leases expired while it was down
// expires them before it serves, and its commit hook is given those expiries alone, not the
// history before them: publishing reads every event after the last published one, and a
// replica that had not taken its starting position yet read the whole retained history (every
// event since the first, into memory, at each such start).
func TestStartPublishesOnlyNewEvents(t *testing.T) {
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	url := srv.NewDatabase(t)
	s, err := postgres.Open(ctx, url, postgres.Options{TestClock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		l, err := s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("old-%d", i), Holder: "w", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, l.Name, l.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "left-held", Holder: "w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	const before = 40*2 + 1 // the events recorded before the restart

	clock.Advance(2 * time.Minute)
	var c collector
	open(t, url, clock, postgres.Options{OnCommit: c.observe})
	got := c.snapshot()
	if len(got) != 1 || got[0] != before+1 {
		t.Errorf("after the restart the commit hook was given seqs %v (%d of them); want only the start's expiry, [%d]", head(got, 5), len(got), before+1)
	}
}

func head(seqs []int64, n int) []int64 { return seqs[:min(n, len(seqs))] }

// TestCatchUpInPages: a replica whose listener was cut off catches up on what the others
// wrote meanwhile a page at a time (so that one back from a long cut-off does not hold all of
// it at once), and still publishes every event, once, in order.
func TestCatchUpInPages(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	var c collector
	writer := open(t, url, nil, postgres.Options{})
	open(t, url+"&application_name=reader", nil, postgres.WithPublishPage(postgres.Options{OnCommit: c.observe}, 3))
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	var cut int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'reader'`).Scan(&cut); err != nil || cut == 0 {
		t.Fatalf("cut the reader's connections: %d, %v", cut, err)
	}
	const events = 2 * 25 // written while the reader's listener reconnects (a second)
	for i := range events / 2 {
		l, err := writer.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("p-%d", i), Holder: "w", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := writer.Release(ctx, l.Name, l.ID); err != nil {
			t.Fatal(err)
		}
	}
	var got []int64
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = c.snapshot(); len(got) >= events {
			break
		}
	}
	if len(got) != events {
		t.Fatalf("the reader was given %d events, want %d", len(got), events)
	}
	for i, seq := range got {
		if seq != int64(i+1) {
			t.Fatalf("the reader was given seq %d at position %d, want %d (every seq once, in order)", seq, i, i+1)
		}
	}
}
