package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// AcquireAll grants every name or none, in p.Mode. It is one operation of the writer's batch:
// every name is decided first (decideName, Acquire's rule), writing nothing but expiries, and
// only when all are free are the grants written; a refusal writes none, and a failure rolls
// the operation back with what it did to the writer's memory. See store.Store.
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

// allDecision is what an acquire of several names decided for one of them: the grant's name
// (the name, or a shared slot of it), whether it is shared, and the count of shared slots the
// name's row must say once it is granted (0: as it is).
type allDecision struct {
	gname  string
	shared bool
	keep   int
}

// acquireAll is AcquireAll's operation.
func acquireAll(ctx context.Context, t *txn, p store.AcquireAllParams) ([]lease.Lease, error) {
	var fp []byte
	if p.IdempotencyKey != "" {
		fp = store.FingerprintAll(p)
		ls, done, err := replayAll(ctx, t, p, fp)
		if done || err != nil {
			return ls, err
		}
	}
	if p.ReplayOnly {
		return nil, store.NotReplayed(p.Names[0])
	}
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
	free := make([]allDecision, 0, len(p.Names))
	var held []string
	var refusals []*lease.Error
	for _, name := range p.Names {
		// Decided without a write: a slot count to keep waits for the grant.
		var d allDecision
		gname, _, shared, err := decideName(ctx, t, p.One(name), func(n int) { d.keep = n })
		var le *lease.Error
		switch {
		case err == nil:
			d.gname, d.shared = gname, shared
			free = append(free, d)
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
	// counter. The names differ, so no grant changes what was decided for another.
	out := make([]lease.Lease, 0, len(free))
	for i, d := range free {
		name := p.Names[i]
		if d.keep > 0 {
			if err := keepSlots(ctx, t, name, d.keep, true); err != nil {
				return nil, err
			}
		}
		token, err := lease.NextToken(t.s.mem.token, ms(t.now))
		if err != nil {
			return nil, err
		}
		id := lease.NewID(token)
		if fp != nil {
			if id, err = keepAllKey(ctx, t, p, i, fp, token); err != nil {
				return nil, err
			}
		}
		l, err := writeGrant(ctx, t, p.One(name), sess, d.gname, token, id, d.shared)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// keepAllKey records the grant of token to the i-th name of p under p's Idempotency-Key and
// returns its lease ID.
func keepAllKey(ctx context.Context, t *txn, p store.AcquireAllParams, i int, fp []byte, token int64) (string, error) {
	salt := lease.NewSalt()
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO idempotency (key_hash, name, fingerprint, salt, token, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key_hash) DO UPDATE SET name = excluded.name,
		fingerprint = excluded.fingerprint, salt = excluded.salt, token = excluded.token, created_at = excluded.created_at`,
		lease.HashID(store.AllKey(p.IdempotencyKey, i)), p.Names[i], fp, salt, token, t.now); err != nil {
		return "", fmt.Errorf("keep idempotency key: %w", w(err))
	}
	return lease.IdempotentID(p.IdempotencyKey, salt, token), nil
}

// replayAll answers a retry of an idempotent acquire of several names: done is true when the
// key was seen within 24 h, with the grants it made (every one still current) or an error
// saying why not (another request under the same key: invalid_request; a grant ended:
// lease_lost).
func replayAll(ctx context.Context, t *txn, p store.AcquireAllParams, fp []byte) ([]lease.Lease, bool, error) {
	out := make([]lease.Lease, 0, len(p.Names))
	for i, name := range p.Names {
		var r lease.Idempotent
		var created int64
		err := t.tx.QueryRowContext(ctx, `SELECT name, fingerprint, salt, token, created_at FROM idempotency WHERE key_hash = ?`,
			lease.HashID(store.AllKey(p.IdempotencyKey, i))).Scan(&r.Name, &r.Fingerprint, &r.Salt, &r.Token, &created)
		r.CreatedAt = ms(created)
		if errors.Is(err, sql.ErrNoRows) || err == nil && !r.Remembered(ms(t.now), store.IdempotencyTTL) {
			if i == 0 {
				return nil, false, nil
			}
			// Records of one request are made and forgotten together.
			return nil, true, lease.Errorf(lease.CodeInvalid, "Idempotency-Key was already used for a different request")
		}
		if err != nil {
			return nil, false, fmt.Errorf("read idempotency key: %w", w(err))
		}
		if err := r.CheckRetry(name, fp); err != nil {
			return nil, true, err
		}
		g, err := scanGrant(t.queryRow(ctx, stGrantByToken, r.Token))
		if err != nil {
			return nil, true, fmt.Errorf("read grant %d of idempotency key: %w", r.Token, w(err))
		}
		if g, err = settle(ctx, t, g); err != nil {
			return nil, true, err
		}
		l, err := r.Replay(p.IdempotencyKey, g.lease(), g.heldAt(t.now), g.endKind.String,
			func(id string) bool { return lease.SameHash(idKey(id), g.idHash) })
		if err != nil {
			return nil, true, err
		}
		out = append(out, l)
	}
	return out, true, nil
}
