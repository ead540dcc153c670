package dashboard_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/handlers"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// seedLeases writes n held leases straight into a migrated database file, in one transaction:
// going through Acquire would take minutes for the sizes the dashboard must stay fast at.
func seedLeases(b *testing.B, path string, n int, now time.Time) {
	b.Helper()
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{Clock: lease.NewFakeClock(now)})
	if err != nil {
		b.Fatal(err)
	}
	st.Close()
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	g, _ := tx.Prepare(`INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at)
		VALUES (?, ?, 'worker', ?, 3600000, 0, ?, ?, ?)`)
	nm, _ := tx.Prepare(`INSERT INTO names (name, token) VALUES (?, ?)`)
	at := now.UnixMilli()
	for i := range n {
		tok := now.UnixMicro() - int64(n) + int64(i)
		name := fmt.Sprintf("job-%06d", i)
		if _, err := g.Exec(tok, name, lease.HashID(name), at, at, at+3600000); err != nil {
			b.Fatal(err)
		}
		if _, err := nm.Exec(name, tok); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkOverview100k renders the overview's first page, a page deep in the list, a prefix
// search, the list sorted by expiry (which reads up to 10,000 leases) and a filtered one, with
// 100,000 held leases.
func BenchmarkOverview100k(b *testing.B) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(b.TempDir(), "big.db")
	seedLeases(b, path, 100_000, now)
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{Clock: lease.NewFakeClock(now)})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	h, err := handlers.New(handlers.Config{Store: st, Clock: st.Clock(), Limits: lease.DefaultLimits(),
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Spec: leasekeeper.OpenAPI(),
		Auth: handlers.AuthConfig{Off: true}}) // what is measured is the page, not the key check
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	// An opaque cursor deep in the list: the one after job-090000.
	deep := fmt.Sprintf("/?cursor=%s", "am9iLTA5MDAwMA")
	for _, p := range []struct{ name, path string }{{"FirstPage", "/"}, {"DeepPage", deep}, {"Prefix", "/?prefix=job-05"},
		{"SortedByExpiry", "/?sort=expiry"}, {"FilteredByName", "/?prefix=job-05&q=55"}} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := http.Get(srv.URL + p.path)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET %s = %d", p.path, resp.StatusCode)
				}
			}
		})
	}
}
