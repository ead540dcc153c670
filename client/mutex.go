package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrNotLocked is Unlock of a Mutex that is not locked.
var ErrNotLocked = errors.New("mutex not locked")

// Mutex is a distributed lock on a name, in the manner of etcd's concurrency.Mutex and
// Consul's LockKey: Lock waits until this process holds the name's lease, Unlock releases it.
// While locked, Lease returns the lease: send its Token with every write the lock protects,
// and do the work under its Context, which ends as soon as the lock can no longer be relied
// on (Consul's lock-lost channel). Goroutines sharing a Mutex exclude each other as
// processes do, through the server. It is safe for concurrent use.
type Mutex struct {
	name    string
	o       AcquireOptions
	acquire func(context.Context, string, AcquireOptions) (*Lease, error)
	until   func(context.Context, string, func(context.Context) (*Lease, error)) (*Lease, error)

	mu sync.Mutex
	l  *Lease // while locked
}

// NewMutex returns a lock on name whose leases are asked for with o (holder, ttl, lock delay,
// metadata; Lock and TryLock decide how long to wait, so o.Wait is ignored) and kept alive by
// this client. Nothing is sent until Lock or TryLock.
func (c *Client) NewMutex(name string, o AcquireOptions) *Mutex {
	return &Mutex{name: name, o: o, acquire: c.Acquire, until: c.acquireUntil}
}

// NewMutex returns a lock on name held under the session, as etcd's
// concurrency.NewMutex(session, pfx): the lock lasts while the session does, renewed with the
// session's other leases, and is lost with it. o is as for Client.NewMutex, but its TTL and
// DisableKeepAlive are the session's business.
func (s *Session) NewMutex(name string, o AcquireOptions) *Mutex {
	return &Mutex{name: name, o: o, acquire: s.Acquire, until: s.c.acquireUntil}
}

// Name returns the name the Mutex locks.
func (m *Mutex) Name() string { return m.name }

// Lock waits, in the server's line, until the lock is held, or until ctx ends. Network
// failures and 5xx answers are retried with growing pauses; requests the server refuses as
// wrong (ErrInvalid, say) return at once. A goroutine that locks a Mutex it already holds
// waits until ctx ends, as with sync.Mutex.
func (m *Mutex) Lock(ctx context.Context) error {
	l, err := m.lease(ctx, "lock")
	if err != nil {
		return err
	}
	m.hold(l)
	return nil
}

// lease waits in the server's line until it has a lease of the Mutex's name, or until ctx
// ends; op names the wait in errors.
func (m *Mutex) lease(ctx context.Context, op string) (*Lease, error) {
	o := m.o
	o.Wait = time.Hour // one turn in line after another, until ctx ends
	return m.until(ctx, fmt.Sprintf("%s %q", op, m.name), func(ctx context.Context) (*Lease, error) {
		return m.acquire(ctx, m.name, o)
	})
}

// TryLock locks without waiting: when somebody holds the name (this process included) it
// returns an error matching ErrLeaseHeld, a *HeldError when another holder has it.
func (m *Mutex) TryLock(ctx context.Context) error {
	o := m.o
	o.Wait = 0
	l, err := m.acquire(ctx, m.name, o)
	if err != nil {
		return fmt.Errorf("try lock %q: %w", m.name, err)
	}
	m.hold(l)
	return nil
}

// hold records the lease of a lock just taken.
func (m *Mutex) hold(l *Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.l = l
}

// Unlock releases the lock. It returns an error matching ErrLeaseLost when the lock had been
// lost before (the work done under it may have overlapped another holder's), and
// ErrNotLocked when the Mutex is not locked. It unlocks in any case: when the release cannot
// reach the server, the lease runs out there after its ttl, renewed no more.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	l := m.l
	m.l = nil
	m.mu.Unlock()
	if l == nil {
		return fmt.Errorf("unlock %q: %w", m.name, ErrNotLocked)
	}
	if err := l.Release(ctx); err != nil {
		return fmt.Errorf("unlock %q: %w", m.name, err)
	}
	return nil
}

// Lease returns the lease of the lock while it is locked, nil otherwise: its Token is the
// fencing token, and its Context ends when the lock is lost.
func (m *Mutex) Lease() *Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.l
}

// Token returns the fencing token of the lock while it is locked, 0 otherwise.
func (m *Mutex) Token() int64 {
	if l := m.Lease(); l != nil {
		return l.Token()
	}
	return 0
}

// Locker returns the Mutex as a sync.Locker, as etcd's concurrency.NewLocker: Lock waits
// without a deadline. A sync.Locker cannot return errors, so its Lock and Unlock panic with
// any error (a closed client, a lost lock found at Unlock); use the Mutex's own methods
// wherever a lost lock must be handled rather than crash the program.
func (m *Mutex) Locker() sync.Locker { return locker{m} }

type locker struct{ m *Mutex }

func (k locker) Lock() {
	if err := k.m.Lock(context.Background()); err != nil {
		panic(err)
	}
}

func (k locker) Unlock() {
	ttl := DefaultTTL
	if l := k.m.Lease(); l != nil {
		ttl = l.TTL()
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(ttl, 5*time.Second))
	defer cancel()
	if err := k.m.Unlock(ctx); err != nil {
		panic(err)
	}
}
