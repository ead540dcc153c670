package queue

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// An acquire of several names waits in the line of every one of them at once, holding none of
// them meanwhile: one place per name, all taken together (under l.mu here, in one transaction
// in a shared line), so that any two waiters stand in the same order in every line they share
// and the oldest of all is first in each of its lines: no two waiters wait for each other.
// It tries when it is first in every line, and is granted when all its names are free; a
// single-name waiter that came later waits behind it in each line, whatever its other names.

// AcquireAll grants every name of p or none, waiting up to wait for all of them at once in the
// line of each. Without a wait it fails at once when a name is held or others wait for it.
// Codes: lease_held (the wait ran out), too_many_waiters, unavailable (the line was closed),
// and those of store.AcquireAll.
func (l *Line) AcquireAll(ctx context.Context, p store.AcquireAllParams, wait time.Duration) ([]lease.Lease, error) {
	st := l.store
	if l.shared != nil {
		// The store refuses a free name while anyone, on any server, waits for it.
		got, err := st.AcquireAll(ctx, p)
		if err == nil || !lease.IsCode(err, lease.CodeHeld) || wait <= 0 {
			return got, err
		}
		return l.waitAllShared(ctx, p, wait)
	}
	queued := l.queued(p.Names)
	if len(queued) > 0 && p.IdempotencyKey != "" {
		// A retry whose first answer was lost gets its grants back (see Acquire).
		rp := p
		rp.ReplayOnly = true
		if got, err := st.AcquireAll(ctx, rp); err == nil || !lease.IsCode(err, lease.CodeHeld) {
			return got, err
		}
	}
	if len(queued) == 0 {
		got, err := st.AcquireAll(ctx, p)
		if err == nil || !lease.IsCode(err, lease.CodeHeld) || wait <= 0 {
			return got, err
		}
	} else if wait <= 0 {
		return nil, l.heldByLines(ctx, p.Names, queued)
	}
	w, els, err := l.joinAll(p.Names, p.Holder)
	if err != nil {
		return nil, err
	}
	defer l.leaveAll(p.Names, els)
	return l.waitAll(ctx, p, wait, w, els, func(ctx context.Context) ([]lease.Lease, int, error) {
		got, err := st.AcquireAll(ctx, p)
		return got, 0, err
	})
}

// waitAll waits in the lines of p's names (see waitTurn), giving back every lease of a grant
// nobody received.
func (l *Line) waitAll(ctx context.Context, p store.AcquireAllParams, wait time.Duration, w *waiter, els []*list.Element,
	try func(context.Context) ([]lease.Lease, int, error)) ([]lease.Lease, error) {
	what := fmt.Sprintf("%q", p.Names)
	return waitTurn(l, ctx, what, wait, w, func() bool { return l.isHeadAll(p.Names, els) }, try,
		func(ctx context.Context, got []lease.Lease) {
			for _, g := range got {
				l.store.Release(ctx, g.Name, g.ID)
			}
		})
}

// waitAllShared waits in the store's lines of p's names, shared by every server, and in this
// server's lines of the same waiters in the store's order.
func (l *Line) waitAllShared(ctx context.Context, p store.AcquireAllParams, wait time.Duration) ([]lease.Lease, error) {
	shared := l.shared
	w, els, err := l.joinAll(p.Names, p.Holder)
	if err != nil {
		return nil, err
	}
	defer l.leaveAll(p.Names, els)
	var ids []int64
	join := func(ctx context.Context) error {
		var err error
		if ids, err = shared.JoinLines(ctx, p.Names, p.Holder); err == nil {
			for i, name := range p.Names {
				l.place(name, els[i], ids[i])
			}
		}
		return err
	}
	leave := func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for i, name := range p.Names {
			shared.LeaveLine(lctx, name, ids[i])
		}
	}
	if err := join(ctx); err != nil {
		return nil, err
	}
	granted := false
	defer func() {
		if !granted { // a grant took the waiter out of the lines in its transaction
			leave()
		}
	}()
	return l.waitAll(ctx, p, wait, w, els, func(ctx context.Context) ([]lease.Lease, int, error) {
		got, ahead, err := shared.AcquireAllInLine(ctx, p, ids)
		if errors.Is(err, store.ErrPlaceLost) {
			// The others took this server for dead: wait on, from the end of every line.
			leave()
			if err = join(ctx); err != nil {
				return nil, 0, err
			}
			got, ahead, err = shared.AcquireAllInLine(ctx, p, ids)
		}
		granted = err == nil
		return got, ahead, err
	})
}

// queued returns the names that others wait for on this server.
func (l *Line) queued(names []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, n := range names {
		if q := l.lines[n]; q != nil && q.Len() > 0 {
			out = append(out, n)
		}
	}
	return out
}

// joinAll puts one waiter at the end of the line of every name, all at once, or in none when a
// line is full.
func (l *Line) joinAll(names []string, holder string) (*waiter, []*list.Element, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range names {
		if err := l.room(n, len(names)); err != nil {
			return nil, nil, err
		}
	}
	turn, since := make(chan struct{}, 1), l.clock.Now()
	els := make([]*list.Element, len(names))
	for i, n := range names {
		// One waiter per line, for its own place in a shared line; all wake on the same turn.
		els[i] = l.push(n, &waiter{turn: turn, holder: holder, since: since, multi: true})
	}
	return els[0].Value.(*waiter), els, nil
}

// leaveAll takes a waiter out of the line of every name.
func (l *Line) leaveAll(names []string, els []*list.Element) {
	for i, n := range names {
		l.leave(n, els[i])
	}
}

// isHeadAll reports whether the waiter is first in the line of every name.
func (l *Line) isHeadAll(names []string, els []*list.Element) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, n := range names {
		if l.lines[n].Front() != els[i] {
			return false
		}
	}
	return true
}

// heldByLines is the answer to an acquire of several names that will not wait while others
// wait for some of them (queued).
func (l *Line) heldByLines(ctx context.Context, names, queued []string) error {
	held := make([]*lease.Error, len(queued))
	for i, n := range queued {
		held[i] = l.heldByLine(ctx, n).(*lease.Error)
	}
	e := lease.HeldAll(len(names), queued, held)
	e.Message = fmt.Sprintf("others wait in line for %s; none of the %d names was granted", strings.Join(queued, ", "), len(names))
	return e
}
