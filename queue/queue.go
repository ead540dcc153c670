// Package queue is the waiting line of acquire: requests that ask to wait for a held lease
// line up per name, first come first served. When the lease is released, revoked or expires,
// the oldest live waiter is woken at once (by the store's commit hook, not by polling) and
// tries to take it with a fresh token; a lock delay is waited out with a timer to its end.
//
// On a store shared by several servers (a SharedStore), the line itself is kept in the store,
// so that it is one line across servers: each server keeps only its own waiters, in the
// store's order, and wakes the first of them; the store grants a free name only to the first
// live waiter of all.
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
	AcquireAll(ctx context.Context, p store.AcquireAllParams) ([]lease.Lease, error)
	Release(ctx context.Context, name, id string) error
	Get(ctx context.Context, name string) (lease.State, error)
}

// SharedStore is a store that keeps the waiting line itself, shared by every server on it.
// Its Acquire refuses a free name (lease_held) while anyone waits for it in line.
type SharedStore interface {
	Store
	// JoinLine puts a request of holder at the end of name's line and returns its place.
	JoinLine(ctx context.Context, name, holder string) (int64, error)
	// LeaveLine takes the request at place id out of name's line.
	LeaveLine(ctx context.Context, name string, id int64) error
	// AcquireInLine grants the name to the request at place id when it is first in line and
	// the name is free, and takes it out of the line. First is the first request of the holder
	// that a handover request of the name's last grant named, once that grant has ended and
	// until the next grant; otherwise the oldest request. Refused with lease_held, it returns how
	// many live requests wait ahead of it (0 when it is first, or when the name is held).
	AcquireInLine(ctx context.Context, p store.AcquireParams, id int64) (lease.Lease, int, error)
	// LineLength returns how many requests wait for name on every server.
	LineLength(ctx context.Context, name string) (int, error)
	// JoinLines puts a request of holder at the end of the line of every name, in one
	// transaction, and returns its places, one per name in the same order.
	JoinLines(ctx context.Context, names []string, holder string) ([]int64, error)
	// AcquireAllInLine grants every name to the request whose places are ids (one per name)
	// when it is first in every line and every name is free, and takes it out of the lines.
	// Refused with lease_held, it returns how many wait ahead of it in the line where most do.
	AcquireAllInLine(ctx context.Context, p store.AcquireAllParams, ids []int64) ([]lease.Lease, int, error)
}

// HeadCheck is how often a waiter that is not first in a shared line checks the line again,
// for the case nobody announces: the first waiter's server died while the name was free.
const HeadCheck = time.Second

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
	shared SharedStore // nil: the line is this server's alone
	clock  lease.Clock
	limits Limits

	mu    sync.Mutex
	lines map[string]*list.List // of *waiter, oldest first
	total int
	// next holds, by name, the holder a handover request named for the current grant: when
	// that grant ends, a waiter of that holder goes first.
	next map[string]preferred
	// first holds, by name, the holder whose oldest waiter goes first: the holder a handover
	// request named, from the end of the grant it was about to the name's next grant. A waiter
	// of that holder joining meanwhile goes first too, as the shared store orders its line.
	first map[string]string

	closed chan struct{} // closed by Close: every waiter gives up
	once   sync.Once
}

type waiter struct {
	turn   chan struct{} // signalled when the waiter should try again
	id     int64         // its place in a shared line; 0 before it has one, or in a line of its own
	holder string
	since  time.Time
	// multi is set for a place of an acquire of several names: a handover never moves it
	// ahead, which could put two such waiters in opposite orders in two lines.
	multi bool
}

// preferred is the holder a handover request of grant token named.
type preferred struct {
	token  int64
	holder string
}

// Waiting is one request in a name's line, for people to see who waits and since when.
type Waiting struct {
	Holder string
	Since  time.Time
}

// New returns an empty line. On a SharedStore, the line is the store's, shared by every server.
func New(st Store, clock lease.Clock, limits Limits) *Line {
	l := &Line{store: st, clock: clock, limits: limits, lines: map[string]*list.List{}, next: map[string]preferred{},
		first: map[string]string{}, closed: make(chan struct{})}
	l.shared, _ = st.(SharedStore)
	return l
}

// Close makes every waiter give up with unavailable, so a shutting-down server is not held
// up by long waits. It is safe to call more than once.
func (l *Line) Close() { l.once.Do(func() { close(l.closed) }) }

// Waiters returns how many requests wait for name (on every server, with a shared line).
func (l *Line) Waiters(name string) int {
	if l.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if n, err := l.shared.LineLength(ctx, name); err == nil {
			return n
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.lines[name]; q != nil {
		return q.Len()
	}
	return 0
}

// Line returns the requests waiting for name, oldest first.
func (l *Line) Line(name string) []Waiting {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.lines[name]
	if q == nil {
		return nil
	}
	out := make([]Waiting, 0, q.Len())
	for e := q.Front(); e != nil; e = e.Next() {
		w := e.Value.(*waiter)
		out = append(out, Waiting{Holder: w.holder, Since: w.since})
	}
	return out
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
				l.first[e.Name] = p.holder
				l.promote(e.Name, p.holder)
			}
			// A freed slot of a semaphore wakes the line of the semaphore, one line for all
			// its slots: the head takes whichever slot is free.
			name, _, _ := lease.SlotOf(e.Name)
			l.wakeHead(name)
		case lease.EventAcquired:
			if e.Mode == lease.ModeShared {
				// A reader granted from the head lets the next reader in line try at
				// once: readers at the head of the line are granted together.
				name, _, _ := lease.SlotOf(e.Name)
				l.wakeHead(name)
			}
			delete(l.first, e.Name) // the holder handed to, or someone else, has the name
			if p, ok := l.next[e.Name]; ok && p.token < e.Token {
				delete(l.next, e.Name) // the grant asked about ended unseen
			}
		}
	}
}

// promote moves the oldest waiter of holder for name to the head of its line; in a shared
// line, only among the waiters that have their place in the store's line. l.mu is held.
func (l *Line) promote(name, holder string) {
	q := l.lines[name]
	if q == nil {
		return
	}
	// In a shared line, only the waiters that have their place in the store's line may move.
	var els []*list.Element
	var line []lease.Waiter
	for el := q.Front(); el != nil; el = el.Next() {
		if w := el.Value.(*waiter); l.shared == nil || w.id != 0 {
			els, line = append(els, el), append(line, lease.Waiter{Holder: w.holder, Multi: w.multi})
		}
	}
	if i := lease.HandedFirst(line, holder); i >= 0 {
		q.MoveToFront(els[i])
	}
}

// LineChanged wakes the first waiter of name here: the shared line changed in a way no event
// tells (a waiter left, on any server). Wire it to the store's line hook. It never blocks.
func (l *Line) LineChanged(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wakeHead(name)
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
	if l.shared != nil {
		// The store refuses a free name while anyone, on any server, waits for it.
		got, err := l.store.Acquire(ctx, p)
		if err == nil || !lease.IsCode(err, lease.CodeHeld) || wait <= 0 {
			return got, err
		}
		return l.waitShared(ctx, p, wait)
	}
	l.mu.Lock()
	queued := l.lines[p.Name] != nil && l.lines[p.Name].Len() > 0
	l.mu.Unlock()
	if queued && p.IdempotencyKey != "" {
		// A retry whose first answer was lost gets its grant back, not a place behind those
		// who queued since (who wait for that very grant).
		rp := p
		rp.ReplayOnly = true
		if got, err := l.store.Acquire(ctx, rp); err == nil || !lease.IsCode(err, lease.CodeHeld) {
			return got, err
		}
	}
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
	return l.wait(ctx, p, wait, w, el, func(ctx context.Context) (lease.Lease, int, error) {
		got, err := l.store.Acquire(ctx, p)
		return got, 0, err
	})
}

// waitShared waits in the store's line, shared by every server, and in this server's line of
// the same waiters in the store's order.
func (l *Line) waitShared(ctx context.Context, p store.AcquireParams, wait time.Duration) (lease.Lease, error) {
	w, el, err := l.join(p.Name, p.Holder)
	if err != nil {
		return lease.Lease{}, err
	}
	defer l.leave(p.Name, el)
	join := func(ctx context.Context) (int64, error) {
		id, err := l.shared.JoinLine(ctx, p.Name, p.Holder)
		if err == nil {
			l.place(p.Name, el, id)
		}
		return id, err
	}
	id, err := join(ctx)
	if err != nil {
		return lease.Lease{}, err
	}
	granted := false
	defer func() {
		if !granted { // a grant took the waiter out of line in its transaction
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			l.shared.LeaveLine(lctx, p.Name, id)
			cancel()
		}
	}()
	return l.wait(ctx, p, wait, w, el, func(ctx context.Context) (lease.Lease, int, error) {
		got, ahead, err := l.shared.AcquireInLine(ctx, p, id)
		if errors.Is(err, store.ErrPlaceLost) {
			// The others took this server for dead (its database session ended, as in a
			// database restart): wait on, from the end of the line.
			if id, err = join(ctx); err != nil {
				return lease.Lease{}, 0, err
			}
			got, ahead, err = l.shared.AcquireInLine(ctx, p, id)
		}
		granted = err == nil
		return got, ahead, err
	})
}

// wait waits in line for the lease of p.Name (see waitTurn).
func (l *Line) wait(ctx context.Context, p store.AcquireParams, wait time.Duration, w *waiter, el *list.Element,
	try func(context.Context) (lease.Lease, int, error)) (lease.Lease, error) {
	return waitTurn(l, ctx, fmt.Sprintf("%q", p.Name), wait, w, func() bool { return l.isHead(p.Name, el) }, try,
		func(ctx context.Context, got lease.Lease) { l.store.Release(ctx, p.Name, got.ID) })
}

// waitTurn waits in line until try, called whenever the waiter is first in this server's lines
// (head) and may have its turn, grants what it asks for (what, for messages). try answers how
// many wait ahead in a shared line when it is refused. A grant that raced with ctx ending is
// handed to giveBack, so that nothing is held that nobody received.
func waitTurn[T any](l *Line, ctx context.Context, what string, wait time.Duration, w *waiter, head func() bool,
	try func(context.Context) (T, int, error), giveBack func(context.Context, T)) (T, error) {
	var none T
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	retry := time.NewTimer(0) // the first try happens at once if this waiter is the head
	defer retry.Stop()
	var lastErr error = lease.Errorf(lease.CodeHeld, "lease %s is held", what)
	for {
		select {
		case <-ctx.Done():
			return none, fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-deadline.C:
			return none, lastErr
		case <-l.closed:
			return none, lease.Errorf(lease.CodeUnavailable, "the server is shutting down; try again")
		case <-w.turn:
		case <-retry.C:
		}
		if !head() {
			continue
		}
		got, ahead, err := try(ctx)
		if err == nil {
			if ctx.Err() != nil {
				// The requester left while the grant committed: give it back.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				giveBack(rctx, got)
				cancel()
				return none, fmt.Errorf("wait for %s: %w", what, ctx.Err())
			}
			return got, nil
		}
		var le *lease.Error
		if !errors.As(err, &le) || le.Code != lease.CodeHeld {
			return none, err
		}
		lastErr = err
		if ahead > 0 {
			// Others, on other servers, are first: their leaving wakes this waiter, and so
			// does their server's death, seen only when someone looks at the line.
			retry.Reset(HeadCheck)
			continue
		}
		// Expiries and releases wake the head through ObserveEvents; a lock delay ends
		// silently, so also wake at the moment the name becomes available.
		until := le.AvailableAt
		if until.IsZero() {
			until = le.ExpiresAt
		}
		retry.Reset(max(time.Millisecond, until.Sub(l.clock.Now())+time.Millisecond))
	}
}

// place moves a waiter to its place in this server's line: in the order of the shared line,
// ahead of those without a place yet, the holder a handover named first. It wakes the head,
// which may have changed.
func (l *Line) place(name string, el *list.Element, id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.lines[name]
	el.Value.(*waiter).id = id
	q.MoveToBack(el)
	for e := q.Front(); e != nil; e = e.Next() {
		if o := e.Value.(*waiter).id; e != el && (o == 0 || o > id) {
			q.MoveBefore(el, e)
			break
		}
	}
	if h, ok := l.first[name]; ok {
		l.promote(name, h)
	}
	l.wakeHead(name)
}

func (l *Line) join(name, holder string) (*waiter, *list.Element, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.room(name, 1); err != nil {
		return nil, nil, err
	}
	w := &waiter{turn: make(chan struct{}, 1), holder: holder, since: l.clock.Now()}
	return w, l.push(name, w), nil
}

// room refuses a waiter when name's line, or the server's lines with more places taken, are
// full. l.mu is held.
func (l *Line) room(name string, more int) error {
	if q := l.lines[name]; q != nil && q.Len() >= l.limits.PerName {
		return lease.Errorf(lease.CodeTooManyWaiters, "%d requests already wait for %q", q.Len(), name)
	}
	if l.total+more > l.limits.Total {
		return lease.Errorf(lease.CodeTooManyWaiters, "%d requests already wait on this server", l.total)
	}
	return nil
}

// push puts w at the end of name's line (or first, for the holder a handover named) and
// returns its place. l.mu is held.
func (l *Line) push(name string, w *waiter) *list.Element {
	q := l.lines[name]
	if q == nil {
		q = list.New()
		l.lines[name] = q
	}
	el := q.PushBack(w)
	l.total++
	if h, ok := l.first[name]; ok && h == w.holder {
		l.promote(name, h)
	}
	return el
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

// Waiting returns how many requests wait for each name that has a line on this server.
func (l *Line) Waiting() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.lines))
	for name, q := range l.lines {
		if q.Len() > 0 {
			out[name] = q.Len()
		}
	}
	return out
}
