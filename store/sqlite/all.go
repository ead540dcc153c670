package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// AcquireAll grants every name or none. It is one operation of the writer's batch: every name
// is decided first (decideName, Acquire's rule), and only when all are free are the grants
// written; a refusal writes none, and a failure rolls the operation back with what it did to
// the writer's memory. See store.Store.
func (s *Store) AcquireAll(ctx context.Context, p store.AcquireAllParams) ([]lease.Lease, error) {
	var out []lease.Lease
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		var err error
		out, err = acquireAll(ctx, t, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("acquire %d names: %w", len(p.Names), err)
	}
	return out, nil
}

// acquireAll is AcquireAll's operation.
func acquireAll(ctx context.Context, t *txn, p store.AcquireAllParams) ([]lease.Lease, error) {
	var sess lease.Session
	if p.SessionID != "" {
		var err error
		if sess, err = sessionByID(ctx, t.tx, p.SessionID, p.Owner); err != nil {
			return nil, err
		}
		// Refused before anything is written: a refusal commits what its operation wrote.
		if _, err := lease.SessionGrant(sess, p.Names[0], p.Holder, 0, 0, ms(t.now)); err != nil {
			return nil, err
		}
	}
	var free, held []string
	var refusals []*lease.Error
	for _, name := range p.Names {
		_, _, _, err := decideName(ctx, t, p.One(name))
		var le *lease.Error
		switch {
		case err == nil:
			free = append(free, name)
		case errors.As(err, &le) && le.Code == lease.CodeHeld:
			held, refusals = append(held, name), append(refusals, le)
		default:
			return nil, err
		}
	}
	if len(held) > 0 {
		return nil, lease.HeldAll(len(p.Names), held, refusals)
	}
	if err := checkHeldCap(ctx, t, p.Owner, p.MaxHeld, len(free)); err != nil {
		return nil, err
	}
	// Every name is free: the grants, in the order asked, each with the next token of the one
	// counter.
	out := make([]lease.Lease, 0, len(free))
	for _, name := range free {
		token, err := lease.NextToken(t.s.mem.token, ms(t.now))
		if err != nil {
			return nil, err
		}
		l, err := writeGrant(ctx, t, p.One(name), sess, name, token, lease.NewID(token), false)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}
