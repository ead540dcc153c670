package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// AcquireAll grants every name or none, in one operation of the batch writer (never its fast
// path: fastOp.eligible knows only single names). Locks, in this order: the owner's cap
// (advisory), the session, every name's row in one global order (by name, so that two such
// acquires, or an acquire and the fast path, never deadlock), each name's grant, the last
// token; then the database's clock is read, and each name is decided by Acquire's rule
// (decider). The grants are written only when every name is free. See store.Store.
func (s *Store) AcquireAll(ctx context.Context, p store.AcquireAllParams) ([]lease.Lease, error) {
	out, _, err := s.acquireAll(ctx, p, nil)
	return out, err
}

// acquireAll grants p's names to the waiter whose places in the names' lines are places (nil:
// a request not in line) when it is first in every one of them, or nobody waits; refused for a
// line, it returns how many wait ahead in the line where most do.
func (s *Store) acquireAll(ctx context.Context, p store.AcquireAllParams, places map[string]int64) ([]lease.Lease, int, error) {
	var out []lease.Lease
	var ahead int
	var fp []byte
	if p.IdempotencyKey != "" {
		fp = store.FingerprintAll(p)
	}
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		out, ahead = nil, 0
		if fp != nil {
			// The key's first record names the request: its lock comes first, as a single
			// acquire's key's does.
			if err := advisory(ctx, t, "idempotency", lease.HashID(store.AllKey(p.IdempotencyKey, 0))); err != nil {
				return err
			}
		}
		sess, err := lockOwner(ctx, t, p.Owner, p.MaxHeld, p.SessionID)
		if err != nil {
			return err
		}
		if err := lockNames(ctx, t, p.Names); err != nil {
			return err
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		if fp != nil {
			got, done, err := replayAll(ctx, t, p, fp, now)
			if done || err != nil {
				out = got
				return err
			}
		}
		if p.ReplayOnly {
			return store.NotReplayed(p.Names[0])
		}
		// Refused before anything is written: a refusal commits what its operation wrote.
		if p.SessionID != "" {
			if _, err := lease.SessionGrant(sess, p.Names[0], p.Holder, 0, 0, ms(now)); err != nil {
				return err
			}
		}
		type name struct {
			g      grant
			ok     bool
			decide func(now, last int64) (string, int64, bool, error)
			keep   int // the shared slots to count once granted (0: as they are)
		}
		names := make([]name, len(p.Names))
		var held []string
		var refusals []*lease.Error
		for i, n := range p.Names {
			// Each name's row is locked already: this locks its grant.
			g, ok, err := lockName(ctx, t, n, true)
			if err != nil {
				return err
			}
			if ok {
				if g, err = settle(ctx, t, g, now); err != nil {
					return err
				}
			}
			// Decided without a write: a slot count to keep waits for the grant.
			decide, err := decider(ctx, t, p.One(n), g, ok, now, func(k int) { names[i].keep = k })
			if err != nil {
				return err
			}
			names[i].g, names[i].ok, names[i].decide = g, ok, decide
			_, _, _, err = decide(now, 0)
			if err == nil {
				// A free name goes to the first in its line, if anyone waits.
				var before int
				before, err = checkLine(ctx, t, n, places[n], g, ok, now)
				ahead = max(ahead, before)
			}
			var le *lease.Error
			if errors.As(err, &le) && le.Code == lease.CodeHeld {
				held, refusals = append(held, n), append(refusals, le)
			} else if err != nil {
				return err
			}
		}
		if len(held) > 0 {
			return lease.HeldAll(len(p.Names), held, refusals)
		}
		last, err := lockToken(ctx, t)
		if err != nil {
			return err
		}
		// Decide again at the clock read after the last lock: the names' rows are still
		// locked, so only time has moved, and the tokens are above now's microseconds.
		if now, err = t.now(ctx); err != nil {
			return err
		}
		if p.MaxHeld > 0 {
			more := len(p.Names)
			if err := checkOwnerCap(ctx, t, "leases", ownedLeases, p.Owner, now, p.MaxHeld,
				func(n, most int) error { return lease.CheckHeldCap(n+more-1, most) }); err != nil {
				return err
			}
		}
		for i := range names {
			names[i].keep = 0
			gname, token, shared, err := names[i].decide(now, last)
			if err != nil {
				return err
			}
			if k := names[i].keep; k > 0 {
				if err := keepSlots(ctx, t, p.Names[i], k, true); err != nil {
					return err
				}
			}
			id := lease.NewID(token)
			if fp != nil {
				if id, err = keepAllKey(ctx, t, p, i, fp, token, now); err != nil {
					return err
				}
			}
			l, err := insertGrant(ctx, t, p.One(p.Names[i]), sess, gname, token, id, now, shared)
			if err != nil {
				return err
			}
			out, last = append(out, l), token
		}
		if _, err := t.tx.Exec(ctx, `UPDATE tokens SET last = $1`, last); err != nil {
			return fmt.Errorf("persist the last token: %w", err)
		}
		if len(places) > 0 {
			ids := make([]int64, 0, len(places))
			for _, id := range places {
				ids = append(ids, id)
			}
			if _, err := t.tx.Exec(ctx, `DELETE FROM waiters WHERE id = ANY($1)`, ids); err != nil {
				return fmt.Errorf("take the waiter out of line: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, ahead, fmt.Errorf("acquire %d names: %w", len(p.Names), err)
	}
	return out, 0, nil
}

// lockNames locks the rows of names, made for names never used, in one global order (by name):
// two transactions that lock names this way never wait for each other in a cycle.
func lockNames(ctx context.Context, t *txn, names []string) error {
	sorted := slices.Sorted(slices.Values(names))
	if _, err := t.tx.Exec(ctx, `INSERT INTO names (name) SELECT unnest($1::text[]) ORDER BY 1 ON CONFLICT (name) DO NOTHING`, sorted); err != nil {
		return fmt.Errorf("lock the names: %w", err)
	}
	if _, err := t.tx.Exec(ctx, `SELECT name FROM names WHERE name = ANY($1) ORDER BY name FOR UPDATE`, sorted); err != nil {
		return fmt.Errorf("lock the names: %w", err)
	}
	return nil
}

// JoinLines puts a request of holder at the end of the line of every name, in one transaction
// that holds every name's row lock: any two such requests stand in the same order in every line
// they share. See queue.SharedAllStore.
func (s *Store) JoinLines(ctx context.Context, names []string, holder string) ([]int64, error) {
	var ids []int64
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		ids = make([]int64, len(names))
		if err := lockNames(ctx, t, names); err != nil {
			return err
		}
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		for i, name := range names {
			if ids[i], err = s.joinLocked(ctx, t, name, holder, now, true); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for %d names: %w", len(names), err)
	}
	return ids, nil
}

// AcquireAllInLine grants every name to the request whose places are ids (one per name, in
// p.Names's order) when it is the first live waiter in every line and every name is free,
// taking it out of the lines in the same transaction. Refused, it answers lease_held and how
// many live waiters are ahead of it in the line where most are. Codes: those of AcquireAll;
// unavailable when a place was lost. See queue.SharedAllStore.
func (s *Store) AcquireAllInLine(ctx context.Context, p store.AcquireAllParams, ids []int64) ([]lease.Lease, int, error) {
	if len(ids) != len(p.Names) {
		return nil, 0, fmt.Errorf("AcquireAllInLine: %d places for %d names", len(ids), len(p.Names))
	}
	places := make(map[string]int64, len(ids))
	for i, name := range p.Names {
		if ids[i] <= 0 {
			return nil, 0, errors.New("AcquireAllInLine: no place in line")
		}
		places[name] = ids[i]
	}
	return s.acquireAll(ctx, p, places)
}

// keepAllKey records the grant of token to the i-th name of p under p's Idempotency-Key and
// returns its lease ID.
func keepAllKey(ctx context.Context, t *txn, p store.AcquireAllParams, i int, fp []byte, token, now int64) (string, error) {
	salt := lease.NewSalt()
	if _, err := t.tx.Exec(ctx, `INSERT INTO idempotency (key_hash, name, fingerprint, salt, token, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key_hash) DO UPDATE SET name = excluded.name,
		fingerprint = excluded.fingerprint, salt = excluded.salt, token = excluded.token, created_at = excluded.created_at`,
		lease.HashID(store.AllKey(p.IdempotencyKey, i)), p.Names[i], fp, salt, token, now); err != nil {
		return "", fmt.Errorf("keep idempotency key: %w", err)
	}
	return lease.IdempotentID(p.IdempotencyKey, salt, token), nil
}

// replayAll answers a retry of an idempotent acquire of several names, whose names are locked:
// done is true when the key was seen within 24 h, with the grants it made (every one still
// current) or an error saying why not (another request under the same key: invalid_request;
// a grant ended: lease_lost).
func replayAll(ctx context.Context, t *txn, p store.AcquireAllParams, fp []byte, now int64) ([]lease.Lease, bool, error) {
	out := make([]lease.Lease, 0, len(p.Names))
	for i, name := range p.Names {
		var r lease.Idempotent
		var created int64
		err := t.tx.QueryRow(ctx, `SELECT name, fingerprint, salt, token, created_at FROM idempotency WHERE key_hash = $1`,
			lease.HashID(store.AllKey(p.IdempotencyKey, i))).Scan(&r.Name, &r.Fingerprint, &r.Salt, &r.Token, &created)
		r.CreatedAt = ms(created)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !r.Remembered(ms(now), store.IdempotencyTTL) {
			if i == 0 {
				return nil, false, nil
			}
			// Records of one request are made and forgotten together.
			return nil, true, lease.Errorf(lease.CodeInvalid, "Idempotency-Key was already used for a different request")
		}
		if err != nil {
			return nil, false, fmt.Errorf("read idempotency key: %w", err)
		}
		if err := r.CheckRetry(name, fp); err != nil {
			return nil, true, err
		}
		g, err := scanGrant(t.tx.QueryRow(ctx, `SELECT `+grantCols+` FROM grants g WHERE g.token = $1 FOR UPDATE`, r.Token))
		if err != nil {
			return nil, true, fmt.Errorf("read grant %d of idempotency key: %w", r.Token, err)
		}
		if g, err = settle(ctx, t, g, now); err != nil {
			return nil, true, err
		}
		l, err := r.Replay(p.IdempotencyKey, g.lease(), g.rule().HeldAt(ms(now)), deref(g.endKind),
			func(id string) bool { return lease.SameHash(lease.HashID(id), g.idHash) })
		if err != nil {
			return nil, true, err
		}
		out = append(out, l)
	}
	return out, true, nil
}
