package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// grant is a row of the grants table.
type grant struct {
	token                      int64
	name, holder               string
	idHash                     []byte
	ttl, lockDelay             int64
	acquired, renewed, expires int64
	ended                      sql.NullInt64
	endKind                    sql.NullString
	metadata                   sql.NullString
	restartExt                 int64  // ms the server's restarts added to its expiry
	session                    string // Ref of the session it is held under, if any
	shared                     bool   // a shared (read) grant, of a slot of its name
}

const grantCols = `g.token, g.name, g.holder, g.id_hash, g.ttl_ms, g.lock_delay_ms, g.acquired_at,
	g.renewed_at, g.expires_at, g.ended_at, g.end_kind, g.metadata, g.restart_ext_ms, g.session, g.shared`

type scanner interface{ Scan(dest ...any) error }

func scanGrant(r scanner) (grant, error) {
	var g grant
	err := r.Scan(&g.token, &g.name, &g.holder, &g.idHash, &g.ttl, &g.lockDelay, &g.acquired,
		&g.renewed, &g.expires, &g.ended, &g.endKind, &g.metadata, &g.restartExt, &g.session, &g.shared)
	return g, err
}

// heldAt reports whether the grant is an unexpired lease at now.
func (g grant) heldAt(now int64) bool { return g.rule().HeldAt(ms(now)) }

// rule is the grant as the lease rules see it.
func (g grant) rule() lease.Grant {
	r := lease.Grant{
		Name: g.name, Holder: g.holder, Token: g.token,
		TTL:        time.Duration(g.ttl) * time.Millisecond,
		LockDelay:  time.Duration(g.lockDelay) * time.Millisecond,
		AcquiredAt: ms(g.acquired), RenewedAt: ms(g.renewed), ExpiresAt: ms(g.expires),
	}
	if g.ended.Valid {
		r.EndedAt, r.End = ms(g.ended.Int64), lease.End(g.endKind.String)
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

		ExtendedByRestart: time.Duration(g.restartExt) * time.Millisecond,
		Session:           g.session,
		Mode:              g.mode(),
	}
}

// mode is ModeShared for a shared grant, "" otherwise (the wire says exclusive for a plain
// lease).
func (g grant) mode() lease.Mode {
	return lease.EventMode(g.shared)
}

// state is what anyone may see of the grant at now; an expired grant not yet recorded reads
// as expired at its expiry.
func (g grant) state(now int64) lease.State {
	st := g.rule().State(ms(now))
	st.Metadata = raw(g.metadata)
	st.Session, st.ExtendedByRestart = g.session, time.Duration(g.restartExt)*time.Millisecond
	st.Mode = g.mode()
	return st
}

func raw(s sql.NullString) []byte {
	if !s.Valid {
		return nil
	}
	return []byte(s.String)
}

// current reads the current grant of name; ok is false for a name never used.
func current(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string) (g grant, ok bool, err error) {
	g, err = scanGrant(q.QueryRowContext(ctx, `SELECT `+grantCols+` FROM names n JOIN grants g ON g.token = n.token WHERE n.name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return grant{}, false, nil
	}
	if err != nil {
		return grant{}, false, fmt.Errorf("read lease %q: %w", name, w(err))
	}
	return g, true, nil
}

// end closes a grant and records the event. For an expiry, at is the expiry itself.
func end(ctx context.Context, t *txn, g grant, kind lease.End, at int64) error {
	return endBy(ctx, t, g, kind, at, "")
}

// endBy is end with the actor who ended the grant (an admin's revoke).
func endBy(ctx context.Context, t *txn, g grant, kind lease.End, at int64, actor string) error {
	// Looked up before the row changes: memory then counts the grant that ends as open.
	c, ok, err := t.lookup(ctx, g.name)
	if err != nil {
		return err
	}
	if _, err := t.exec(ctx, stEnd, at, string(kind), g.token); err != nil {
		return fmt.Errorf("end lease %q token %d: %w", g.name, g.token, w(err))
	}
	if ok && c.token == g.token {
		c.ended, c.end = at, codeOf(kind)
		t.setName(g.name, c)
	}
	t.setHandover(g.token, lease.Handover{}, false)
	t.setSessionOf(g.token, "", false)
	return t.record(ctx, lease.Event{Type: lease.EventType(kind), Name: g.name, Token: g.token, Holder: g.holder, At: ms(at),
		Metadata: raw(g.metadata), Actor: actor, Session: g.session, Mode: lease.EventMode(g.shared)})
}

// expireBefore records as expired, at their expiry, the limit open grants that expired by
// cutoff first (all of them when limit is negative).
func expireBefore(ctx context.Context, t *txn, cutoff int64, limit int) error {
	rows, err := t.tx.QueryContext(ctx, `SELECT `+grantCols+` FROM grants g WHERE g.ended_at IS NULL AND g.expires_at <= ? ORDER BY g.expires_at LIMIT ?`, cutoff, limit)
	if err != nil {
		return fmt.Errorf("find expired leases: %w", w(err))
	}
	var due []grant
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			rows.Close()
			return fmt.Errorf("find expired leases: %w", err)
		}
		due = append(due, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("find expired leases: %w", w(err))
	}
	for _, g := range due {
		if err := end(ctx, t, g, lease.EndExpired, g.expires); err != nil {
			return err
		}
	}
	return nil
}

// current is the current grant of name, from the writer's memory (and its metadata, when it
// has some, from SQL); ok is false for a name never used.
func (t *txn) current(ctx context.Context, name string) (grant, bool, error) {
	c, ok, err := t.lookup(ctx, name)
	if err != nil || !ok {
		return grant{}, false, err
	}
	g := c.grant(name)
	g.session = t.s.mem.sessionOf[c.token]
	if c.hasMeta {
		if err := t.queryRow(ctx, stMetadata, c.token).Scan(&g.metadata); err != nil {
			return g, true, fmt.Errorf("read metadata of %q: %w", name, w(err))
		}
	}
	return g, true, nil
}

// currentSettled reads the current grant of name inside t, with a passed expiry recorded
// first; ok is false for a name never used.
func currentSettled(ctx context.Context, t *txn, name string) (grant, bool, error) {
	g, ok, err := t.current(ctx, name)
	if err != nil || !ok {
		return g, ok, err
	}
	g, err = settle(ctx, t, g)
	return g, true, err
}

// settle records the expiry of g if it is open but past expiry at t.now, and returns it
// as it now stands.
func settle(ctx context.Context, t *txn, g grant) (grant, error) {
	if _, expired := lease.Settle(g.rule(), ms(t.now)); expired {
		if err := end(ctx, t, g, lease.EndExpired, g.expires); err != nil {
			return g, err
		}
		g.ended = sql.NullInt64{Int64: g.expires, Valid: true}
		g.endKind = sql.NullString{String: string(lease.EndExpired), Valid: true}
	}
	return g, nil
}

// Acquire grants the lease on a free name. See store.Store.
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (lease.Lease, error) {
	var out lease.Lease
	err := s.write(ctx, s.acquireOp(p, &out))
	if err != nil {
		return lease.Lease{}, fmt.Errorf("acquire %q: %w", p.Name, err)
	}
	return out, nil
}

// acquireOp is Acquire's operation; it sets *out to the lease granted.
func (s *Store) acquireOp(p store.AcquireParams, out *lease.Lease) func(context.Context, *txn) error {
	return func(ctx context.Context, t *txn) error {
		var keyHash, fp []byte
		if p.IdempotencyKey != "" {
			keyHash, fp = lease.HashID(p.IdempotencyKey), store.Fingerprint(p)
			l, done, err := replay(ctx, t, p, keyHash, fp)
			if done || err != nil {
				*out = l
				return err
			}
		}
		if p.ReplayOnly {
			return store.NotReplayed(p.Name)
		}
		var sess lease.Session
		if p.SessionID != "" {
			var err error
			if sess, err = sessionByID(ctx, t.tx, p.SessionID, p.Owner); err != nil {
				return err
			}
		}
		gname, token, shared, err := decideName(ctx, t, p, nil)
		if err != nil {
			return err
		}
		if err := checkHeldCap(ctx, t, p.Owner, p.MaxHeld, 1); err != nil {
			return err
		}
		id := lease.NewID(token)
		if keyHash != nil {
			salt := lease.NewSalt()
			id = lease.IdempotentID(p.IdempotencyKey, salt, token)
			if _, err := t.tx.ExecContext(ctx, `INSERT INTO idempotency (key_hash, name, fingerprint, salt, token, created_at)
				VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key_hash) DO UPDATE SET name = excluded.name,
				fingerprint = excluded.fingerprint, salt = excluded.salt, token = excluded.token, created_at = excluded.created_at`,
				keyHash, p.Name, fp, salt, token, t.now); err != nil {
				return fmt.Errorf("keep idempotency key: %w", w(err))
			}
		}
		l, err := writeGrant(ctx, t, p, sess, gname, token, id, shared)
		*out = l
		return err
	}
}

// checkHeldCap refuses grants of more leases to owner when it would hold more than maxHeld.
// Memory counts the key's open grants, never fewer than its held leases: only near the cap does
// it take SQL to leave out the expired ones not yet recorded.
func checkHeldCap(ctx context.Context, t *txn, owner string, maxHeld, more int) error {
	if n := t.s.mem.owners[owner]; maxHeld > 0 && n+more > maxHeld {
		if err := t.queryRow(ctx, stCountOwned, owner, t.now).Scan(&n); err != nil {
			return fmt.Errorf("count the key's leases: %w", w(err))
		}
		return lease.CheckHeldCap(n+more-1, maxHeld)
	}
	return nil
}

// writeGrant writes the grant of gname that an acquire decided, with its token and lease ID,
// under sess when p has a SessionID, shared or not, and records it in memory and as an
// acquired event.
func writeGrant(ctx context.Context, t *txn, p store.AcquireParams, sess lease.Session, gname string, token int64, id string, shared bool) (lease.Lease, error) {
	ng := grant{
		token: token, name: gname, holder: p.Holder, idHash: idKey(id),
		ttl: p.TTL.Milliseconds(), lockDelay: p.LockDelay.Milliseconds(),
		acquired: t.now, renewed: t.now, expires: t.now + p.TTL.Milliseconds(),
		metadata: nullText(p.Metadata), shared: shared,
	}
	if p.SessionID != "" {
		sg, err := lease.SessionGrant(sess, p.Name, p.Holder, token, p.LockDelay, ms(t.now))
		if err != nil {
			return lease.Lease{}, err
		}
		ng.ttl, ng.expires, ng.session = sg.TTL.Milliseconds(), sg.ExpiresAt.UnixMilli(), sess.Ref
		t.setSessionOf(token, sess.Ref, true)
	}
	if _, err := t.exec(ctx, stInsertGrant, ng.token, ng.name, ng.holder, ng.idHash, ng.ttl, ng.lockDelay, ng.acquired, ng.renewed, ng.expires, ng.metadata, p.Owner, ng.session, ng.shared); err != nil {
		return lease.Lease{}, fmt.Errorf("insert grant %q: %w", p.Name, w(err))
	}
	if _, err := t.exec(ctx, stPointName, gname, token); err != nil {
		return lease.Lease{}, fmt.Errorf("point %q at its grant: %w", gname, w(err))
	}
	// meta.last_token is written once for the batch, in its transaction (see runBatch).
	t.setToken(token)
	t.setName(gname, curOf(ng, p.Owner))
	out := ng.lease()
	out.ID, out.Limit = id, p.Limit
	return out, t.record(ctx, lease.Event{Type: lease.EventAcquired, Name: gname, Token: token, Holder: p.Holder,
		At: ms(t.now), ExpiresAt: out.ExpiresAt, LockDelay: p.LockDelay, Metadata: p.Metadata, Mode: lease.EventMode(shared)})
}

// decideName decides which name an acquire grants (p.Name, a free slot of the semaphore
// p.Name, or a shared slot of it) and with which token, keeping a name's limit fixed while it
// is held; shared reports a shared grant. A shared grant of a slot that the name's row does
// not count yet is handed to keep (the count to keep) when keep is set, to be written with the
// grant; otherwise it is written now.
func decideName(ctx context.Context, t *txn, p store.AcquireParams, keep func(n int)) (gname string, token int64, shared bool, err error) {
	now := ms(t.now)
	g, ok, err := currentSettled(ctx, t, p.Name)
	if err != nil {
		return "", 0, false, err
	}
	lim, isShared := t.s.mem.sems[p.Name], t.s.mem.shared[p.Name]
	slotHeld := false
	if lim > 0 {
		if slotHeld, err = t.slotHeld(ctx, p.Name, lim); err != nil {
			return "", 0, false, err
		}
	}
	fixed := lim
	if isShared || !slotHeld {
		fixed = 0
	}
	if err := lease.CheckLimit(p.Name, p.Limit, fixed, ok && g.heldAt(t.now)); err != nil {
		return "", 0, false, err
	}
	if err := lease.CheckSharedLimit(p.Name, p.Limit, isShared && slotHeld); err != nil {
		return "", 0, false, err
	}
	if p.Limit == 0 {
		return decideMode(ctx, t, p, g, ok, keep)
	}
	slots, exists := make([]lease.Grant, p.Limit), make([]bool, p.Limit)
	for i := range slots {
		sg, ok, err := currentSettled(ctx, t, lease.SlotName(p.Name, i))
		if err != nil {
			return "", 0, false, err
		}
		slots[i], exists[i] = sg.rule(), ok
	}
	slot, token, err := lease.DecideSemaphore(p.Name, slots, exists, now, t.s.mem.token)
	if err != nil {
		return "", 0, false, err
	}
	if lim != p.Limit || isShared {
		if err := keepSlots(ctx, t, p.Name, p.Limit, false); err != nil {
			return "", 0, false, err
		}
	}
	return lease.SlotName(p.Name, slot), token, false, nil
}

// decideMode decides an acquire of p.Name without a limit, exclusive or shared
// (lease.DecideMode), given its own grant g (settled; ok false for one never made): the name
// itself, or the shared slot to grant.
func decideMode(ctx context.Context, t *txn, p store.AcquireParams, g grant, ok bool, keep func(n int)) (string, int64, bool, error) {
	h := lease.Holders{Name: p.Name, Excl: g.rule(), ExclExists: ok}
	lim, isShared := t.s.mem.sems[p.Name], t.s.mem.shared[p.Name]
	if isShared || p.Mode == lease.ModeShared {
		h.Shared, h.SharedExists = make([]lease.Grant, lim), make([]bool, lim)
		for i := range lim {
			sg, ok, err := currentSettled(ctx, t, lease.SlotName(p.Name, i))
			if err != nil {
				return "", 0, false, err
			}
			h.Shared[i], h.SharedExists[i] = sg.rule(), ok
		}
	}
	return store.DecideMode(h, p.Mode, ms(t.now), t.s.mem.token, lim, isShared, func(n int) error {
		if keep != nil {
			keep(n)
			return nil
		}
		return keepSlots(ctx, t, p.Name, n, true)
	})
}

// keepSlots records that name has lim slots, shared ones or a semaphore's.
func keepSlots(ctx context.Context, t *txn, name string, lim int, shared bool) error {
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO semaphores (name, lim, shared) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET lim = excluded.lim, shared = excluded.shared`, name, lim, shared); err != nil {
		return fmt.Errorf("keep the slots of %q: %w", name, w(err))
	}
	setUndoable(t, t.s.mem.sems, name, lim, true)
	setUndoable(t, t.s.mem.shared, name, true, shared)
	return nil
}

// slotHeld reports whether any of the first limit slots of the semaphore name is held now.
func (t *txn) slotHeld(ctx context.Context, name string, limit int) (bool, error) {
	for i := range limit {
		c, ok, err := t.lookup(ctx, lease.SlotName(name, i))
		if err != nil {
			return false, err
		}
		if ok && c.end == stillOpen && c.expires > t.now {
			return true, nil
		}
	}
	return false, nil
}

// replay answers a retry of an idempotent acquire: done is true when the key was seen within
// 24 h, with the grant it made (still current) or an error saying why not.
func replay(ctx context.Context, t *txn, p store.AcquireParams, keyHash, fp []byte) (lease.Lease, bool, error) {
	var r lease.Idempotent
	var created int64
	err := t.tx.QueryRowContext(ctx, `SELECT name, fingerprint, salt, token, created_at FROM idempotency WHERE key_hash = ?`, keyHash).
		Scan(&r.Name, &r.Fingerprint, &r.Salt, &r.Token, &created)
	r.CreatedAt = ms(created)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !r.Remembered(ms(t.now), store.IdempotencyTTL) {
		return lease.Lease{}, false, nil
	}
	if err != nil {
		return lease.Lease{}, false, fmt.Errorf("read idempotency key: %w", w(err))
	}
	if err := r.CheckRetry(p.Name, fp); err != nil {
		return lease.Lease{}, true, err
	}
	g, err := scanGrant(t.queryRow(ctx, stGrantByToken, r.Token))
	if err != nil {
		return lease.Lease{}, true, fmt.Errorf("read grant %d of idempotency key: %w", r.Token, w(err))
	}
	if g, err = settle(ctx, t, g); err != nil {
		return lease.Lease{}, true, err
	}
	l, err := r.Replay(p.IdempotencyKey, g.lease(), g.heldAt(t.now), g.endKind.String,
		func(id string) bool { return lease.SameHash(idKey(id), g.idHash) })
	return l, true, err
}

// byID finds the grant whose lease ID is id and checks it belongs to name.
func byID(ctx context.Context, t *txn, name, id string) (grant, error) {
	h := idKey(id)
	c, ok, err := t.lookup(ctx, name)
	if err != nil {
		return grant{}, err
	}
	if ok && c.ownsID(h) {
		// The holder of the current grant (nearly every renew and release).
		g, _, err := t.current(ctx, name)
		if err != nil {
			return g, err
		}
		return settle(ctx, t, g)
	}
	g, err := scanGrant(t.queryRow(ctx, stGrantByID, h))
	if errors.Is(err, sql.ErrNoRows) || err == nil && g.name != name && !isSlotOf(g.name, name) {
		return grant{}, lease.Errorf(lease.CodeLost, "lease_id is not a lease on %q (unknown, or pruned after it ended)", name)
	}
	if err != nil {
		return grant{}, fmt.Errorf("find lease by id: %w", w(err))
	}
	return settle(ctx, t, g)
}

// isSlotOf reports whether slot names a slot of the semaphore name.
func isSlotOf(slot, name string) bool {
	parent, _, ok := lease.SlotOf(slot)
	return ok && parent == name
}

// Renew extends the current unexpired lease. See store.Store.
func (s *Store) Renew(ctx context.Context, name, id string, ttl time.Duration, metadata json.RawMessage) (lease.Lease, error) {
	var out lease.Lease
	err := s.write(ctx, s.renewOp(name, id, ttl, metadata, &out))
	if err != nil {
		return lease.Lease{}, fmt.Errorf("renew %q: %w", name, err)
	}
	return out, nil
}

// renewOp is Renew's operation; it sets *out to the renewed lease.
func (s *Store) renewOp(name, id string, ttl time.Duration, metadata json.RawMessage, out *lease.Lease) func(context.Context, *txn) error {
	return func(ctx context.Context, t *txn) error {
		g, err := byID(ctx, t, name, id)
		if err != nil {
			return err
		}
		r, err := lease.DecideRenew(g.rule(), ttl, ms(t.now))
		if err != nil {
			return err
		}
		if g.session != "" {
			return lease.Errorf(lease.CodeInvalid, "lease %q is held under session %s: renew the session", name, g.session)
		}
		g.ttl, g.renewed, g.expires = r.TTL.Milliseconds(), r.RenewedAt.UnixMilli(), r.ExpiresAt.UnixMilli()
		if metadata == nil {
			_, err = t.exec(ctx, stRenew, g.ttl, g.renewed, g.expires, g.token)
		} else {
			g.metadata = nullText(metadata)
			_, err = t.exec(ctx, stRenewMetadata, g.ttl, g.renewed, g.expires, g.metadata, g.token)
		}
		if err != nil {
			return fmt.Errorf("renew token %d: %w", g.token, w(err))
		}
		// Looked up as byID found it: name's, or a slot's of the semaphore name.
		c, _, err := t.lookup(ctx, g.name)
		if err != nil {
			return err
		}
		c.ttl, c.renewed, c.expires = g.ttl, g.renewed, g.expires
		if metadata != nil {
			c.hasMeta = g.metadata.Valid
		}
		t.setName(g.name, c)
		*out = g.lease()
		if !g.shared {
			out.Limit = t.s.mem.sems[out.Name]
		}
		if h, ok := t.s.mem.handovers[g.token]; ok {
			h.Name, h.Holder = g.name, g.holder
			out.Handover = &h
		}
		return t.record(ctx, lease.Event{Type: lease.EventRenewed, Name: g.name, Token: g.token, Holder: g.holder,
			At: ms(t.now), ExpiresAt: out.ExpiresAt, Metadata: raw(g.metadata), Mode: lease.EventMode(g.shared)})
	}
}

// Release ends the lease. See store.Store.
func (s *Store) Release(ctx context.Context, name, id string) error {
	err := s.free(ctx, s.releaseOp(name, id))
	if err != nil {
		return fmt.Errorf("release %q: %w", name, err)
	}
	return nil
}

// releaseOp is Release's operation.
func (s *Store) releaseOp(name, id string) func(context.Context, *txn) error {
	return func(ctx context.Context, t *txn) error {
		g, err := byID(ctx, t, name, id)
		if err != nil {
			return err
		}
		if ended, err := lease.DecideRelease(g.rule(), ms(t.now)); !ended {
			return err
		}
		return end(ctx, t, g, lease.EndReleased, t.now)
	}
}

// Revoke ends the current lease on name. See store.Store.
func (s *Store) Revoke(ctx context.Context, name string, token int64, actor string) error {
	err := s.free(ctx, func(ctx context.Context, t *txn) error {
		g, ok, err := currentSettled(ctx, t, name)
		if err != nil {
			return err
		}
		if lim := t.s.mem.sems[name]; lim > 0 && !(ok && g.heldAt(t.now)) {
			return revokeSlots(ctx, t, name, lim, token, actor)
		}
		if ended, err := lease.DecideRevoke(g.rule(), ok, name, token); !ended {
			return err
		}
		return endBy(ctx, t, g, lease.EndRevoked, t.now, actor)
	})
	if err != nil {
		return fmt.Errorf("revoke %q: %w", name, err)
	}
	return nil
}

// Get returns the state of name. See store.Store.
func (s *Store) Get(ctx context.Context, name string) (lease.State, error) {
	g, ok, err := current(ctx, s.r, name)
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
	// The clock is read after the rows, as on PostgreSQL: a lease read as held was held at a
	// time no earlier than the one it is judged at.
	now := s.clock.Now().UnixMilli()
	var sl *lease.Slotted
	if hasSlots {
		sl = &lease.Slotted{Limit: lim, Shared: shared}
		for _, c := range slots {
			sl.Slots = append(sl.Slots, c.state(now))
		}
	}
	return lease.NameState(name, g.state(now), ok, sl)
}

// ExpireDue records passed expiries. See store.Store.
func (s *Store) ExpireDue(ctx context.Context) (int, time.Time, error) {
	var n int
	var next time.Time
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		if err := expireBefore(ctx, t, t.now, store.SweepLimit); err != nil {
			return err
		}
		// Commit even with nothing expired: the sweep persists the clock high-water mark,
		// which start-up uses to tell leases that ended before a crash from those that may
		// still be believed held.
		t.dirty = true
		n = len(t.events)
		var nx sql.NullInt64
		if err := t.tx.QueryRowContext(ctx, `SELECT min(expires_at) FROM grants WHERE ended_at IS NULL`).Scan(&nx); err != nil {
			return fmt.Errorf("next expiry: %w", w(err))
		}
		if nx.Valid {
			next = ms(nx.Int64)
		}
		return nil
	})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("expire due leases: %w", err)
	}
	return n, next, nil
}

// HeldCount counts leases held now: the open grants less those already past expiry, found in
// grants_open (the sweeper keeps them few). Without a prefix the open grants are the count the
// writer keeps in meta; with one, those under the prefix in grants_open_name, which holds no
// expiry (a renewal would rewrite its entry). Counting stays cheap with many leases. See
// store.Store.
func (s *Store) HeldCount(ctx context.Context, prefix string) (int, error) {
	var n int
	now := s.clock.Now().UnixMilli()
	var err error
	if prefix == "" {
		err = s.r.QueryRowContext(ctx, `SELECT (SELECT value FROM meta WHERE key = 'open_grants') - (SELECT count(*)
			FROM grants INDEXED BY grants_open WHERE ended_at IS NULL AND expires_at <= ?)`, now).Scan(&n)
	} else {
		lo, hi := store.PrefixRange(prefix)
		err = s.r.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM grants INDEXED BY grants_open_name
			WHERE ended_at IS NULL AND name >= ?1 AND name < ?2) - (SELECT count(*) FROM grants INDEXED BY grants_open
			WHERE ended_at IS NULL AND expires_at <= ?3 AND name >= ?1 AND name < ?2)`, lo, hi, now).Scan(&n)
	}
	if err != nil {
		return 0, fmt.Errorf("count held leases: %w", w(err))
	}
	return n, nil
}

// RecentlyFreed lists names freed lately, newest first. It reads the newest end events
// backwards by seq (cheap whatever the history's size) and the expiries the sweeper has not
// recorded yet, then keeps the names that are still free. See store.Store.
func (s *Store) RecentlyFreed(ctx context.Context, prefix string, limit int) ([]lease.State, error) {
	limit = store.ClampLimit(limit)
	now := s.clock.Now().UnixMilli()
	lo, hi := store.PrefixRange(prefix)
	var names []string
	seen := map[string]bool{}
	collect := func(q string, args ...any) error {
		rows, err := s.r.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return err
			}
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
		return rows.Err()
	}
	if err := collect(`SELECT name FROM grants INDEXED BY grants_open WHERE ended_at IS NULL AND expires_at <= ?
		AND name >= ? AND name < ? LIMIT ?`, now, lo, hi, limit); err != nil {
		return nil, fmt.Errorf("recently freed: %w", w(err))
	}
	if err := collect(`SELECT name FROM events WHERE type IN ('released', 'expired', 'revoked')
		AND name >= ? AND name < ? ORDER BY seq DESC LIMIT ?`, lo, hi, limit*8); err != nil {
		return nil, fmt.Errorf("recently freed: %w", w(err))
	}
	if len(names) == 0 {
		return nil, nil
	}
	// The candidates' current grants in one query: the names travel as one JSON array.
	list, err := json.Marshal(names)
	if err != nil {
		return nil, fmt.Errorf("recently freed: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+grantCols+` FROM json_each(?) j
		CROSS JOIN names n ON n.name = j.value JOIN grants g ON g.token = n.token`, string(list))
	if err != nil {
		return nil, fmt.Errorf("recently freed: %w", w(err))
	}
	defer rows.Close()
	var out []lease.State
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			return nil, fmt.Errorf("recently freed: %w", err)
		}
		if !g.heldAt(now) {
			out = append(out, g.state(now))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recently freed: %w", w(err))
	}
	slices.SortFunc(out, func(a, b lease.State) int { return b.EndedAt.Compare(a.EndedAt) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// The statements of prune that delete ended grants: those that ended before a time, and those
// older than the newest n ended grants. Each name's last grant stays (the state of the name).
// Both read ended grants through grants_ended and look names up by token (names_token), as
// the foreign key of names.token does for every grant deleted.
const (
	pruneGrantsBefore = `DELETE FROM grants WHERE ended_at < ? AND NOT EXISTS (SELECT 1 FROM names n WHERE n.token = grants.token)`
	pruneGrantsBeyond = `DELETE FROM grants WHERE ended_at <= (SELECT ended_at FROM grants WHERE ended_at IS NOT NULL ORDER BY ended_at DESC LIMIT 1 OFFSET ?)
		AND NOT EXISTS (SELECT 1 FROM names n WHERE n.token = grants.token)`
)

// Prune deletes old history. See store.Store.
func (s *Store) Prune(ctx context.Context, r store.Retention) error {
	return s.free(ctx, func(ctx context.Context, t *txn) error { return prune(ctx, t, r) })
}

// prune is Prune's operation.
func prune(ctx context.Context, t *txn, r store.Retention) error {
	// The batch's earlier operations' events first, so that they are pruned as if each
	// operation had run alone.
	if err := t.b.writeEvents(ctx, t.s); err != nil {
		return err
	}
	if r.Age > 0 {
		cut := t.now - r.Age.Milliseconds()
		// Events are recorded in seq order at the writer's clock, which never goes back (it
		// starts past the newest time persisted): those recorded before cut are the ones before
		// the first recorded since, found by reading them in seq order (what is deleted anyway)
		// rather than by an index on recorded_at that every event would have to enter.
		if err := pruneEventsBefore(ctx, t, `SELECT coalesce((SELECT seq FROM events WHERE recorded_at >= ? ORDER BY seq LIMIT 1),
			(SELECT coalesce(max(seq), 0) + 1 FROM events))`, cut); err != nil {
			return err
		}
		for _, q := range []struct{ what, sql string }{
			{"rejections", `DELETE FROM rejections WHERE at < ?`},
			{"grants", pruneGrantsBefore},
			{"sessions", `DELETE FROM lease_sessions WHERE coalesce(closed_at, expires_at) < ?`},
		} {
			if _, err := t.tx.ExecContext(ctx, q.sql, cut); err != nil {
				return fmt.Errorf("prune %s: %w", q.what, w(err))
			}
		}
	}
	if r.Rows > 0 {
		// Keep the newest r.Rows: a client reporting rejections (or taking leases) as fast
		// as it can must not grow the database without bound inside the age window.
		if err := pruneEventsBefore(ctx, t, `SELECT coalesce((SELECT seq FROM events ORDER BY seq DESC LIMIT 1 OFFSET ?), 0) + 1`, r.Rows); err != nil {
			return err
		}
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM rejections WHERE id <= (SELECT id FROM rejections ORDER BY id DESC LIMIT 1 OFFSET ?)`, r.Rows); err != nil {
			return fmt.Errorf("prune rejections beyond %d rows: %w", r.Rows, w(err))
		}
		// And the ended grants: a client that takes and frees leases as fast as it can must
		// not grow the database without bound inside the age window either.
		if _, err := t.tx.ExecContext(ctx, pruneGrantsBeyond, r.Rows); err != nil {
			return fmt.Errorf("prune ended grants beyond %d: %w", r.Rows, w(err))
		}
		// And the ended sessions (closed, or past their expiry), the newest kept.
		if _, err := t.tx.ExecContext(ctx, `DELETE FROM lease_sessions WHERE rowid IN (SELECT rowid FROM lease_sessions
			WHERE coalesce(closed_at, expires_at) <= ? ORDER BY rowid DESC LIMIT -1 OFFSET ?)`, t.now, r.Rows); err != nil {
			return fmt.Errorf("prune ended sessions beyond %d: %w", r.Rows, w(err))
		}
	}
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM idempotency WHERE created_at <= ?`, t.now-store.IdempotencyTTL.Milliseconds()); err != nil {
		return fmt.Errorf("prune idempotency keys: %w", w(err))
	}
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, t.now); err != nil {
		return fmt.Errorf("prune sessions: %w", w(err))
	}
	t.dirty = true
	return nil
}

// pruneEventsBefore deletes the events before the seq that firstKept (a query of one argument,
// arg) finds, and their entries in events_by_name: the cut is found once, for both tables.
func pruneEventsBefore(ctx context.Context, t *txn, firstKept string, arg any) error {
	var first int64
	if err := t.tx.QueryRowContext(ctx, firstKept, arg).Scan(&first); err != nil {
		return fmt.Errorf("prune events: %w", w(err))
	}
	for _, q := range []struct{ what, sql string }{
		{"events by name", `DELETE FROM events_by_name WHERE (name, seq) IN (SELECT name, seq FROM events WHERE seq < ?)`},
		{"events", `DELETE FROM events WHERE seq < ?`},
	} {
		if _, err := t.tx.ExecContext(ctx, q.sql, first); err != nil {
			return fmt.Errorf("prune %s: %w", q.what, w(err))
		}
	}
	return nil
}

// RequestHandover records a handover request for name's current grant. See store.Store.
func (s *Store) RequestHandover(ctx context.Context, name string, h lease.Handover) (lease.Handover, error) {
	var out lease.Handover
	err := s.write(ctx, func(ctx context.Context, t *txn) error {
		g, ok, err := currentSettled(ctx, t, name)
		if err != nil {
			return err
		}
		if lim := t.s.mem.sems[name]; t.s.mem.shared[name] && !(ok && g.heldAt(t.now)) {
			// Every shared holder is asked; the answer is the first one's request.
			slots, exists := make([]lease.Grant, lim), make([]bool, lim)
			for i := range lim {
				sg, found, err := currentSettled(ctx, t, lease.SlotName(name, i))
				if err != nil {
					return err
				}
				slots[i], exists[i] = sg.rule(), found
			}
			hs, err := lease.DecideSharedHandover(name, slots, exists, h, ms(t.now))
			for _, one := range hs {
				if err := recordHandover(ctx, t, one); err != nil {
					return err
				}
			}
			if len(hs) > 0 {
				out = hs[0]
			}
			return err
		}
		if out, err = lease.DecideHandover(g.rule(), ok, name, h, ms(t.now)); err != nil {
			return err
		}
		return recordHandover(ctx, t, out)
	})
	if err != nil {
		return lease.Handover{}, fmt.Errorf("request handover of %q: %w", name, err)
	}
	return out, nil
}

// recordHandover records the handover request h of its grant, with its event.
func recordHandover(ctx context.Context, t *txn, h lease.Handover) error {
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO handovers (token, to_holder, reason, requested_by, requested_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (token) DO UPDATE SET to_holder = excluded.to_holder, reason = excluded.reason,
		requested_by = excluded.requested_by, requested_at = excluded.requested_at`,
		h.Token, h.To, h.Reason, h.By, t.now); err != nil {
		return fmt.Errorf("record handover of token %d: %w", h.Token, w(err))
	}
	t.setHandover(h.Token, h, true)
	return t.record(ctx, lease.Event{Type: lease.EventHandoverRequested, Name: h.Name, Token: h.Token, Holder: h.Holder,
		At: ms(t.now), Actor: h.By, Handover: &h})
}

// loadHandovers reads the handover requested of each open grant that has one.
func (s *Store) loadHandovers(ctx context.Context) (map[int64]lease.Handover, error) {
	rows, err := s.w.QueryContext(ctx, `SELECT h.token, h.to_holder, h.reason, h.requested_by, h.requested_at
		FROM handovers h JOIN grants g ON g.token = h.token WHERE g.ended_at IS NULL`)
	if err != nil {
		return nil, fmt.Errorf("load handovers: %w", err)
	}
	defer rows.Close()
	out := map[int64]lease.Handover{}
	for rows.Next() {
		var h lease.Handover
		var at int64
		if err := rows.Scan(&h.Token, &h.To, &h.Reason, &h.By, &at); err != nil {
			return nil, fmt.Errorf("load handovers: %w", err)
		}
		h.At = ms(at)
		out[h.Token] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load handovers: %w", err)
	}
	return out, nil
}
