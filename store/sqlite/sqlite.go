// Package sqlite is the embedded SQLite backend of store.Store: WAL mode, synchronous=FULL, one
// writer. Writes are serialized under the writer lock and committed in groups (an operation that
// fails for SQLite's reasons rolls back alone: see Store.commit), answered only after the commit
// reached the disk, and their events are published in commit order.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
	"github.com/pressly/goose/v3"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/migrations"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/parts"
)

var _ store.Store = (*Store)(nil)

// Options configure a Store. The zero value is usable.
type Options struct {
	// Clock overrides the server clock (tests). By default the store anchors a
	// lease.AnchoredClock to the wall clock, never earlier than the newest persisted time.
	Clock lease.Clock
	// OnCommit is called after every committed write with the events it recorded, in commit
	// order, before the write is answered. It runs after the writer lock is let go (the next
	// batch may be committing meanwhile) but one batch at a time: it must not block.
	OnCommit func([]lease.Event)
	// OnBatch, when set, is told of every batch the writer ran: how many operations it held,
	// how long it took from BEGIN to the end of COMMIT, and whether it committed (metrics).
	OnBatch func(ops int, took time.Duration, committed bool)
	// OnBatchTrace, when set, is also told of every batch with the contexts of its operations
	// and the time of its COMMIT (tracing). Unset, the writer neither collects nor times them.
	OnBatchTrace func(store.Batch)
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// MaxPageCount caps the database file at this many pages (SQLite's max_page_count) on
	// the writer connection; writes beyond it fail as on a full disk. 0 leaves SQLite's cap.
	MaxPageCount int
	// CheckpointEvery is how often the WAL is copied into the database in the background
	// (default 250 ms); the writer never checkpoints.
	CheckpointEvery time.Duration
	// Fault, when set, is asked before each step of a write ("begin", "exec" for every
	// statement, "commit") and a non-nil answer makes that step fail with it, as a failing
	// disk would (an fsync error surfaces as COMMIT's). For fault-injection tests only.
	Fault func(step string) error
	// Reserve is the disk space held in <db>-reserve and given back when a write fails for
	// want of space, so that deletes and releases still work on a full disk (see reserve):
	// 0 takes DefaultReserve, below 0 holds none.
	Reserve int64
	// EventTail is how many of the newest events a query by name may read by seq, unindexed
	// (default 2048): when more are, the writer's next batch adds the older half of them to
	// events_by_name in one sorted INSERT. Small in tests, to exercise both halves.
	EventTail int
	// HeldNarrow is the most matches Held sorts after reading them through its filter's index
	// (default heldsql.NarrowRows, -1 never); with more, it walks the order's index. Small in
	// tests, to exercise both plans.
	HeldNarrow int
	// HeldParts is how Held finds a part of a name or holder (default PartsBackground: an index
	// in memory, built and kept off the write path; see parts).
	HeldParts PartsMode
	// NameCache is the most names whose current grant the writer keeps in memory (default
	// DefaultNameCache); the others are read from SQL when an operation first touches them.
	// Small in tests, to exercise loads and evictions.
	NameCache int

	// tuneParts, when set, changes the index of parts' settings before its keeper starts
	// (this package's tests).
	tuneParts func(*parts.Keeper)
}

// DefaultNameCache is Options.NameCache's default: the writer's memory of current grants
// stays within a few tens of MB whatever the number of leases, and the names a busy server
// touches stay in it.
const DefaultNameCache = 100_000

// Store is the SQLite store.
type Store struct {
	w        *sql.DB // the single writer connection
	r        *sql.DB // readers
	clock    lease.Clock
	onCommit func([]lease.Event)
	log      *slog.Logger

	onBatch func(ops int, took time.Duration, committed bool)
	onTrace func(store.Batch)
	commitd time.Duration // the last COMMIT's time, kept only with onTrace; owned by the holder of lock
	fault   func(step string) error
	reserve *reserve // nil with Options.Reserve below 0
	tail    int64    // Options.EventTail
	narrow  int      // Options.HeldNarrow
	cached  int      // Options.NameCache
	stmts   [numStmts]*sql.Stmt
	events  [eventChunk]*sql.Stmt // events[n-1] inserts n events

	lock    chan struct{} // the writer lock: held from BEGIN to the end of the commit
	mem     mem           // owned by the holder of lock
	pubMu   sync.Mutex    // taken before lock is let go: batches publish in commit order
	pendMu  sync.Mutex
	pending []*op // operations waiting for the next group commit
	health  writeHealth
	cp      *checkpointer
	parts   *parts.Keeper // the names and holders of the open grants, for Held's filters on a part

	dir       string // the database file's folder, whose file system DiskFree reports on
	stretched int    // leases the start-up held past their expiry (StretchedAtStart)
	// stretchTop is the last token issued before the start when it stretched any lease, else
	// 0: the grants it stretched are the open ones up to it (see Triage).
	stretchTop int64
}

// Open opens (creating if needed) the database at path, applies the migrations, anchors the
// clock and makes restart conservative (invariant 5): every lease that was open when the
// process stopped is recorded as expired if it had expired before the newest persisted time,
// and otherwise held until at least now + its ttl.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" || path == ":memory:" {
		return nil, errors.New("open sqlite: a file path is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	created, err := createPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if !created {
		tighten(path, log)
	}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "on")
	q.Set("_txlock", "immediate")
	drv := &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		// The writer never checkpoints: the checkpointer does, on a connection of its own, so
		// that no commit waits for the WAL to be copied into the database and synced.
		if _, err := c.Exec("PRAGMA wal_autocheckpoint = 0", nil); err != nil {
			return err
		}
		if n := opts.MaxPageCount; n > 0 {
			if _, err := c.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", n), nil); err != nil {
				return err
			}
		}
		return nil
	}}
	w := sql.OpenDB(connector{drv: drv, dsn: fileURI(path, q)})
	w.SetMaxOpenConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	q.Set("_txlock", "deferred")
	q.Set("_query_only", "true")
	r, err := sql.Open("sqlite3", fileURI(path, q))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	q.Del("_query_only")
	cp, err := sql.Open("sqlite3", fileURI(path, q))
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	cp.SetMaxOpenConns(1)
	s := &Store{w: w, r: r, onCommit: opts.OnCommit, onBatch: opts.OnBatch, onTrace: opts.OnBatchTrace, fault: opts.Fault, log: log, lock: make(chan struct{}, 1),
		tail: int64(opts.EventTail), narrow: opts.HeldNarrow, dir: filepath.Dir(path), parts: parts.New(opts.HeldParts, r, partsSQL(), log)}
	if s.tail <= 0 {
		s.tail = 2048
	}
	if s.cached = opts.NameCache; s.cached <= 0 {
		s.cached = DefaultNameCache
	}
	if err := s.start(ctx, path, opts.Clock); err != nil {
		w.Close()
		r.Close()
		cp.Close()
		return nil, err
	}
	if size := opts.Reserve; size >= 0 {
		if size == 0 {
			size = DefaultReserve
		}
		if s.reserve, err = openReserve(path+"-reserve", size); err != nil {
			w.Close()
			r.Close()
			cp.Close()
			return nil, err
		}
	}
	every := opts.CheckpointEvery
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	s.cp = startCheckpointer(cp, every, log)
	// The start-up write is copied too, without waiting for a write to follow it: a restart's
	// stretch rewrites every open grant, and until that WAL is copied every read goes through
	// it (seconds per dashboard page at a million: BENCHMARKS.md).
	s.cp.wrote()
	// The index of parts is built now, paced, in the background, so that the first filter on a
	// part does not wait for it (docs/DESIGN.md).
	if opts.tuneParts != nil {
		opts.tuneParts(s.parts)
	}
	s.parts.Start()
	return s, nil
}

// rebuildAbove is how many open grants make the restart build grants_open again rather than
// move each entry (see start).
const rebuildAbove = 50_000

// dropIfMany drops the index when more than above grants are open (by meta.open_grants, which
// the start-up write has not yet mended: a guide here) and returns the SQL that creates it
// again, as the schema holds it; otherwise it returns "".
func dropIfMany(ctx context.Context, t *txn, index string, above int64) (string, error) {
	var open int64
	if err := t.tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'open_grants'`).Scan(&open); err != nil {
		return "", fmt.Errorf("count open grants: %w", err)
	}
	if open <= above {
		return "", nil
	}
	var create string
	if err := t.tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = ?`, index).Scan(&create); err != nil {
		return "", fmt.Errorf("read index %s: %w", index, err)
	}
	if _, err := t.tx.ExecContext(ctx, `DROP INDEX `+index); err != nil {
		return "", fmt.Errorf("drop index %s: %w", index, err)
	}
	return create, nil
}

func (s *Store) start(ctx context.Context, path string, clock lease.Clock) error {
	if err := w(s.w.PingContext(ctx)); err != nil {
		return fmt.Errorf("open sqlite %s: %w", path, err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.w, migrations.SQLite())
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations to %s: %w", path, err)
	}
	var hwm int64
	if err := s.w.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'clock_hwm'`).Scan(&hwm); err != nil {
		return fmt.Errorf("read clock high-water mark: %w", err)
	}
	if clock == nil {
		clock = lease.NewAnchoredClock(time.Now(), time.UnixMilli(hwm), lease.SinceStart())
	}
	s.clock = clock
	if err := s.prepare(ctx); err != nil {
		return err
	}
	// The start-up write records events: it needs the counters, not yet the leases.
	if err := s.loadCounters(ctx); err != nil {
		return err
	}
	err = s.write(ctx, func(ctx context.Context, t *txn) error {
		// The leases open at the crash: those already past expiry by the newest persisted
		// time had ended before the crash; the others may still be believed held.
		// All of them (LIMIT -1): the stretch below would extend any left open.
		if err := expireBefore(ctx, t, hwm, -1); err != nil {
			return err
		}
		// Counted before the stretch below, which keeps its statement for all open grants.
		if err := t.tx.QueryRowContext(ctx, `SELECT count(*) FROM grants WHERE ended_at IS NULL AND ? + ttl_ms > expires_at`,
			t.now).Scan(&s.stretched); err != nil {
			return fmt.Errorf("count the leases a restart stretches: %w", err)
		}
		// With many open grants, moving each one's entry in the index on expiry costs more
		// than building the index again from the rewritten rows (restarts at a million open
		// grants: BENCHMARKS.md).
		rebuild, err := dropIfMany(ctx, t, "grants_open", rebuildAbove)
		if err != nil {
			return err
		}
		// What the stretch adds is kept with the grant, so its holder's next renewal can be
		// told (extended_by_restart_ms).
		_, err = t.tx.ExecContext(ctx, `UPDATE grants SET restart_ext_ms = restart_ext_ms + max(0, ? + ttl_ms - expires_at),
			expires_at = max(expires_at, ? + ttl_ms) WHERE ended_at IS NULL`, t.now, t.now)
		if err != nil {
			return err
		}
		if rebuild != "" {
			if _, err := t.tx.ExecContext(ctx, rebuild); err != nil {
				return fmt.Errorf("build grants_open again: %w", err)
			}
		}
		// Sessions open at the crash are stretched alike, so that they keep expiring with
		// their leases (invariant S2).
		_, err = t.tx.ExecContext(ctx, `UPDATE lease_sessions SET expires_at = max(expires_at, ? + ttl_ms)
			WHERE closed_at IS NULL AND expires_at > ?`, t.now, hwm)
		t.dirty = true
		return err
	})
	if err != nil {
		return err
	}
	if s.stretched > 0 {
		s.stretchTop = s.mem.token
	}
	return s.load(ctx)
}

// fileURI is the SQLite URI of the file at path with the query q. The path is escaped: SQLite
// reads '?' as the start of the query and '#' as a fragment, so "a#b.db" would open "a".
func fileURI(path string, q url.Values) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path) + "?" + q.Encode()
}

// connector opens the writer's connections with its own driver value, so that a connection
// hook needs no driver registered under a global name.
type connector struct {
	drv *sqlite3.SQLiteDriver
	dsn string
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.drv }

// Clock returns the server clock the store decides with.
func (s *Store) Clock() lease.Clock { return s.clock }

// Ping checks that the database answers, and that the last write did not fail for the
// database's own reasons (see writeFailure): then it answers unavailable until one succeeds.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.health.err(); err != nil {
		return err
	}
	if s.reserve != nil && !s.reserve.take() {
		return lease.Errorf(lease.CodeUnavailable, "the disk is full: its reserve of %d bytes, for deletes and releases, is given back", s.reserve.size)
	}
	var one int
	if err := s.r.QueryRowContext(ctx, `SELECT 1 FROM meta LIMIT 1`).Scan(&one); err != nil {
		return fmt.Errorf("ping sqlite: %w", err)
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.lock <- struct{}{}
	defer func() { <-s.lock }()
	s.parts.Close()
	var errs []error
	if s.cp != nil {
		errs = append(errs, s.cp.close())
	}
	for _, st := range append(s.stmts[:], s.events[:]...) {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(append(errs, s.r.Close(), s.w.Close())...)
}

// txn is one operation inside a batch's transaction: the time it decides with, read once, what
// it recorded, and how to undo what it changed in the writer's memory.
type txn struct {
	s      *Store
	b      *batchTx
	tx     *sql.Tx
	now    int64 // server time, ms
	events []lease.Event
	dirty  bool
	undo   []func()
}

// batchTx is a batch's transaction with the prepared statements it has bound so far, and the
// operations whose events are still to be written (see writeEvents).
type batchTx struct {
	tx      *sql.Tx
	bound   [numStmts]*sql.Stmt
	events  [eventChunk]*sql.Stmt
	pending []*txn
	args    []any
}

// exec runs a prepared statement inside the batch's transaction; binding a statement prepared
// on the writer's pool to the transaction reuses its preparation (the pool has one connection).
func (t *txn) exec(ctx context.Context, id stmtID, args ...any) (sql.Result, error) {
	if err := t.s.inject("exec"); err != nil {
		return nil, err
	}
	return t.stmt(ctx, id).ExecContext(ctx, args...)
}

// inject returns the fault Options.Fault injects at step, if any.
func (s *Store) inject(step string) error {
	if s.fault == nil {
		return nil
	}
	return s.fault(step)
}

func (t *txn) queryRow(ctx context.Context, id stmtID, args ...any) *sql.Row {
	return t.stmt(ctx, id).QueryRowContext(ctx, args...)
}

func (t *txn) stmt(ctx context.Context, id stmtID) *sql.Stmt {
	b := t.b
	if b.bound[id] == nil {
		b.bound[id] = b.tx.StmtContext(ctx, t.s.stmts[id])
	}
	return b.bound[id]
}

// op is one write operation waiting for a group commit.
type op struct {
	ctx    context.Context
	fn     func(context.Context, *txn) error
	frees  bool // it frees space: it runs again with the disk reserve given back
	err    error
	events []lease.Event
	done   chan struct{}
}

// write runs fn as one operation and answers after it is committed. Operations that arrive
// while a commit is under way are committed together in the next transaction (group commit),
// so throughput is not one fsync per operation while every operation still sees and keeps the
// invariants alone. A domain error from fn still commits what fn wrote (an expiry it recorded,
// a rejection) and is then returned; any other error rolls back that operation only (see
// commit).
//
// The leader of a batch holds the writer lock from BEGIN to the end of the commit, then takes
// the publishing lock before it lets the writer lock go: the next batch is decided and synced
// while this one's events fan out, and events still reach OnCommit in commit order.
func (s *Store) write(ctx context.Context, fn func(context.Context, *txn) error) error {
	return s.run(&op{ctx: ctx, fn: fn, done: make(chan struct{})})
}

// free is write for an operation that frees space (a delete, a release): on a full disk it
// runs again with the disk reserve given back (see reserve).
func (s *Store) free(ctx context.Context, fn func(context.Context, *txn) error) error {
	return s.run(&op{ctx: ctx, fn: fn, frees: true, done: make(chan struct{})})
}

func (s *Store) run(o *op) error {
	s.pendMu.Lock()
	s.pending = append(s.pending, o)
	s.pendMu.Unlock()
	select {
	case <-o.done: // a leader committed it
		return o.err
	case s.lock <- struct{}{}: // lead the next batch
	}
	select {
	case <-o.done:
		<-s.lock
		return o.err
	default:
	}
	s.pendMu.Lock()
	batch := s.pending
	s.pending = nil
	s.pendMu.Unlock()
	if len(batch) == 0 {
		// o was taken by the previous batch, which is publishing now.
		<-s.lock
		<-o.done
		return o.err
	}
	began := time.Now()
	committed, failure := s.commitWithin(batch)
	took, commitd := time.Since(began), s.commitd // under the writer lock, which the next batch takes
	switch {
	case failure != nil:
		if s.health.fail(s.clock.Now(), failure, s.log) {
			s.checkpoint()
		}
	case committed:
		s.health.ok(s.clock.Now(), s.log)
		if s.cp != nil {
			s.cp.wrote()
			s.cp.finish(s.w)
		}
	}
	s.pubMu.Lock()
	<-s.lock
	defer s.pubMu.Unlock()
	if committed && s.onCommit != nil {
		var evs []lease.Event
		for _, o := range batch {
			evs = append(evs, o.events...)
		}
		if len(evs) > 0 {
			s.onCommit(evs)
		}
	}
	for _, o := range batch {
		close(o.done)
	}
	if s.onBatch != nil {
		s.onBatch(len(batch), took, committed)
	}
	if s.onTrace != nil {
		ops := make([]context.Context, len(batch))
		for i, o := range batch {
			ops[i] = o.ctx
		}
		s.onTrace(store.Batch{Ops: ops, Began: began, Took: took, Commit: commitd, Committed: committed})
	}
	// o may have been in the previous batch, whose leader let the writer lock go before it
	// answered: wait for that answer.
	<-o.done
	return o.err
}

// DiskFree returns how many bytes an unprivileged writer may still write on the file system
// that holds the database file.
func (s *Store) DiskFree() (uint64, error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &fs); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", s.dir, err)
	}
	return fs.Bavail * uint64(fs.Bsize), nil
}

// StretchedAtStart returns how many open leases Open held until at least its start + their ttl
// because they would otherwise have ended earlier (invariant 5): leases whose holders may have
// paused, or died, across the restart.
func (s *Store) StretchedAtStart() int { return s.stretched }

// QueueDepth returns how many operations wait for the next group commit.
func (s *Store) QueueDepth() int {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	return len(s.pending)
}

// commitWithin commits a batch within the disk's room (see reserve): the reserve given back
// is taken again first when there is room for it, and when the batch fails for want of space,
// the reserve is given back and the operations that free space and failed run again, in a
// batch of their own. (The log tells of the failures once per episode: see writeHealth.)
func (s *Store) commitWithin(batch []*op) (committed bool, failure error) {
	if s.reserve != nil {
		s.reserve.take()
	}
	committed, failure = s.commit(batch)
	if !isFull(failure) || s.reserve == nil || !s.reserve.give() {
		return committed, failure
	}
	s.log.Debug("the disk is full: gave back the disk reserve, for deletes and releases", "bytes", s.reserve.size)
	var again []*op
	for _, o := range batch {
		if o.frees && isFull(o.err) {
			again = append(again, o)
		}
	}
	if len(again) == 0 {
		return committed, failure
	}
	s.checkpoint() // the WAL's frames go to the database file, and the WAL gives its room back
	ok, err := s.commit(again)
	if err == nil {
		failure = nil
		for _, o := range batch {
			if failure == nil {
				failure = writeFailure(o.err)
			}
		}
	}
	return committed || ok, failure
}

func isFull(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrFull
}

// checkpoint copies the WAL into the database and truncates it, after a write failed: when the
// disk is full, what the WAL held is freed on disk, and pages freed by deletions are reused.
// Called by the holder of s.lock, outside any transaction.
func (s *Store) checkpoint() {
	if s.cp != nil {
		s.cp.mu.Lock()
		defer s.cp.mu.Unlock()
	}
	var busy, frames, done int
	err := s.w.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done)
	if err != nil || busy != 0 {
		s.log.Warn("checkpoint after a failed write", "err", err, "busy", busy != 0)
		return
	}
	s.log.Debug("checkpointed the WAL after a failed write", "frames", frames)
}

// commit runs a batch of operations in one transaction. It reports whether it committed, and
// the first failure of the database (see writeFailure). It is called only by the holder of
// s.lock.
//
// Operations run first without savepoints: the writer decides from memory, so an operation
// fails for SQLite's reasons only rarely (a full disk, a broken constraint). When one does, the
// whole transaction is rolled back, memory with it, and the batch runs again with a savepoint
// around each operation, so that such a failure still rolls back that operation only, as
// before. Every operation decides again on the second run, from the state it finds then.
func (s *Store) commit(batch []*op) (committed bool, failure error) {
	committed, retry := s.runBatch(batch, false)
	if retry {
		committed, _ = s.runBatch(batch, true)
	}
	for _, o := range batch {
		if failure == nil {
			failure = writeFailure(o.err)
		}
	}
	return committed, failure
}

// failed reports whether err makes an operation roll back: any error but a domain decision,
// and a domain error the driver's code made (busy, full).
func failed(err error) bool {
	if err == nil {
		return false // before the targets of errors.As, which escape: a call per operation
	}
	var domain *lease.Error
	var driver sqlite3.Error
	return !errors.As(err, &domain) || errors.As(err, &driver)
}

// runBatch runs the batch in one transaction, each operation in a savepoint when savepoints is
// true. Without savepoints, it stops at the first operation that failed, rolls everything back
// and asks for a retry.
func (s *Store) runBatch(batch []*op, savepoints bool) (committed, retry bool) {
	err := s.inject("begin")
	var tx *sql.Tx
	if err == nil {
		tx, err = s.w.BeginTx(context.Background(), nil)
	}
	if err != nil {
		for _, o := range batch {
			o.err = fmt.Errorf("begin: %w", w(err))
		}
		return false, false
	}
	defer tx.Rollback()
	b := &batchTx{tx: tx}
	var done []*txn // what to undo in memory if the transaction does not commit
	undoAll := func() {
		for i := len(done) - 1; i >= 0; i-- {
			done[i].rollback()
		}
	}
	fail := func(err error) {
		undoAll()
		for _, o := range batch {
			var domain *lease.Error
			o.events = nil
			if o.err == nil || errors.As(o.err, &domain) {
				o.err = err
			}
		}
	}
	var last int64
	dirty := false
	token := s.mem.token
	for _, o := range batch {
		o.err, o.events = nil, nil
		if err := o.ctx.Err(); err != nil {
			o.err = err
			continue
		}
		// An operation must not be interrupted mid-statement: SQLite would roll back the
		// whole transaction, taking the batch's other operations with it.
		ctx := context.WithoutCancel(o.ctx)
		t := &txn{s: s, b: b, tx: tx, now: s.clock.Now().UnixMilli()}
		if savepoints {
			if _, err := t.exec(ctx, stSavepoint); err != nil {
				o.err = fmt.Errorf("savepoint: %w", w(err))
				continue
			}
		}
		o.err = o.fn(ctx, t)
		if len(t.events) > 0 && !failed(o.err) {
			b.pending = append(b.pending, t)
			if savepoints {
				// Inside the operation's savepoint: a failure takes the operation with it.
				if err := b.writeEvents(ctx, s); err != nil {
					o.err = err
				}
			}
		}
		if failed(o.err) {
			if !savepoints {
				t.rollback()
				undoAll()
				return false, true
			}
			t.rollback()
			if _, err := t.exec(ctx, stRollbackTo); err != nil {
				// SQLite may end the whole transaction on an error such as SQLITE_FULL: then
				// nothing of the batch is written, whatever its operations were told.
				fail(fmt.Errorf("%w (and the transaction with it: roll back operation: %v)", o.err, err))
				return false, false
			}
			t.events = nil
		} else {
			done = append(done, t)
			if t.dirty {
				dirty, last = true, max(last, t.now)
			}
		}
		if savepoints {
			if _, err := t.exec(ctx, stRelease); err != nil {
				o.err = errors.Join(o.err, fmt.Errorf("release savepoint: %w", w(err)))
			}
		}
		o.events = t.events
	}
	if !dirty {
		return false, false
	}
	if err := b.writeEvents(context.Background(), s); err != nil {
		if savepoints {
			fail(err) // cannot happen: each operation wrote its own
			return false, false
		}
		undoAll()
		return false, true
	}
	indexed, err := b.indexEvents(context.Background(), s, savepoints)
	if err != nil {
		if savepoints {
			fail(err) // the transaction itself failed: its savepoint could not be taken or let go
			return false, false
		}
		undoAll()
		return false, true
	}
	// The clock's high-water mark and the last token, once for the whole batch, in the same
	// transaction as the grants (invariants 2 and 4).
	if _, err := b.tx.Stmt(s.stmts[stHWM]).Exec(last); err != nil {
		fail(fmt.Errorf("persist clock: %w", w(err)))
		return false, false
	}
	if s.mem.token != token {
		if _, err := b.tx.Stmt(s.stmts[stLastToken]).Exec(s.mem.token); err != nil {
			fail(fmt.Errorf("persist last token: %w", w(err)))
			return false, false
		}
	}
	if s.mem.open != s.mem.saved {
		if _, err := b.tx.Stmt(s.stmts[stOpenGrants]).Exec(s.mem.open); err != nil {
			fail(fmt.Errorf("persist the count of open grants: %w", w(err)))
			return false, false
		}
	}
	err = s.inject("commit")
	if err == nil {
		var at time.Time
		if s.onTrace != nil {
			at = time.Now()
		}
		err = tx.Commit()
		if s.onTrace != nil {
			s.commitd = time.Since(at)
		}
	}
	if err != nil {
		fail(fmt.Errorf("commit: %w", w(err)))
		return false, false
	}
	s.mem.indexed, s.mem.saved = indexed, s.mem.open
	s.mem.trim(s.cached)
	return true, false
}

// indexEvents adds to events_by_name, when more than s.tail events are not in it, the older
// half of those, in one INSERT sorted by name: each page of the table it rewrites takes many
// entries of a name at once, where an index on events rewrote a page per name in every batch.
// It returns the last seq indexed, which the memory takes once the batch committed. On the
// batch's second run (savepoints), a failure here leaves the events to a later batch instead of
// failing the batch's operations.
func (b *batchTx) indexEvents(ctx context.Context, s *Store, savepoints bool) (int64, error) {
	from := s.mem.indexed
	if s.mem.seq-from <= s.tail {
		return from, nil
	}
	to := s.mem.seq - s.tail/2
	exec := func(id stmtID, args ...any) error {
		_, err := b.tx.Stmt(s.stmts[id]).ExecContext(ctx, args...)
		return err
	}
	if savepoints {
		if err := exec(stSavepoint); err != nil {
			return from, fmt.Errorf("index events by name: savepoint: %w", w(err))
		}
	}
	err := s.inject("index")
	if err == nil {
		err = exec(stIndexEvents, from, to)
	}
	if err == nil {
		err = exec(stIndexed, to)
	}
	switch {
	case err != nil && !savepoints:
		return from, fmt.Errorf("index events by name: %w", w(err))
	case err != nil:
		s.log.Warn("events left for a later batch to index by name", "err", err)
		if err := exec(stRollbackTo); err != nil {
			return from, fmt.Errorf("index events by name: roll back: %w", w(err))
		}
		to = from
	}
	if savepoints {
		if err := exec(stRelease); err != nil {
			return from, fmt.Errorf("index events by name: release savepoint: %w", w(err))
		}
	}
	return to, nil
}

// record gives an event its seq and keeps it for OnCommit; the batch inserts it into the events
// table with the events of the batch's other operations (see writeEvents), in the operation's
// savepoint when there are savepoints.
func (t *txn) record(_ context.Context, e lease.Event) error {
	e.Seq = t.nextSeq()
	t.events = append(t.events, e)
	t.dirty = true
	return nil
}

// eventChunk is the most events one INSERT writes. A batch's events go in as few statements
// as it allows, each prepared once for its number of rows: a multi-row INSERT pays the
// statement's overhead (database/sql, cgo, the VM's start) once for all its rows. Not more
// rows: a statement that writes several rows keeps a statement journal of the pages it
// changes, in memory up to 64 KiB and beyond that in a temporary file, and 16 or 32 events,
// each changing its own page of the events' name index, went past it on most batches (an
// open, writes and a close each time cost more system CPU than the statements saved).
const eventChunk = 8

// eventColumns is how many columns an event row binds.
const eventColumns = 13

// eventInsert is the INSERT of n events.
func eventInsert(n int) string {
	row := "(" + strings.Repeat("?, ", eventColumns-1) + "?)"
	return `INSERT INTO events (seq, type, name, token, holder, at, expires_at, metadata, resource, recorded_at, actor, lock_delay_ms, detail)
		VALUES ` + strings.Repeat(row+", ", n-1) + row
}

// writeEvents inserts the events recorded by the operations in b.pending, in seq order, and
// empties b.pending.
func (b *batchTx) writeEvents(ctx context.Context, s *Store) error {
	defer func() { b.pending, b.args = b.pending[:0], b.args[:0] }()
	n := 0
	flush := func() error {
		if err := s.inject("exec"); err != nil {
			return err
		}
		st := b.events[n-1]
		if st == nil {
			st = b.tx.StmtContext(ctx, s.events[n-1])
			b.events[n-1] = st
		}
		_, err := st.ExecContext(ctx, b.args...)
		b.args, n = b.args[:0], 0
		return err
	}
	for _, t := range b.pending {
		for _, e := range t.events {
			b.args = appendEvent(b.args, e, t.now)
			if n++; n == eventChunk {
				if err := flush(); err != nil {
					return fmt.Errorf("record events: %w", w(err))
				}
			}
		}
	}
	if n > 0 {
		if err := flush(); err != nil {
			return fmt.Errorf("record events: %w", w(err))
		}
	}
	return nil
}

// appendEvent appends the columns of e, recorded at now, to args.
func appendEvent(args []any, e lease.Event, now int64) []any {
	var exp sql.NullInt64
	if !e.ExpiresAt.IsZero() {
		exp = sql.NullInt64{Int64: e.ExpiresAt.UnixMilli(), Valid: true}
	}
	var delay sql.NullInt64
	if e.Type == lease.EventAcquired {
		delay = sql.NullInt64{Int64: e.LockDelay.Milliseconds(), Valid: true}
	}
	return append(args, e.Seq, string(e.Type), e.Name, e.Token, e.Holder, e.At.UnixMilli(), exp,
		nullText(e.Metadata), nullString(e.Resource), now, e.Actor, delay, store.EventDetail(e))
}

// stmtID names a statement the writer prepares once, at open.
type stmtID int

const (
	stSavepoint stmtID = iota
	stRollbackTo
	stRelease
	stHWM
	stLastToken
	stInsertGrant
	stPointName
	stRenew
	stRenewMetadata
	stEnd
	stMetadata
	stGrantByID
	stGrantByToken
	stCur
	stCountOwned
	stPutResource
	stDeleteResource
	stRejection
	stIndexEvents
	stIndexed
	stOpenGrants
	numStmts
)

var stmtSQL = [numStmts]string{
	stSavepoint:  `SAVEPOINT op`,
	stRollbackTo: `ROLLBACK TO op`,
	stRelease:    `RELEASE op`,
	stHWM:        `UPDATE meta SET value = max(value, ?) WHERE key = 'clock_hwm'`,
	stLastToken:  `UPDATE meta SET value = ? WHERE key = 'last_token'`,
	stInsertGrant: `INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms,
		acquired_at, renewed_at, expires_at, metadata, owner, session, shared) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	stPointName:     `INSERT INTO names (name, token) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET token = excluded.token`,
	stRenew:         `UPDATE grants SET ttl_ms = ?, renewed_at = ?, expires_at = ? WHERE token = ?`,
	stRenewMetadata: `UPDATE grants SET ttl_ms = ?, renewed_at = ?, expires_at = ?, metadata = ? WHERE token = ?`,
	stEnd:           `UPDATE grants SET ended_at = ?, end_kind = ? WHERE token = ?`,
	stMetadata:      `SELECT metadata FROM grants WHERE token = ?`,
	stGrantByID:     `SELECT ` + grantCols + ` FROM grants g WHERE g.id_hash = ?`,
	stGrantByToken:  `SELECT ` + grantCols + ` FROM grants g WHERE g.token = ?`,
	stCur: `SELECT g.token, g.name, g.holder, g.id_hash, g.ttl_ms, g.lock_delay_ms, g.acquired_at, g.renewed_at,
		g.expires_at, g.ended_at, g.end_kind, g.metadata IS NOT NULL, g.owner, g.restart_ext_ms, g.shared
		FROM names n JOIN grants g ON g.token = n.token WHERE n.name = ?`,
	// The key's open grants less those already past expiry: grants_open_owner leaves out
	// expires_at, which every renewal changes (see HeldCount).
	stCountOwned: `SELECT (SELECT count(*) FROM grants INDEXED BY grants_open_owner WHERE owner = ?1 AND ended_at IS NULL)
		- (SELECT count(*) FROM grants INDEXED BY grants_open WHERE ended_at IS NULL AND expires_at <= ?2 AND owner = ?1)`,
	// The write's entry is built once, as the new row's one-entry history; an update appends
	// it to the row's history, first dropping the entry store.WritersKept from the end ($[#-N]
	// names none while the history is shorter). The history is SQLite's binary JSON (JSONB),
	// edited without being parsed: as text, parsed and printed again on every write, it cost
	// twice the CPU (BenchmarkPutResourceParallel).
	stPutResource: `INSERT INTO resources (name, fence, version, value, content_type, updated_at, lease, holder, owner, grant_name, writers)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, jsonb_array(jsonb_object('v', ?3, 't', ?2, 'l', ?7, 'h', ?8, 'at', ?6,
		'n', length(?4), 'ct', ?5))) ON CONFLICT (name) DO UPDATE SET fence = excluded.fence, version = excluded.version,
		value = excluded.value, content_type = excluded.content_type, updated_at = excluded.updated_at,
		lease = excluded.lease, holder = excluded.holder, owner = excluded.owner, grant_name = excluded.grant_name,
		writers = jsonb_insert(jsonb_remove(resources.writers, '$[#-` + writersKept + `]'), '$[#]', jsonb_extract(excluded.writers, '$[0]'))`,
	stDeleteResource: `DELETE FROM resources WHERE name = ?`,
	stRejection: `INSERT INTO rejections (resource, lease, presented_token, current_fence, holder,
		client_addr, user_agent, reason, source, at, key_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
	stIndexEvents: `INSERT INTO events_by_name (name, seq) SELECT name, seq FROM events WHERE seq > ? AND seq <= ? ORDER BY name, seq`,
	stIndexed:     `UPDATE meta SET value = ? WHERE key = 'events_indexed'`,
	stOpenGrants:  `UPDATE meta SET value = ? WHERE key = 'open_grants'`,
}

// prepare prepares the writer's statements once.
func (s *Store) prepare(ctx context.Context) error {
	for id, q := range stmtSQL {
		st, err := s.w.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		s.stmts[id] = st
	}
	for n := range s.events {
		st, err := s.w.PrepareContext(ctx, eventInsert(n+1))
		if err != nil {
			return fmt.Errorf("prepare the insert of %d events: %w", n+1, err)
		}
		s.events[n] = st
	}
	return nil
}

// w translates driver errors: a busy or locked database, a full disk and an I/O error are
// unavailable (503, try again), not internal. The driver's error stays in the chain.
func w(err error) error {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return err
	}
	var msg string
	switch se.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		msg = "the database is busy"
	case sqlite3.ErrFull:
		msg = "the database cannot grow: the disk is full"
	case sqlite3.ErrIoErr:
		msg = "the database hit an I/O error"
	default:
		return err
	}
	return fmt.Errorf("%w: %w", &lease.Error{Code: lease.CodeUnavailable, Message: msg}, err)
}

// writeFailure returns err if the database itself refused the write (full disk, I/O error,
// still locked by another process after the busy timeout): a failure that makes the store
// unready until a write succeeds.
func writeFailure(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrFull, sqlite3.ErrIoErr, sqlite3.ErrBusy, sqlite3.ErrLocked:
			return err
		}
	}
	return nil
}

func ms(t int64) time.Time { return time.UnixMilli(t).UTC() }

func nullText(b []byte) sql.NullString {
	return sql.NullString{String: string(b), Valid: len(b) > 0}
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
