package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/sqlite"
)

// TestWritersMigrationKeepsLastWrite: a resource written before the history of writers existed
// (migration 0009) starts it with its last write.
func TestWritersMigrationKeepsLastWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w1", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.PutResource(ctx, store.ResourceWrite{Name: "db", Token: l.Token, LeaseName: "job", Value: []byte("abc"), ContentType: "text/plain"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Back to the schema before 0009 (and 0010 to 0019, which run again).
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP INDEX grants_open_late`, `DROP INDEX grants_open_newest`,
		`DROP INDEX grants_open_name`, `CREATE INDEX grants_open_name ON grants (name, expires_at) WHERE ended_at IS NULL`,
		`DROP INDEX grants_open_owner`, `CREATE INDEX grants_open_owner ON grants (owner, expires_at) WHERE ended_at IS NULL`,
		`CREATE INDEX grants_name ON grants (name, token)`,
		`CREATE INDEX events_name ON events (name, seq)`, `DELETE FROM meta WHERE key = 'events_indexed'`, `DROP TABLE events_by_name`, `DELETE FROM meta WHERE key = 'open_grants'`, `CREATE INDEX events_recorded ON events (recorded_at)`,
		`ALTER TABLE resources DROP COLUMN writers`, `DROP INDEX grants_ended`, `DROP INDEX names_token`, `DROP INDEX grants_session`, `DROP INDEX lease_sessions_owner_open`, `DROP INDEX resources_owner`, `ALTER TABLE resources DROP COLUMN owner`, `ALTER TABLE grants DROP COLUMN shared`, `ALTER TABLE semaphores DROP COLUMN shared`, `CREATE INDEX grants_open_session ON grants (session) WHERE ended_at IS NULL AND session <> ''`, `DROP INDEX resources_grant`, `ALTER TABLE resources DROP COLUMN grant_name`, `ALTER TABLE keys DROP COLUMN last_used`, `ALTER TABLE rejections DROP COLUMN key_id`, `DELETE FROM goose_db_version WHERE version_id >= 9`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.ResourceWriters(ctx, "db")
	want := lease.Write{Version: 1, Token: l.Token, Lease: "job", Holder: "w1", At: r.UpdatedAt, Size: 3, ContentType: "text/plain"}
	if err != nil || len(got) != 1 || got[0] != want {
		t.Errorf("ResourceWriters() after the migration = %+v, %v; want [%+v]", got, err, want)
	}
}
