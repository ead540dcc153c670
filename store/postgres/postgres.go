// Package postgres is the PostgreSQL backend of store.Store, for many stateless leasekeeper
// replicas on one database. The database decides: every write is one transaction that locks the
// rows it decides on (a name's row, a grant, a resource), then reads the database's clock
// (clock_timestamp(), after the locks) and calls the lease rules of package lease. Nothing is
// decided from a replica's memory or its wall clock.
//
// Two one-row tables order what must be ordered: tokens (the last token issued, locked by every
// grant, so tokens grow in commit order) and event_seq (taken by every transaction that records
// events just before it commits and held to the end, so event seqs become visible in order).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/migrations"
	"github.com/leasekeeper/leasekeeper/store"
)

var _ store.Store = (*Store)(nil)

// Channel is the LISTEN/NOTIFY channel a commit that recorded events notifies, with its last
// seq as the payload.
const Channel = "leasekeeper_events"

// Options configure a Store. The zero value is usable.
type Options struct {
	// TestClock is for tests only: when set, decisions read it instead of the database's
	// clock_timestamp(), so the conformance suite can move time. Production leaves it nil.
	TestClock lease.Clock
	// OnCommit is called after every committed write of this store with the events it
	// recorded, in seq order, before the write is answered. It must not block.
	OnCommit func([]lease.Event)
	// OnBatch, when set, is told of every write transaction: one operation, how long it took
	// from BEGIN to the end of COMMIT (retries included), and whether it committed (metrics).
	OnBatch func(ops int, took time.Duration, committed bool)
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// Store is the PostgreSQL store.
type Store struct {
	pool     *pgxpool.Pool
	test     lease.Clock
	clock    lease.Clock
	onCommit func([]lease.Event)
	onBatch  func(ops int, took time.Duration, committed bool)
	log      *slog.Logger
	// pubMu is held from taking the event seq to the end of OnCommit (the database's seq lock
	// serializes those steps anyway), and while the listener publishes other replicas' events:
	// OnCommit sees every event once, in seq order, without gaps.
	pubMu     sync.Mutex
	published int64 // the last seq handed to OnCommit

	stopListen context.CancelFunc
	listening  chan struct{} // closed when the listener has stopped
}

// Open connects to the database at url (postgres:// or postgresql://), applies the migrations
// under an advisory lock (replicas starting together take turns), and records the expiries that
// passed while no replica ran.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	s := &Store{pool: pool, test: opts.TestClock, onCommit: opts.OnCommit, onBatch: opts.OnBatch, log: log}
	if err := s.start(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) start(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("open postgres: %w", translate(err))
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres(), goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	if s.test != nil {
		s.clock = s.test
	} else {
		// The clock handed to the service (the line's deadlines, the sweeper's timer, the key
		// cache) follows the database's clock: anchored to it once, then monotonic. Decisions
		// never read it; they read clock_timestamp() inside their transaction.
		var ms int64
		if err := s.pool.QueryRow(ctx, nowSQL).Scan(&ms); err != nil {
			return fmt.Errorf("read the database's clock: %w", translate(err))
		}
		s.clock = lease.NewAnchoredClock(time.UnixMilli(ms), time.Time{}, lease.SinceStart())
	}
	if _, _, err := s.ExpireDue(ctx); err != nil {
		return err
	}
	if s.onCommit != nil {
		if s.published, err = s.LatestSeq(ctx); err != nil {
			return err
		}
		lctx, stop := context.WithCancel(context.Background())
		s.stopListen, s.listening = stop, make(chan struct{})
		go s.listen(lctx)
	}
	return nil
}

// Clock returns the clock the service schedules by: the test clock, or one that follows the
// database's clock. Decisions are made by the database's clock itself.
func (s *Store) Clock() lease.Clock { return s.clock }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", translate(err))
	}
	return nil
}

// Close stops the listener and closes the connection pool.
func (s *Store) Close() error {
	if s.stopListen != nil {
		s.stopListen()
		<-s.listening
	}
	s.pool.Close()
	return nil
}

// nowSQL reads the database's clock in milliseconds. clock_timestamp() is the time of the
// statement, not of the transaction's start (now()), so a decision read after a row lock is not
// older than the commit it waited for.
const nowSQL = `SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// queryer is a pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// now reads the time a decision is made at, in milliseconds: the database's clock, or the test
// clock. Call it after taking the row locks the decision depends on.
func (s *Store) now(ctx context.Context, q queryer) (int64, error) {
	if s.test != nil {
		return s.test.Now().UnixMilli(), nil
	}
	var ms int64
	if err := q.QueryRow(ctx, nowSQL).Scan(&ms); err != nil {
		return 0, fmt.Errorf("read the database's clock: %w", translate(err))
	}
	return ms, nil
}

// txn is one write operation's transaction and the events it recorded, which get their seqs
// at commit.
type txn struct {
	s      *Store
	tx     pgx.Tx
	events []lease.Event
}

// now reads the decision time inside the transaction (see Store.now).
func (t *txn) now(ctx context.Context) (int64, error) { return t.s.now(ctx, t.tx) }

// record keeps an event to insert at commit, when it gets its seq.
func (t *txn) record(e lease.Event) { t.events = append(t.events, e) }

// maxAttempts bounds the runs of a transaction the database aborted to break a deadlock or a
// serialization conflict.
const maxAttempts = 4

// write runs fn in one transaction and commits it, then hands its events to OnCommit. A domain
// error from fn still commits what fn wrote (an expiry it recorded, a rejection) and is then
// returned; any other error rolls back. A deadlock or serialization failure runs fn again; when
// they persist, or the database cannot be reached, the error is unavailable.
func (s *Store) write(ctx context.Context, fn func(context.Context, *txn) error) (err error) {
	if s.onBatch != nil {
		began := time.Now()
		defer func() {
			var domain *lease.Error
			s.onBatch(1, time.Since(began), err == nil || errors.As(err, &domain) && lease.ErrorCode(err) != lease.CodeUnavailable)
		}()
	}
	for attempt := range maxAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
			}
		}
		err = s.try(ctx, fn)
		if !retryable(err) {
			break
		}
	}
	return translate(err)
}

func (s *Store) try(ctx context.Context, fn func(context.Context, *txn) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	t := &txn{s: s, tx: tx}
	result := fn(ctx, t)
	var domain *lease.Error
	if result != nil && !errors.As(result, &domain) {
		return result
	}
	if len(t.events) == 0 {
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return result
	}
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	if err := t.insertEvents(ctx); err != nil {
		return err
	}
	// Other replicas' events before this transaction's are read on its own connection: a
	// holder of pubMu must never wait for the pool, whose connections may all be held by
	// transactions waiting for pubMu.
	var before []lease.Event
	if s.onCommit != nil {
		var err error
		if before, err = s.unpublished(ctx, tx, t.events[0].Seq); err != nil {
			s.log.Warn("read other replicas' events", "err", err)
		}
	}
	err = tx.Commit(ctx)
	if s.onCommit != nil {
		s.publish(before)
		if err == nil {
			s.publish(t.events)
		}
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return result
}

// insertEvents gives the events their seqs and inserts them. The event_seq row stays locked
// until COMMIT: a transaction that takes seq 42 cannot commit before the one that took 41 has,
// so a reader of seq > n never misses an event that commits later. It also notifies the other
// replicas (NOTIFY is delivered at commit).
func (t *txn) insertEvents(ctx context.Context) error {
	var last int64
	if err := t.tx.QueryRow(ctx, `UPDATE event_seq SET last = last + $1 RETURNING last`, len(t.events)).Scan(&last); err != nil {
		return fmt.Errorf("take event seq: %w", err)
	}
	now, err := t.now(ctx)
	if err != nil {
		return err
	}
	rows := make([][]any, len(t.events))
	for i := range t.events {
		e := &t.events[i]
		e.Seq = last - int64(len(t.events)) + 1 + int64(i)
		var exp *int64
		if !e.ExpiresAt.IsZero() {
			v := e.ExpiresAt.UnixMilli()
			exp = &v
		}
		rows[i] = []any{e.Seq, string(e.Type), e.Name, e.Token, e.Holder, e.At.UnixMilli(), exp,
			nullText(e.Metadata), nullString(e.Resource), now, e.Actor, store.EventDetail(*e)}
	}
	_, err = t.tx.CopyFrom(ctx, pgx.Identifier{"events"},
		[]string{"seq", "type", "name", "token", "holder", "at", "expires_at", "metadata", "resource", "recorded_at", "actor", "detail"},
		pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("record events: %w", err)
	}
	if _, err := t.tx.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, strconv.FormatInt(last, 10)); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// retryable reports whether the database aborted the transaction to break a deadlock or a
// serialization conflict, or failed before anything was sent: running it again is safe.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01"
	}
	return err != nil && pgconn.SafeToRetry(err)
}

// translate turns driver errors into the store's vocabulary: what a retry later may fix (the
// database unreachable, shutting down, out of connections or disk, a conflict that persisted)
// is unavailable (503); a domain error passes; anything else stays internal. The driver's error
// stays in the chain.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var domain *lease.Error
	if errors.As(err, &domain) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	msg := ""
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		switch {
		case pe.Code == "40001" || pe.Code == "40P01":
			msg = "the database kept aborting the operation to resolve conflicts"
		case pe.Code[:2] == "08" || pe.Code[:2] == "53" || pe.Code[:2] == "57":
			// connection exceptions, insufficient resources, operator intervention (shutdown)
			msg = "the database is unavailable (" + pe.Code + ")"
		case pe.Code == "25006":
			msg = "the database is read-only (a standby?)"
		}
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		msg = "the database cannot be reached"
	}
	if msg == "" {
		return err
	}
	return fmt.Errorf("%w: %w", &lease.Error{Code: lease.CodeUnavailable, Message: msg}, err)
}

func ms(t int64) time.Time { return time.UnixMilli(t).UTC() }

func nullText(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
