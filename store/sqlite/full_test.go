package sqlite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/logtest"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// openCapped opens a database capped at 64 pages of 4 KiB, holding the lease "job", on a fake
// clock. The background checkpoint runs every millisecond, so that the checkpoint after a
// failed write meets it as on a busy machine (and must not give up, finding it busy).
func openCapped(t *testing.T, log *slog.Logger) (*sqlite.Store, *lease.FakeClock, string, lease.Lease) {
	t.Helper()
	clock := lease.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{Clock: clock, MaxPageCount: 64, Logger: log, CheckpointEvery: time.Millisecond})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	l, err := s.Acquire(context.Background(), store.AcquireParams{Name: "job", Holder: "w1", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s, clock, path, l
}

// TestDiskFull fills the database to its page cap, which SQLite answers as it answers a full
// disk (SQLITE_FULL), and checks what the issue asks of a full disk: writes are unavailable (and
// leave nothing half-written), the store is not ready, the WAL is checkpointed, reads work, the
// log says it once and then sums up, and writes work again once space is freed, without a
// restart.
func TestDiskFull(t *testing.T) {
	ctx := context.Background()
	var log logtest.Sink
	s, clock, path, l := openCapped(t, log.Logger())
	put := func(name string, size int) error {
		_, err := s.PutResource(ctx, store.ResourceWrite{Name: name, Token: l.Token, Value: bytes.Repeat([]byte("x"), size), ContentType: "text/plain"})
		return err
	}

	var full error
	written := 0
	for i := 0; full == nil && i < 1000; i++ {
		if full = put(fmt.Sprintf("fill-%d", i), 8<<10); full == nil {
			written++
		}
	}
	if written == 0 || !lease.IsCode(full, lease.CodeUnavailable) {
		t.Fatalf("after %d writes of 8 KiB, PutResource() = %v, want unavailable (disk full)", written, full)
	}
	if err := s.Ping(ctx); !lease.IsCode(err, lease.CodeUnavailable) {
		t.Errorf("Ping() while writes fail = %v, want unavailable", err)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() != 0 {
		t.Errorf("the WAL after a failed write: %v, %v; want checkpointed and truncated to 0 bytes", fi.Size(), err)
	}

	// Small writes fail too, and each fails whole: no grant without its event.
	for i := range 20 {
		name := fmt.Sprintf("small-%d", i)
		if _, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: "w2", TTL: time.Hour}); err == nil {
			continue // it fitted in a page's free space
		} else if !lease.IsCode(err, lease.CodeUnavailable) {
			t.Fatalf("Acquire(%s) on a full database = %v, want unavailable", name, err)
		}
		if st, err := s.Get(ctx, name); !lease.IsCode(err, lease.CodeNotFound) {
			t.Errorf("Get(%s) after its acquire failed = %+v, %v; want not_found, nothing half-written", name, st, err)
		}
	}
	for i := range 20 {
		if err := put(fmt.Sprintf("more-%d", i), 8<<10); !lease.IsCode(err, lease.CodeUnavailable) {
			t.Fatalf("PutResource(more-%d) = %v, want unavailable", i, err)
		}
	}
	if err := s.Ping(ctx); !lease.IsCode(err, lease.CodeUnavailable) {
		t.Errorf("Ping() while writes fail = %v, want unavailable", err)
	}

	// Reads work.
	if r, err := s.GetResource(ctx, "fill-0"); err != nil || len(r.Value) != 8<<10 {
		t.Errorf("GetResource(fill-0) while writes fail = %d bytes, %v", len(r.Value), err)
	}
	if st, err := s.Get(ctx, "job"); err != nil || !st.Held {
		t.Errorf("Get(job) while writes fail = %+v, %v", st, err)
	}

	// One ERROR for the episode, even if small writes fitted between the failures, no
	// summary before its time, then one with the count.
	if n := len(log.Records(t, "ERROR")); n != 1 {
		t.Errorf("ERROR lines after some 40 failed writes = %d, want 1", n)
	}
	if n := len(stillFail(t, &log)); n != 0 {
		t.Errorf("WARN lines of failing writes within 10 s of the first failure = %d, want 0", n)
	}
	clock.Advance(11 * time.Second)
	if err := put("late", 8<<10); !lease.IsCode(err, lease.CodeUnavailable) {
		t.Fatalf("PutResource(late) = %v, want unavailable", err)
	}
	if warns := stillFail(t, &log); len(warns) != 1 || warns[0]["failures"] == nil {
		t.Errorf("WARN lines 11 s after the first failure = %v, want one summary with a count", warns)
	}

	// Freeing space is a write that needs none; after it, writes work again.
	clock.Advance(11 * time.Second)
	for i := range 3 {
		if err := s.DeleteResource(ctx, fmt.Sprintf("fill-%d", i), "test"); err != nil {
			t.Fatalf("DeleteResource(fill-%d) on a full database = %v, want it to free space", i, err)
		}
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping() after a write succeeded = %v, want ready", err)
	}
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "after", Holder: "w3", TTL: time.Hour}); err != nil {
		t.Errorf("Acquire() after space was freed = %v", err)
	}
	if err := put("after", 8<<10); err != nil {
		t.Errorf("PutResource() after space was freed = %v", err)
	}
	// The index of parts, built when the store opens, logs its build at INFO too.
	var infos []map[string]any
	for _, r := range log.Records(t, "INFO") {
		if !strings.Contains(fmt.Sprint(r["msg"]), "index of the parts") {
			infos = append(infos, r)
		}
	}
	if len(infos) != 1 || !strings.Contains(fmt.Sprint(infos[0]["msg"]), "succeed again") {
		t.Errorf("INFO lines = %v, want one saying writes succeed again", infos)
	}
}

// stillFail is the WARN lines that sum up failing writes. Other WARN lines may come on a busy
// machine (a background checkpoint that found readers) and are not what TestDiskFull counts.
func stillFail(t *testing.T, log *logtest.Sink) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range log.Records(t, "WARN") {
		if r["msg"] == "database writes still fail" {
			out = append(out, r)
		}
	}
	return out
}

// TestDiskFullGroupCommit: on a full disk SQLite may roll back a whole transaction in the
// middle of a group commit. Every acquire must then be answered as it ended: one granted is
// there afterwards, one refused (unavailable, never an internal error) left nothing behind.
func TestDiskFullGroupCommit(t *testing.T) {
	ctx := context.Background()
	s, _, _, l := openCapped(t, nil)
	for i := 0; i < 1000; i++ {
		_, err := s.PutResource(ctx, store.ResourceWrite{Name: fmt.Sprintf("fill-%d", i), Token: l.Token, Value: bytes.Repeat([]byte("x"), 2<<10)})
		if err != nil {
			break
		}
	}
	for round := range 5 {
		var wg sync.WaitGroup
		granted := make([]lease.Lease, 64)
		for i := range granted {
			wg.Go(func() {
				g, err := s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("r%d-%d", round, i), Holder: "w", TTL: time.Hour,
					Metadata: json.RawMessage(`{"pad":"` + strings.Repeat("p", 300) + `"}`)})
				if err == nil {
					granted[i] = g
				} else if !lease.IsCode(err, lease.CodeUnavailable) {
					t.Errorf("Acquire() on a full database = %v, want a grant or unavailable", err)
				}
			})
		}
		wg.Wait()
		for i, g := range granted {
			name := fmt.Sprintf("r%d-%d", round, i)
			st, err := s.Get(ctx, name)
			switch {
			case g.Name == "" && !lease.IsCode(err, lease.CodeNotFound):
				t.Errorf("Get(%s) after its acquire failed = %+v, %v; want not_found", name, st, err)
			case g.Name != "" && (err != nil || !st.Held || st.Token != g.Token):
				t.Errorf("Get(%s) after its acquire answered token %d = %+v, %v; want held with that token", name, g.Token, st, err)
			}
		}
		// Free a little, so the next round again mixes writes that fit with writes that fail.
		s.DeleteResource(ctx, fmt.Sprintf("fill-%d", round), "test")
	}
}
