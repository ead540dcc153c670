package postgres_test

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// fastStatements sorts the statements of the batches' fast paths out of the pipelines a
// batchSQL saw: those of each pipeline that begins a batch's transaction (the locks and reads),
// and with them the writes sent before the plan mode is set back (see fast.go).
func fastStatements(batches [][]string) (reads, all map[string]bool) {
	reads, all = map[string]bool{}, map[string]bool{}
	for _, qs := range batches {
		lockPipeline := len(qs) > 0 && strings.HasPrefix(qs[0], "BEGIN ISOLATION LEVEL")
		reset := slices.IndexFunc(qs, func(q string) bool { return strings.Contains(q, "plan_cache_mode = DEFAULT") })
		for i, q := range qs {
			if strings.HasPrefix(q, "BEGIN") || strings.Contains(q, "plan_cache_mode") {
				continue
			}
			if lockPipeline {
				reads[q] = true
			}
			if lockPipeline || i < reset {
				all[q] = true
			}
		}
	}
	return reads, all
}

// TestFastPathPlannedOnce: the fast path's statements run with one plan each, made once for
// any arguments, and at 50,000 grants, names and resources those plans read them by index.
// Left to choose, PostgreSQL planned the batch's read of its grants for its arguments at
// every batch: a third of its CPU at one operation a batch.
func TestFastPathPlannedOnce(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	rec := new(batchSQL)
	// A pool of one connection, so that the statements' plans are counted where they ran.
	s := open(t, url, nil, postgres.WithTracer(postgres.Options{MaxConns: 1}, rec))
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	now := time.Now().UnixMilli()
	for _, seed := range []string{
		`INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
			SELECT i, 'seed-' || i, 'w', sha256(int8send(i)), 3600000, 0, $1, $1, $1::bigint + 3600000, '' FROM generate_series(1, 50000) i`,
		`INSERT INTO names (name, token) SELECT 'seed-' || i, i FROM generate_series(1, 50000) i`,
		`INSERT INTO resources (name, fence, version, value, content_type, updated_at)
			SELECT 'seed-' || i, i, 1, '', '', $1 FROM generate_series(1, 50000) i`,
		`ANALYZE grants, names, resources, open_due, open_text`,
	} {
		args := []any{now}
		if !strings.Contains(seed, "$1") {
			args = nil
		}
		if _, err := conn.Exec(ctx, seed, args...); err != nil {
			t.Fatalf("%.60s: %v", seed, err)
		}
	}
	// Each kind of fast operation, each its own batch, past the five runs after which
	// PostgreSQL would choose between the plans.
	for i := range 7 {
		name := "job-" + strconv.Itoa(i)
		l, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: "w", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Renew(ctx, name, l.ID, time.Minute, nil); err != nil {
			t.Fatal(err)
		}
		w := store.ResourceWrite{Name: "res-" + strconv.Itoa(i), Token: l.Token, LeaseName: name, Value: []byte("v"), ContentType: "text/plain"}
		if _, err := s.PutResource(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, name, l.ID); err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	reads, all := fastStatements(rec.batches)
	rec.mu.Unlock()
	if len(reads) < 4 {
		t.Fatalf("saw %d statements of the fast path's reads, want the locks of names, grants, resources and tokens", len(reads))
	}
	plans, err := postgres.PreparedPlans(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for sql := range reads {
		p, ok := plans[sql]
		if !ok {
			t.Errorf("not prepared on the pool's connection: %.100s", oneLine(sql))
		} else if p[1] > 0 {
			t.Errorf("planned for its arguments %d times (and once for any %d times), want never: %.100s", p[1], p[0], oneLine(sql))
		}
	}
	// The plans made once read by index. (Their arguments do not change them: NULLs stand in.)
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	scan := regexp.MustCompile(`Seq Scan on (grants|names|resources|open_due|open_text|events)\b`)
	param := regexp.MustCompile(`\$(\d+)`)
	for sql := range all {
		n := 0
		for _, m := range param.FindAllStringSubmatch(sql, -1) {
			k, _ := strconv.Atoi(m[1])
			n = max(n, k)
		}
		execute := "EXPLAIN EXECUTE fast"
		if n > 0 {
			execute += "(" + strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ") + ")"
		}
		res, err := conn.PgConn().Exec(ctx, "PREPARE fast AS "+sql+"; "+execute+"; DEALLOCATE fast").ReadAll()
		if err != nil {
			t.Fatalf("explain %.100s: %v", oneLine(sql), err)
		}
		var plan []string
		for _, r := range res {
			for _, row := range r.Rows {
				plan = append(plan, string(row[0]))
			}
		}
		if joined := strings.Join(plan, "\n"); scan.MatchString(joined) {
			t.Errorf("the plan made once reads a whole table: %.100s\n%s", oneLine(sql), joined)
		}
	}
}

func oneLine(sql string) string { return strings.Join(strings.Fields(sql), " ") }
