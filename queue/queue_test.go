package queue_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/testwait"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/queue"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// fixture is a real store whose commits wake the line, as in the server.
type fixture struct {
	st   fixtureStore
	line *queue.Line
}

// fixtureStore is what the tests do to the store beside the line.
type fixtureStore interface {
	queue.Store
	RequestHandover(ctx context.Context, name string, h lease.Handover) (lease.Handover, error)
	Events(ctx context.Context, f store.EventFilter) (store.Page[lease.Event], error)
}

var pg = new(pgtest.Server)

func TestMain(m *testing.M) { pgtest.Main(m, pg) }

// newPGFixture is a fixture on a new PostgreSQL database: a shared line, kept in the database,
// and decided by the database's clock.
func newPGFixture(t *testing.T) *fixture {
	t.Helper()
	return newPGReplica(t, pg.NewDatabase(t))
}

// newPGReplica is a fixture on the PostgreSQL database url, as one replica of several.
func newPGReplica(t *testing.T, url string) *fixture {
	t.Helper()
	f := &fixture{}
	var mu sync.Mutex
	hook := func(do func(l *queue.Line)) {
		mu.Lock()
		l := f.line
		mu.Unlock()
		if l != nil {
			do(l)
		}
	}
	st, err := postgres.Open(context.Background(), url, postgres.Options{
		OnCommit: func(evs []lease.Event) { hook(func(l *queue.Line) { l.ObserveEvents(evs) }) },
		OnLine:   func(name string) { hook(func(l *queue.Line) { l.LineChanged(name) }) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mu.Lock()
	f.st, f.line = st, queue.New(st, st.Clock(), queue.DefaultLimits())
	mu.Unlock()
	return f
}

func newFixture(t *testing.T, clock lease.Clock, limits queue.Limits) *fixture {
	t.Helper()
	f := &fixture{}
	var mu sync.Mutex
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "q.db"), sqlite.Options{Clock: clock,
		OnCommit: func(evs []lease.Event) {
			mu.Lock()
			l := f.line
			mu.Unlock()
			if l != nil {
				l.ObserveEvents(evs)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mu.Lock()
	f.st, f.line = st, queue.New(st, st.Clock(), limits)
	mu.Unlock()
	return f
}

func params(name, holder string, ttl time.Duration) store.AcquireParams {
	return store.AcquireParams{Name: name, Holder: holder, TTL: ttl}
}

// waitFor polls cond for up to 30 seconds: a bound that only ends a broken test (two seconds
// failed on a loaded machine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

type result struct {
	l   lease.Lease
	err error
}

// lineUp puts n waiters for name in line, in order, holders w0, w1, …, each waiting a minute.
// Every waiter answers on the one channel returned, so that a grant out of order shows at
// once instead of leaving the test waiting for the waiter that should have been served.
func (f *fixture) lineUp(t *testing.T, name string, n int) chan result {
	t.Helper()
	granted := make(chan result, n)
	for i := range n {
		go func() {
			l, err := f.line.Acquire(context.Background(), params(name, fmt.Sprintf("w%d", i), time.Minute), time.Minute)
			granted <- result{l, err}
		}()
		waitFor(t, fmt.Sprintf("waiter %d in line", i), func() bool { return f.line.Waiters(name) == i+1 })
	}
	return granted
}

func TestFIFOOrderOfThreeWaiters(t *testing.T) {
	f := newFixture(t, lease.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), queue.DefaultLimits())
	ctx := context.Background()
	first, err := f.line.Acquire(ctx, params("job", "holder", time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	granted := f.lineUp(t, "job", 3)
	var holders []string
	for _, w := range f.line.Line("job") {
		holders = append(holders, w.Holder)
		if !w.Since.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("waiter %s since %v, want the clock's time when it joined", w.Holder, w.Since)
		}
	}
	if want := []string{"w0", "w1", "w2"}; fmt.Sprint(holders) != fmt.Sprint(want) {
		t.Errorf("Line() holders = %v, want %v, oldest first", holders, want)
	}
	if _, err := f.line.Acquire(ctx, params("job", "barger", time.Minute), 0); !lease.IsCode(err, lease.CodeHeld) {
		t.Errorf("Acquire(no wait, others in line) = %v, want lease_held", err)
	}
	prev := first
	for i := range 3 {
		if err := f.st.Release(ctx, "job", prev.ID); err != nil {
			t.Fatalf("Release(%s) = %v", prev.Holder, err)
		}
		r := testwait.Receive(t, granted, 5*time.Second)
		if r.err != nil || r.l.Holder != fmt.Sprintf("w%d", i) {
			t.Fatalf("grant %d = %+v, %v; want w%d (first come first served)", i, r.l, r.err, i)
		}
		if r.l.Token <= prev.Token {
			t.Errorf("token %d, want > %d", r.l.Token, prev.Token)
		}
		prev = r.l
	}
	if n := f.line.Total(); n != 0 {
		t.Errorf("Total() = %d after all were served, want 0", n)
	}
}

func TestExpiryWakesWaiterOnTime(t *testing.T) {
	clock := lease.NewAnchoredClock(time.Now(), time.Time{}, lease.SinceStart())
	f := newFixture(t, clock, queue.DefaultLimits())
	ctx := context.Background()
	held, err := f.line.Acquire(ctx, params("job", "a", 300*time.Millisecond), 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.line.Acquire(ctx, params("job", "b", time.Minute), 30*time.Second)
	if err != nil {
		t.Fatalf("Acquire(wait) = %v", err)
	}
	// Granted by the server's clock no earlier than the expiry, and long before the wait's end:
	// the line keeps a timer for the expiry (nothing else wakes it: no release, no poll). The
	// bound is loose on purpose, so that a busy machine's scheduling delays never fail it; a
	// line without the timer would wait out its 30 s.
	late := got.AcquiredAt.Sub(held.ExpiresAt)
	t.Logf("granted %v after the expiry", late)
	if late < 0 || late > 10*time.Second {
		t.Errorf("granted %v after the expiry, want within [0, 10s]", late)
	}
}

func TestCancelledWaiterLeavesLine(t *testing.T) {
	f := newFixture(t, lease.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), queue.DefaultLimits())
	ctx := context.Background()
	held, err := f.line.Acquire(ctx, params("job", "a", time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := f.line.Acquire(wctx, params("job", "gone", time.Minute), time.Minute)
		done <- err
	}()
	waitFor(t, "the waiter in line", func() bool { return f.line.Waiters("job") == 1 })
	cancel()
	if err := testwait.Receive(t, done, 5*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire(cancelled) = %v, want context.Canceled", err)
	}
	if n := f.line.Waiters("job"); n != 0 {
		t.Errorf("Waiters() = %d after cancel, want 0", n)
	}
	if err := f.st.Release(ctx, "job", held.ID); err != nil {
		t.Fatal(err)
	}
	st, err := f.st.Get(ctx, "job")
	if err != nil || st.Held {
		t.Errorf("Get() = %+v, %v; want free: nobody is left to receive a grant", st, err)
	}
}

func TestWaitRunsOut(t *testing.T) {
	f := newFixture(t, lease.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), queue.DefaultLimits())
	ctx := context.Background()
	if _, err := f.line.Acquire(ctx, params("job", "a", time.Minute), 0); err != nil {
		t.Fatal(err)
	}
	_, err := f.line.Acquire(ctx, params("job", "b", time.Minute), 30*time.Millisecond)
	var le *lease.Error
	if !errors.As(err, &le) || le.Code != lease.CodeHeld || le.Holder != "a" {
		t.Errorf("Acquire(wait runs out) = %v, want lease_held by a", err)
	}
	if n := f.line.Total(); n != 0 {
		t.Errorf("Total() = %d, want 0", n)
	}
}

func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits queue.Limits
		second string // name the second waiter asks for
	}{
		{"ErrTooManyOnName", queue.Limits{PerName: 1, Total: 10}, "a"},
		{"ErrTooManyInAll", queue.Limits{PerName: 10, Total: 1}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, lease.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), tc.limits)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for _, n := range []string{"a", "b"} {
				if _, err := f.line.Acquire(ctx, params(n, "holder", time.Minute), 0); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.line.Acquire(ctx, params("a", "w1", time.Minute), time.Minute)
			}()
			waitFor(t, "the first waiter", func() bool { return f.line.Total() == 1 })
			_, err := f.line.Acquire(ctx, params(tc.second, "w2", time.Minute), time.Minute)
			if !lease.IsCode(err, lease.CodeTooManyWaiters) {
				t.Errorf("Acquire(line full) = %v, want too_many_waiters", err)
			}
			cancel()
			testwait.Receive(t, done, 5*time.Second)
		})
	}
}

func TestLockDelayEndsWaitWithoutEvent(t *testing.T) {
	clock := lease.NewAnchoredClock(time.Now(), time.Time{}, lease.SinceStart())
	f := newFixture(t, clock, queue.DefaultLimits())
	ctx := context.Background()
	p := params("job", "a", 100*time.Millisecond)
	p.LockDelay = 200 * time.Millisecond
	held, err := f.line.Acquire(ctx, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.line.Acquire(ctx, params("job", "b", time.Minute), 5*time.Second)
	if err != nil {
		t.Fatalf("Acquire(wait through lock delay) = %v", err)
	}
	if avail := held.ExpiresAt.Add(p.LockDelay); got.AcquiredAt.Before(avail) {
		t.Errorf("granted at %v, inside the lock delay ending %v", got.AcquiredAt, avail)
	}
}

// TestHandoverTargetGoesFirst: with three waiting, a handover request naming the last of them
// has it granted first when the holder releases; the others keep their order. A request
// without a target, or naming nobody in line, changes no order. On SQLite the line is the
// server's; on PostgreSQL it is the database's.
func TestHandoverTargetGoesFirst(t *testing.T) { onBothLines(t, testHandoverTargetGoesFirst) }

// onBothLines runs test on a SQLite fixture, whose line is the server's, and on a PostgreSQL
// one, whose line is the database's.
func onBothLines(t *testing.T, test func(t *testing.T, f *fixture)) {
	t.Run("sqlite", func(t *testing.T) {
		test(t, newFixture(t, lease.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), queue.DefaultLimits()))
	})
	t.Run("postgres", func(t *testing.T) { test(t, newPGFixture(t)) })
}

func testHandoverTargetGoesFirst(t *testing.T, f *fixture) {
	ctx := context.Background()
	prev, err := f.line.Acquire(ctx, params("job", "holder", time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	granted := f.lineUp(t, "job", 3)
	for i, step := range []struct{ to, want string }{{"w2", "w2"}, {"", "w0"}, {"nobody", "w1"}} {
		if _, err := f.st.RequestHandover(ctx, "job", lease.Handover{To: step.to}); err != nil {
			t.Fatalf("RequestHandover(to %q) = %v", step.to, err)
		}
		if err := f.st.Release(ctx, "job", prev.ID); err != nil {
			t.Fatalf("Release(%s) = %v", prev.Holder, err)
		}
		r := testwait.Receive(t, granted, 5*time.Second)
		if r.err != nil || r.l.Holder != step.want {
			t.Fatalf("grant %d after a handover to %q = %+v, %v; want %s", i, step.to, r.l, r.err, step.want)
		}
		prev = r.l
	}
}

// TestSemaphoreWaiterGetsFreedSlot: with every slot of a semaphore held, a waiter is woken by
// the release of any slot and granted that slot; a plain waiter's line is the same line.
func TestSemaphoreWaiterGetsFreedSlot(t *testing.T) {
	f := newFixture(t, lease.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), queue.DefaultLimits())
	ctx := context.Background()
	slot := func(holder string) store.AcquireParams {
		p := params("pool", holder, time.Minute)
		p.Limit = 2
		return p
	}
	var held []lease.Lease
	for _, h := range []string{"a", "b"} {
		l, err := f.line.Acquire(ctx, slot(h), 0)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	granted := make(chan result, 1)
	go func() {
		l, err := f.line.Acquire(ctx, slot("c"), time.Minute)
		granted <- result{l, err}
	}()
	waitFor(t, "c in line", func() bool { return f.line.Waiters("pool") == 1 })
	if err := f.st.Release(ctx, "pool", held[1].ID); err != nil {
		t.Fatal(err)
	}
	r := testwait.Receive(t, granted, 5*time.Second)
	if r.err != nil || r.l.Slot != 1 || r.l.Token <= held[1].Token {
		t.Fatalf("waiter = %+v, %v; want slot 1 with a higher token", r.l, r.err)
	}
}
