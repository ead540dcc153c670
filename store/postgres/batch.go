package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// The batch writer. Each replica runs its writes as batches: operations that arrive while a
// batch is under way join the next one, which runs them in one transaction, records all their
// events in one statement, commits once and flushes once. A batch costs one BEGIN, one event
// insert, one COMMIT and one flush whatever its size, where each operation cost them all before;
// the operations' own statements run in turn on the batch's connection, and the fast paths of
// fast.go (renew, release, the fenced write) decide many operations with a fixed number of
// statements.
//
// The leader of a batch (the operation that took the writer lock) holds the lock from BEGIN to
// the end of COMMIT, then lets it go before its flush has returned: the next batch runs its
// statements while this one's commit reaches the disk, and concurrent flushes share an fsync.
// The flush is sent with the COMMIT, in the same round trip (commitRun), and the lock goes as
// soon as COMMIT's answer is read. Nothing is answered or published before its commit is
// flushed.
//
// Failures: an operation's domain error (a rule refused it) still commits what it wrote and
// fails it alone. Any other error of an operation rolls the batch back and runs it again with a
// savepoint around each operation, so that the failure takes that operation only. A batch the
// database aborted (deadlock, serialization) or that failed before anything was sent runs again,
// up to maxAttempts times, after a deadlock one transaction per operation (see lead); one whose
// connection was lost fails, every operation answered unavailable (503): a batch is never half
// applied.

// maxBatch bounds the operations of one batch, and so the time its locks are held.
const maxBatch = 256

// op is one write operation waiting for a batch.
type op struct {
	ctx     context.Context
	fn      func(context.Context, *txn) error
	fast    *fastOp // when set, the batch may decide it on its fast path instead of calling fn
	decided bool    // decided on the fast path in this run of the batch
	skipped bool    // its caller had gone when the batch began: not run
	err     error
	events  []lease.Event
	done    chan struct{}
}

// write runs fn as one operation of a batch (see above) and returns once the batch is flushed
// to disk. A domain error from fn still commits what fn wrote (an expiry it recorded, a
// rejection) and is then returned; any other error rolls back fn's writes only. fn may run more
// than once (a retried batch): it must set its results anew each time.
func (s *Store) write(ctx context.Context, fn func(context.Context, *txn) error) error {
	return s.enqueue(&op{ctx: ctx, fn: fn, done: make(chan struct{})})
}

// enqueue runs o in a batch and returns its error.
func (s *Store) enqueue(o *op) error {
	s.pendMu.Lock()
	s.pending = append(s.pending, o)
	s.pendMu.Unlock()
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	select {
	case <-o.done: // a leader ran it
		return o.err
	case s.lock <- struct{}{}: // lead the next batch
	}
	s.linger()
	s.pendMu.Lock()
	batch := s.pending
	if len(batch) > maxBatch {
		batch = batch[:maxBatch:maxBatch]
		s.pending = append([]*op(nil), s.pending[maxBatch:]...)
	} else {
		s.pending = nil
	}
	s.pendMu.Unlock()
	if len(batch) == 0 {
		// o was taken by a batch that is flushing now.
		<-s.lock
		<-o.done
		return o.err
	}
	s.lead(batch)
	<-o.done
	return o.err
}

// maxLinger bounds how long a leader waits for its batch to fill (see linger), and lingerOps is
// the batch that needs no wait.
const (
	maxLinger = 2 * time.Millisecond
	lingerOps = maxBatch / 8
)

// linger lets the next batch fill while the previous one flushes: its leader (who holds s.lock)
// waits until that flush ends, lingerOps operations are pending, or maxLinger has passed. Its
// operations would wait for that flush anyway (theirs shares the fsync, or follows it), so the
// wait costs them little; what it saves is transactions: under load a batch gathers what the
// flush's time brings instead of what one transaction's does, and each transaction is CPU of the
// database and of the replica (three replicas on one database each ran batches a third the size
// of one's). Nothing waits when no flush is in flight: an operation alone is never delayed.
func (s *Store) linger() {
	s.pendMu.Lock()
	flushing, n := s.flushing, len(s.pending)
	s.pendMu.Unlock()
	if flushing == nil || n >= lingerOps {
		return
	}
	wait := maxLinger
	if s.lingerMax > 0 {
		wait = s.lingerMax
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-flushing:
			return
		case <-t.C:
			return
		case <-s.arrived:
			s.pendMu.Lock()
			n = len(s.pending)
			s.pendMu.Unlock()
			if n >= lingerOps {
				return
			}
		}
	}
}

// flushStarted records a flush in flight until the returned channel is closed: the newest one is
// what linger waits for.
func (s *Store) flushStarted() chan struct{} {
	done := make(chan struct{})
	s.pendMu.Lock()
	s.flushing = done
	s.pendMu.Unlock()
	return done
}

// flushEnded ends the flush flushStarted returned done for.
func (s *Store) flushEnded(done chan struct{}) {
	s.pendMu.Lock()
	if s.flushing == done {
		s.flushing = nil
	}
	s.pendMu.Unlock()
	close(done)
}

// lead runs batch as its leader, who holds s.lock, and answers its operations; it lets s.lock
// go as soon as the batch has committed (before its flush has returned), or once it failed.
func (s *Store) lead(batch []*op) {
	began := time.Now()
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			<-s.lock
		}
	}
	conn, evs, flush, err := s.commitBatch(batch, func(evs []lease.Event) {
		s.raiseCommitted(evs)
		unlock()
	})
	if errors.Is(err, errDeadlocked) {
		// Its operations run one transaction each, in order, the writer's slot held: an
		// operation alone locks its names in one order (sorted), the order every other
		// transaction alone locks them in, where a batch's operations each lock their own
		// in turn and two batches can wait for each other again at every retry (twelve
		// clients taking two of four names each on two replicas, on a busy machine, kept
		// a batch aborted through all its runs: 503s).
		for _, o := range batch {
			began := time.Now()
			conn, evs, flush, err := s.commitBatch([]*op{o}, s.raiseCommitted)
			s.finish([]*op{o}, began, conn, evs, flush, err)
		}
		unlock()
		return
	}
	defer unlock()
	s.finish(batch, began, conn, evs, flush, err)
}

// raiseCommitted records that evs, a write's events, have committed: the listener leaves them
// to the writer, which publishes them once they are flushed.
func (s *Store) raiseCommitted(evs []lease.Event) {
	if len(evs) > 0 {
		raise(&s.committed, evs[len(evs)-1].Seq)
	}
}

// finish ends a run of batch that began at began and committed on conn with evs (its flush
// took flush), or failed with err: it publishes the events and answers the batch's
// operations. What committed is published and answered whoever has gone, so that a caller
// that still listens (a waiter's line, which gives back a grant nobody received) learns of it.
func (s *Store) finish(batch []*op, began time.Time, conn *pgxpool.Conn, evs []lease.Event, flush time.Duration, err error) {
	committed := err == nil
	if conn != nil {
		if committed && len(evs) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
			s.publishUpTo(ctx, conn.Conn(), evs)
			cancel()
		}
		conn.Release()
	}
	if s.onBatch != nil {
		s.onBatch(len(batch), time.Since(began), committed)
	}
	if s.onTrace != nil {
		ops := make([]context.Context, len(batch))
		for i, o := range batch {
			ops[i] = o.ctx
		}
		s.onTrace(store.Batch{Ops: ops, Began: began, Took: time.Since(began), Commit: flush, Committed: committed})
	}
	for _, o := range batch {
		if err != nil && !o.skipped {
			// The batch failed: whatever its operations were told by their decisions, none
			// of it is written.
			o.err = err
		}
		close(o.done)
	}
}

// commitBatch runs batch in one transaction and commits it (asynchronously, see insertEvents),
// then flushes the commit, retrying what may be retried; committed is called with the batch's
// events once COMMIT has returned, before the flush has. It returns the connection it committed
// on, still acquired, the batch's events in seq order, and how long the flush took; on error
// every operation is answered that error, except errDeadlocked (a batch of several operations
// in a deadlock), which lead handles. A batch whose flush failed is not run again: it is
// written, durable or not, and is answered unavailable.
func (s *Store) commitBatch(batch []*op, committed func([]lease.Event)) (*pgxpool.Conn, []lease.Event, time.Duration, error) {
	var err error
	for attempt := range maxAttempts {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt*attempt) * 5 * time.Millisecond)
		}
		var conn *pgxpool.Conn
		var evs []lease.Event
		var flush time.Duration
		conn, evs, flush, err = s.tryBatch(batch, committed)
		if err == nil {
			return conn, evs, flush, nil
		}
		if afterCommit(err) || !retryable(err) {
			break
		}
		if len(batch) > 1 && deadlocked(err) {
			return nil, nil, 0, errDeadlocked
		}
	}
	return nil, nil, 0, translate(err)
}

// flushError is the failure of the flush after a batch committed: the batch is written, and
// perhaps not durable.
type flushError struct{ err error }

func (e *flushError) Error() string { return "flush the commit: " + e.err.Error() }
func (e *flushError) Unwrap() error { return e.err }

// afterCommit reports whether err is a flushError: the batch committed before it failed.
func afterCommit(err error) bool {
	var fe *flushError
	return errors.As(err, &fe)
}

// errDeadlocked says that the database aborted a batch of several operations to end a
// deadlock: lead runs them again one transaction each.
var errDeadlocked = errors.New("the batch was aborted to end a deadlock")

func deadlocked(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}

// batchTimeout bounds one run of a batch: its statements do not end with a caller's context
// (one caller leaving must not abort the others' transaction).
const batchTimeout = 30 * time.Second

// tryBatch runs batch once: first without savepoints, and again with one around each
// operation when an operation failed for another reason than a rule. On success it returns the
// connection, which the caller releases.
func (s *Store) tryBatch(batch []*op, committed func([]lease.Event)) (conn *pgxpool.Conn, evs []lease.Event, flush time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	conn, err = s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		if err != nil {
			if afterCommit(err) {
				// The connection may be broken: do not hand it back.
				conn.Conn().Close(context.Background())
			}
			conn.Release()
			conn = nil
		}
	}()
	evs, flush, err = s.runBatch(ctx, conn.Conn(), batch, false, committed)
	if errors.Is(err, errOperationFailed) {
		evs, flush, err = s.runBatch(ctx, conn.Conn(), batch, true, committed)
	}
	return conn, evs, flush, err
}

// errOperationFailed says that an operation failed for another reason than a rule, in a run
// without savepoints: the batch runs again with them.
var errOperationFailed = errors.New("an operation failed")

// beginSQL starts a batch's transaction. Read committed: every decision locks the rows it
// reads first.
const beginSQL = `BEGIN ISOLATION LEVEL READ COMMITTED`

// runBatch runs the operations of batch in one transaction on c, commits it and flushes the
// commit: the fast path's operations first (their first pipeline begins the transaction), then
// each other operation's own statements, then one pipeline with the fast path's writes (unless
// the others' statements had to see them first), the batch's events, COMMIT and the flush. A
// batch of fast operations alone costs two round trips.
func (s *Store) runBatch(ctx context.Context, c *pgx.Conn, batch []*op, savepoints bool, committed func([]lease.Event)) (_ []lease.Event, _ time.Duration, err error) {
	open := false
	defer func() {
		if open {
			if _, rerr := c.Exec(context.Background(), `ROLLBACK`); rerr != nil {
				c.Close(context.Background())
			}
		}
	}()
	// A failure of the batch's own statements (not an operation's) fails the operations alone
	// when the database still answers: the run with savepoints finds which.
	own := func(err error) error {
		if savepoints || lost(err) || retryable(err) {
			return err
		}
		return fmt.Errorf("%w: %w", errOperationFailed, err)
	}
	fast := resetOps(batch, savepoints)
	var last pipeline // what is sent with COMMIT
	open = true
	if fast {
		b, err := s.fastPhase(ctx, c, batch)
		if err != nil {
			return nil, 0, own(err)
		}
		b.queueWrites(&last)
		last.exec(defaultPlansSQL)
	} else if _, err := c.Exec(ctx, beginSQL); err != nil {
		return nil, 0, fmt.Errorf("begin: %w", err)
	}
	ran, err := s.runOwn(ctx, c, batch, savepoints, &last, own)
	if err != nil {
		return nil, 0, err
	}
	evs, flush, err := s.commitRun(ctx, c, &last, ran, committed)
	if afterCommit(err) {
		open = false // committed
		return nil, 0, err
	}
	if err != nil {
		return nil, 0, own(err)
	}
	open = false
	return evs, flush, nil
}

// resetOps readies the operations of a batch for a run: those whose callers left are skipped;
// it reports whether any goes through the fast path (never with savepoints).
func resetOps(batch []*op, savepoints bool) (fast bool) {
	for _, o := range batch {
		o.err, o.events, o.decided, o.skipped = nil, nil, false, false
		if err := o.ctx.Err(); err != nil {
			o.err, o.skipped = err, true
		} else if o.fast != nil && !savepoints {
			fast = true
		}
	}
	return fast
}

// runOwn runs, in the batch's transaction, the operations the fast path did not decide, each
// its own statements (after what the fast path wrote, in last, has been sent), and returns the
// operations that ran, in the order of their events: the fast path's first. With savepoints,
// an operation that fails rolls back alone; without, it fails the run (errOperationFailed).
func (s *Store) runOwn(ctx context.Context, c *pgx.Conn, batch []*op, savepoints bool, last *pipeline, own func(error) error) ([]*op, error) {
	var ran []*op
	for _, o := range batch {
		if o.decided {
			ran = append(ran, o)
		}
	}
	for _, o := range batch {
		if o.decided || o.err != nil {
			continue
		}
		if last.len() > 0 {
			// This operation must see what the fast path decided.
			if err := last.run(ctx, c); err != nil {
				return nil, own(err)
			}
			*last = pipeline{}
		}
		if savepoints {
			if _, err := c.Exec(ctx, `SAVEPOINT op`); err != nil {
				return nil, fmt.Errorf("savepoint: %w", err)
			}
		}
		t := &txn{s: s, tx: c}
		o.err = o.fn(ctx, t)
		if failed(o.err) {
			if lost(o.err) || retryable(o.err) {
				// The batch's connection or transaction is gone, whichever operation saw it.
				return nil, o.err
			}
			if !savepoints {
				return nil, errOperationFailed
			}
			if _, err := c.Exec(ctx, `ROLLBACK TO SAVEPOINT op`); err != nil {
				return nil, fmt.Errorf("roll back operation: %w (after %w)", err, o.err)
			}
			continue
		}
		o.events = t.events
		ran = append(ran, o)
	}
	return ran, nil
}

// commitRun sends last with the events of the operations that ran, in their order, COMMIT and,
// when there are events, the flush of that commit and the NOTIFY after it (queueFlush), in one
// round trip; it gives each operation its events with their seqs. committed is called once
// COMMIT has returned: the batch's locks are released, and the next batch may run while the
// flush waits for the disk (linger waits for it until flushEnded). An error after COMMIT is a
// flushError; an error of the NOTIFY alone is none (see queueFlush).
func (s *Store) commitRun(ctx context.Context, c *pgx.Conn, last *pipeline, ran []*op, committed func([]lease.Event)) ([]lease.Event, time.Duration, error) {
	var evs []lease.Event
	for _, o := range ran {
		evs = append(evs, o.events...)
	}
	if len(evs) > 0 {
		s.queueEvents(last, evs)
	}
	done, flushed := false, false
	var flushing chan struct{}
	var began time.Time
	last.queue(func(r pgx.BatchResults) error {
		if err := readCommit(r); err != nil {
			return err
		}
		done = true
		if len(evs) > 0 {
			began, flushing = time.Now(), s.flushStarted()
		}
		committed(evs)
		return nil
	}, `COMMIT`)
	if len(evs) > 0 {
		queueFlush(last, func() { flushed = true })
	}
	err := last.run(ctx, c)
	var flush time.Duration
	if flushing != nil {
		flush = time.Since(began)
		s.flushEnded(flushing)
	}
	switch {
	case !done:
		return nil, 0, fmt.Errorf("commit: %w", err)
	case len(evs) > 0 && !flushed:
		return nil, 0, &flushError{err}
	}
	// queueEvents set the seqs in evs; each operation's events are a run of them.
	i := 0
	for _, o := range ran {
		o.events = evs[i : i+len(o.events)]
		i += len(o.events)
	}
	return evs, flush, nil
}

// readCommit reads the result of a pipeline's COMMIT: an error when the transaction was rolled
// back instead (PostgreSQL answers COMMIT in a failed transaction with ROLLBACK).
func readCommit(r pgx.BatchResults) error {
	tag, err := r.Exec()
	if err == nil && tag.String() != "COMMIT" {
		err = errors.New("the transaction was rolled back")
	}
	return err
}

// pipeline is statements sent together, in one round trip, with what reads each one's result.
type pipeline struct {
	b     pgx.Batch
	reads []func(pgx.BatchResults) error
}

// queue adds a statement whose result read reads.
func (p *pipeline) queue(read func(pgx.BatchResults) error, sql string, args ...any) {
	p.b.Queue(sql, args...)
	p.reads = append(p.reads, read)
}

// exec adds a statement whose result is only checked for an error.
func (p *pipeline) exec(sql string, args ...any) {
	p.queue(func(r pgx.BatchResults) error { _, err := r.Exec(); return err }, sql, args...)
}

func (p *pipeline) len() int { return len(p.reads) }

// run sends the statements on q and reads their results in order; it returns the first error.
func (p *pipeline) run(ctx context.Context, q queryer) error {
	if len(p.reads) == 0 {
		return nil
	}
	res := q.SendBatch(ctx, &p.b)
	for _, read := range p.reads {
		if err := read(res); err != nil {
			res.Close()
			return err
		}
	}
	return res.Close()
}

// failed reports whether err makes an operation roll back: any error but a rule's decision,
// and an unavailable database dressed as one (translate).
func failed(err error) bool {
	if err == nil {
		return false
	}
	var domain *lease.Error
	return !errors.As(err, &domain) || domain.Code == lease.CodeUnavailable
}

// lost reports whether err says the connection or its transaction is gone (rather than one
// statement refused): no savepoint can save the batch.
func lost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		c := pe.Code[:2]
		return c == "08" || c == "53" || c == "57" || c == "25"
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || lease.ErrorCode(translate(err)) == lease.CodeUnavailable
}

// writers is how many batches a replica runs at once: one, as SQLite's writer. Batches lock in
// one global order (the keys' caps, resources, names, grants, the last token, each sorted), so
// the fast paths of several replicas cannot deadlock; a batch's operations that take their own
// locks can, and the database then aborts one batch, whose operations run again one
// transaction each. Two or four writers per replica measured no better here: the commit's
// round trips are short beside the flush, which batches already overlap.
const writers = 1

// raise sets v to n if n is greater.
func raise(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}
