package queue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/testwait"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/queue"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/storetest"
)

// grant is one waiter's answer: who asked and what it got.
type grant struct {
	holder string
	ls     []lease.Lease
	err    error
}

func allParams(holder string, names ...string) store.AcquireAllParams {
	return store.AcquireAllParams{Names: names, Holder: holder, TTL: time.Minute}
}

// waitAll starts holder waiting a minute for names, answering on granted, and returns once it
// stands in line (n waiters then on the name it checks).
func (f *fixture) waitAll(t *testing.T, granted chan<- grant, holder string, check string, n int, names ...string) {
	t.Helper()
	go func() {
		ls, err := f.line.AcquireAll(context.Background(), allParams(holder, names...), time.Minute)
		granted <- grant{holder, ls, err}
	}()
	waitFor(t, holder+" in line", func() bool { return f.line.Waiters(check) == n })
}

func (f *fixture) hold(t *testing.T, holder string, names ...string) []lease.Lease {
	t.Helper()
	ls, err := f.line.AcquireAll(context.Background(), allParams(holder, names...), 0)
	if err != nil {
		t.Fatalf("AcquireAll(%v) by %s = %v", names, holder, err)
	}
	return ls
}

func (f *fixture) releaseAll(t *testing.T, ls []lease.Lease) {
	t.Helper()
	for _, l := range ls {
		if err := f.st.Release(context.Background(), l.Name, l.ID); err != nil {
			t.Fatalf("Release(%s) = %v", l.Name, err)
		}
	}
}

func bothBackends(t *testing.T, test func(t *testing.T, f *fixture)) {
	t.Run("sqlite", func(t *testing.T) {
		test(t, newFixture(t, lease.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), queue.DefaultLimits()))
	})
	t.Run("postgres", func(t *testing.T) { test(t, newPGFixture(t)) })
}

// TestAcquireAllWaitsHoldingNone: a waiter for a and b holds neither while it waits (a freed
// stays free), and is granted both once the last is freed.
func TestAcquireAllWaitsHoldingNone(t *testing.T) {
	bothBackends(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		x := f.hold(t, "x", "a", "b")
		granted := make(chan grant, 1)
		f.waitAll(t, granted, "w", "b", 1, "a", "b")
		f.releaseAll(t, x[:1])
		if st, err := f.st.Get(ctx, "a"); err != nil || st.Held {
			t.Errorf("a while w waits for b = %+v, %v; want free: the waiter holds none of its names", st, err)
		}
		// A request that will not wait does not pass the waiter.
		_, err := f.line.AcquireAll(ctx, allParams("late", "a"), 0)
		if !lease.IsCode(err, lease.CodeHeld) {
			t.Errorf("AcquireAll([a], no wait) while w waits = %v, want lease_held", err)
		}
		f.releaseAll(t, x[1:])
		g := testwait.Receive(t, granted, 10*time.Second)
		if g.err != nil || len(g.ls) != 2 || g.ls[0].Name != "a" || g.ls[1].Name != "b" {
			t.Fatalf("w = %+v, %v; want a and b", g.ls, g.err)
		}
		if n := f.line.Total(); n != 0 {
			t.Errorf("Total() = %d after the grant, want 0", n)
		}
	})
}

// TestAcquireAllLineOrder: a waiter for several names is served in the line of each: one that
// came later never overtakes it, though every name it wants is free, and it never overtakes
// one that came first.
func TestAcquireAllLineOrder(t *testing.T) {
	bothBackends(t, func(t *testing.T, f *fixture) {
		x := f.hold(t, "x", "c")
		granted := make(chan grant, 3)
		// s waits for b (free) and c (held): first in b's line though b is free.
		f.waitAll(t, granted, "s", "b", 1, "b", "c")
		// w waits for a and b, both free now: behind s in b's line.
		f.waitAll(t, granted, "w", "b", 2, "a", "b")
		// v, a single name, waits for a: behind w.
		go func() {
			l, err := f.line.Acquire(context.Background(), params("a", "v", time.Minute), time.Minute)
			granted <- grant{"v", []lease.Lease{l}, err}
		}()
		waitFor(t, "v in line", func() bool { return f.line.Waiters("a") == 2 })
		var order []string
		f.releaseAll(t, x)
		for range 3 {
			g := testwait.Receive(t, granted, 10*time.Second)
			if g.err != nil {
				t.Fatalf("%s = %v", g.holder, g.err)
			}
			order = append(order, g.holder)
			f.releaseAll(t, g.ls)
		}
		if want := []string{"s", "w", "v"}; !slices.Equal(order, want) {
			t.Errorf("grants in the order %v, want %v (the lines' order)", order, want)
		}
	})
}

// TestAcquireAllConcurrentNoDeadlock: many clients wait at once for overlapping sets, in
// opposite orders, and single names: every one is served, none waits for another forever, and
// the history keeps all or nothing. On PostgreSQL the clients wait on two replicas of one
// database, whose line they share.
func TestAcquireAllConcurrentNoDeadlock(t *testing.T) {
	bothBackends(t, func(t *testing.T, f *fixture) {
		testConcurrentNoDeadlock(t, f, f, 30*time.Second, nil)
	})
	t.Run("postgres-replicas", func(t *testing.T) {
		url := pg.NewDatabase(t)
		// A waiter behind one of another replica looks again each queue.HeadCheck: slower.
		testConcurrentNoDeadlock(t, newPGReplica(t, url), newPGReplica(t, url), 2*time.Minute, nil)
	})
}

// TestAcquireAllReadersAndWritersWait: the clients of TestAcquireAllConcurrentNoDeadlock, two
// of every three reading their sets (shared) and the others writing them, all waiting in the
// names' lines: every one is served (no deadlock, no reader or writer left behind), and the
// history shows no set in part and no exclusive grant beside another grant of its name.
func TestAcquireAllReadersAndWritersWait(t *testing.T) {
	shared := func(c int) lease.Mode {
		if c%3 == 2 {
			return lease.ModeExclusive
		}
		return lease.ModeShared
	}
	bothBackends(t, func(t *testing.T, f *fixture) {
		testConcurrentNoDeadlock(t, f, f, 30*time.Second, shared)
	})
}

// testConcurrentNoDeadlock runs the clients of TestAcquireAllConcurrentNoDeadlock, the even ones
// on f, the odd ones on g, each waiting up to wait for a set in mode(client) (nil: exclusive).
func testConcurrentNoDeadlock(t *testing.T, f, g *fixture, wait time.Duration, mode func(c int) lease.Mode) {
	{
		names := []string{"n0", "n1", "n2", "n3"}
		var mu sync.Mutex
		var got []storetest.Granted
		var wg sync.WaitGroup
		for c := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 4 {
					set := []string{names[(c+i)%4], names[(c+i+1+c%2)%4]}
					if c%3 == 0 {
						set = set[:1]
					}
					if c%2 == 1 {
						slices.Reverse(set)
					}
					on := f
					if c%2 == 1 {
						on = g
					}
					p := allParams(fmt.Sprintf("c%d", c), set...)
					if mode != nil {
						p.Mode = mode(c)
					}
					ls, err := on.line.AcquireAll(context.Background(), p, wait)
					if err != nil {
						t.Errorf("client %d: AcquireAll(%v) = %v, want every waiter served", c, set, err)
						return
					}
					mu.Lock()
					got = append(got, storetest.Granted{Asked: set, Leases: ls})
					mu.Unlock()
					for _, l := range ls {
						f.st.Release(context.Background(), l.Name, l.ID)
					}
				}
			}()
		}
		wg.Wait()
		if len(got) != 48 {
			t.Fatalf("%d sets granted, want 48", len(got))
		}
		page, err := f.st.Events(context.Background(), store.EventFilter{Limit: store.MaxLimit})
		if err != nil || page.Next != "" {
			t.Fatalf("Events() = %d events, next %q, %v; want one page", len(page.Items), page.Next, err)
		}
		if err := storetest.CheckAllOrNothing(page.Items, got); err != nil {
			t.Error(err)
		}
	}
}

// TestAcquireAllNotPromotedByHandover: a handover request never moves a place of an acquire of
// several names ahead (in one line only, it could stand before a waiter there and behind it in
// another line, and the two would wait for each other): the line keeps its order.
func TestAcquireAllNotPromotedByHandover(t *testing.T) {
	bothBackends(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		x := f.hold(t, "x", "a")
		granted := make(chan grant, 2)
		go func() {
			l, err := f.line.Acquire(ctx, params("a", "q", time.Minute), time.Minute)
			granted <- grant{"q", []lease.Lease{l}, err}
		}()
		waitFor(t, "q in line", func() bool { return f.line.Waiters("a") == 1 })
		f.waitAll(t, granted, "p", "a", 2, "a", "b")
		if _, err := f.st.RequestHandover(ctx, "a", lease.Handover{To: "p"}); err != nil {
			t.Fatal(err)
		}
		f.releaseAll(t, x)
		g := testwait.Receive(t, granted, 10*time.Second)
		if g.err != nil || g.holder != "q" {
			t.Fatalf("first grant = %s %+v, %v; want q, first in line", g.holder, g.ls, g.err)
		}
		f.releaseAll(t, g.ls)
		if g := testwait.Receive(t, granted, 10*time.Second); g.err != nil || g.holder != "p" {
			t.Fatalf("second grant = %s, %v; want p", g.holder, g.err)
		}
	})
}

// TestRetryWhileOthersWait: an idempotent acquire (of one name, or of several) retried after
// others queued for its names, because its first answer was lost, is answered its grants, with
// or without wait_ms: not refused by the line, and not queued behind waiters who wait for those
// very grants. A new key is still refused while they wait. Both backends.
func TestRetryWhileOthersWait(t *testing.T) {
	bothBackends(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		one := params("job", "a", time.Minute)
		one.IdempotencyKey = "retry-one"
		set := allParams("a", "set-x", "set-y")
		set.IdempotencyKey = "retry-set"
		first, err := f.line.Acquire(ctx, one, 0)
		if err != nil {
			t.Fatal(err)
		}
		firstSet, err := f.line.AcquireAll(ctx, set, 0)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		wg.Go(func() { f.line.Acquire(wctx, params("job", "b", time.Minute), time.Minute) })
		wg.Go(func() { f.line.AcquireAll(wctx, allParams("b", "set-y"), time.Minute) })
		waitFor(t, "the waiters in line", func() bool { return f.line.Waiters("job") == 1 && f.line.Waiters("set-y") == 1 })

		// The wait is a bound that a retry queued behind b would run out: it would then fail.
		for _, wait := range []time.Duration{0, 5 * time.Second} {
			got, err := f.line.Acquire(ctx, one, wait)
			if err != nil || got.ID != first.ID || got.Token != first.Token {
				t.Errorf("retry of the acquire (wait %v) = %+v, %v; want its grant %d", wait, got, err, first.Token)
			}
			gotSet, err := f.line.AcquireAll(ctx, set, wait)
			if err != nil || len(gotSet) != 2 || gotSet[0].ID != firstSet[0].ID || gotSet[1].Token != firstSet[1].Token {
				t.Errorf("retry of the set (wait %v) = %+v, %v; want its grants", wait, gotSet, err)
			}
		}
		other := params("job", "c", time.Minute)
		other.IdempotencyKey = "new-key"
		if _, err := f.line.Acquire(ctx, other, 0); !lease.IsCode(err, lease.CodeHeld) {
			t.Errorf("a new key while b waits = %v, want lease_held", err)
		}
		otherSet := allParams("c", "set-y")
		otherSet.IdempotencyKey = "new-set-key"
		if _, err := f.line.AcquireAll(ctx, otherSet, 0); !lease.IsCode(err, lease.CodeHeld) {
			t.Errorf("a new set key while b waits = %v, want lease_held", err)
		}
	})
}
