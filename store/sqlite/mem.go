package sqlite

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/leasekeeper/leasekeeper/lease"
)

// mem is the writer's view of the current state, loaded at open and changed only by the
// holder of the writer lock, in step with the transaction it belongs to: the current grant of
// the names touched lately, the fence of every resource, the last token issued and the last
// event seq. It lets the writer decide without reading SQL for the names it works on; readers
// still read SQL (what is committed).
type mem struct {
	// names holds the current grant of the names touched lately, at most Options.NameCache
	// of them between batches (see lookup and trim); SQL holds every name's.
	names  map[string]cur
	owners map[string]int // open grants per owning key, an upper bound of its held leases
	fences map[string]fenceRow
	token  int64 // the last token issued (meta.last_token)
	seq    int64 // the last event seq given
	// indexed is the last seq in events_by_name (meta.events_indexed): the events after it
	// are found by name by reading them in seq order.
	indexed int64
	// open counts the open grants (the current grants of names that have not ended); saved is
	// the count in meta.open_grants, which the batch that changes open writes.
	open, saved int64
	// handovers holds the handover requested of each open grant that has one, by token.
	handovers map[int64]lease.Handover
	// sessionOf holds the session Ref of each open grant held under a session, by token.
	sessionOf map[int64]string
	// sems holds the limit of every name ever acquired as a semaphore, or with shared
	// grants: then how many of its slots were used so far.
	sems map[string]int
	// shared holds the names in sems whose slots are shared grants (lease.ModeShared).
	shared map[string]bool
}

// cur is a name's current grant, kept small (heap at a million: BENCHMARKS.md): no metadata (read
// from SQL when the grant has some), and only the first half of the lease ID's SHA-256, which is
// enough to recognise the current holder (a forged match needs a 128-bit preimage); any other
// ID is looked up by its whole hash in SQL.
type cur struct {
	token, ttl, lockDelay      int64
	acquired, renewed, expires int64
	ended                      int64 // 0 while open
	// restartExt is what restarts added to the grant's expiry (grants.restart_ext_ms): after
	// a restart with many leases open, nearly every one has some, so it is kept here rather
	// than in a map by token (what that map cost a restart at a million: BENCHMARKS.md).
	restartExt    int64
	idHash        [16]byte
	holder, owner string
	end           endCode // how it ended; stillOpen while open
	hasMeta       bool
	shared        bool // a shared (read) grant
}

// curMaxSize is the most a cur may take: a map keeps values of up to 128 bytes in its own
// slots, and any larger one apart, behind a pointer: a million names then cost a million more
// objects to allocate and for the collector to scan (TestCurKeptInline).
const curMaxSize = 128

// endCode is a lease.End in one byte, so that cur stays within curMaxSize.
type endCode uint8

const (
	stillOpen endCode = iota
	endReleased
	endExpired
	endRevoked
)

func codeOf(e lease.End) endCode {
	switch e {
	case lease.EndReleased:
		return endReleased
	case lease.EndExpired:
		return endExpired
	case lease.EndRevoked:
		return endRevoked
	}
	return stillOpen
}

func (e endCode) kind() lease.End {
	return [...]lease.End{"", lease.EndReleased, lease.EndExpired, lease.EndRevoked}[e]
}

type fenceRow struct{ fence, version int64 }

func curOf(g grant, owner string) cur {
	c := cur{token: g.token, ttl: g.ttl, lockDelay: g.lockDelay, acquired: g.acquired, renewed: g.renewed,
		expires: g.expires, restartExt: g.restartExt, holder: g.holder, owner: owner, hasMeta: g.metadata.Valid, shared: g.shared}
	copy(c.idHash[:], hashOf(g.idHash))
	if g.ended.Valid {
		c.ended, c.end = g.ended.Int64, codeOf(lease.End(g.endKind.String))
	}
	return c
}

// grant is c as a grants row of name, without its metadata.
func (c cur) grant(name string) grant {
	g := grant{token: c.token, name: name, shared: c.shared, holder: c.holder, idHash: c.idHash[:], ttl: c.ttl,
		lockDelay: c.lockDelay, acquired: c.acquired, renewed: c.renewed, expires: c.expires, restartExt: c.restartExt}
	if c.end != stillOpen {
		g.ended = sql.NullInt64{Int64: c.ended, Valid: true}
		g.endKind = sql.NullString{String: string(c.end.kind()), Valid: true}
	}
	return g
}

// ownsID reports, in constant time, whether key (idKey) is of c's lease ID.
func (c cur) ownsID(key []byte) bool {
	return subtle.ConstantTimeCompare(c.idHash[:], hashOf(key)[:len(c.idHash)]) == 1
}

// idKey is what the grants table keeps of a lease ID (id_hash). For an ID that carries its
// token: the token, big-endian, then the ID's SHA-256, so that new grants' keys come in token
// order and the unique index on them grows at its end (a page rewritten per batch) instead of
// taking each grant's entry to a random page of an index of every grant ever made. For an ID
// from before IDs carried their token: its SHA-256 alone.
func idKey(id string) []byte {
	h := lease.HashID(id)
	token, ok := lease.IDToken(id)
	if !ok {
		return h
	}
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(h)), uint64(token)), h...)
}

// hashOf is the SHA-256 of the lease ID in its idKey.
func hashOf(key []byte) []byte {
	if len(key) > sha256.Size {
		return key[len(key)-sha256.Size:]
	}
	return key
}

// loadCounters reads the last token and event seq into an otherwise empty memory.
func (s *Store) loadCounters(ctx context.Context) error {
	m := mem{names: map[string]cur{}, owners: map[string]int{}, fences: map[string]fenceRow{}, handovers: map[int64]lease.Handover{},
		sessionOf: map[int64]string{}, sems: map[string]int{}, shared: map[string]bool{}}
	if err := s.w.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'last_token'`).Scan(&m.token); err != nil {
		return fmt.Errorf("read the last token: %w", err)
	}
	// AUTOINCREMENT never gives a seq twice, even after the newest events were pruned:
	// sqlite_sequence keeps the largest ever given.
	err := s.w.QueryRowContext(ctx, `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)`).Scan(&m.seq)
	if err != nil {
		return fmt.Errorf("read the last event seq: %w", err)
	}
	if err := s.w.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'events_indexed'`).Scan(&m.indexed); err != nil {
		return fmt.Errorf("read the events indexed by name: %w", err)
	}
	s.mem = m
	return nil
}

// load reads the state the writer keeps in memory. The current grants of names are not read
// here: each is read from SQL when an operation first touches its name (lookup), so that a
// restart does not wait for a million of them (BENCHMARKS.md); the counts of open grants,
// overall and per owning key, are read from grants_open_owner.
func (s *Store) load(ctx context.Context) error {
	if err := s.loadCounters(ctx); err != nil {
		return err
	}
	m := s.mem
	rows, err := s.w.QueryContext(ctx, `SELECT owner, count(*) FROM grants INDEXED BY grants_open_owner
		WHERE ended_at IS NULL GROUP BY owner`)
	if err != nil {
		return fmt.Errorf("count open grants: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var owner string
		var n int
		if err := rows.Scan(&owner, &n); err != nil {
			return fmt.Errorf("count open grants: %w", err)
		}
		m.open += int64(n)
		if owner != "" {
			m.owners[owner] = n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count open grants: %w", err)
	}
	if m.handovers, err = s.loadHandovers(ctx); err != nil {
		return err
	}
	if m.sessionOf, err = s.loadSessionOf(ctx); err != nil {
		return err
	}
	if m.sems, m.shared, err = s.loadSemaphores(ctx); err != nil {
		return err
	}
	fr, err := s.w.QueryContext(ctx, `SELECT name, fence, version FROM resources`)
	if err != nil {
		return fmt.Errorf("load fences: %w", err)
	}
	defer fr.Close()
	for fr.Next() {
		var name string
		var f fenceRow
		if err := fr.Scan(&name, &f.fence, &f.version); err != nil {
			return fmt.Errorf("load fences: %w", err)
		}
		m.fences[name] = f
	}
	if err := fr.Err(); err != nil {
		return fmt.Errorf("load fences: %w", err)
	}
	// The start-up write ended the grants that had expired before the restart without
	// counting them (memory held no grants then): the count is mended here, before any read.
	if err := s.w.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'open_grants'`).Scan(&m.saved); err != nil {
		return fmt.Errorf("read the count of open grants: %w", err)
	}
	if m.saved != m.open {
		if _, err := s.stmts[stOpenGrants].ExecContext(ctx, m.open); err != nil {
			return fmt.Errorf("write the count of open grants: %w", err)
		}
		m.saved = m.open
	}
	s.mem = m
	return nil
}

// lookup is the current grant of name, from memory or else from SQL inside t's transaction
// (which then keeps it in memory, undone with t); ok is false for a name never used. Every
// change to a name's grant looks it up first, so that setName knows what it replaces.
func (t *txn) lookup(ctx context.Context, name string) (cur, bool, error) {
	m := &t.s.mem
	if c, ok := m.names[name]; ok {
		return c, true, nil
	}
	c, err := scanCur(t.stmt(ctx, stCur).QueryRowContext(ctx, name))
	if errors.Is(err, sql.ErrNoRows) {
		return cur{}, false, nil
	}
	if err != nil {
		return cur{}, false, fmt.Errorf("read the current grant of %q: %w", name, w(err))
	}
	// Undone with the operation: a batch rolled back may have changed the row read here.
	m.names[name] = c
	t.undo = append(t.undo, func() { delete(m.names, name) })
	return c, true, nil
}

// scanCur reads a row of stCur.
func scanCur(row *sql.Row) (cur, error) {
	var g grant
	var hasMeta bool
	var owner string
	var idHash []byte
	if err := row.Scan(&g.token, &g.name, &g.holder, &idHash, &g.ttl, &g.lockDelay, &g.acquired, &g.renewed, &g.expires,
		&g.ended, &g.endKind, &hasMeta, &owner, &g.restartExt, &g.shared); err != nil {
		return cur{}, err
	}
	g.metadata.Valid, g.idHash = hasMeta, idHash
	return curOf(g, owner), nil
}

// trim forgets names past max, down to seven eighths of it, once a batch has committed: what
// it forgets is in SQL, and lookup reads it again when needed.
func (m *mem) trim(max int) {
	if len(m.names) <= max {
		return
	}
	keep := max - max/8
	for name := range m.names {
		if len(m.names) <= keep {
			break
		}
		delete(m.names, name)
	}
}

// The changes an operation makes to mem, each with its undo, so that an operation (or a
// batch) that SQLite rolls back leaves mem as it found it.

func (t *txn) setName(name string, c cur) {
	m := &t.s.mem
	old, had := m.names[name]
	m.names[name] = c
	t.undo = append(t.undo, func() {
		if had {
			m.names[name] = old
		} else {
			delete(m.names, name)
		}
	})
	t.countOwner(old, had, -1)
	t.countOwner(c, true, 1)
	if d := isOpen(c, true) - isOpen(old, had); d != 0 {
		m.open += d
		t.undo = append(t.undo, func() { m.open -= d })
	}
}

// isOpen is 1 when there is a grant c and it has not ended, else 0.
func isOpen(c cur, ok bool) int64 {
	if ok && c.end == stillOpen {
		return 1
	}
	return 0
}

// countOwner adds d to the open grants of c's owner when c is open.
func (t *txn) countOwner(c cur, ok bool, d int) {
	if !ok || c.owner == "" || c.end != stillOpen {
		return
	}
	m := &t.s.mem
	m.owners[c.owner] += d
	t.undo = append(t.undo, func() { m.owners[c.owner] -= d })
}

// setHandover records h as the handover requested of its grant; keep false forgets it.
func (t *txn) setHandover(token int64, h lease.Handover, keep bool) {
	setUndoable(t, t.s.mem.handovers, token, h, keep)
}

// setSessionOf records that the grant token is held under the session ref; keep false forgets it.
func (t *txn) setSessionOf(token int64, ref string, keep bool) {
	setUndoable(t, t.s.mem.sessionOf, token, ref, keep)
}

// setUndoable sets m[k] = v (keep false deletes it) with its undo.
func setUndoable[K comparable, V any](t *txn, m map[K]V, k K, v V, keep bool) {
	old, had := m[k]
	if !keep && !had {
		return
	}
	if keep {
		m[k] = v
	} else {
		delete(m, k)
	}
	t.undo = append(t.undo, func() {
		if had {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
}

func (t *txn) setToken(token int64) {
	m := &t.s.mem
	old := m.token
	m.token = token
	t.undo = append(t.undo, func() { m.token = old })
}

func (t *txn) setFence(name string, f fenceRow, keep bool) {
	m := &t.s.mem
	old, had := m.fences[name]
	if keep {
		m.fences[name] = f
	} else {
		delete(m.fences, name)
	}
	t.undo = append(t.undo, func() {
		if had {
			m.fences[name] = old
		} else {
			delete(m.fences, name)
		}
	})
}

func (t *txn) nextSeq() int64 {
	m := &t.s.mem
	m.seq++
	t.undo = append(t.undo, func() { m.seq-- })
	return m.seq
}

// rollback undoes what t changed in mem, newest first.
func (t *txn) rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.undo = nil
}
