package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/internal/testwait"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/parts"
	"github.com/leasekeeper/leasekeeper/store/postgres"
	"github.com/leasekeeper/leasekeeper/store/storetest"
)

// TestPartsCountAsSQL compares the index of parts' count with the count in SQL (the oracle,
// open_text's LIKE) for filters on a part of the name and of the holder, with a prefix and a
// scope, over names and holders with '%', '_', '#', '\' and characters of several bytes, after
// each kind of end between the index's catch-ups: released, revoked, expired and swept, and
// expired not yet recorded; and that Held's total is the count. A filter on a state is left to
// SQL.
func TestPartsCountAsSQL(t *testing.T) {
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	s := open(t, srv.NewDatabase(t), clock, postgres.WithParts(postgres.Options{}, parts.AtOnce, nil))
	ls := storetest.SeedParts(t, s)
	containsParts := []string{"", "job", "team", "a", "_", "x1", "pool", "sem", "#", "o", "-0", ".", "A", "ü"}
	holderParts := []string{"", "w", "_", "%", "%_", "é", "日本", "#", "Oncall", `\`, "-1"}
	prefixes := []string{"", "team-", "job-00", "pool"}
	scopes := [][]string{nil, {"team-a.", "job-001"}}
	counts := map[int]bool{}
	check := func(step string) {
		t.Helper()
		for _, f := range storetest.PartsFilters(containsParts, holderParts, prefixes, scopes) {
			memory, inSQL, counted, err := postgres.PartsCounts(ctx, s, f)
			if err != nil || !counted {
				t.Fatalf("%s: Held(%+v): counted %v, %v; want a count by the index of parts", step, f, counted, err)
			}
			if memory != inSQL {
				t.Errorf("%s: Held(%+v): %d with the index of parts, %d in SQL", step, f, memory, inSQL)
			}
			counts[inSQL] = true
		}
		for _, f := range []store.HeldFilter{{Contains: "job"}, {Holder: "-1", Order: store.OrderNewest}} {
			_, inSQL, _, err := postgres.PartsCounts(ctx, s, f)
			if p, herr := s.Held(ctx, f); err != nil || herr != nil || p.Total != inSQL {
				t.Errorf("%s: Held(%+v).Total = %d, %v; want %d (%v)", step, f, p.Total, herr, inSQL, err)
			}
		}
	}
	check("acquired")
	for _, i := range []int{1, 7} {
		if err := s.Release(ctx, ls[i].Name, ls[i].ID); err != nil {
			t.Fatal(err)
		}
	}
	check("released")
	if err := s.Revoke(ctx, ls[2].Name, 0, "admin"); err != nil {
		t.Fatal(err)
	}
	check("revoked")
	clock.Advance(10 * time.Second)
	check("expired, not recorded")
	storetest.BoundedPages(t, storetest.PartsFilters([]string{"", "job", "a", "sem", "#", "-0", "x1"},
		[]string{"", "w", "-1", "%"}, []string{"", "job-00", "pool"}, [][]string{nil, {"team-a.", "job-001"}}), postgres.BoundPage(s))
	if _, _, err := s.ExpireDue(ctx); err != nil { // team-b.x1 and a-b
		t.Fatal(err)
	}
	check("expired and swept")
	if len(counts) < 5 {
		t.Errorf("the filters gave only the counts %v: the check checks little", counts)
	}
	for _, f := range []store.HeldFilter{{Holder: "w", State: store.HeldLate}} {
		if _, _, counted, err := postgres.PartsCounts(ctx, s, f); err != nil || counted {
			t.Errorf("Held(%+v): counted %v, %v; want it left to SQL", f, counted, err)
		}
	}
}

// statements records the SQL of every statement run on a store's connections.
type statements struct {
	mu  sync.Mutex
	sql []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql = append(s.sql, data.SQL)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements recorded since the last take.
func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sql
	s.sql = nil
	return out
}

// TestHeldReadsThePartsIndex checks that the keeper of the index of parts runs once the store
// is open (the first filter would otherwise count in SQL for the seconds of a build), and that
// Held then counts and lists a part's few matches by their tokens (Among), not through
// open_text's trigram indexes.
func TestHeldReadsThePartsIndex(t *testing.T) {
	ctx := context.Background()
	built := make(chan struct{}, 1)
	trace := new(statements)
	opts := postgres.WithParts(postgres.Options{}, parts.Background, func(k *parts.Keeper) {
		k.OnSwap, k.Every = func() { built <- struct{}{} }, time.Hour
	})
	s := open(t, srv.NewDatabase(t), lease.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)), postgres.WithTracer(opts, trace))
	if !postgres.Parts(s).Keeping() {
		t.Fatal("no keeper runs once the store is open: the first filter would count in SQL")
	}
	testwait.Receive(t, built, time.Minute)
	for _, n := range []string{"a-needle", "b-hay", "c-needle"} {
		if _, err := s.Acquire(ctx, store.AcquireParams{Name: n, Holder: "w", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	trace.take()
	p, err := s.Held(ctx, store.HeldFilter{Contains: "needle", Limit: 10})
	if err != nil || p.Total != 2 || len(p.Items) != 2 || p.Items[0].Name != "a-needle" || p.Items[1].Name != "c-needle" {
		t.Fatalf("Held(needle) = %+v, %v; want a-needle and c-needle", p, err)
	}
	among := false
	for _, q := range trace.take() {
		if strings.Contains(q, "count(*) FROM open_text a") && !strings.Contains(q, "jsonb_array_elements_text") {
			t.Errorf("Held(needle) counted through open_text's trigrams although the index of parts is built:\n%s", q)
		}
		among = among || strings.Contains(q, "jsonb_array_elements_text")
	}
	if !among {
		t.Error("Held(needle) read no grant by the tokens the index of parts listed")
	}
}
