package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/heldsql"
)

// grant is a row of the grants table.
type grant struct {
	token                      int64
	name, holder               string
	idHash                     []byte
	ttl, lockDelay             int64
	acquired, renewed, expires int64
	ended                      *int64
	endKind                    *string
	metadata                   *string
	session                    string // Ref of the session it is held under, if any
	owner                      string // the id of the key that took it
	shared                     bool   // a shared (read) grant, of a slot of its name
}

const grantCols = `g.token, g.name, g.holder, g.id_hash, g.ttl_ms, g.lock_delay_ms, g.acquired_at,
	g.renewed_at, g.expires_at, g.ended_at, g.end_kind, g.metadata, g.session, g.owner, g.shared`

func scanGrant(r pgx.Row) (grant, error) {
	var g grant
	err := r.Scan(&g.token, &g.name, &g.holder, &g.idHash, &g.ttl, &g.lockDelay, &g.acquired,
		&g.renewed, &g.expires, &g.ended, &g.endKind, &g.metadata, &g.session, &g.owner, &g.shared)
	return g, err
}

// rule is the grant as the lease rules see it.
func (g grant) rule() lease.Grant {
	r := lease.Grant{
		Name: g.name, Holder: g.holder, Token: g.token,
		TTL:        time.Duration(g.ttl) * time.Millisecond,
		LockDelay:  time.Duration(g.lockDelay) * time.Millisecond,
		AcquiredAt: ms(g.acquired), RenewedAt: ms(g.renewed), ExpiresAt: ms(g.expires),
	}
	if g.ended != nil {
		r.EndedAt, r.End = ms(*g.ended), lease.End(deref(g.endKind))
	}
	return r
}

func (g grant) lease() lease.Lease {
	name, slot, _ := lease.SlotOf(g.name)
	return lease.Lease{
		Name: name, Slot: slot, Holder: g.holder, Token: g.token,
		TTL:        time.Duration(g.ttl) * time.Millisecond,
		AcquiredAt: ms(g.acquired), RenewedAt: ms(g.renewed), ExpiresAt: ms(g.expires),
		LockDelay: time.Duration(g.lockDelay) * time.Millisecond,
		Metadata:  raw(g.metadata),
		Session:   g.session,
		Mode:      lease.EventMode(g.shared),
	}
}

// state is what anyone may see of the grant at now.
func (g grant) state(now int64) lease.State {
	st := g.rule().State(ms(now))
	st.Metadata = raw(g.metadata)
	st.Session, st.Mode = g.session, lease.EventMode(g.shared)
	return st
}

func raw(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// lockName locks name's row and reads its current grant, locked too; ok is false while the
// name has no grant. The name's row is its lock: acquire, revoke and fenced writes naming the
// lease take it first, so they decide one at a time. With create, a name never used gets its
// row (acquire); without, it stays unlocked and unknown: nothing can be decided on it that a
// concurrent first acquire would change.
func lockName(ctx context.Context, t *txn, name string, create bool) (g grant, ok bool, err error) {
	if create {
		if _, err := t.tx.Exec(ctx, `INSERT INTO names (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, name); err != nil {
			return grant{}, false, fmt.Errorf("lock lease %q: %w", name, err)
		}
	}
	var token *int64
	err = t.tx.QueryRow(ctx, `SELECT token FROM names WHERE name = $1 FOR UPDATE`, name).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) && !create {
		return grant{}, false, nil
	}
	if err != nil {
		return grant{}, false, fmt.Errorf("lock lease %q: %w", name, err)
	}
	if token == nil {
		return grant{}, false, nil
	}
	g, err = scanGrant(t.tx.QueryRow(ctx, `SELECT `+grantCols+` FROM grants g WHERE g.token = $1 FOR UPDATE`, *token))
	if err != nil {
		return grant{}, false, fmt.Errorf("read lease %q: %w", name, err)
	}
	return g, true, nil
}

// end closes a grant and records the event, by actor (an admin's revoke) if any. For an expiry,
// at is the expiry itself.
func end(ctx context.Context, t *txn, g grant, kind lease.End, at, now int64, actor string) error {
	if _, err := t.tx.Exec(ctx, `UPDATE grants SET ended_at = $1, end_kind = $2 WHERE token = $3`, at, string(kind), g.token); err != nil {
		return fmt.Errorf("end lease %q token %d: %w", g.name, g.token, err)
	}
	recordEnd(t, g, kind, at, actor)
	return nil
}

// recordEnd records the event of g's end, by actor if any, at at.
func recordEnd(t *txn, g grant, kind lease.End, at int64, actor string) {
	t.record(lease.Event{Type: lease.EventType(kind), Name: g.name, Token: g.token, Holder: g.holder, At: ms(at),
		Metadata: raw(g.metadata), Actor: actor, Session: g.session, Mode: lease.EventMode(g.shared)})
}

// expireAll records gs, open grants locked by the caller, as expired at their expiry, in one
// statement: a statement each cost a round trip and a run of the grants' trigger each, 350 us
// an expiry.
func expireAll(ctx context.Context, t *txn, gs []grant) error {
	if len(gs) == 0 {
		return nil
	}
	tokens, ats := make([]int64, len(gs)), make([]int64, len(gs))
	for i, g := range gs {
		tokens[i], ats[i] = g.token, g.expires
	}
	if _, err := t.tx.Exec(ctx, `UPDATE grants g SET ended_at = u.at, end_kind = $3
		FROM unnest($1::bigint[], $2::bigint[]) AS u(token, at) WHERE g.token = u.token`, tokens, ats, string(lease.EndExpired)); err != nil {
		return fmt.Errorf("end %d expired leases: %w", len(gs), err)
	}
	for _, g := range gs {
		recordEnd(t, g, lease.EndExpired, g.expires, "")
	}
	return nil
}

// settle records the expiry of g, locked by the caller, if it is open but past expiry at now,
// and returns it as it now stands.
func settle(ctx context.Context, t *txn, g grant, now int64) (grant, error) {
	if _, expired := lease.Settle(g.rule(), ms(now)); expired {
		if err := end(ctx, t, g, lease.EndExpired, g.expires, now, ""); err != nil {
			return g, err
		}
		kind := string(lease.EndExpired)
		g.ended, g.endKind = &g.expires, &kind
	}
	return g, nil
}

// lockToken locks the last issued token; every grant holds it to its commit.
func lockToken(ctx context.Context, t *txn) (int64, error) {
	var last int64
	if err := t.tx.QueryRow(ctx, `SELECT last FROM tokens FOR UPDATE`).Scan(&last); err != nil {
		return 0, fmt.Errorf("lock the last token: %w", err)
	}
	return last, nil
}

// Acquire grants the lease on a free name that nobody waits for in line. Locks, in this order:
// the idempotency key (advisory), the owner's cap (advisory), the name's row and its grant, the
// last token; then the database's clock is read, and lease.DecideAcquire decides. See
// store.Store.
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (lease.Lease, error) {
	l, _, err := s.acquire(ctx, p, 0)
	return l, err
}

// acquire grants the lease on a free name to waiter (0: a request not in line) when it is first
// in the name's line or nobody waits; refused for the line, it returns how many wait ahead.
func (s *Store) acquire(ctx context.Context, p store.AcquireParams, waiter int64) (lease.Lease, int, error) {
	var out lease.Lease
	var ahead int
	run := s.write
	if waiter == 0 {
		f := &fastOp{kind: fastAcquire, acquire: p, lease: &out}
		run = func(ctx context.Context, fn func(context.Context, *txn) error) error { return s.writeFast(ctx, f, fn) }
	}
	err := run(ctx, func(ctx context.Context, t *txn) error {
		a, done, err := lockAcquire(ctx, t, p)
		if done || err != nil {
			out = a.replayed
			return err
		}
		var d acquireDecision
		if d, ahead, err = decideAcquire(ctx, t, p, a, waiter); err != nil {
			return err
		}
		out, err = writeAcquire(ctx, t, p, a, d, waiter)
		return err
	})
	if err != nil {
		return lease.Lease{}, ahead, fmt.Errorf("acquire %q: %w", p.Name, err)
	}
	return out, 0, nil
}

// acquireLocks is what an acquire holds and read once its locks are taken.
type acquireLocks struct {
	keyHash, fp []byte        // of the Idempotency-Key, nil without one
	sess        lease.Session // the session acquired under, if any
	g           grant         // the name's current grant, settled at now
	ok          bool          // false for a name never used
	now         int64         // the database's clock, read after the locks
	replayed    lease.Lease   // a retry's answer (done)
}

// lockAcquire takes an acquire's locks in the global order (the idempotency key's, the owner's
// and the session's, the name's row), reads the clock after them, and settles the name's
// grant. done reports a retry of an idempotent acquire answered with a.replayed (or err).
func lockAcquire(ctx context.Context, t *txn, p store.AcquireParams) (a acquireLocks, done bool, err error) {
	if p.IdempotencyKey != "" {
		a.keyHash, a.fp = lease.HashID(p.IdempotencyKey), store.Fingerprint(p)
		if err := advisory(ctx, t, "idempotency", a.keyHash); err != nil {
			return a, false, err
		}
	}
	if a.sess, err = lockOwner(ctx, t, p.Owner, p.MaxHeld, p.SessionID); err != nil {
		return a, false, err
	}
	if a.g, a.ok, err = lockName(ctx, t, p.Name, true); err != nil {
		return a, false, err
	}
	if a.now, err = t.now(ctx); err != nil {
		return a, false, err
	}
	if a.keyHash != nil {
		if a.replayed, done, err = replay(ctx, t, p, a.keyHash, a.fp, a.now); done || err != nil {
			return a, true, err
		}
	}
	if p.ReplayOnly {
		return a, true, store.NotReplayed(p.Name)
	}
	if a.ok {
		a.g, err = settle(ctx, t, a.g, a.now)
	}
	return a, false, err
}

// acquireDecision is what an acquire grants: the name (a slot's for a semaphore or a reader),
// its token, whether it is shared, decided at now.
type acquireDecision struct {
	gname  string
	token  int64
	shared bool
	now    int64
}

// decideAcquire decides an acquire twice: first at the clock read after the name's locks, so
// that a held name is refused before the last token is locked (contention on one name does not
// queue every other grant behind it), and a free one goes to the first in its line; then, with
// the last token locked, at the clock read after that last lock: the name's row (and its
// slots) are still locked, so only time has moved, and the token is above now's
// microseconds. ahead is how many wait before waiter.
func decideAcquire(ctx context.Context, t *txn, p store.AcquireParams, a acquireLocks, waiter int64) (d acquireDecision, ahead int, err error) {
	decide, err := decider(ctx, t, p, a.g, a.ok, a.now, nil)
	if err != nil {
		return d, 0, err
	}
	if _, _, _, err := decide(a.now, 0); err != nil {
		return d, 0, err
	}
	if ahead, err = checkLine(ctx, t, p.Name, waiter, a.g, a.ok, a.now); err != nil {
		return d, ahead, err
	}
	last, err := lockToken(ctx, t)
	if err != nil {
		return d, 0, err
	}
	if d.now, err = t.now(ctx); err != nil {
		return d, 0, err
	}
	d.gname, d.token, d.shared, err = decide(d.now, last)
	return d, 0, err
}

// writeAcquire checks the owner's cap and writes what d grants: the idempotency key's row, the
// grant, the last token, and the waiter's place taken out of line.
func writeAcquire(ctx context.Context, t *txn, p store.AcquireParams, a acquireLocks, d acquireDecision, waiter int64) (lease.Lease, error) {
	if p.MaxHeld > 0 {
		if err := checkOwnerCap(ctx, t, "leases", ownedLeases, p.Owner, d.now, p.MaxHeld, lease.CheckHeldCap); err != nil {
			return lease.Lease{}, err
		}
	}
	id := lease.NewID(d.token)
	if a.keyHash != nil {
		salt := lease.NewSalt()
		id = lease.IdempotentID(p.IdempotencyKey, salt, d.token)
		if _, err := t.tx.Exec(ctx, `INSERT INTO idempotency (key_hash, name, fingerprint, salt, token, created_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key_hash) DO UPDATE SET name = excluded.name,
			fingerprint = excluded.fingerprint, salt = excluded.salt, token = excluded.token, created_at = excluded.created_at`,
			a.keyHash, p.Name, a.fp, salt, d.token, d.now); err != nil {
			return lease.Lease{}, fmt.Errorf("keep idempotency key: %w", err)
		}
	}
	out, err := insertGrant(ctx, t, p, a.sess, d.gname, d.token, id, d.now, d.shared)
	if err != nil {
		return lease.Lease{}, err
	}
	if _, err := t.tx.Exec(ctx, `UPDATE tokens SET last = $1`, d.token); err != nil {
		return lease.Lease{}, fmt.Errorf("persist the last token: %w", err)
	}
	if waiter != 0 {
		if _, err := t.tx.Exec(ctx, `DELETE FROM waiters WHERE id = $1`, waiter); err != nil {
			return lease.Lease{}, fmt.Errorf("take the waiter out of line: %w", err)
		}
	}
	return out, nil
}

// lockOwner takes the locks an acquire takes before its names: the owner's cap (advisory) when
// it has one, then the session it acquires under, if any (before the names, as its renewal and
// close lock it before its grants), which it returns.
func lockOwner(ctx context.Context, t *txn, owner string, maxHeld int, sessionID string) (lease.Session, error) {
	if maxHeld > 0 {
		if err := advisory(ctx, t, "owner", []byte(owner)); err != nil {
			return lease.Session{}, err
		}
	}
	if sessionID == "" {
		return lease.Session{}, nil
	}
	return sessionByID(ctx, t, sessionID, owner, "FOR SHARE")
}

// insertGrant writes the grant of gname that an acquire decided at now, with its token and
// lease ID, under sess when p has a SessionID, points the name at it and records the acquired
// event. The caller persists the last token.
func insertGrant(ctx context.Context, t *txn, p store.AcquireParams, sess lease.Session, gname string, token int64, id string, now int64, shared bool) (lease.Lease, error) {
	ng := lease.NewGrant(gname, p.Holder, token, p.TTL, p.LockDelay, ms(now))
	if p.SessionID != "" {
		var err error
		if ng, err = lease.SessionGrant(sess, p.Name, p.Holder, token, p.LockDelay, ms(now)); err != nil {
			return lease.Lease{}, err
		}
	}
	if _, err := t.tx.Exec(ctx, `INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms,
		acquired_at, renewed_at, expires_at, metadata, owner, session, shared) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		token, gname, p.Holder, lease.HashID(id), ng.TTL.Milliseconds(), p.LockDelay.Milliseconds(),
		now, now, ng.ExpiresAt.UnixMilli(), nullText(p.Metadata), p.Owner, sess.Ref, shared); err != nil {
		return lease.Lease{}, fmt.Errorf("insert grant %q: %w", gname, err)
	}
	if _, err := t.tx.Exec(ctx, `UPDATE names SET token = $2 WHERE name = $1`, gname, token); err != nil {
		return lease.Lease{}, fmt.Errorf("point %q at its grant: %w", gname, err)
	}
	_, slot, _ := lease.SlotOf(gname)
	out := lease.Lease{Name: p.Name, Holder: p.Holder, ID: id, Token: token, TTL: ng.TTL, AcquiredAt: ng.AcquiredAt,
		RenewedAt: ng.RenewedAt, ExpiresAt: ng.ExpiresAt, LockDelay: ng.LockDelay, Metadata: p.Metadata, Session: sess.Ref,
		Limit: p.Limit, Slot: slot, Mode: lease.EventMode(shared)}
	t.record(lease.Event{Type: lease.EventAcquired, Name: gname, Token: token, Holder: p.Holder,
		At: ms(now), ExpiresAt: out.ExpiresAt, LockDelay: p.LockDelay, Metadata: p.Metadata, Mode: out.Mode})
	return out, nil
}

// decider returns how an acquire decides, given name's current grant g (locked and settled):
// a plain lease's token, a free slot of the semaphore name, or the exclusive grant or a shared
// slot (lease.DecideMode), with its token; it locks the name's slots, in order, first. The
// limit of a held name stays fixed. shared reports a shared grant. When keep is set, a shared
// grant of a slot the name's row does not count yet hands keep the count to write with the
// grant (the caller writes it); otherwise the decision writes it.
func decider(ctx context.Context, t *txn, p store.AcquireParams, g grant, ok bool, now int64, keep func(n int)) (func(now, last int64) (name string, token int64, shared bool, err error), error) {
	var lim int
	var isShared bool
	err := t.tx.QueryRow(ctx, `SELECT lim, shared FROM semaphores WHERE name = $1`, p.Name).Scan(&lim, &isShared)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read the limit of %q: %w", p.Name, err)
	}
	n := max(lim, p.Limit)
	// A shared acquire may take a new slot after the last: its row is locked (made) too.
	if p.Mode == lease.ModeShared && lim < lease.MaxShared {
		n = lim + 1
	}
	slots, exists := make([]grant, n), make([]bool, n)
	fixed, sharedHeld := 0, false
	for i := range n {
		if slots[i], exists[i], err = lockName(ctx, t, lease.SlotName(p.Name, i), p.Limit > 0 || i >= lim); err != nil {
			return nil, err
		}
		if exists[i] {
			if slots[i], err = settle(ctx, t, slots[i], now); err != nil {
				return nil, err
			}
			if i < lim && slots[i].rule().HeldAt(ms(now)) {
				fixed, sharedHeld = lim, isShared
			}
		}
	}
	if isShared {
		fixed = 0
	}
	if err := lease.CheckLimit(p.Name, p.Limit, fixed, ok && g.rule().HeldAt(ms(now))); err != nil {
		return nil, err
	}
	if err := lease.CheckSharedLimit(p.Name, p.Limit, sharedHeld); err != nil {
		return nil, err
	}
	// resettle records, at the clock a decision runs at, the expiry of each grant it may take
	// the place of. They were settled at the clock read after their locks; the decision runs
	// again at a later one (after the last token's lock), and a grant that expired in between,
	// taken over unsettled, had its expiry recorded after the grant that replaced it, by the
	// sweep.
	resettle := func(now int64) error {
		var err error
		if ok {
			if g, err = settle(ctx, t, g, now); err != nil {
				return err
			}
		}
		for i := range slots {
			if exists[i] {
				if slots[i], err = settle(ctx, t, slots[i], now); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if p.Limit == 0 {
		return func(now, last int64) (string, int64, bool, error) {
			if err := resettle(now); err != nil {
				return "", 0, false, err
			}
			h := lease.Holders{Name: p.Name, Excl: g.rule(), ExclExists: ok}
			if isShared || p.Mode == lease.ModeShared {
				h.Shared, h.SharedExists = make([]lease.Grant, lim), exists[:lim]
				for i := range lim {
					h.Shared[i] = slots[i].rule()
				}
			}
			return store.DecideMode(h, p.Mode, ms(now), last, lim, isShared, func(n int) error {
				if keep != nil {
					keep(n)
					return nil
				}
				return keepSlots(ctx, t, p.Name, n, true)
			})
		}, nil
	}
	if lim != p.Limit || isShared {
		if err := keepSlots(ctx, t, p.Name, p.Limit, false); err != nil {
			return nil, err
		}
	}
	return func(now, last int64) (string, int64, bool, error) {
		if err := resettle(now); err != nil {
			return "", 0, false, err
		}
		rules := make([]lease.Grant, p.Limit)
		for i := range rules {
			rules[i] = slots[i].rule()
		}
		slot, token, err := lease.DecideSemaphore(p.Name, rules, exists[:p.Limit], ms(now), last)
		return lease.SlotName(p.Name, slot), token, false, err
	}, nil
}

// ownedLeases counts the leases an owner ($1) holds at now ($2).
const ownedLeases = `SELECT count(*) FROM grants WHERE owner = $1 AND ended_at IS NULL AND expires_at > $2`

// keepSlots records that name has lim slots, shared ones or a semaphore's.
func keepSlots(ctx context.Context, t *txn, name string, lim int, shared bool) error {
	if _, err := t.tx.Exec(ctx, `INSERT INTO semaphores (name, lim, shared) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET lim = excluded.lim, shared = excluded.shared`, name, lim, shared); err != nil {
		return fmt.Errorf("keep the slots of %q: %w", name, err)
	}
	return nil
}

// checkOwnerCap counts what owner holds with count (a query of the owner and now) and lets
// check refuse when that is most already. The caller holds the owner's advisory lock.
func checkOwnerCap(ctx context.Context, t *txn, what, count, owner string, now int64, most int, check func(n, most int) error) error {
	var n int
	if err := t.tx.QueryRow(ctx, count, owner, now).Scan(&n); err != nil {
		return fmt.Errorf("count the key's %s: %w", what, err)
	}
	return check(n, most)
}

// advisory takes a transaction-scoped advisory lock on (kind, key).
func advisory(ctx context.Context, t *txn, kind string, key []byte) error {
	if _, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, advisoryKey(kind, key)); err != nil {
		return fmt.Errorf("lock %s: %w", kind, err)
	}
	return nil
}

// advisoryKey is the key of the advisory lock on (kind, key).
func advisoryKey(kind string, key []byte) int64 {
	h := sha256.Sum256(append([]byte(kind+"\x00"), key...))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// replay answers a retry of an idempotent acquire: done is true when the key was seen within
// 24 h, with the grant it made (still current) or an error saying why not.
func replay(ctx context.Context, t *txn, p store.AcquireParams, keyHash, fp []byte, now int64) (lease.Lease, bool, error) {
	var r lease.Idempotent
	var created int64
	err := t.tx.QueryRow(ctx, `SELECT name, fingerprint, salt, token, created_at FROM idempotency WHERE key_hash = $1`, keyHash).
		Scan(&r.Name, &r.Fingerprint, &r.Salt, &r.Token, &created)
	r.CreatedAt = ms(created)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && !r.Remembered(ms(now), store.IdempotencyTTL) {
		return lease.Lease{}, false, nil
	}
	if err != nil {
		return lease.Lease{}, false, fmt.Errorf("read idempotency key: %w", err)
	}
	if err := r.CheckRetry(p.Name, fp); err != nil {
		return lease.Lease{}, true, err
	}
	g, err := scanGrant(t.tx.QueryRow(ctx, `SELECT `+grantCols+` FROM grants g WHERE g.token = $1 FOR UPDATE`, r.Token))
	if err != nil {
		return lease.Lease{}, true, fmt.Errorf("read grant %d of idempotency key: %w", r.Token, err)
	}
	if g, err = settle(ctx, t, g, now); err != nil {
		return lease.Lease{}, true, err
	}
	l, err := r.Replay(p.IdempotencyKey, g.lease(), g.rule().HeldAt(ms(now)), deref(g.endKind),
		func(id string) bool { return lease.SameHash(lease.HashID(id), g.idHash) })
	return l, true, err
}

// byID locks the grant whose lease ID is id, checks it belongs to name, reads the clock and
// settles the grant at it.
func byID(ctx context.Context, t *txn, name, id string) (grant, int64, error) {
	g, err := scanGrant(t.tx.QueryRow(ctx, `SELECT `+grantCols+` FROM grants g WHERE g.id_hash = $1 FOR UPDATE`, lease.HashID(id)))
	if parent, _, _ := lease.SlotOf(g.name); errors.Is(err, pgx.ErrNoRows) || err == nil && parent != name {
		return grant{}, 0, lease.Errorf(lease.CodeLost, "lease_id is not a lease on %q (unknown, or pruned after it ended)", name)
	}
	if err != nil {
		return grant{}, 0, fmt.Errorf("find lease by id: %w", err)
	}
	now, err := t.now(ctx)
	if err != nil {
		return grant{}, 0, err
	}
	g, err = settle(ctx, t, g, now)
	return g, now, err
}

// Renew extends the current unexpired lease. A grant that is held is its name's current one
// (a new grant needs the old one ended), so the grant's row is the only lock. See store.Store.
func (s *Store) Renew(ctx context.Context, name, id string, ttl time.Duration, metadata json.RawMessage) (lease.Lease, error) {
	var out lease.Lease
	f := &fastOp{kind: fastRenew, name: name, id: id, ttl: ttl, metadata: metadata, lease: &out}
	err := s.writeFast(ctx, f, func(ctx context.Context, t *txn) error {
		g, now, err := byID(ctx, t, name, id)
		if err != nil {
			return err
		}
		r, err := lease.DecideRenew(g.rule(), ttl, ms(now))
		if err != nil {
			return err
		}
		if g.session != "" {
			return lease.Errorf(lease.CodeInvalid, "lease %q is held under session %s: renew the session", name, g.session)
		}
		g.ttl, g.renewed, g.expires = r.TTL.Milliseconds(), r.RenewedAt.UnixMilli(), r.ExpiresAt.UnixMilli()
		if metadata != nil {
			g.metadata = nullText(metadata)
		}
		// With no new metadata, the lease keeps its own (COALESCE).
		if _, err := t.tx.Exec(ctx, `UPDATE grants SET ttl_ms = $1, renewed_at = $2, expires_at = $3,
			metadata = COALESCE($5, metadata) WHERE token = $4`,
			g.ttl, g.renewed, g.expires, g.token, nullText(metadata)); err != nil {
			return fmt.Errorf("renew token %d: %w", g.token, err)
		}
		out = g.lease()
		if out.Handover, err = handoverOf(ctx, t, g); err != nil {
			return err
		}
		if _, _, isSlot := lease.SlotOf(g.name); isSlot && !g.shared {
			if err := t.tx.QueryRow(ctx, `SELECT lim FROM semaphores WHERE name = $1`, name).Scan(&out.Limit); err != nil {
				return fmt.Errorf("read the limit of %q: %w", name, err)
			}
		}
		t.record(lease.Event{Type: lease.EventRenewed, Name: g.name, Token: g.token, Holder: g.holder,
			At: ms(now), ExpiresAt: out.ExpiresAt, Metadata: raw(g.metadata), Mode: lease.EventMode(g.shared)})
		return nil
	})
	if err != nil {
		return lease.Lease{}, fmt.Errorf("renew %q: %w", name, err)
	}
	return out, nil
}

// Release ends the lease. See store.Store.
func (s *Store) Release(ctx context.Context, name, id string) error {
	f := &fastOp{kind: fastRelease, name: name, id: id}
	err := s.writeFast(ctx, f, func(ctx context.Context, t *txn) error {
		g, now, err := byID(ctx, t, name, id)
		if err != nil {
			return err
		}
		if ended, err := lease.DecideRelease(g.rule(), ms(now)); !ended {
			return err
		}
		return end(ctx, t, g, lease.EndReleased, now, now, "")
	})
	if err != nil {
		return fmt.Errorf("release %q: %w", name, err)
	}
	return nil
}

// lockSettled locks the row of a used name (see lockName), reads the database's clock after
// the lock, and settles the name's current grant at that time.
func lockSettled(ctx context.Context, t *txn, name string) (g grant, ok bool, now int64, err error) {
	if g, ok, err = lockName(ctx, t, name, false); err != nil {
		return g, ok, 0, err
	}
	if now, err = t.now(ctx); err != nil {
		return g, ok, 0, err
	}
	if ok {
		g, err = settle(ctx, t, g, now)
	}
	return g, ok, now, err
}

// Revoke ends the current lease on name. See store.Store.
func (s *Store) Revoke(ctx context.Context, name string, token int64, actor string) error {
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		g, ok, now, err := lockSettled(ctx, t, name)
		if err != nil {
			return err
		}
		if !(ok && g.rule().HeldAt(ms(now))) {
			if done, err := revokeSlots(ctx, t, name, token, actor, now); done {
				return err
			}
		}
		if ended, err := lease.DecideRevoke(g.rule(), ok, name, token); !ended {
			return err
		}
		return end(ctx, t, g, lease.EndRevoked, now, now, actor)
	})
	if err != nil {
		return fmt.Errorf("revoke %q: %w", name, err)
	}
	return nil
}

// current reads the current grant of name without locks; ok is false for a name never used.
func current(ctx context.Context, q queryer, name string) (grant, bool, error) {
	g, err := scanGrant(q.QueryRow(ctx, `SELECT `+grantCols+` FROM names n JOIN grants g ON g.token = n.token WHERE n.name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return grant{}, false, nil
	}
	if err != nil {
		return grant{}, false, fmt.Errorf("read lease %q: %w", name, translate(err))
	}
	return g, true, nil
}

// Get returns the state of name. See store.Store.
func (s *Store) Get(ctx context.Context, name string) (lease.State, error) {
	g, ok, err := current(ctx, s.pool, name)
	if err != nil {
		return lease.State{}, err
	}
	lim, shared, hasSlots, err := s.slotsOf(ctx, name)
	if err != nil {
		return lease.State{}, err
	}
	slots, err := s.slotGrants(ctx, name, lim)
	if err != nil {
		return lease.State{}, err
	}
	// The clock is read after the rows: a lease read as held was held at a time no earlier
	// than the one it is judged at.
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return lease.State{}, err
	}
	var sl *lease.Slotted
	if hasSlots {
		sl = &lease.Slotted{Limit: lim, Shared: shared}
		for _, c := range slots {
			sl.Slots = append(sl.Slots, c.state(now))
		}
	}
	return lease.NameState(name, g.state(now), ok, sl)
}

// slotsOf reads whether name has slots, and how many: a semaphore's limit, or the shared slots
// used so far (shared).
func (s *Store) slotsOf(ctx context.Context, name string) (lim int, shared, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT lim, shared FROM semaphores WHERE name = $1`, name).Scan(&lim, &shared)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, false, nil
	}
	if err != nil {
		return 0, false, false, fmt.Errorf("read semaphore %q: %w", name, translate(err))
	}
	return lim, shared, true, nil
}

// slotGrants reads the current grants of the first lim slots of name, those ever used.
func (s *Store) slotGrants(ctx context.Context, name string, lim int) ([]grant, error) {
	var out []grant
	for i := range lim {
		g, found, err := current(ctx, s.pool, lease.SlotName(name, i))
		if err != nil {
			return nil, err
		}
		if found {
			out = append(out, g)
		}
	}
	return out, nil
}

// ExpireDue records passed expiries. Replicas sweeping at once skip each other's rows (SKIP
// LOCKED), so each expiry is recorded once. See store.Store.
func (s *Store) ExpireDue(ctx context.Context) (int, time.Time, error) {
	var n int
	var next time.Time
	err := s.writeAlone(ctx, func(ctx context.Context, t *txn) error {
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		rows, err := t.tx.Query(ctx, `SELECT `+grantCols+` FROM open_due d JOIN grants g ON g.token = d.token
			WHERE d.expires_at <= $1 AND g.ended_at IS NULL AND g.expires_at <= $1 ORDER BY d.expires_at LIMIT $2 FOR UPDATE OF g SKIP LOCKED`, now, store.SweepLimit)
		if err != nil {
			return fmt.Errorf("find expired leases: %w", err)
		}
		due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (grant, error) { return scanGrant(r) })
		if err != nil {
			return fmt.Errorf("find expired leases: %w", err)
		}
		if err := expireAll(ctx, t, due); err != nil {
			return err
		}
		n = len(due)
		if n == store.SweepLimit {
			// More may be due: the sweeper calls again at once.
			next = ms(now)
			return nil
		}
		var nx *int64
		if err := t.tx.QueryRow(ctx, `SELECT min(expires_at) FROM open_due WHERE expires_at > $1`, now).Scan(&nx); err != nil {
			return fmt.Errorf("next expiry: %w", err)
		}
		if nx != nil {
			next = ms(*nx)
		}
		return nil
	})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("expire due leases: %w", err)
	}
	// The changes to the count of open grants folded into it, in a transaction of their own (a
	// writer never waits for the counter's row; see migration 0016).
	if _, err := s.pool.Exec(ctx, `WITH d AS (DELETE FROM open_grants_delta RETURNING n)
		UPDATE open_grants SET n = n + (SELECT coalesce(sum(n), 0) FROM d)`); err != nil {
		return 0, time.Time{}, fmt.Errorf("fold the count of open grants: %w", translate(err))
	}
	return n, next, nil
}

// HeldCount counts leases held now. See store.Store.
func (s *Store) HeldCount(ctx context.Context, prefix string) (int, error) {
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return 0, err
	}
	lo, hi := store.PrefixRange(prefix)
	q := `SELECT count(*) FROM grants WHERE ended_at IS NULL AND expires_at > $1 AND name >= $2 AND name < $3`
	if prefix == "" {
		// Every open grant, from the count the grants' trigger keeps, less the few past expiry
		// that no sweep has recorded yet (a range of open_due_expiry).
		q = `SELECT ` + heldsql.Postgres.OpenGrants + ` - (SELECT count(*) FROM open_due
			WHERE expires_at <= $1 AND name >= $2 AND name < $3)`
	}
	var n int
	if err := s.pool.QueryRow(ctx, q, custom, now, lo, hi).Scan(&n); err != nil {
		return 0, fmt.Errorf("count held leases: %w", translate(err))
	}
	return n, nil
}

// RecentlyFreed lists names freed lately, newest first: the newest end events and the expiries
// no sweep has recorded yet, kept when the name is still free. See store.Store.
func (s *Store) RecentlyFreed(ctx context.Context, prefix string, limit int) ([]lease.State, error) {
	limit = store.ClampLimit(limit)
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	lo, hi := store.PrefixRange(prefix)
	rows, err := s.pool.Query(ctx, `WITH cand AS (
			(SELECT name FROM open_due WHERE expires_at <= $1 AND name >= $2 AND name < $3 LIMIT $4)
			UNION
			(SELECT name FROM events WHERE type IN ('released', 'expired', 'revoked') AND name >= $2 AND name < $3
				ORDER BY seq DESC LIMIT $4 * 8))
		SELECT `+grantCols+` FROM cand JOIN names n ON n.name = cand.name JOIN grants g ON g.token = n.token
		WHERE NOT (g.ended_at IS NULL AND g.expires_at > $1)`, now, lo, hi, limit)
	if err != nil {
		return nil, fmt.Errorf("recently freed: %w", translate(err))
	}
	gs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (grant, error) { return scanGrant(r) })
	if err != nil {
		return nil, fmt.Errorf("recently freed: %w", translate(err))
	}
	var out []lease.State
	for _, g := range gs {
		out = append(out, g.state(now))
	}
	slices.SortFunc(out, func(a, b lease.State) int { return b.EndedAt.Compare(a.EndedAt) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Prune deletes old history. See store.Store.
func (s *Store) Prune(ctx context.Context, r store.Retention) error {
	return s.writeAlone(ctx, func(ctx context.Context, t *txn) error {
		now, err := t.now(ctx)
		if err != nil {
			return err
		}
		if r.Age > 0 {
			cut := now - r.Age.Milliseconds()
			for _, q := range []struct{ what, sql string }{
				{"events", `DELETE FROM events WHERE recorded_at < $1`},
				{"rejections", `DELETE FROM rejections WHERE at < $1`},
				{"grants", `DELETE FROM grants g WHERE ended_at < $1 AND NOT EXISTS (SELECT 1 FROM names n WHERE n.token = g.token)`},
				{"sessions", `DELETE FROM lease_sessions WHERE coalesce(closed_at, expires_at) < $1`},
			} {
				if _, err := t.tx.Exec(ctx, q.sql, cut); err != nil {
					return fmt.Errorf("prune %s: %w", q.what, err)
				}
			}
		}
		if r.Rows > 0 {
			for _, q := range []struct{ what, sql string }{
				{"events", `DELETE FROM events WHERE seq <= (SELECT seq FROM events ORDER BY seq DESC LIMIT 1 OFFSET $1)`},
				{"rejections", `DELETE FROM rejections WHERE id <= (SELECT id FROM rejections ORDER BY id DESC LIMIT 1 OFFSET $1)`},
				{"ended grants", `DELETE FROM grants g WHERE ended_at <= (SELECT ended_at FROM grants WHERE ended_at IS NOT NULL ORDER BY ended_at DESC LIMIT 1 OFFSET $1)
					AND NOT EXISTS (SELECT 1 FROM names n WHERE n.token = g.token)`},
			} {
				if _, err := t.tx.Exec(ctx, q.sql, r.Rows); err != nil {
					return fmt.Errorf("prune %s beyond %d rows: %w", q.what, r.Rows, err)
				}
			}
			if _, err := t.tx.Exec(ctx, `DELETE FROM lease_sessions WHERE ref IN (SELECT ref FROM lease_sessions
				WHERE coalesce(closed_at, expires_at) <= $2 ORDER BY created_at DESC, ref DESC OFFSET $1)`, r.Rows, now); err != nil {
				return fmt.Errorf("prune ended sessions beyond %d rows: %w", r.Rows, err)
			}
		}
		if _, err := t.tx.Exec(ctx, `DELETE FROM idempotency WHERE created_at <= $1`, now-store.IdempotencyTTL.Milliseconds()); err != nil {
			return fmt.Errorf("prune idempotency keys: %w", err)
		}
		if _, err := t.tx.Exec(ctx, `DELETE FROM sessions WHERE expires_at <= $1`, now); err != nil {
			return fmt.Errorf("prune sessions: %w", err)
		}
		return nil
	})
}

// RequestHandover records a handover request for name's current grant, under the name's lock.
// See store.Store.
func (s *Store) RequestHandover(ctx context.Context, name string, h lease.Handover) (lease.Handover, error) {
	var out lease.Handover
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		g, ok, now, err := lockSettled(ctx, t, name)
		if err != nil {
			return err
		}
		if !(ok && g.rule().HeldAt(ms(now))) {
			// A shared name: every shared holder is asked; the answer is the first one's request.
			hs, shared, err := sharedHandovers(ctx, t, name, h, now)
			for _, one := range hs {
				if err := recordHandover(ctx, t, one, now); err != nil {
					return err
				}
			}
			if len(hs) > 0 {
				out = hs[0]
			}
			if shared {
				return err
			}
		}
		if out, err = lease.DecideHandover(g.rule(), ok, name, h, ms(now)); err != nil {
			return err
		}
		return recordHandover(ctx, t, out, now)
	})
	if err != nil {
		return lease.Handover{}, fmt.Errorf("request handover of %q: %w", name, err)
	}
	return out, nil
}

// sharedHandovers decides a handover request of name if its slots are shared ones (shared
// false when they are not), locking them in order.
func sharedHandovers(ctx context.Context, t *txn, name string, h lease.Handover, now int64) (hs []lease.Handover, shared bool, err error) {
	var lim int
	err = t.tx.QueryRow(ctx, `SELECT lim, shared FROM semaphores WHERE name = $1`, name).Scan(&lim, &shared)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && !shared {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("read the slots of %q: %w", name, err)
	}
	slots, exists := make([]lease.Grant, lim), make([]bool, lim)
	for i := range lim {
		sg, found, err := lockName(ctx, t, lease.SlotName(name, i), false)
		if err != nil {
			return nil, true, err
		}
		if found {
			if sg, err = settle(ctx, t, sg, now); err != nil {
				return nil, true, err
			}
		}
		slots[i], exists[i] = sg.rule(), found
	}
	hs, err = lease.DecideSharedHandover(name, slots, exists, h, ms(now))
	return hs, true, err
}

// recordHandover records the handover request h of its grant, with its event.
func recordHandover(ctx context.Context, t *txn, h lease.Handover, now int64) error {
	if _, err := t.tx.Exec(ctx, `INSERT INTO handovers (token, to_holder, reason, requested_by, requested_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (token) DO UPDATE SET to_holder = excluded.to_holder, reason = excluded.reason,
		requested_by = excluded.requested_by, requested_at = excluded.requested_at`,
		h.Token, h.To, h.Reason, h.By, now); err != nil {
		return fmt.Errorf("record handover of token %d: %w", h.Token, err)
	}
	t.record(lease.Event{Type: lease.EventHandoverRequested, Name: h.Name, Token: h.Token, Holder: h.Holder,
		At: ms(now), Actor: h.By, Handover: &h})
	return nil
}

// handoverOf reads the handover requested of the grant token, nil for none.
func handoverOf(ctx context.Context, t *txn, g grant) (*lease.Handover, error) {
	h, token := lease.Handover{Name: g.name, Holder: g.holder, Token: g.token}, g.token
	var at int64
	err := t.tx.QueryRow(ctx, `SELECT to_holder, reason, requested_by, requested_at FROM handovers WHERE token = $1`, token).
		Scan(&h.To, &h.Reason, &h.By, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read handover of token %d: %w", token, err)
	}
	h.At = ms(at)
	return &h, nil
}

// revokeSlots revokes slots of name if it is a semaphore (done false when it is not): the one
// holding token, or every open one without a token. The caller holds the name's row lock; the
// slots are locked in order, as acquires lock them.
func revokeSlots(ctx context.Context, t *txn, name string, token int64, actor string, now int64) (done bool, err error) {
	var lim int
	err = t.tx.QueryRow(ctx, `SELECT lim FROM semaphores WHERE name = $1`, name).Scan(&lim)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("read the limit of %q: %w", name, err)
	}
	slots, rules, exists := make([]grant, lim), make([]lease.Grant, lim), make([]bool, lim)
	for i := range lim {
		if slots[i], exists[i], err = lockName(ctx, t, lease.SlotName(name, i), false); err != nil {
			return true, err
		}
		if exists[i] {
			if slots[i], err = settle(ctx, t, slots[i], now); err != nil {
				return true, err
			}
		}
		rules[i] = slots[i].rule()
	}
	ends, err := lease.DecideRevokeSlots(name, rules, exists, token)
	for _, i := range ends {
		if err := end(ctx, t, slots[i], lease.EndRevoked, now, now, actor); err != nil {
			return true, err
		}
	}
	return true, err
}

// SharedNames returns which of names take shared leases. See store.Store.
func (s *Store) SharedNames(ctx context.Context, names []string) (map[string]bool, error) {
	if err := store.CheckNames(names); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	if len(names) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT name FROM semaphores WHERE shared AND name = ANY($1)`, names)
	if err != nil {
		return nil, fmt.Errorf("names taking shared leases: %w", translate(err))
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("names taking shared leases: %w", translate(err))
	}
	for _, n := range found {
		out[n] = true
	}
	return out, nil
}
