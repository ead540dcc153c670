package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// modes records, for each statement the store sends outside batches, the exec mode it asked
// for (pgx takes a QueryExecMode as the first argument).
type modes struct {
	mu  sync.Mutex
	got map[string][]pgx.QueryExecMode
}

func (m *modes) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	mode := pgx.QueryExecModeCacheStatement // the pool's default
	if len(d.Args) > 0 {
		if a, ok := d.Args[0].(pgx.QueryExecMode); ok {
			mode = a
		}
	}
	m.mu.Lock()
	m.got[d.SQL] = append(m.got[d.SQL], mode)
	m.mu.Unlock()
	return ctx
}

func (m *modes) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestOverviewPlannedForItsArguments: the overview's statements (Held's count and page, the
// held count of a prefix, the triage summary) run unprepared, so that PostgreSQL plans each for
// its arguments: a prepared statement's generic plan, which it picks after five runs, read
// every grant of a million for a range it did not know.
func TestOverviewPlannedForItsArguments(t *testing.T) {
	m := &modes{got: map[string][]pgx.QueryExecMode{}}
	s := open(t, srv.NewDatabase(t), nil, postgres.WithTracer(postgres.Options{}, m))
	ctx := context.Background()
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "job-1", Holder: "w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	clear(m.got)
	m.mu.Unlock()
	for range 7 { // past the five runs after which a prepared statement may go generic
		for _, f := range []store.HeldFilter{{}, {Prefix: "job-"}, {Contains: "ob-", Order: store.OrderExpiry}, {State: store.HeldLate}} {
			f.Limit = 50
			if _, err := s.Held(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.HeldCount(ctx, "job-"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Triage(ctx, "job-", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for sql, got := range m.got {
		if !strings.Contains(sql, "grants") {
			continue
		}
		n++
		for _, mode := range got {
			if mode != pgx.QueryExecModeExec {
				t.Errorf("sent as %v, want unprepared (exec): %.120s", mode, strings.Join(strings.Fields(sql), " "))
				break
			}
		}
	}
	if n == 0 {
		t.Fatal("no statement of the overview was seen")
	}
}
