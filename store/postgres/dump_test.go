package postgres_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// TestRestoreOldDump: a pg_dump taken while serving, restored after more grants were made,
// still issues tokens above every token issued before the restore (the token follows the
// database's clock), and refuses a fenced write carrying a token the dump never saw.
func TestRestoreOldDump(t *testing.T) {
	url := srv.NewDatabase(t)
	bin := pgBin(t)
	ctx := context.Background()
	s := open(t, url, nil, postgres.Options{})
	a, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), "leasekeeper.dump")
	if out, err := exec.Command(filepath.Join(bin, "pg_dump"), "--format=custom", "--file", dump, url).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, out)
	}
	if err := s.Release(ctx, "job", a.ID); err != nil {
		t.Fatal(err)
	}
	b, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w2", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	restored := srv.NewDatabase(t)
	if out, err := exec.Command(filepath.Join(bin, "pg_restore"), "--no-owner", "--dbname", restored, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v: %s", err, out)
	}
	r := open(t, restored, nil, postgres.Options{})
	// The dump still has w1 holding job: the restored database knows nothing of b.
	if _, err := r.PutResource(ctx, store.ResourceWrite{Name: "db", Token: b.Token, Value: []byte("v")}); !lease.IsCode(err, lease.CodeNotIssued) {
		t.Errorf("PutResource(token issued after the dump) = %v, want token_not_issued", err)
	}
	c, err := r.Acquire(ctx, store.AcquireParams{Name: "other", Holder: "w3", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if c.Token <= b.Token {
		t.Errorf("token after restoring the old dump = %d, want > %d, the last issued before the restore", c.Token, b.Token)
	}
}
