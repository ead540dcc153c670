// Package sqlite is the embedded SQLite backend of store.Store: WAL mode, synchronous=FULL, one
// writer. Every write is one IMMEDIATE transaction under the writer lock, so operations are
// serialized, committed to disk before they are answered, and their events are published in
// commit order.
package sqlite

import (
	"context"
	"database/sql"
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
}

// Store is the SQLite store.
type Store struct {
	w        *sql.DB // the single writer connection
	r        *sql.DB // readers
	clock    lease.Clock
	onCommit func([]lease.Event)
	log      *slog.Logger

	mu sync.Mutex // the writer lock: held from BEGIN to the end of OnCommit
}

// Open opens (creating if needed) the database at path, applies the migrations, anchors the
// clock and makes restart conservative (invariant 5): every lease that was open when the
// process stopped is recorded as expired if it had expired before the newest persisted time,
// and otherwise held until at least now + its ttl.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" || path == ":memory:" {
		return nil, errors.New("open sqlite: a file path is required")
	}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "on")
	q.Set("_txlock", "immediate")
	w, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
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
	s := &Store{w: w, r: r, onCommit: opts.OnCommit, log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
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
	return s.write(ctx, func(t *txn) error {
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

// Clock returns the server clock the store decides with.
func (s *Store) Clock() lease.Clock { return s.clock }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, `SELECT 1 FROM meta LIMIT 1`).Scan(&one); err != nil {
		return fmt.Errorf("ping sqlite: %w", err)
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.r.Close(), s.w.Close())
}

// txn is one write transaction: the time it decides with, read once, and what it recorded.
type txn struct {
	tx     *sql.Tx
	now    int64 // server time, ms
	events []lease.Event
	dirty  bool
}

// write runs fn in one IMMEDIATE transaction under the writer lock. A domain error from fn
// still commits what fn wrote (an expiry it recorded, a rejection) and is then returned; any
// other error rolls back.
func (s *Store) write(ctx context.Context, fn func(*txn) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", w(err))
	}
	defer tx.Rollback()
	t := &txn{tx: tx, now: s.clock.Now().UnixMilli()}
	ferr := fn(t)
	var domain *lease.Error
	if ferr != nil && !errors.As(ferr, &domain) {
		return ferr
	}
	if !t.dirty {
		return ferr
	}
	if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = max(value, ?) WHERE key = 'clock_hwm'`, t.now); err != nil {
		return fmt.Errorf("persist clock: %w", w(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", w(err))
	}
	if s.onCommit != nil && len(t.events) > 0 {
		s.onCommit(t.events)
	}
	return ferr
}

// record inserts an event and keeps it for OnCommit.
func (t *txn) record(ctx context.Context, e lease.Event) error {
	var exp sql.NullInt64
	if !e.ExpiresAt.IsZero() {
		exp = sql.NullInt64{Int64: e.ExpiresAt.UnixMilli(), Valid: true}
	}
	err := t.tx.QueryRowContext(ctx, `INSERT INTO events (type, name, token, holder, at, expires_at, metadata, resource, recorded_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
		string(e.Type), e.Name, e.Token, e.Holder, e.At.UnixMilli(), exp, nullText(e.Metadata), nullString(e.Resource), t.now).Scan(&e.Seq)
	if err != nil {
		return fmt.Errorf("record %s event for %q: %w", e.Type, e.Name, w(err))
	}
	t.events = append(t.events, e)
	t.dirty = true
	return nil
}

// w translates driver errors: a busy or locked database is unavailable, not internal.
func w(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked) {
		return &lease.Error{Code: lease.CodeUnavailable, Message: "the database is busy: " + se.Error()}
	}
	return err
}

func ms(t int64) time.Time { return time.UnixMilli(t).UTC() }

func nullText(b []byte) sql.NullString {
	return sql.NullString{String: string(b), Valid: len(b) > 0}
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
