package handlers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

// keyUseEvery is how often at most a key's last use is written to the store: a request is not
// a write, and the keys page needs the minute, not the millisecond.
const keyUseEvery = time.Minute

// keyToucher records a key's use; store.Store is one.
type keyToucher interface {
	TouchKey(ctx context.Context, id string) error
}

// keyUse remembers when each key was last used by this process, and persists it at most once
// per keyUseEvery per key. Its maps hold one entry per key that authenticated, which the
// store's keys bound.
type keyUse struct {
	store keyToucher
	clock lease.Clock

	mu    sync.Mutex
	seen  map[string]time.Time // key id → last use, by the server's clock
	saved map[string]time.Time // key id → when its use was last written
}

func newKeyUse(st keyToucher, clock lease.Clock) *keyUse {
	return &keyUse{store: st, clock: clock, seen: map[string]time.Time{}, saved: map[string]time.Time{}}
}

// used notes that key id was used now, and writes it to the store when its last write is
// keyUseEvery old or more. A failed write is tried again on the next use.
func (u *keyUse) used(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	now := u.clock.Now()
	u.mu.Lock()
	u.seen[id] = now
	last, ok := u.saved[id]
	due := !ok || now.Sub(last) >= keyUseEvery
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

// last is the later of stored (the store's last use of key id) and this process's own.
func (u *keyUse) last(id string, stored time.Time) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if t := u.seen[id]; t.After(stored) {
		return t
	}
	return stored
}
