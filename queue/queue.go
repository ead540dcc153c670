// Package queue is the waiting line of acquire: requests that ask to wait for a held lease
// line up per name, first come first served. When the lease is released, revoked or expires,
// the oldest live waiter is woken at once (by the store's commit hook, not by polling) and
// tries to take it with a fresh token; a lock delay is waited out with a timer to its end.
package queue

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// Store is what the line needs of the store.
type Store interface {
	Acquire(ctx context.Context, p store.AcquireParams) (lease.Lease, error)
	Release(ctx context.Context, name, id string) error
	Get(ctx context.Context, name string) (lease.State, error)
}

// Limits bound the line.
type Limits struct {
	PerName int // waiters on one name
	Total   int // waiters on all names
}

// DefaultLimits allow 1,000 waiters on a name and 10,000 in all.
func DefaultLimits() Limits { return Limits{PerName: 1000, Total: 10000} }

// Line is the waiting line of every name.
type Line struct {
	store  Store
	clock  lease.Clock
	limits Limits

	mu    sync.Mutex
	lines map[string]*list.List // of *waiter, oldest first
	total int
	// next holds, by name, the holder a handover request named for the current grant: when
	// that grant ends, a waiter of that holder goes first.
	next map[string]preferred

	closed chan struct{} // closed by Close: every waiter gives up
	once   sync.Once
}

type waiter struct {
	turn   chan struct{} // signalled when the waiter should try again
	holder string
}

// preferred is the holder a handover request of grant token named.
type preferred struct {
	token  int64
	holder string
}

// New returns an empty line.
func New(st Store, clock lease.Clock, limits Limits) *Line {
	return &Line{store: st, clock: clock, limits: limits, lines: map[string]*list.List{}, next: map[string]preferred{}, closed: make(chan struct{})}
}

// Close makes every waiter give up with unavailable, so a shutting-down server is not held
// up by long waits. It is safe to call more than once.
func (l *Line) Close() { l.once.Do(func() { close(l.closed) }) }

// Waiters returns how many requests wait for name.
func (l *Line) Waiters(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.lines[name]; q != nil {
		return q.Len()
	}
	return 0
}

// Total returns how many requests wait for any name.
func (l *Line) Total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// ObserveEvents wakes the oldest waiter of every name whose lease just ended; wire it to the
// store's commit hook. It never blocks. A handover request that named a holder puts that
// holder's oldest waiter first when the grant it asked about ends.
func (l *Line) ObserveEvents(evs []lease.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range evs {
		switch e.Type {
		case lease.EventHandoverRequested:
			if e.Handover != nil && e.Handover.To != "" {
				l.next[e.Name] = preferred{token: e.Token, holder: e.Handover.To}
			} else {
				delete(l.next, e.Name)
			}
		case lease.EventReleased, lease.EventExpired, lease.EventRevoked:
			if p, ok := l.next[e.Name]; ok && p.token == e.Token {
				delete(l.next, e.Name)
				l.promote(e.Name, p.holder)
			}
			// A freed slot of a semaphore wakes the line of the semaphore, one line for all
			// its slots: the head takes whichever slot is free.
			name, _, _ := lease.SlotOf(e.Name)
			l.wakeHead(name)
		case lease.EventAcquired:
			if p, ok := l.next[e.Name]; ok && p.token < e.Token {
				delete(l.next, e.Name) // the grant asked about ended unseen
			}
		}
	}
}

// promote moves the oldest waiter of holder for name to the head of its line. l.mu is held.
func (l *Line) promote(name, holder string) {
	q := l.lines[name]
	if q == nil {
		return
	}
	for el := q.Front(); el != nil; el = el.Next() {
		if el.Value.(*waiter).holder == holder {
			q.MoveToFront(el)
			return
		}
	}
}

// wakeHead signals the oldest waiter of name. l.mu must be held.
func (l *Line) wakeHead(name string) {
	if q := l.lines[name]; q != nil && q.Len() > 0 {
		w := q.Front().Value.(*waiter)
		select {
		case w.turn <- struct{}{}:
		default:
		}
	}
}

// Acquire grants the lease, waiting in line up to wait for it. Without a wait it fails at once
// when the lease is held or others wait before it. A waiter whose ctx ends leaves the line, and
// a grant that raced with its ctx ending is released, so no lease is held that nobody received.
// Codes: lease_held (the wait ran out), too_many_waiters, unavailable (the line was closed),
// and those of store.Acquire.
func (l *Line) Acquire(ctx context.Context, p store.AcquireParams, wait time.Duration) (lease.Lease, error) {
	l.mu.Lock()
	queued := l.lines[p.Name] != nil && l.lines[p.Name].Len() > 0
	l.mu.Unlock()
	if !queued {
		got, err := l.store.Acquire(ctx, p)
		if err == nil || !lease.IsCode(err, lease.CodeHeld) || wait <= 0 {
			return got, err
		}
	} else if wait <= 0 {
		return lease.Lease{}, l.heldByLine(ctx, p.Name)
	}

	w, el, err := l.join(p.Name, p.Holder)
	if err != nil {
		return lease.Lease{}, err
	}
	defer l.leave(p.Name, el)

	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	retry := time.NewTimer(0) // the first try happens at once if this waiter is the head
	defer retry.Stop()
	var lastErr error = lease.Errorf(lease.CodeHeld, "lease %q is held", p.Name)
	for {
		select {
		case <-ctx.Done():
			return lease.Lease{}, fmt.Errorf("wait for %q: %w", p.Name, ctx.Err())
		case <-deadline.C:
			return lease.Lease{}, lastErr
		case <-l.closed:
			return lease.Lease{}, lease.Errorf(lease.CodeUnavailable, "the server is shutting down; try again")
		case <-w.turn:
		case <-retry.C:
		}
		if !l.isHead(p.Name, el) {
			continue
		}
		got, err := l.store.Acquire(ctx, p)
		if err == nil {
			if ctx.Err() != nil {
				// The requester left while the grant committed: give it back.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				l.store.Release(rctx, p.Name, got.ID)
				cancel()
				return lease.Lease{}, fmt.Errorf("wait for %q: %w", p.Name, ctx.Err())
			}
			return got, nil
		}
		var le *lease.Error
		if !errors.As(err, &le) || le.Code != lease.CodeHeld {
			return lease.Lease{}, err
		}
		lastErr = err
		// Expiries and releases wake the head through ObserveEvents; a lock delay ends
		// silently, so also wake at the moment the name becomes available.
		until := le.AvailableAt
		if until.IsZero() {
			until = le.ExpiresAt
		}
		retry.Reset(max(time.Millisecond, until.Sub(l.clock.Now())+time.Millisecond))
	}
}

func (l *Line) join(name, holder string) (*waiter, *list.Element, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.lines[name]
	if q == nil {
		q = list.New()
		l.lines[name] = q
	}
	if q.Len() >= l.limits.PerName {
		return nil, nil, lease.Errorf(lease.CodeTooManyWaiters, "%d requests already wait for %q", q.Len(), name)
	}
	if l.total >= l.limits.Total {
		return nil, nil, lease.Errorf(lease.CodeTooManyWaiters, "%d requests already wait on this server", l.total)
	}
	w := &waiter{turn: make(chan struct{}, 1), holder: holder}
	el := q.PushBack(w)
	l.total++
	return w, el, nil
}

// leave takes a waiter out of the line; if it was the head, the next one gets its turn.
func (l *Line) leave(name string, el *list.Element) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.lines[name]
	wasHead := q.Front() == el
	q.Remove(el)
	l.total--
	if q.Len() == 0 {
		delete(l.lines, name)
		return
	}
	if wasHead {
		l.wakeHead(name)
	}
}

func (l *Line) isHead(name string, el *list.Element) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines[name].Front() == el
}

// heldByLine is the answer to a request that will not wait while others do.
func (l *Line) heldByLine(ctx context.Context, name string) error {
	e := lease.Errorf(lease.CodeHeld, "lease %q has %d requests waiting for it", name, l.Waiters(name))
	if st, err := l.store.Get(ctx, name); err == nil {
		e.Holder, e.ExpiresAt, e.AvailableAt = st.Holder, st.ExpiresAt, st.AvailableAt
		if !st.Held {
			e.AvailableAt = l.clock.Now()
		}
	}
	return e
}
