package auth

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

// UseEvery is how often at most a key's last use is written to the store: a request is not a
// write, and the keys page needs the minute, not the millisecond.
const UseEvery = time.Minute

// Toucher records a key's use; store.Store is one.
type Toucher interface {
	TouchKey(ctx context.Context, id string) error
}

// Uses remembers when each key was last used by this process, and persists it at most once per
// UseEvery per key, through a Toucher (the only I/O of this package, and not its own). Its maps
// hold one entry per key that authenticated, which the store's keys bound.
type Uses struct {
	store Toucher
	clock lease.Clock

	mu    sync.Mutex
	seen  map[string]time.Time // key id → last use, by the server's clock
	saved map[string]time.Time // key id → when its use was last written
}

// NewUses returns a Uses that writes through st.
func NewUses(st Toucher, clock lease.Clock) *Uses {
	return &Uses{store: st, clock: clock, seen: map[string]time.Time{}, saved: map[string]time.Time{}}
}

// Used notes that key id was used now, and writes it to the store when its last write is
// UseEvery old or more. A failed write is tried again on the next use.
func (u *Uses) Used(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	now := u.clock.Now()
	u.mu.Lock()
	u.seen[id] = now
	last, ok := u.saved[id]
	due := !ok || now.Sub(last) >= UseEvery
	if due {
		u.saved[id] = now
	}
	u.mu.Unlock()
	if !due {
		return nil
	}
	if err := u.store.TouchKey(ctx, id); err != nil {
		u.mu.Lock()
		if u.saved[id].Equal(now) {
			if ok {
				u.saved[id] = last
			} else {
				delete(u.saved, id)
			}
		}
		u.mu.Unlock()
		return fmt.Errorf("record the last use of key %s: %w", id, err)
	}
	return nil
}

// Last is the later of stored (the store's last use of key id) and this process's own.
func (u *Uses) Last(id string, stored time.Time) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if t := u.seen[id]; t.After(stored) {
		return t
	}
	return stored
}
