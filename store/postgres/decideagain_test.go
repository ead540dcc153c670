package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
	"github.com/leasekeeper/leasekeeper/store/storetest"
)

// tickingClock is a fake clock that, once armed, moves on by a millisecond at every read: an
// acquire's two clock reads (after the name's locks, then after the last token's) then fall
// on either side of an expiry.
type tickingClock struct {
	*lease.FakeClock
	armed atomic.Bool
}

func (c *tickingClock) Now() time.Time {
	now := c.FakeClock.Now()
	if c.armed.Load() {
		c.Advance(time.Millisecond)
	}
	return now
}

// TestExpiryRecordedBeforeTakeover: a slot whose grant expires between an acquire's first
// decision (which finds another slot free) and its last (the clock moved on while the last
// token was locked, and the first slot is the one taken) has its expiry recorded before the
// grant that takes its place, for a semaphore and for readers, alone and in a set: the slot's
// history stays acquired, expired, acquired. Before, the expiry was left to the sweep and
// recorded after the new grant. (A held name is refused at the first decision.)
func TestExpiryRecordedBeforeTakeover(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		p    store.AcquireParams
		all  bool
		hist string // the name whose history is checked
	}{
		{"semaphore slot", store.AcquireParams{Name: "sem", Limit: 2}, false, "sem#0"},
		{"reader's slot", store.AcquireParams{Name: "r", Mode: lease.ModeShared}, false, "r#0"},
		{"readers' set", store.AcquireParams{Name: "rs", Mode: lease.ModeShared}, true, "rs#0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := &tickingClock{FakeClock: lease.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))}
			s := open(t, srv.NewDatabase(t), clock, postgres.Options{})
			acquire := func(holder string) error {
				p := c.p
				p.Holder, p.TTL = holder, time.Second
				if c.all {
					_, err := s.AcquireAll(ctx, store.AcquireAllParams{Names: []string{p.Name}, Holder: holder, TTL: time.Second, Mode: p.Mode})
					return err
				}
				_, err := s.Acquire(ctx, p)
				return err
			}
			if err := acquire("first"); err != nil {
				t.Fatal(err)
			}
			// The first read falls a millisecond before the expiry; the ones after it, at or past it.
			clock.Advance(time.Second - time.Millisecond)
			clock.armed.Store(true)
			err := acquire("second")
			clock.armed.Store(false)
			if err != nil {
				t.Fatalf("acquire at the expiry: %v", err)
			}
			page, err := s.Events(ctx, store.EventFilter{Limit: store.MaxLimit})
			if err != nil {
				t.Fatal(err)
			}
			var history []lease.Event
			for _, ev := range page.Items {
				if ev.Name == c.hist {
					history = append(history, ev)
				}
			}
			if err := storetest.CheckHistory(history); err != nil || len(history) != 3 {
				t.Errorf("history of %q: %v, %d events; want acquired, expired, acquired:", c.hist, err, len(history))
				for _, ev := range history {
					t.Logf("seq %d %s token %d by %s", ev.Seq, ev.Type, ev.Token, ev.Holder)
				}
			}
		})
	}
}
