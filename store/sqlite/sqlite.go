// Package sqlite is the embedded SQLite backend of store.Store: WAL mode, synchronous=FULL, one
// writer. Writes are serialized under the writer lock and committed in groups (each operation in
// its own savepoint), answered only after the commit reached the disk, and their events are
// published in commit order.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
	"github.com/pressly/goose/v3"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/migrations"
	"github.com/leasekeeper/leasekeeper/store"
)

var _ store.Store = (*Store)(nil)

// Options configure a Store. The zero value is usable.
type Options struct {
	// Clock overrides the server clock (tests). By default the store anchors a
	// lease.AnchoredClock to the wall clock, never earlier than the newest persisted time.
	Clock lease.Clock
	// OnCommit is called after every committed write with the events it recorded, in commit
	// order, under the writer lock: it must not block.
	OnCommit func([]lease.Event)
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// MaxPageCount caps the database file at this many pages (SQLite's max_page_count) on
	// the writer connection; writes beyond it fail as on a full disk. 0 leaves SQLite's cap.
	MaxPageCount int
}

// Store is the SQLite store.
type Store struct {
	w        *sql.DB // the single writer connection
	r        *sql.DB // readers
	clock    lease.Clock
	onCommit func([]lease.Event)
	log      *slog.Logger

	lock    chan struct{} // the writer lock: held from BEGIN to the end of OnCommit
	pendMu  sync.Mutex
	pending []*op // operations waiting for the next group commit
	health  writeHealth
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
	drv := &sqlite3.SQLiteDriver{}
	if n := opts.MaxPageCount; n > 0 {
		drv.ConnectHook = func(c *sqlite3.SQLiteConn) error {
			_, err := c.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", n), nil)
			return err
		}
	}
	w := sql.OpenDB(connector{drv: drv, dsn: "file:" + path + "?" + q.Encode()})
	w.SetMaxOpenConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	q.Set("_txlock", "deferred")
	q.Set("_query_only", "true")
	r, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	s := &Store{w: w, r: r, onCommit: opts.OnCommit, log: log, lock: make(chan struct{}, 1)}
	if err := s.start(ctx, path, opts.Clock); err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	return s, nil
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
	return s.write(ctx, func(ctx context.Context, t *txn) error {
		// The leases open at the crash: those already past expiry by the newest persisted
		// time had ended before the crash; the others may still be believed held.
		if err := expireBefore(ctx, t, hwm); err != nil {
			return err
		}
		_, err := t.tx.ExecContext(ctx, `UPDATE grants SET expires_at = max(expires_at, ? + ttl_ms)
			WHERE ended_at IS NULL`, t.now)
		t.dirty = true
		return err
	})
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
	return errors.Join(s.r.Close(), s.w.Close())
}

// txn is one write transaction: the time it decides with, read once, and what it recorded.
type txn struct {
	tx     *sql.Tx
	now    int64 // server time, ms
	events []lease.Event
	dirty  bool
}

// op is one write operation waiting for a group commit.
type op struct {
	ctx    context.Context
	fn     func(context.Context, *txn) error
	err    error
	events []lease.Event
	done   chan struct{}
}

// write runs fn as one operation and answers after it is committed. Operations that arrive
// while a commit is under way are committed together in the next transaction (group commit),
// each inside its own savepoint, so throughput is not one fsync per operation while every
// operation still sees and keeps the invariants alone. A domain error from fn still commits
// what fn wrote (an expiry it recorded, a rejection) and is then returned; any other error
// rolls back that operation only.
func (s *Store) write(ctx context.Context, fn func(context.Context, *txn) error) error {
	o := &op{ctx: ctx, fn: fn, done: make(chan struct{})}
	s.pendMu.Lock()
	s.pending = append(s.pending, o)
	s.pendMu.Unlock()
	select {
	case <-o.done: // a leader committed it
		return o.err
	case s.lock <- struct{}{}: // lead the next batch
	}
	defer func() { <-s.lock }()
	select {
	case <-o.done:
		return o.err
	default:
	}
	s.pendMu.Lock()
	batch := s.pending
	s.pending = nil
	s.pendMu.Unlock()
	committed, failure := s.commit(batch)
	switch {
	case failure != nil:
		if s.health.fail(s.clock.Now(), failure, s.log) {
			s.checkpoint()
		}
	case committed:
		s.health.ok(s.clock.Now(), s.log)
	}
	return o.err
}

// checkpoint copies the WAL into the database and truncates it, after a write failed: when the
// disk is full, what the WAL held is freed on disk, and pages freed by deletions are reused.
// Called by the holder of s.lock, outside any transaction.
func (s *Store) checkpoint() {
	var busy, frames, done int
	err := s.w.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done)
	if err != nil || busy != 0 {
		s.log.Warn("checkpoint after a failed write", "err", err, "busy", busy != 0)
		return
	}
	s.log.Debug("checkpointed the WAL after a failed write", "frames", frames)
}

// commit runs a batch of operations in one transaction and publishes their events in order.
// It reports whether it committed, and the first failure of the database (see writeFailure).
// It is called only by the holder of s.lock.
func (s *Store) commit(batch []*op) (committed bool, failure error) {
	defer func() {
		for _, o := range batch {
			close(o.done)
			if failure == nil {
				failure = writeFailure(o.err)
			}
		}
	}()
	tx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		for _, o := range batch {
			o.err = fmt.Errorf("begin: %w", w(err))
		}
		return false, nil
	}
	defer tx.Rollback()
	var last int64
	dirty := false
	fail := func(err error) {
		for _, o := range batch {
			var domain *lease.Error
			if o.err == nil || errors.As(o.err, &domain) {
				o.err = err
			}
		}
	}
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.err = err
			continue
		}
		// An operation must not be interrupted mid-statement: SQLite would roll back the
		// whole transaction, taking the batch's other operations with it.
		ctx := context.WithoutCancel(o.ctx)
		if _, err := tx.ExecContext(ctx, `SAVEPOINT op`); err != nil {
			o.err = fmt.Errorf("savepoint: %w", w(err))
			continue
		}
		t := &txn{tx: tx, now: s.clock.Now().UnixMilli()}
		o.err = o.fn(ctx, t)
		var domain *lease.Error
		var driver sqlite3.Error
		// A domain decision keeps what fn recorded (an expiry, a rejection); a failure does not,
		// even one the driver's code makes a domain error (busy, full).
		if o.err != nil && (!errors.As(o.err, &domain) || errors.As(o.err, &driver)) {
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO op`); err != nil {
				// SQLite may end the whole transaction on an error such as SQLITE_FULL: then
				// nothing of the batch is written, whatever its operations were told.
				fail(fmt.Errorf("%w (and the transaction with it: roll back operation: %v)", o.err, err))
				return false, nil
			}
			t.events = nil
		} else if t.dirty {
			dirty, last = true, max(last, t.now)
		}
		if _, err := tx.ExecContext(ctx, `RELEASE op`); err != nil {
			o.err = errors.Join(o.err, fmt.Errorf("release savepoint: %w", w(err)))
		}
		o.events = t.events
	}
	if !dirty {
		return false, nil
	}
	if _, err := tx.Exec(`UPDATE meta SET value = max(value, ?) WHERE key = 'clock_hwm'`, last); err != nil {
		fail(fmt.Errorf("persist clock: %w", w(err)))
		return false, nil
	}
	if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("commit: %w", w(err)))
		return false, nil
	}
	if s.onCommit == nil {
		return true, nil
	}
	var evs []lease.Event
	for _, o := range batch {
		evs = append(evs, o.events...)
	}
	if len(evs) > 0 {
		s.onCommit(evs)
	}
	return true, nil
}

// record inserts an event and keeps it for OnCommit.
func (t *txn) record(ctx context.Context, e lease.Event) error {
	var exp sql.NullInt64
	if !e.ExpiresAt.IsZero() {
		exp = sql.NullInt64{Int64: e.ExpiresAt.UnixMilli(), Valid: true}
	}
	err := t.tx.QueryRowContext(ctx, `INSERT INTO events (type, name, token, holder, at, expires_at, metadata, resource, recorded_at, actor)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
		string(e.Type), e.Name, e.Token, e.Holder, e.At.UnixMilli(), exp, nullText(e.Metadata), nullString(e.Resource), t.now, e.Actor).Scan(&e.Seq)
	if err != nil {
		return fmt.Errorf("record %s event for %q: %w", e.Type, e.Name, w(err))
	}
	t.events = append(t.events, e)
	t.dirty = true
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
