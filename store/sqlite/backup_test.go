package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

func TestBackupWhileOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path, out := filepath.Join(dir, "live.db"), filepath.Join(dir, "backup.db")
	clock := lease.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(ctx, path, sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	first, err := st.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlite.Backup(ctx, path, out); err != nil {
		t.Fatalf("Backup() = %v", err)
	}
	if err := sqlite.Backup(ctx, path, out); err == nil {
		t.Error("Backup() over an existing file = nil, want an error")
	}
	// Later grants on the live database, then the backup is restored and served.
	clock.Advance(time.Hour)
	later, err := st.Acquire(ctx, store.AcquireParams{Name: "other", Holder: "w2", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	restored, err := sqlite.Open(ctx, out, sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatalf("Open(backup) = %v", err)
	}
	defer restored.Close()
	got, err := restored.Get(ctx, "job")
	if err != nil || got.Token != first.Token {
		t.Errorf("Get(job) from the backup = %+v, %v; want token %d", got, err, first.Token)
	}
	if _, err := restored.Get(ctx, "other"); !lease.IsCode(err, lease.CodeNotFound) {
		t.Errorf("Get(other) from the backup = %v, want not_found: it was granted after the backup", err)
	}
	next, err := restored.Acquire(ctx, store.AcquireParams{Name: "third", Holder: "w3", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if next.Token <= later.Token {
		t.Errorf("token from the restored backup %d, want > %d (issued after the backup)", next.Token, later.Token)
	}
}
