// Package postgres is the PostgreSQL backend of store.Store, for many stateless leasekeeper
// replicas on one database. The database decides: every write locks the rows it decides on (a
// name's row, a grant, a resource), then reads the database's clock (clock_timestamp(), after
// the locks) and calls the lease rules of package lease. Nothing is decided from a replica's
// memory or its wall clock.
//
// Writes run in batches (batch.go): the operations that arrive while a batch is under way run
// together in the next one, in one transaction, with one commit and one flush; the hot ones
// (acquire, renew, release, the fenced write) are decided together on a fast path of set-based
// statements (fast.go), a fixed number of round trips whatever the batch's size.
//
// Two one-row tables order what must be ordered: tokens (the last token issued, locked by every
// grant, so tokens grow in commit order) and event_seq (taken by every transaction that records
// events just before it commits and held to the end, so event seqs become visible in order).
//
// Locks are held through COMMIT, so a commit that waited for its WAL flush would hold the
// event_seq row for the length of an fsync, and every write would wait for the one before it.
// So a transaction that records events commits without waiting for the flush
// (synchronous_commit off, for it alone), which releases its locks at once; then, before its
// operations are answered or its events are published, a synchronous commit of a one-record
// transaction on the same connection, sent in the same round trip as the COMMIT, flushes the
// WAL through it (WAL is flushed in order, so through every commit before it too). Concurrent
// flushes share an fsync (the NOTIFY each one sends commits after it, on its own: see
// queueFlush). Nothing is answered, published or listed (Events reads up to the last published
// seq) before it is durable (invariant 10).
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
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
	"github.com/leasekeeper/leasekeeper/store/parts"
)

var _ store.Store = (*Store)(nil)

// Channel is the LISTEN/NOTIFY channel on which the flush of a commit that recorded events
// notifies, with its last seq as the payload (queueFlush).
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
	// OnBatchTrace, when set, is also told of every batch with the contexts of its operations
	// (traces); its Commit is the flush that made the batch durable. It must not block.
	OnBatchTrace func(store.Batch)
	// OnLine, when set, is called with a name whose waiting line changed on some replica in a
	// way no event tells (a waiter left; dead replicas' waiters were removed), so the next
	// waiter here tries at once. It must not block.
	OnLine func(name string)
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// MaxConns is the size of the connection pool; 0 means DefaultMaxConns. The URL's
	// pool_max_conns, when given, wins.
	MaxConns int
	// HeldParts is how Held finds a part of a name or holder (default parts.Background: an
	// index in memory, built and kept off the write path; see package parts).
	HeldParts parts.Mode

	tracer pgx.QueryTracer // tests count round trips with it
	// tuneParts, when set, changes the index of parts' settings before its keeper starts
	// (tests).
	tuneParts func(*parts.Keeper)
	// publishPage, when set, replaces the page of events read to publish (tests).
	publishPage int
}

// Store is the PostgreSQL store.
type Store struct {
	pool     *pgxpool.Pool
	test     lease.Clock
	clock    lease.Clock
	onCommit func([]lease.Event)
	onBatch  func(ops int, took time.Duration, committed bool)
	onTrace  func(store.Batch)
	onLine   func(name string)
	log      *slog.Logger
	// replica is this replica's id, whose presence lock its listener's connection holds while
	// it lives (see line.go).
	replica atomic.Int32
	// pubMu is held while events are handed to OnCommit, by a writer after its flush or by the
	// listener: OnCommit sees every event once, in seq order, without gaps. Its holder never
	// waits for the pool.
	pubMu sync.Mutex
	// published is the last seq handed to OnCommit: every event up to it is committed and
	// durable. Written under pubMu.
	published atomic.Int64
	// committed is the last seq of this replica's newest committed batch, which its leader
	// publishes after the flush with every event before it.
	committed atomic.Int64

	lock    chan struct{} // the writer lock: held by a batch's leader from BEGIN to COMMIT
	pendMu  sync.Mutex
	pending []*op // operations waiting for the next batch
	// flushing is closed when the newest batch's flush ends; nil when none is in flight.
	flushing chan struct{}
	arrived  chan struct{} // a token sent (without blocking) as each operation is queued
	// lingerMax replaces maxLinger when set (tests).
	lingerMax time.Duration
	// publishPage replaces the page of publishThrough when set (Options.publishPage).
	publishPage int

	stopListen context.CancelFunc
	listening  chan struct{} // closed when the listener has stopped

	// parts is the names and holders of the open grants, for Held's filters on a part (see
	// package parts), read through partsDB, database/sql over the pool.
	parts   *parts.Keeper
	partsDB *sql.DB
}

// Open connects to the database at url (postgres:// or postgresql://), applies the migrations
// under an advisory lock (replicas starting together take turns), and records the expiries that
// passed while no replica ran.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := poolConfig(url, opts.MaxConns)
	if err != nil {
		return nil, err
	}
	if opts.tracer != nil {
		cfg.ConnConfig.Tracer = opts.tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	s := &Store{pool: pool, test: opts.TestClock, onCommit: opts.OnCommit, onBatch: opts.OnBatch, onTrace: opts.OnBatchTrace, onLine: opts.OnLine, log: log,
		lock: make(chan struct{}, writers), arrived: make(chan struct{}, 1), publishPage: opts.publishPage}
	if err := s.start(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	// The index of parts is built now, paced, in the background, so that the first filter on a
	// part does not sieve in SQL for the seconds of a build.
	s.partsDB = stdlib.OpenDBFromPool(pool)
	s.parts = parts.New(opts.HeldParts, s.partsDB, partsSQL(), log)
	if opts.tuneParts != nil {
		opts.tuneParts(s.parts)
	}
	s.parts.Start()
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
	// Events committed by other replicas may not be flushed yet: flush, then start after them.
	// This comes before the first write below: a write publishes every event after the last
	// published one, and with none published yet, the sweep's first expiry read the whole
	// history (the 587,158 retained events of a benchmark's database, 1.1 s and 340 MB, at
	// each start after a lease had expired while the replica was down).
	if _, err := s.pool.Exec(ctx, flushSQL); err != nil {
		return fmt.Errorf("flush the database's WAL: %w", translate(err))
	}
	var latest *int64
	if err := s.pool.QueryRow(ctx, `SELECT max(seq) FROM events`).Scan(&latest); err != nil {
		return fmt.Errorf("latest event: %w", translate(err))
	}
	if latest != nil {
		s.published.Store(*latest)
	}
	if _, _, err := s.ExpireDue(ctx); err != nil {
		return err
	}
	// The listener's connection holds this replica's presence lock before any request can
	// join a line.
	conn, err := s.connectListener(ctx)
	if err != nil {
		return fmt.Errorf("open postgres: %w", translate(err))
	}
	lctx, stop := context.WithCancel(context.Background())
	s.stopListen, s.listening = stop, make(chan struct{})
	go s.listen(lctx, conn)
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
	s.parts.Close()
	s.partsDB.Close()
	s.pool.Close()
	return nil
}

// nowSQL reads the database's clock in milliseconds. clock_timestamp() is the time of the
// statement, not of the transaction's start (now()), so a decision read after a row lock is not
// older than the commit it waited for.
const nowSQL = `SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// queryer is a pool, a connection or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
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
	tx     queryer // the connection, inside the transaction
	events []lease.Event
}

// now reads the decision time inside the transaction (see Store.now).
func (t *txn) now(ctx context.Context) (int64, error) { return t.s.now(ctx, t.tx) }

// record keeps an event to insert at commit, when it gets its seq.
func (t *txn) record(e lease.Event) { t.events = append(t.events, e) }

// maxAttempts bounds the runs of a transaction the database aborted to break a deadlock or a
// serialization conflict.
const maxAttempts = 4

// writeAlone runs fn in a transaction of its own, outside the batches: for the sweeper's and
// the pruner's long transactions, which must not hold up the batches. Its errors are those of
// write.
func (s *Store) writeAlone(ctx context.Context, fn func(context.Context, *txn) error) (err error) {
	if s.onBatch != nil {
		began := time.Now()
		defer func() { s.onBatch(1, time.Since(began), !failed(err)) }()
	}
	for attempt := range maxAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
			}
		}
		err = s.tryAlone(ctx, fn)
		if !retryable(err) {
			break
		}
	}
	return translate(err)
}

func (s *Store) tryAlone(ctx context.Context, fn func(context.Context, *txn) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	t := &txn{s: s, tx: tx}
	if result := fn(ctx, t); failed(result) || len(t.events) == 0 {
		if failed(result) {
			return result
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return result
	}
	if err := s.insertEvents(ctx, tx, t.events); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if err := flushNotify(fctx, conn.Conn()); err != nil {
		return fmt.Errorf("flush the commit: %w", err)
	}
	s.publishUpTo(fctx, conn.Conn(), t.events)
	return nil
}

// flushTimeout bounds the flush after a commit.
const flushTimeout = 10 * time.Second

// flushSQL commits a one-record transaction synchronously (the session's default), which
// returns once the WAL is flushed through its commit record, so through every commit before it.
const flushSQL = `SELECT pg_logical_emit_message(true, 'leasekeeper', '')`

// flushNotify flushes, on conn, the commit that recorded events (insertEvents), then notifies
// the other replicas with their last seq, in one round trip (queueFlush).
func flushNotify(ctx context.Context, conn *pgx.Conn) error {
	var pl pipeline
	flushed := false
	queueFlush(&pl, func() { flushed = true })
	if err := pl.run(ctx, conn); err != nil && !flushed {
		return err
	}
	return nil // a failed NOTIFY alone: see queueFlush
}

// queueFlush queues on pl, after the COMMIT of a transaction that recorded events
// (queueEvents, which leaves the last of their seqs in the session's leasekeeper.last_seq), the
// flush of that commit and the NOTIFY of that seq to the other replicas; flushed is called once
// the flush has returned. The flush is a synchronous transaction of one record (flushSQL), which
// returns once the WAL is flushed through it and so through every commit before it; after it
// a transaction of its own sends the NOTIFY and commits asynchronously. A replica that hears
// seq n knows that every event up to n has committed (seqs commit in order) and is durable,
// and reads them without a flush of its own (listen.go).
//
// The NOTIFY is not sent in the synchronous transaction: PostgreSQL serialises the commits of
// the transactions that notify with one database-wide lock, held until after the commit, so
// there it was held through the fsync and the flushes of every replica took turns, an fsync
// each, instead of sharing one. Nor is it sent with the batch's commit: then the other
// replicas heard of events not yet durable, and each had to flush before reading them.
//
// An error of the NOTIFY alone does not fail the flush: the events are durable and answered,
// and the other replicas read them when they hear the next notification.
func queueFlush(pl *pipeline, flushed func()) {
	pl.exec(`BEGIN`)
	pl.exec(flushSQL)
	pl.queue(func(r pgx.BatchResults) error {
		err := readCommit(r)
		if err == nil {
			flushed()
		}
		return err
	}, `COMMIT`)
	pl.exec(`SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, current_setting('leasekeeper.last_seq'))`, Channel)
}

// insertEvents gives the events their seqs and inserts them, in one statement that also makes
// the commit asynchronous (see the package comment); the flush after it notifies the other
// replicas (flushNotify). The event_seq row stays locked until COMMIT: a transaction that takes
// seq 42 cannot commit before the one that took 41 has, so a reader of seq > n never misses an
// event that commits later.
func (s *Store) insertEvents(ctx context.Context, q queryer, events []lease.Event) error {
	var pl pipeline
	s.queueEvents(&pl, events)
	return pl.run(ctx, q)
}

// queueEvents queues insertEvents's statement on pl; when pl has run, events have their seqs.
func (s *Store) queueEvents(pl *pipeline, events []lease.Event) {
	var recorded *int64
	if s.test != nil {
		v := s.test.Now().UnixMilli()
		recorded = &v
	}
	n := len(events)
	cols := struct {
		typ, name, holder, meta, res, actor, detail []*string
		token, at, exp, delay                       []*int64
	}{}
	for i := range events {
		e := &events[i]
		var exp *int64
		if !e.ExpiresAt.IsZero() {
			v := e.ExpiresAt.UnixMilli()
			exp = &v
		}
		typ, name, holder, actor := string(e.Type), e.Name, e.Holder, e.Actor
		token, at := e.Token, e.At.UnixMilli()
		cols.typ, cols.name, cols.holder, cols.actor = append(cols.typ, &typ), append(cols.name, &name), append(cols.holder, &holder), append(cols.actor, &actor)
		cols.meta, cols.res = append(cols.meta, nullText(e.Metadata)), append(cols.res, nullString(e.Resource))
		cols.token, cols.at, cols.exp = append(cols.token, &token), append(cols.at, &at), append(cols.exp, exp)
		var delay *int64
		if e.Type == lease.EventAcquired {
			v := e.LockDelay.Milliseconds()
			delay = &v
		}
		cols.delay = append(cols.delay, delay)
		cols.detail = append(cols.detail, store.EventDetail(*e))
	}
	pl.queue(func(r pgx.BatchResults) error {
		var last int64
		if err := r.QueryRow().Scan(&last); err != nil {
			return fmt.Errorf("record events: %w", err)
		}
		for i := range events {
			events[i].Seq = last - int64(n) + 1 + int64(i)
		}
		return nil
	}, `WITH s AS (UPDATE event_seq SET last = last + $1 RETURNING last),
		c AS (SELECT set_config('synchronous_commit', 'off', true) AS v, set_config('leasekeeper.last_seq', s.last::text, false) AS w FROM s),
		i AS (INSERT INTO events (seq, type, name, token, holder, at, expires_at, metadata, resource, recorded_at, actor, lock_delay_ms, detail)
			SELECT s.last - $1 + e.ord, e.type, e.name, e.token, e.holder, e.at, e.exp, e.meta, e.res,
				COALESCE($11, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), e.actor, e.delay, e.detail
			FROM s, unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[], $8::text[], $9::text[], $10::text[], $12::bigint[], $13::text[])
				WITH ORDINALITY AS e(type, name, token, holder, at, exp, meta, res, actor, delay, detail, ord))
		SELECT s.last FROM s, c`,
		n, cols.typ, cols.name, cols.token, cols.holder, cols.at, cols.exp, cols.meta, cols.res, cols.actor, recorded, cols.delay, cols.detail)
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
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, pgconn.ErrConnClosed):
		// ErrConnClosed: the driver closed the connection after a failure on it (the server
		// went away between a commit and its flush, say). The flush is not tried again on
		// another connection: after a crash it would succeed whether the commit survived or
		// not.
		msg = "the database cannot be reached"
	}
	if pe != nil && pe.Code == "22021" {
		// Text that is not UTF-8 reached a statement (the edge refuses it in bodies, query
		// strings and cursors): the request's fault, never the server's.
		return fmt.Errorf("%w: %w", lease.Errorf(lease.CodeInvalid, "a text argument is not valid UTF-8"), err)
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
