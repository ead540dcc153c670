package client

import (
	"context"
	"fmt"
	"sync"
)

// RWMutex is a distributed readers-writer lock on a name, in the manner of Curator's
// InterProcessReadWriteLock: RLock holds a shared lease (readers hold the name together), Lock
// an exclusive one (a writer holds it alone). Writers never starve: once a writer waits, the
// readers that come after it wait behind it. Each lock returns the Context of its lease, which
// ends as soon as the lock can no longer be relied on; do the work under it. Only a writer's
// token writes: a fenced write with a reader's token is refused (shared_token). Each RLock
// takes a lease of its own, and RUnlock releases the newest one; goroutines sharing an
// RWMutex exclude each other as processes do, through the server. It is safe for concurrent
// use.
type RWMutex struct {
	w *Mutex // the writer's lock
	r *Mutex // asks for the shared leases, kept in readers (never held by r itself)

	mu      sync.Mutex
	readers []*Lease // held, oldest first
}

// NewRWMutex returns a readers-writer lock on name whose leases are asked for with o (as for
// NewMutex; its Shared and Limit are RLock's and Lock's business) and kept alive by this
// client. Nothing is sent until a lock is asked for.
func (c *Client) NewRWMutex(name string, o AcquireOptions) *RWMutex {
	o.Limit = 0
	w, r := o, o
	w.Shared, r.Shared = false, true
	return &RWMutex{w: c.NewMutex(name, w), r: c.NewMutex(name, r)}
}

// Name returns the name the RWMutex locks.
func (m *RWMutex) Name() string { return m.w.Name() }

// RLock waits, in the server's line, until this process holds a shared lease on the name, or
// until ctx ends, and returns the lease's Context.
func (m *RWMutex) RLock(ctx context.Context) (context.Context, error) {
	l, err := m.r.lease(ctx, "read lock")
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.readers = append(m.readers, l)
	m.mu.Unlock()
	return l.Context(), nil
}

// RUnlock releases the newest shared lease RLock took. Errors are as for Mutex.Unlock.
func (m *RWMutex) RUnlock(ctx context.Context) error {
	m.mu.Lock()
	n := len(m.readers)
	var l *Lease
	if n > 0 {
		l, m.readers = m.readers[n-1], m.readers[:n-1]
	}
	m.mu.Unlock()
	if l == nil {
		return fmt.Errorf("read unlock %q: %w", m.Name(), ErrNotLocked)
	}
	if err := l.Release(ctx); err != nil {
		return fmt.Errorf("read unlock %q: %w", m.Name(), err)
	}
	return nil
}

// Lock waits, in the server's line, until this process holds the name alone, or until ctx
// ends, and returns the lease's Context; Token is its fencing token.
func (m *RWMutex) Lock(ctx context.Context) (context.Context, error) {
	if err := m.w.Lock(ctx); err != nil {
		return nil, err
	}
	return m.w.Lease().Context(), nil
}

// Unlock releases the exclusive lease Lock took. Errors are as for Mutex.Unlock.
func (m *RWMutex) Unlock(ctx context.Context) error { return m.w.Unlock(ctx) }

// Token returns the fencing token of the writer's lock while it is held, 0 otherwise.
func (m *RWMutex) Token() int64 { return m.w.Token() }
