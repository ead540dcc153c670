package service_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/service"
	"github.com/leasekeeper/leasekeeper/service/servicetest"
	"github.com/leasekeeper/leasekeeper/store/postgres"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// TestScale measures what must stay flat as the number of held leases grows: acquire and
// renew latency (p50, one client, so each is one fsync plus the work), the process's RSS, the
// time a restart takes to be ready (open, conservative restart, the writer's memory loaded),
// and the dashboard's first page. It runs only when LEASEKEEPER_SCALE lists the sizes, e.g.
//
//	LEASEKEEPER_SCALE=1000,100000,1000000 go test -run TestScale -v -timeout 30m ./service
//
// TestScale measures SQLite; TestScalePostgres the same on PostgreSQL.
func TestScale(t *testing.T) {
	scale(t, false, func(t *testing.T, n int) func(*service.Hooks) (service.Store, error) {
		path := filepath.Join(t.TempDir(), "scale.db")
		seedHeld(t, path, n)
		return func(h *service.Hooks) (service.Store, error) {
			return sqlite.Open(context.Background(), path, sqlite.Options{OnCommit: h.Publish, OnBatch: h.Batch})
		}
	})
}

// TestScalePostgres is TestScale on databases of the PostgreSQL test server (a throwaway
// cluster without fsync, as every PostgreSQL test's: the figures compare sizes, not disks).
// Its restart is a replica's start: connect, check the migrations, expire what is due, read
// the database's clock and the last event, and listen. The sizes are measured side by side,
// one request to each in turn, so that the machine's other work weighs on every size alike
// (the process's RSS then counts every store opened so far).
func TestScalePostgres(t *testing.T) {
	scale(t, true, func(t *testing.T, n int) func(*service.Hooks) (service.Store, error) {
		url := pg.NewDatabase(t)
		seedHeldPostgres(t, url, n)
		return func(h *service.Hooks) (service.Store, error) {
			return postgres.Open(context.Background(), url, postgres.Options{OnCommit: h.Publish, OnBatch: h.Batch, OnLine: h.LineChanged})
		}
	})
}

// scale measures each size LEASEKEEPER_SCALE lists, on the database seed makes with n held
// leases (the function seed returns opens it): one size after the other, or, sideBySide, all
// of them seeded and opened first, then their requests interleaved.
func scale(t *testing.T, sideBySide bool, seed func(t *testing.T, n int) func(*service.Hooks) (service.Store, error)) {
	sizes := os.Getenv("LEASEKEEPER_SCALE")
	if sizes == "" {
		t.Skip("set LEASEKEEPER_SCALE=1000,100000,1000000 to run the scale measurements")
	}
	var ns []int
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("LEASEKEEPER_SCALE: %v", err)
		}
		ns = append(ns, n)
	}
	var runs []*scaleRun
	logRuns := func() {
		for _, r := range runs {
			t.Logf("%10d %12s %12s %10.0f %10.0f %12s %12s", r.n, median(r.acq), median(r.ren), r.rssMB, r.heapMB, r.restart, median(r.dash))
			r.close()
		}
		runs = nil
	}
	t.Logf("%10s %12s %12s %10s %10s %12s %12s", "leases", "acquire p50", "renew p50", "RSS MB", "heap MB", "restart", "dashboard")
	for _, n := range ns {
		runs = append(runs, openScale(t, n, seed(t, n)))
		if !sideBySide {
			measureScale(runs)
			logRuns()
		}
	}
	measureScale(runs)
	logRuns()
}

// scaleRun is one size's store and server, and its figures.
type scaleRun struct {
	n              int
	restart        time.Duration
	rssMB, heapMB  float64
	acq, ren, dash []time.Duration
	do             func(method, path, body string, header ...string) (time.Duration, string)
	close          func()
}

// openScale opens a store with open and serves it, timing the restart: from opening the
// database to a handler ready to serve.
func openScale(t *testing.T, n int, open func(*service.Hooks) (service.Store, error)) *scaleRun {
	r := &scaleRun{n: n}
	began := time.Now()
	var hooks service.Hooks
	st, err := open(&hooks)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(st, &hooks, service.Config{})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	r.restart = time.Since(began)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.rssMB, r.heapMB = rssMB(t), float64(ms.HeapInuse)/(1<<20)
	srv := httptest.NewServer(svc.Handler)
	r.close = func() { srv.Close(); st.Close() }
	hc := &http.Client{Transport: servicetest.BearerTransport{Key: servicetest.AdminKey(t, st)}}
	r.do = func(method, path, body string, header ...string) (time.Duration, string) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		began := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(began)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, b)
		}
		return took, string(b)
	}
	return r
}

// measureScale times 200 acquires of new names, each followed by its renewal, then 5 loads of
// the dashboard, one request to each of runs in turn.
func measureScale(runs []*scaleRun) {
	const ops = 200
	for i := range ops {
		for _, r := range runs {
			took, body := r.do(http.MethodPost, fmt.Sprintf("/v1/leases/new-%d/acquire", i), `{"holder":"scale","ttl_ms":60000}`)
			r.acq = append(r.acq, took)
			id := body[strings.Index(body, `"lease_id":"`)+len(`"lease_id":"`):]
			id = id[:strings.IndexByte(id, '"')]
			took, _ = r.do(http.MethodPost, fmt.Sprintf("/v1/leases/new-%d/renew", i), `{"lease_id":"`+id+`"}`)
			r.ren = append(r.ren, took)
		}
	}
	for range 5 {
		for _, r := range runs {
			took, _ := r.do(http.MethodGet, "/", "", "Accept", "text/html")
			r.dash = append(r.dash, took)
		}
	}
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// seedHeld writes n held leases (one hour left) straight into a migrated database: going
// through Acquire would take minutes at a million.
func seedHeld(t *testing.T, path string, n int) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=FULL")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	at, first := now.UnixMilli(), now.UnixMicro()-int64(n)-1000
	for _, q := range []string{
		`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ` + strconv.Itoa(n-1) + `)
		INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
		SELECT ` + strconv.FormatInt(first, 10) + ` + i, printf('job-%07d', i), 'worker-' || (i % 64), randomblob(32), 3600000, 0, ` +
			strconv.FormatInt(at, 10) + `, ` + strconv.FormatInt(at, 10) + `, ` + strconv.FormatInt(at+3600000, 10) + `, '' FROM c`,
		`INSERT INTO names (name, token) SELECT name, token FROM grants`,
		`UPDATE meta SET value = ` + strconv.FormatInt(first+int64(n), 10) + ` WHERE key = 'last_token'`,
		`UPDATE meta SET value = ` + strconv.Itoa(n) + ` WHERE key = 'open_grants'`, // as the writer keeps it
		`PRAGMA wal_checkpoint(TRUNCATE)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("seed %d leases: %v", n, err)
		}
	}
}

// seedHeldPostgres writes n held leases (one hour left) into the migrated database at url, as
// acquires would (a grant, the name's row, its acquired event, the last token and event seq),
// with generate_series: going through Acquire would take far longer at a million.
func seedHeldPostgres(t *testing.T, url string, n int) {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	now := time.Now()
	at, first := now.UnixMilli(), now.UnixMicro()-int64(n)-1000
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
		SELECT $1 + i, 'job-' || lpad(i::text, 7, '0'), 'worker-' || (i % 64), sha256(int8send(i)), 3600000, 0, $2::bigint, $2::bigint, $2::bigint + 3600000, ''
		FROM generate_series(0, $3::bigint - 1) i`, []any{first, at, n}},
		{`INSERT INTO names (name, token) SELECT name, token FROM grants`, nil},
		{`INSERT INTO events (seq, type, name, token, holder, at, expires_at, recorded_at, lock_delay_ms)
		SELECT row_number() OVER (ORDER BY token), 'acquired', name, token, holder, acquired_at, expires_at, acquired_at, 0 FROM grants`, nil},
		{`UPDATE tokens SET last = $1`, []any{first + int64(n)}},
		{`UPDATE event_seq SET last = $1`, []any{n}},
		{`VACUUM ANALYZE`, nil},
		// The seeding's dirty pages written now, not by a checkpoint while the figures are taken.
		{`CHECKPOINT`, nil},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("seed %d leases: %v", n, err)
		}
	}
}

// rssMB reads this process's resident set size.
func rssMB(t *testing.T) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}
