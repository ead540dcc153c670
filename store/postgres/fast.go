package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// The fast paths of a batch: the operations that come by the thousand a second (acquire of a
// plain lease, renew, release, the fenced write) are decided together, with a fixed number of
// round trips whatever their number:
//
//  1. one pipeline locks everything they decide on, each kind of row in one statement in one
//     global order (the keys' caps, resources by name, names by name, grants by token, then
//     the last token, the order a write of its own takes them in),
//     reads what else they need (waiting lines, semaphores, handovers, the grants of presented
//     tokens) and last the database's clock, so the clock is read after every lock;
//  2. the lease rules (package lease) decide each operation in turn, in memory, each seeing what
//     the ones before it decided;
//  3. one pipeline writes the outcome with set-based statements (unnest arrays).
//
// The events of the batch are then recorded in one statement with the rest (see runBatch). An
// operation the fast path does not decide (a semaphore, a session, an idempotency key, a per-key
// cap, a name with a waiting line, a second write of one resource in the batch) runs its own
// statements after the fast ones, in the same transaction, and sees what they wrote. Nothing is
// decided in SQL.

// fastKind is the kind of a fast operation.
type fastKind uint8

const (
	fastAcquire fastKind = iota + 1
	fastRenew
	fastRelease
	fastPut
)

// fastOp is an operation the batch may decide on its fast path, and where its answer goes.
type fastOp struct {
	kind     fastKind
	name, id string // renew, release: the lease's name and ID
	ttl      time.Duration
	metadata json.RawMessage
	acquire  store.AcquireParams
	put      store.ResourceWrite

	lease    *lease.Lease    // acquire, renew
	resource *lease.Resource // put
}

// eligible reports whether the fast path may decide f at all, before anything is read.
func (f *fastOp) eligible() bool {
	switch f.kind {
	case fastAcquire:
		p := f.acquire
		// A shared acquire, and any of a name with shared grants (a semaphores row), decides
		// over the name's slots: the ordinary statements lock and read them.
		return p.IdempotencyKey == "" && p.SessionID == "" && p.Limit == 0 && p.Mode != lease.ModeShared
	case fastPut:
		// A scoped writer's bound on tokens, and a key's quota, read rows of their own.
		w := f.put
		return len(w.Scope) == 0 && (w.Owner == "" || w.Quota == lease.Quota{})
	}
	return true
}

// writeFast runs f as one operation of a batch: on the fast path when it can, otherwise fn.
func (s *Store) writeFast(ctx context.Context, f *fastOp, fn func(context.Context, *txn) error) error {
	if !f.eligible() {
		return s.write(ctx, fn)
	}
	return s.enqueue(&op{ctx: ctx, fn: fn, fast: f, done: make(chan struct{})})
}

// resRow is a locked resource row as the batch sees it.
type resRow struct {
	fence, version int64
	touched        bool // written, refused or dropped by an operation of this batch
	drop           bool // made by this batch for a refused first write: deleted again
	written        *lease.Resource
	owner          string // the key that wrote it
	grant          string // the grant its token was issued to (store.GrantName)
}

// fastBatch is the fast path's view of the rows it locked, as its operations change them.
type fastBatch struct {
	now       int64
	last      int64 // the last token issued (with tokenLocked, this batch may issue more)
	lastDirty bool
	names     map[string]*grant // current grant of each locked name; nil for a name without one
	byID      map[string]*grant // by string(id_hash)
	byToken   map[int64]*grant
	presented map[int64]grant // grants of tokens presented to fenced writes, unlocked
	lines     map[string]bool // names with a waiting line
	sems      map[string]bool // names used as semaphores
	handovers map[int64]lease.Handover
	resources map[string]*resRow
	dirty     []*grant // grants of the table this batch changed, once each
	isDirty   map[int64]bool
	fresh     []*grant          // grants this batch made
	pointed   map[string]int64  // names pointed at a new grant
	rejected  []lease.Rejection // refused fenced writes to record
	values    map[string][]byte // the value each written resource takes
	current   map[string]int64  // the grant each locked name's row points at (0: none)
	held      map[string]int    // unexpired leases each capped key holds
}

// fastPhase begins the batch's transaction, locks and reads what its fast operations (those
// with fast set) decide on, and decides them, marking each it decided; the others are left to
// their own statements. The caller queues the decisions' writes (queueWrites).
func (s *Store) fastPhase(ctx context.Context, c *pgx.Conn, batch []*op) (*fastBatch, error) {
	var acquireNames, leaseNames, resources, owners []string
	var idHashes [][]byte
	var presented []int64
	for _, o := range batch {
		f := o.fast
		if f == nil || o.err != nil {
			continue
		}
		switch f.kind {
		case fastAcquire:
			acquireNames = append(acquireNames, f.acquire.Name)
			if f.acquire.MaxHeld > 0 {
				owners = append(owners, f.acquire.Owner)
			}
		case fastRenew, fastRelease:
			idHashes = append(idHashes, lease.HashID(f.id))
		case fastPut:
			resources = append(resources, f.put.Name)
			if f.put.LeaseName != "" {
				leaseNames = append(leaseNames, f.put.LeaseName)
			}
			presented = append(presented, f.put.Token)
		}
	}
	b := &fastBatch{names: map[string]*grant{}, byID: map[string]*grant{}, byToken: map[int64]*grant{},
		presented: map[int64]grant{}, lines: map[string]bool{}, sems: map[string]bool{}, handovers: map[int64]lease.Handover{},
		resources: map[string]*resRow{}, isDirty: map[int64]bool{}, pointed: map[string]int64{}, values: map[string][]byte{},
		current: map[string]int64{}, held: map[string]int{}}
	if err := s.fastLock(ctx, c, b, acquireNames, leaseNames, resources, idHashes, presented, owners); err != nil {
		return nil, err
	}
	for _, o := range batch {
		if o.fast == nil || o.err != nil {
			continue
		}
		var evs []lease.Event
		done, err := b.decide(o.fast, &evs)
		if !done {
			continue
		}
		o.decided, o.err, o.events = true, err, evs
	}
	return b, nil
}

// fastLock runs the first pipeline: it locks and reads what the batch decides on, then reads
// the clock.
func (s *Store) fastLock(ctx context.Context, c *pgx.Conn, b *fastBatch, acquireNames, leaseNames, resources []string, idHashes [][]byte, presented []int64, owners []string) error {
	lockNames := sortedUnique(append(slices.Clone(acquireNames), leaseNames...))
	acquireNames, resources, owners = sortedUnique(acquireNames), sortedUnique(resources), sortedUnique(owners)
	var pl pipeline
	queue := pl.queue
	pl.exec(beginSQL)
	pl.exec(genericPlansSQL)
	if len(owners) > 0 {
		// The keys' caps first, as an acquire of its own takes them (acquire).
		keys := make([]int64, len(owners))
		for i, o := range owners {
			keys[i] = advisoryKey("owner", []byte(o))
		}
		slices.Sort(keys)
		pl.exec(`SELECT pg_advisory_xact_lock(k) FROM (SELECT DISTINCT k FROM unnest($1::bigint[]) AS k ORDER BY k) AS keys`, keys)
	}
	if len(resources) > 0 {
		pl.exec(`INSERT INTO resources (name, fence, version, value, content_type, updated_at)
			SELECT n, 0, 0, '', '', 0 FROM unnest($1::text[]) AS n ORDER BY n ON CONFLICT (name) DO NOTHING`, resources)
		queue(func(r pgx.BatchResults) error {
			rows, err := r.Query()
			if err != nil {
				return err
			}
			var name string
			var row resRow
			_, err = pgx.ForEachRow(rows, []any{&name, &row.fence, &row.version}, func() error {
				rr := row
				b.resources[name] = &rr
				return nil
			})
			return err
		}, `SELECT name, fence, version FROM resources WHERE name = ANY($1) ORDER BY name FOR UPDATE`, resources)
	}
	if len(acquireNames) > 0 {
		pl.exec(`INSERT INTO names (name) SELECT n FROM unnest($1::text[]) AS n ORDER BY n ON CONFLICT (name) DO NOTHING`, acquireNames)
	}
	if len(lockNames) > 0 {
		queue(func(r pgx.BatchResults) error {
			rows, err := r.Query()
			if err != nil {
				return err
			}
			var name string
			var token *int64
			_, err = pgx.ForEachRow(rows, []any{&name, &token}, func() error {
				b.names[name] = nil
				if token != nil {
					b.current[name] = *token
				}
				return nil
			})
			return err
		}, `SELECT name, token FROM names WHERE name = ANY($1) ORDER BY name FOR UPDATE`, lockNames)
	}
	if len(lockNames) > 0 || len(idHashes) > 0 {
		queue(func(r pgx.BatchResults) error {
			rows, err := r.Query()
			if err != nil {
				return err
			}
			gs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (grant, error) { return scanGrant(r) })
			for i := range gs {
				g := &gs[i]
				b.byToken[g.token] = g
				b.byID[string(g.idHash)] = g
			}
			return err
		}, `SELECT `+grantCols+` FROM grants g WHERE g.token = ANY(ARRAY(
				SELECT token FROM grants WHERE id_hash = ANY($1)
				UNION SELECT token FROM names WHERE name = ANY($2) AND token IS NOT NULL))
			ORDER BY g.token FOR UPDATE`, idHashes, lockNames)
	}
	if len(idHashes) > 0 {
		queue(func(r pgx.BatchResults) error {
			rows, err := r.Query()
			if err != nil {
				return err
			}
			var h lease.Handover
			var at int64
			_, err = pgx.ForEachRow(rows, []any{&h.Token, &h.To, &h.Reason, &h.By, &at}, func() error {
				h.At = ms(at)
				b.handovers[h.Token] = h
				return nil
			})
			return err
			// Driven from handovers, which is empty or nearly so: each pending request checks its
			// grant by token, where looking the batch's grants up again cost every batch as
			// much as one index lookup per renewal.
		}, `SELECT h.token, h.to_holder, h.reason, h.requested_by, h.requested_at FROM handovers h
			WHERE EXISTS (SELECT 1 FROM grants g WHERE g.token = h.token AND g.id_hash = ANY($1))`, idHashes)
	}
	if len(acquireNames) > 0 {
		queue(func(r pgx.BatchResults) error {
			return r.QueryRow().Scan(&b.last)
		}, `SELECT last FROM tokens FOR UPDATE`)
		queue(func(r pgx.BatchResults) error {
			return collectNames(r, b.lines)
		}, `SELECT DISTINCT name FROM waiters WHERE name = ANY($1)`, acquireNames)
		queue(func(r pgx.BatchResults) error {
			return collectNames(r, b.sems)
		}, `SELECT name FROM semaphores WHERE name = ANY($1)`, acquireNames)
	} else if len(presented) > 0 {
		// Tokens are issued with the tokens row locked to commit: a token a client presents
		// was committed before, so the committed last token bounds it without a lock.
		queue(func(r pgx.BatchResults) error {
			return r.QueryRow().Scan(&b.last)
		}, `SELECT last FROM tokens`)
	}
	if len(presented) > 0 {
		queue(func(r pgx.BatchResults) error {
			rows, err := r.Query()
			if err != nil {
				return err
			}
			gs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (grant, error) { return scanGrant(r) })
			for _, g := range gs {
				b.presented[g.token] = g
			}
			return err
		}, `SELECT `+grantCols+` FROM grants g WHERE g.token = ANY($1)`, presented)
	}
	var testNow *int64
	if s.test != nil {
		v := s.test.Now().UnixMilli()
		testNow = &v
	}
	switch {
	case len(owners) > 0:
		// The clock, and what each capped key holds at its time: after every lock.
		queue(func(r pgx.BatchResults) error {
			rows, err := r.Query()
			if err != nil {
				return err
			}
			var owner string
			var n int
			_, err = pgx.ForEachRow(rows, []any{&b.now, &owner, &n}, func() error {
				b.held[owner] = n
				return nil
			})
			return err
		}, `WITH c AS MATERIALIZED (SELECT COALESCE($2::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS now)
			SELECT c.now, o, (SELECT count(*) FROM grants g WHERE g.owner = o AND g.ended_at IS NULL AND g.expires_at > c.now)
			FROM c CROSS JOIN unnest($1::text[]) AS o`, owners, testNow)
	case testNow == nil:
		queue(func(r pgx.BatchResults) error { return r.QueryRow().Scan(&b.now) }, nowSQL)
	default:
		b.now = *testNow
	}
	if err := pl.run(ctx, c); err != nil {
		return fmt.Errorf("lock the batch's rows: %w", err)
	}
	for name, token := range b.current {
		b.names[name] = b.byToken[token]
	}
	return nil
}

// The fast path's statements run with the plan each was given once for any arguments (a
// generic plan), from its first pipeline to the end of its writes (genericPlansSQL, then
// defaultPlansSQL): each reads and writes rows by key (= ANY of an array, a join on unnest), and
// its generic plan reads the same indexes as a plan made for the arguments, which
// TestFastPathPlannedOnce checks at 50,000 grants. Left to choose, PostgreSQL planned the
// batch's read of its grants anew at every batch (its generic plan costs more on paper, for
// arrays of unknown length), as it did the handovers' and, for batches of a few operations, the
// grants' update: at one operation a batch 28 % of the database's CPU went to planning (perf),
// and three replicas on one database (batches a third the size) spent 7 - 20 % more of the
// database's CPU per renewal than with the plans made once (five pairs of runs, 3 Dec 2026).
// The statements the batch's other operations run after them, some of them ranges of a time or
// of names whose plan depends on the arguments, are planned as before.
const (
	genericPlansSQL = `SET LOCAL plan_cache_mode = force_generic_plan`
	defaultPlansSQL = `SET LOCAL plan_cache_mode = DEFAULT`
)

func collectNames(r pgx.BatchResults, into map[string]bool) error {
	rows, err := r.Query()
	if err != nil {
		return err
	}
	var name string
	_, err = pgx.ForEachRow(rows, []any{&name}, func() error {
		into[name] = true
		return nil
	})
	return err
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// touch marks g, a grant of the table, as changed by this batch.
func (b *fastBatch) touch(g *grant) {
	if !b.isDirty[g.token] {
		b.isDirty[g.token] = true
		b.dirty = append(b.dirty, g)
	}
}

// settle records g's expiry if it is open but past it at the batch's time (see settle).
func (b *fastBatch) settle(g *grant, evs *[]lease.Event) {
	if _, expired := lease.Settle(g.rule(), ms(b.now)); expired {
		b.end(g, lease.EndExpired, g.expires, evs)
	}
}

// end closes g and records the event (see end).
func (b *fastBatch) end(g *grant, kind lease.End, at int64, evs *[]lease.Event) {
	if n, capped := b.held[g.owner]; capped && kind != lease.EndExpired {
		b.held[g.owner] = n - 1 // counted as held at the batch's time (an expiry was not)
	}
	k := string(kind)
	g.ended, g.endKind = &at, &k
	if !slices.Contains(b.fresh, g) {
		b.touch(g)
	}
	*evs = append(*evs, lease.Event{Type: lease.EventType(kind), Name: g.name, Token: g.token, Holder: g.holder, At: ms(at),
		Metadata: raw(g.metadata), Session: g.session, Mode: lease.EventMode(g.shared)})
}

// decide decides f in memory. done is false when the fast path cannot decide it (its own
// statements will, after the batch's fast ones).
func (b *fastBatch) decide(f *fastOp, evs *[]lease.Event) (done bool, err error) {
	switch f.kind {
	case fastAcquire:
		return b.acquire(f, evs)
	case fastRenew:
		return b.renew(f, evs)
	case fastRelease:
		return b.release(f, evs)
	case fastPut:
		return b.put(f, evs)
	}
	return false, nil
}

// byLeaseID is the grant whose lease ID is id, if it is a lease on name (see byID).
func (b *fastBatch) byLeaseID(name, id string) (*grant, error) {
	g := b.byID[string(lease.HashID(id))]
	if g != nil {
		if parent, _, _ := lease.SlotOf(g.name); parent == name {
			return g, nil
		}
	}
	return nil, lease.Errorf(lease.CodeLost, "lease_id is not a lease on %q (unknown, or pruned after it ended)", name)
}

func (b *fastBatch) acquire(f *fastOp, evs *[]lease.Event) (bool, error) {
	p := f.acquire
	cur, locked := b.names[p.Name]
	if !locked || b.lines[p.Name] || b.sems[p.Name] {
		return false, nil
	}
	var rule lease.Grant
	if cur != nil {
		b.settle(cur, evs)
		rule = cur.rule()
	}
	token, err := lease.DecideAcquire(rule, cur != nil, ms(b.now), b.last)
	if err != nil {
		return true, err
	}
	if p.MaxHeld > 0 {
		if err := lease.CheckHeldCap(b.held[p.Owner], p.MaxHeld); err != nil {
			return true, err
		}
		b.held[p.Owner]++
	}
	ng := lease.NewGrant(p.Name, p.Holder, token, p.TTL, p.LockDelay, ms(b.now))
	id := lease.NewID(token)
	g := &grant{token: token, name: p.Name, holder: p.Holder, idHash: lease.HashID(id), ttl: ng.TTL.Milliseconds(),
		lockDelay: p.LockDelay.Milliseconds(), acquired: b.now, renewed: b.now, expires: ng.ExpiresAt.UnixMilli(),
		metadata: nullText(p.Metadata), owner: p.Owner}
	b.fresh = append(b.fresh, g)
	b.names[p.Name], b.byToken[token], b.byID[string(g.idHash)] = g, g, g
	b.pointed[p.Name] = token
	b.last, b.lastDirty = token, true
	*f.lease = lease.Lease{Name: p.Name, Holder: p.Holder, ID: id, Token: token, TTL: ng.TTL, AcquiredAt: ng.AcquiredAt,
		RenewedAt: ng.RenewedAt, ExpiresAt: ng.ExpiresAt, LockDelay: ng.LockDelay, Metadata: p.Metadata}
	*evs = append(*evs, lease.Event{Type: lease.EventAcquired, Name: p.Name, Token: token, Holder: p.Holder,
		At: ms(b.now), ExpiresAt: ng.ExpiresAt, LockDelay: p.LockDelay, Metadata: p.Metadata})
	return true, nil
}

func (b *fastBatch) renew(f *fastOp, evs *[]lease.Event) (bool, error) {
	g, err := b.byLeaseID(f.name, f.id)
	if err != nil {
		return true, err
	}
	if _, _, isSlot := lease.SlotOf(g.name); isSlot {
		return false, nil // its answer names the semaphore's limit
	}
	b.settle(g, evs)
	r, err := lease.DecideRenew(g.rule(), f.ttl, ms(b.now))
	if err != nil {
		return true, err
	}
	if g.session != "" {
		return true, lease.Errorf(lease.CodeInvalid, "lease %q is held under session %s: renew the session", f.name, g.session)
	}
	g.ttl, g.renewed, g.expires = r.TTL.Milliseconds(), r.RenewedAt.UnixMilli(), r.ExpiresAt.UnixMilli()
	if f.metadata != nil {
		g.metadata = nullText(f.metadata)
	}
	if !slices.Contains(b.fresh, g) {
		b.touch(g)
	}
	*f.lease = g.lease()
	if h, ok := b.handovers[g.token]; ok {
		h.Name, h.Holder = g.name, g.holder
		f.lease.Handover = &h
	}
	*evs = append(*evs, lease.Event{Type: lease.EventRenewed, Name: g.name, Token: g.token, Holder: g.holder,
		At: ms(b.now), ExpiresAt: f.lease.ExpiresAt, Metadata: raw(g.metadata)})
	return true, nil
}

func (b *fastBatch) release(f *fastOp, evs *[]lease.Event) (bool, error) {
	g, err := b.byLeaseID(f.name, f.id)
	if err != nil {
		return true, err
	}
	b.settle(g, evs)
	if ended, err := lease.DecideRelease(g.rule(), ms(b.now)); !ended {
		return true, err
	}
	b.end(g, lease.EndReleased, b.now, evs)
	return true, nil
}

func (b *fastBatch) put(f *fastOp, evs *[]lease.Event) (bool, error) {
	wr := f.put
	r := b.resources[wr.Name]
	if r == nil || r.touched {
		// Not locked (its row was dropped by a refused first write as this batch made it),
		// or written already in this batch: its history of writers takes one entry a
		// statement.
		return false, nil
	}
	owner, known := b.presented[wr.Token]
	if g := b.byToken[wr.Token]; g != nil {
		owner, known = *g, true
	}
	fw := lease.FencedWrite{Resource: wr.Name, Token: wr.Token, Fence: r.fence, LeaseName: wr.LeaseName, LastToken: b.last,
		Shared: known && owner.shared}
	var lg *grant
	if wr.LeaseName != "" {
		cur, locked := b.names[wr.LeaseName]
		if locked && cur != nil {
			lg, fw.LeaseExists = cur, true
		}
	}
	if lg != nil {
		b.settle(lg, evs)
		fw.Lease = lg.rule()
	}
	r.touched = true
	if e := lease.DecideFencedWrite(fw, ms(b.now)); e != nil {
		r.drop = r.version == 0
		rej := lease.Rejection{Resource: wr.Name, Lease: wr.LeaseName, PresentedToken: wr.Token, CurrentFence: e.CurrentFence,
			ClientAddr: wr.ClientAddr, UserAgent: wr.UserAgent, Reason: e.Message, Source: lease.RejectionSourceServer, KeyID: wr.Owner}
		rej.Lease, rej.Holder = lease.Attribute(wr.Scope, rej.Lease, owner.name, owner.holder, known)
		rej.At = ms(b.now)
		b.rejected = append(b.rejected, rej)
		*evs = append(*evs, lease.Event{Type: lease.EventRejected, Name: rej.Lease, Token: rej.PresentedToken,
			Holder: rej.Holder, At: rej.At, Resource: rej.Resource})
		return true, e
	}
	if e := lease.DecideWriteCondition(wr.IfVersion, wr.IfAbsent, r.version); e != nil {
		r.drop = r.version == 0
		return true, e
	}
	leaseName, holder := lease.Attribute(wr.Scope, wr.LeaseName, owner.name, owner.holder, known)
	out := lease.Resource{Name: wr.Name, Fence: wr.Token, Version: r.version + 1, UpdatedAt: ms(b.now),
		Size: int64(len(wr.Value)), ContentType: wr.ContentType, Lease: leaseName, Holder: holder}
	r.written, r.fence, r.version, r.owner, r.grant = &out, out.Fence, out.Version, wr.Owner, store.GrantName(owner.name, known)
	*f.resource = out
	b.values[wr.Name] = nonNil(wr.Value)
	return true, nil
}

// queueWrites queues on p the writes of every row the batch's decisions changed, a statement
// a table.
func (b *fastBatch) queueWrites(p *pipeline) {
	if len(b.dirty) > 0 {
		var tokens, ttl, renewed, expires []int64
		var ended []*int64
		var kinds, meta []*string
		for _, g := range b.dirty {
			tokens, ttl, renewed, expires = append(tokens, g.token), append(ttl, g.ttl), append(renewed, g.renewed), append(expires, g.expires)
			ended, kinds, meta = append(ended, g.ended), append(kinds, g.endKind), append(meta, g.metadata)
		}
		p.exec(`UPDATE grants g SET ttl_ms = u.ttl, renewed_at = u.renewed, expires_at = u.expires, ended_at = u.ended,
			end_kind = u.kind, metadata = u.meta
			FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::text[])
				AS u(token, ttl, renewed, expires, ended, kind, meta)
			WHERE g.token = u.token`, tokens, ttl, renewed, expires, ended, kinds, meta)
	}
	if len(b.fresh) > 0 {
		var tokens, ttl, delay, at, expires []int64
		var ended []*int64
		var kinds, meta []*string
		var names, holders, owners []string
		var hashes [][]byte
		for _, g := range b.fresh {
			tokens, ttl, delay, at, expires = append(tokens, g.token), append(ttl, g.ttl), append(delay, g.lockDelay), append(at, g.acquired), append(expires, g.expires)
			ended, kinds, meta = append(ended, g.ended), append(kinds, g.endKind), append(meta, g.metadata)
			names, holders, owners, hashes = append(names, g.name), append(holders, g.holder), append(owners, g.owner), append(hashes, g.idHash)
		}
		p.exec(`INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at,
				ended_at, end_kind, metadata, owner, session)
			SELECT token, name, holder, hash, ttl, delay, at, at, expires, ended, kind, meta, owner, ''
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[],
				$9::bigint[], $10::text[], $11::text[], $12::text[]) AS u(token, name, holder, hash, ttl, delay, at, expires, ended, kind, meta, owner)`,
			tokens, names, holders, hashes, ttl, delay, at, expires, ended, kinds, meta, owners)
		var pointNames []string
		var pointTokens []int64
		for name, token := range b.pointed {
			pointNames, pointTokens = append(pointNames, name), append(pointTokens, token)
		}
		p.exec(`UPDATE names n SET token = u.token FROM unnest($1::text[], $2::bigint[]) AS u(name, token) WHERE n.name = u.name`,
			pointNames, pointTokens)
	}
	if b.lastDirty {
		p.exec(`UPDATE tokens SET last = $1`, b.last)
	}
	var drop []string
	var written []*resRow
	var values [][]byte
	for name, r := range b.resources {
		if r.drop {
			drop = append(drop, name)
		}
		if r.written != nil {
			written = append(written, r)
		}
	}
	if len(written) > 0 {
		values = make([][]byte, len(written))
		var names, cts, leases, holders, owners, grants []string
		var fences, versions, sizes []int64
		for _, r := range written {
			w := r.written
			names, cts, leases, holders = append(names, w.Name), append(cts, w.ContentType), append(leases, w.Lease), append(holders, w.Holder)
			fences, versions, sizes, owners = append(fences, w.Fence), append(versions, w.Version), append(sizes, w.Size), append(owners, r.owner)
			grants = append(grants, r.grant)
		}
		for i, r := range written {
			values[i] = b.values[r.written.Name]
		}
		// The write joins the row's history of writers, which drops its oldest entry past
		// store.WritersKept, in the same UPDATE.
		p.exec(`UPDATE resources r SET fence = u.fence, version = u.version, value = u.value, content_type = u.ct,
			updated_at = $8, lease = u.lease, holder = u.holder, owner = u.owner, grant_name = u.gname,
			writers = CASE WHEN jsonb_array_length(r.writers) >= `+writersKept+` THEN r.writers - 0 ELSE r.writers END
				|| jsonb_build_array(jsonb_build_object('v', u.version, 't', u.fence, 'l', u.lease, 'h', u.holder,
				'at', $8::bigint, 'n', u.size, 'ct', u.ct))
			FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[], $5::text[], $6::text[], $7::text[], $9::bigint[], $10::text[], $11::text[])
				AS u(name, fence, version, value, ct, lease, holder, size, owner, gname)
			WHERE r.name = u.name`, names, fences, versions, values, cts, leases, holders, b.now, sizes, owners, grants)
	}
	if len(drop) > 0 {
		p.exec(`DELETE FROM resources WHERE name = ANY($1) AND version = 0`, drop)
	}
	if len(b.rejected) > 0 {
		var resources, leases, holders, addrs, agents, reasons, sources, keys []string
		var tokens, fences []int64
		for _, r := range b.rejected {
			resources, leases, holders, addrs = append(resources, r.Resource), append(leases, r.Lease), append(holders, r.Holder), append(addrs, r.ClientAddr)
			agents, reasons, sources, keys = append(agents, r.UserAgent), append(reasons, r.Reason), append(sources, r.Source), append(keys, r.KeyID)
			tokens, fences = append(tokens, r.PresentedToken), append(fences, r.CurrentFence)
		}
		p.exec(`INSERT INTO rejections (resource, lease, presented_token, current_fence, holder, client_addr, user_agent, reason, source, at, key_id)
			SELECT resource, lease, token, fence, holder, addr, agent, reason, source, $10, key_id
			FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $11::text[])
				AS u(resource, lease, token, fence, holder, addr, agent, reason, source, key_id)`,
			resources, leases, tokens, fences, holders, addrs, agents, reasons, sources, b.now, keys)
	}
}
