package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// batchOf runs the writes as one batch: it holds the writer, starts each write in a goroutine,
// waits until all of them wait for the batch, lets it run, and waits for every write to end.
func batchOf(t *testing.T, s *postgres.Store, writes ...func()) {
	t.Helper()
	pending, release := postgres.HoldBatches(s)
	var wg sync.WaitGroup
	for _, w := range writes {
		wg.Go(w)
	}
	for deadline := time.Now().Add(30 * time.Second); pending() < len(writes); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			release()
			t.Fatalf("%d of %d writes wait for the batch after 30 s", pending(), len(writes))
		}
	}
	release()
	wg.Wait()
}

// batches records the sizes of the batches a store committed (its OnBatch).
type batches struct {
	mu        sync.Mutex
	committed []int
}

func (b *batches) observe(ops int, _ time.Duration, committed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if committed {
		b.committed = append(b.committed, ops)
	}
}

func (b *batches) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.committed = nil
}

func (b *batches) sizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.committed)
}

// TestBatchOperationFailsAlone: in one batch with acquires, renewals and fenced writes, an
// operation the database refuses (division by zero) fails alone; the others are decided and
// committed once, and the batch is reported as one.
func TestBatchOperationFailsAlone(t *testing.T) {
	ctx := context.Background()
	var b batches
	s := open(t, srv.NewDatabase(t), nil, postgres.Options{OnBatch: b.observe})
	held := make([]lease.Lease, 5)
	for i := range held {
		var err error
		if held[i], err = s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("held-%d", i), Holder: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	b.reset()
	var writes []func()
	acquired := make([]lease.Lease, 10)
	acqErr := make([]error, 10)
	for i := range acquired {
		writes = append(writes, func() {
			acquired[i], acqErr[i] = s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("new-%d", i), Holder: "w", TTL: time.Minute})
		})
	}
	renewErr := make([]error, len(held))
	putErr := make([]error, len(held))
	for i, l := range held {
		writes = append(writes, func() {
			_, renewErr[i] = s.Renew(ctx, l.Name, l.ID, 2*time.Minute, nil)
		}, func() {
			_, putErr[i] = s.PutResource(ctx, store.ResourceWrite{Name: fmt.Sprintf("res-%d", i), Token: l.Token, LeaseName: l.Name, Value: []byte("v")})
		})
	}
	var badErr error
	writes = append(writes, func() { badErr = postgres.WriteSQL(ctx, s, `SELECT 1/0`) })
	batchOf(t, s, writes...)

	if badErr == nil || lease.ErrorCode(badErr) != lease.CodeInternal {
		t.Errorf("the refused operation: err = %v, want an internal error", badErr)
	}
	for i, err := range acqErr {
		if err != nil {
			t.Errorf("acquire new-%d: %v", i, err)
		}
	}
	for i := range held {
		if renewErr[i] != nil || putErr[i] != nil {
			t.Errorf("held-%d: renew %v, put %v", i, renewErr[i], putErr[i])
		}
		st, err := s.Get(ctx, held[i].Name)
		if err != nil || st.Token != held[i].Token || st.ExpiresAt.Sub(st.RenewedAt) != 2*time.Minute {
			t.Errorf("held-%d after its renewal: %+v, %v", i, st, err)
		}
	}
	evs, err := s.Events(ctx, store.EventFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	count := map[lease.EventType]int{}
	for _, e := range evs.Items {
		count[e.Type]++
	}
	if count[lease.EventAcquired] != len(held)+len(acquired) || count[lease.EventRenewed] != len(held) {
		t.Errorf("events: %v, want each write's once", count)
	}
	if sizes := b.sizes(); len(sizes) != 1 || sizes[0] != len(writes) {
		t.Errorf("committed batches: %v, want one of %d operations", sizes, len(writes))
	}
}

// TestBatchRetriedWhenAborted: a batch the database aborts (a deadlock) runs again, and what
// its other operations decided is committed once.
func TestBatchRetriedWhenAborted(t *testing.T) {
	ctx := context.Background()
	s := open(t, srv.NewDatabase(t), nil, postgres.Options{})
	var l lease.Lease
	var acqErr, abortedErr error
	var runs int
	batchOf(t, s, func() {
		l, acqErr = s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w", TTL: time.Minute})
	}, func() {
		runs, abortedErr = postgres.WriteAborted(ctx, s, "40P01", 2)
	})
	if acqErr != nil || abortedErr != nil || runs != 3 {
		t.Fatalf("acquire: %v; the aborted operation: %v after %d runs, want nil after 3", acqErr, abortedErr, runs)
	}
	evs, err := s.Events(ctx, store.EventFilter{Name: "job"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || evs.Items[0].Token != l.Token {
		t.Errorf("events of job: %+v, want one acquired with token %d", evs, l.Token)
	}
}

// TestBatchAfterDeadlockRunsAlone: the operations of a batch the database aborted to end a
// deadlock run again one transaction each (a batch's operations lock their names in turn, and
// two batches can deadlock again at every retry; an operation alone locks its names sorted, as
// every other one alone does). An operation that meets a deadlock again alone is retried.
func TestBatchAfterDeadlockRunsAlone(t *testing.T) {
	ctx := context.Background()
	var b batches
	s := open(t, srv.NewDatabase(t), nil, postgres.Options{OnBatch: b.observe})
	b.reset() // the start's sweep
	var acqErr [2]error
	var abortedErr error
	var runs int
	batchOf(t, s, func() {
		_, acqErr[0] = s.Acquire(ctx, store.AcquireParams{Name: "a", Holder: "w", TTL: time.Minute})
	}, func() {
		_, acqErr[1] = s.AcquireAll(ctx, store.AcquireAllParams{Names: []string{"b", "c"}, Holder: "w", TTL: time.Minute})
	}, func() {
		runs, abortedErr = postgres.WriteAborted(ctx, s, "40P01", 2)
	})
	if acqErr[0] != nil || acqErr[1] != nil || abortedErr != nil || runs != 3 {
		t.Fatalf("acquires: %v; the aborted operation: %v after %d runs, want nil after 3", acqErr, abortedErr, runs)
	}
	if sizes := b.sizes(); !slices.Equal(sizes, []int{1, 1, 1}) {
		t.Errorf("committed batches after the deadlock: %v, want [1 1 1] (each operation alone)", sizes)
	}
}

// TestBatchLostConnection: a batch whose connection is lost is never half applied: every
// operation in it is answered unavailable, and none of their writes is there.
func TestBatchLostConnection(t *testing.T) {
	ctx := context.Background()
	s := open(t, srv.NewDatabase(t), nil, postgres.Options{})
	var acqErr, killErr error
	batchOf(t, s, func() {
		_, acqErr = s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w", TTL: time.Minute})
	}, func() {
		killErr = postgres.WriteSQL(ctx, s, `SELECT pg_terminate_backend(pg_backend_pid())`)
	})
	if lease.ErrorCode(acqErr) != lease.CodeUnavailable || lease.ErrorCode(killErr) != lease.CodeUnavailable {
		t.Fatalf("acquire: %v; the operation that lost the connection: %v; want both unavailable", acqErr, killErr)
	}
	if st, err := s.Get(ctx, "job"); lease.ErrorCode(err) != lease.CodeNotFound {
		t.Errorf("Get(job) = %+v, %v; want not_found: the batch was rolled back", st, err)
	}
	// The store goes on with a new connection.
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w", TTL: time.Minute}); err != nil {
		t.Errorf("acquire after the lost connection: %v", err)
	}
}

// roundTrips counts the round trips of the store's connections but the listener's (which
// catches up on other replicas' events when notified): statements sent alone and pipelines.
type roundTrips struct {
	n        atomic.Int64
	mu       sync.Mutex
	listener *pgx.Conn
}

func (r *roundTrips) count(c *pgx.Conn, sql string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.HasPrefix(sql, "LISTEN") {
		r.listener = c
	}
	if c != r.listener {
		r.n.Add(1)
	}
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.count(c, d.SQL)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.count(c, "")
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestBatchRoundTripsFixed: a batch of acquires, renewals, fenced writes and releases costs the
// same round trips whatever its size: it is decided on the fast path, not statement by
// statement.
func TestBatchRoundTripsFixed(t *testing.T) {
	ctx := context.Background()
	rt := new(roundTrips)
	s := open(t, srv.NewDatabase(t), nil, postgres.WithTracer(postgres.Options{}, rt))
	round := 0
	// trips runs n acquires, then n renewals and fenced writes, then n releases, each kind as
	// one batch, and returns the round trips of each batch.
	trips := func(n int) [3]int64 {
		round++
		var out [3]int64
		ls := make([]lease.Lease, n)
		var writes []func()
		for i := range n {
			writes = append(writes, func() {
				var err error
				if ls[i], err = s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("r%d-%d", round, i), Holder: "w", TTL: time.Minute}); err != nil {
					t.Error(err)
				}
			})
		}
		before := rt.n.Load()
		batchOf(t, s, writes...)
		out[0] = rt.n.Load() - before
		writes = nil
		for _, l := range ls {
			writes = append(writes, func() {
				if _, err := s.Renew(ctx, l.Name, l.ID, time.Minute, nil); err != nil {
					t.Error(err)
				}
			}, func() {
				if _, err := s.PutResource(ctx, store.ResourceWrite{Name: l.Name, Token: l.Token, LeaseName: l.Name, Value: []byte("v")}); err != nil {
					t.Error(err)
				}
			})
		}
		before = rt.n.Load()
		batchOf(t, s, writes...)
		out[1] = rt.n.Load() - before
		writes = nil
		for _, l := range ls {
			writes = append(writes, func() {
				if err := s.Release(ctx, l.Name, l.ID); err != nil {
					t.Error(err)
				}
			})
		}
		before = rt.n.Load()
		batchOf(t, s, writes...)
		out[2] = rt.n.Load() - before
		return out
	}
	trips(3) // statements described and cached on the connections
	one, many := trips(1), trips(50)
	if one != many {
		t.Errorf("round trips of a batch (acquire, renew and write, release): %v for 1 operation, %v for 50; want the same", one, many)
	}
	for i, n := range one {
		if n > 2 {
			t.Errorf("batch %d: %d round trips, want at most 2 (two pipelines, the flush in the second)", i, n)
		}
	}
}

// TestBatchOwnerCap: a key's cap holds within one batch: of five acquires by a key that may hold
// three leases and holds one, two are granted.
func TestBatchOwnerCap(t *testing.T) {
	ctx := context.Background()
	s := open(t, srv.NewDatabase(t), nil, postgres.Options{})
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "first", Holder: "w", TTL: time.Minute, Owner: "k1", MaxHeld: 3}); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 5)
	var writes []func()
	for i := range errs {
		writes = append(writes, func() {
			_, errs[i] = s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("job-%d", i), Holder: "w", TTL: time.Minute, Owner: "k1", MaxHeld: 3})
		})
	}
	var other error
	writes = append(writes, func() {
		_, other = s.Acquire(ctx, store.AcquireParams{Name: "other", Holder: "w", TTL: time.Minute, Owner: "k2", MaxHeld: 3})
	})
	batchOf(t, s, writes...)
	granted, refused := 0, 0
	for _, err := range errs {
		switch lease.ErrorCode(err) {
		case "":
			granted++
		case lease.CodeTooManyLeases:
			refused++
		default:
			t.Errorf("acquire: %v", err)
		}
	}
	if granted != 2 || refused != 3 || other != nil {
		t.Errorf("granted %d, refused %d (want 2 and 3); another key's acquire: %v", granted, refused, other)
	}
	if n, err := s.HeldCount(ctx, "job-"); err != nil || n != 2 {
		t.Errorf("HeldCount(job-) = %d, %v; want 2", n, err)
	}
}

// TestDecisionClockAfterLocks: a batch reads the database's clock after it has the locks it
// decides on. Another transaction holds a name's row while it ends the name's grant 100 ms
// later; an acquire that waited for the row must be granted no earlier than that end.
func TestDecisionClockAfterLocks(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s := open(t, url, nil, postgres.Options{})
	l, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w1", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM names WHERE name = 'job' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   lease.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w2", TTL: time.Hour})
		got <- result{l, err}
	}()
	time.Sleep(100 * time.Millisecond) // the acquire reads its clock, then waits for the row
	var ended int64
	if err := tx.QueryRow(ctx, `UPDATE grants SET ended_at = floor(extract(epoch FROM clock_timestamp()) * 1000), end_kind = 'released'
		WHERE token = $1 RETURNING ended_at`, l.Token).Scan(&ended); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the acquire did not end 30 s after the row was let go")
	}
	if r.err != nil {
		t.Fatalf("acquire after the release: %v", r.err)
	}
	if at := r.l.AcquiredAt.UnixMilli(); at < ended {
		t.Errorf("granted at %d, before the previous grant ended at %d: the decision's clock was read before the lock", at, ended)
	}
}

// TestCommitsSynchronously: the store's connections commit synchronously whatever the server's
// default (the test cluster's is off), so the flush after an asynchronous commit waits for the
// disk.
func TestCommitsSynchronously(t *testing.T) {
	s := open(t, srv.NewDatabase(t), nil, postgres.Options{})
	if v, err := postgres.SynchronousCommit(context.Background(), s); err != nil || v != "on" {
		t.Errorf("synchronous_commit = %q, %v; want on", v, err)
	}
}

// TestBatchTrace: OnBatchTrace is told of each batch with its operations' contexts (which carry
// their requests' traces) and the flush that made it durable.
func TestBatchTrace(t *testing.T) {
	type key struct{}
	var mu sync.Mutex
	var got []store.Batch
	s := open(t, srv.NewDatabase(t), nil, postgres.Options{OnBatchTrace: func(b store.Batch) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, b)
	}})
	ctx := context.WithValue(context.Background(), key{}, "request 1")
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range got {
		for _, op := range b.Ops {
			if op.Value(key{}) == "request 1" {
				if !b.Committed || b.Commit <= 0 || b.Took < b.Commit {
					t.Errorf("the acquire's batch: %+v, want committed, with the flush's time within its own", b)
				}
				return
			}
		}
	}
	t.Errorf("no batch traced with the acquire's context among %d", len(got))
}

// batchSQL records the statements of every pipeline the store's connections send.
type batchSQL struct {
	mu      sync.Mutex
	batches [][]string
}

func (b *batchSQL) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (b *batchSQL) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (b *batchSQL) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var stmts []string
	for _, q := range d.Batch.QueuedQueries {
		stmts = append(stmts, q.SQL)
	}
	b.mu.Lock()
	b.batches = append(b.batches, stmts)
	b.mu.Unlock()
	return ctx
}
func (b *batchSQL) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (b *batchSQL) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestFlushNotifiesAfterItsCommit: the NOTIFY that tells the other replicas of a batch's events
// is sent after the synchronous commit that flushes them, in an asynchronous transaction of its
// own. PostgreSQL serialises the commits of notifying transactions with one database-wide lock
// held until after the commit: a NOTIFY in the synchronous transaction held it through the
// fsync, and the flushes of every replica took turns instead of sharing an fsync. (That they
// make the events durable is TestDatabaseCrash's, in faults/; that the other replicas hear of
// them, the replica tests'.)
func TestFlushNotifiesAfterItsCommit(t *testing.T) {
	trace := new(batchSQL)
	s := open(t, srv.NewDatabase(t), nil, postgres.WithTracer(postgres.Options{}, trace))
	if _, err := s.Acquire(context.Background(), store.AcquireParams{Name: "job", Holder: "w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	trace.mu.Lock()
	defer trace.mu.Unlock()
	found := false
	for _, stmts := range trace.batches {
		notify := slices.IndexFunc(stmts, func(q string) bool { return strings.Contains(q, "pg_notify") })
		flush := slices.IndexFunc(stmts, func(q string) bool { return strings.Contains(q, "pg_logical_emit_message") })
		if notify < 0 || flush < 0 {
			continue
		}
		found = true
		commit := slices.Index(stmts[flush:], "COMMIT")
		if commit < 0 || flush+commit > notify {
			t.Errorf("flush pipeline %q: the NOTIFY is sent before the flush's COMMIT, in its synchronous transaction", stmts)
		}
		if !strings.Contains(stmts[notify], "'synchronous_commit', 'off'") {
			t.Errorf("flush pipeline %q: the NOTIFY's transaction commits synchronously", stmts)
		}
	}
	if !found {
		t.Errorf("no pipeline flushed and notified: %q", trace.batches)
	}
}

// flushHold holds, once armed, the first batch whose flush's result is read, until release.
type flushHold struct {
	armed    atomic.Bool
	held     chan struct{}
	release  chan struct{}
	released sync.Once
}

func (h *flushHold) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (h *flushHold) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (h *flushHold) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (h *flushHold) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	// Once: a sync.Once would hold every other batch's flush until this one's ended.
	if strings.Contains(d.SQL, "pg_logical_emit_message") && h.armed.CompareAndSwap(true, false) {
		close(h.held)
		<-h.release
	}
}
func (h *flushHold) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (h *flushHold) let() { h.released.Do(func() { close(h.release) }) }

// TestBatchSlotFreeDuringFlush: a batch lets the writer's slot go once its COMMIT has returned,
// before its flush has: the next batch runs while the disk works (and is answered first when
// that flush is slow), where a slot held through the flush would make every batch wait for the
// disk in turn.
func TestBatchSlotFreeDuringFlush(t *testing.T) {
	h := &flushHold{held: make(chan struct{}), release: make(chan struct{})}
	s := open(t, srv.NewDatabase(t), nil, postgres.WithTracer(postgres.Options{}, h))
	t.Cleanup(h.let)
	ctx := context.Background()
	acquire := func(name string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: "w", TTL: time.Minute})
			done <- err
		}()
		return done
	}
	h.armed.Store(true)
	first := acquire("first")
	select {
	case <-h.held:
	case err := <-first:
		t.Fatalf("the first acquire ended (%v) without its flush being seen", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the first acquire's flush was not seen in 30 s")
	}
	select {
	case err := <-acquire("second"):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write waited 30 s for the flush of the batch before it: the writer's slot is held through the flush")
	}
	h.let()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// TestBatchFlushFailedNotRunAgain: a batch whose flush fails after its COMMIT returned is
// written: it never runs again, even when the error is one that a batch is retried for before
// its COMMIT (a serialization failure), and its operations are answered unavailable, since
// their commit may not be on disk. A batch run again there would apply its operations twice.
//
// The database fails the flush: a function of the test's schema, which the database's
// search_path puts before pg_catalog, takes the place of pg_logical_emit_message and raises
// while flush_fails has a row.
func TestBatchFlushFailedNotRunAgain(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var db string
	if err := admin.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE flush_fails (at int)`,
		`CREATE TABLE runs (at int)`,
		`CREATE FUNCTION public.pg_logical_emit_message(transactional boolean, prefix text, content text) RETURNS pg_lsn
			LANGUAGE plpgsql AS $$
			BEGIN
				IF EXISTS (SELECT FROM public.flush_fails) THEN
					RAISE EXCEPTION 'the flush fails (test)' USING ERRCODE = '40001';
				END IF;
				RETURN pg_catalog.pg_logical_emit_message(transactional, prefix, content);
			END $$`,
		`ALTER DATABASE "` + db + `" SET search_path = public, pg_catalog`,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s := open(t, url, nil, postgres.Options{})
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "before", Holder: "w", TTL: time.Minute}); err != nil {
		t.Fatalf("acquire while the flush works: %v", err)
	}
	if _, err := admin.Exec(ctx, `INSERT INTO flush_fails VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var acqErr, runErr error
	batchOf(t, s, func() {
		_, acqErr = s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w", TTL: time.Minute})
	}, func() {
		runErr = postgres.WriteSQL(ctx, s, `INSERT INTO runs VALUES (1)`)
	})
	if _, err := admin.Exec(ctx, `DELETE FROM flush_fails`); err != nil {
		t.Fatal(err)
	}
	if lease.ErrorCode(acqErr) != lease.CodeUnavailable || lease.ErrorCode(runErr) != lease.CodeUnavailable {
		t.Errorf("acquire: %v; the other operation: %v; want both unavailable (committed, perhaps not durable)", acqErr, runErr)
	}
	var runs int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM runs`).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != 1 {
		t.Errorf("the batch committed %d times, want once: a batch whose flush failed was run again", runs)
	}
	if st, err := s.Get(ctx, "job"); err != nil || !st.Held || st.Holder != "w" {
		t.Errorf("Get(job) = %+v, %v; want held by w: the batch committed before its flush failed", st, err)
	}
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "after", Holder: "w", TTL: time.Minute}); err != nil {
		t.Errorf("acquire once the flush works again: %v", err)
	}
}
