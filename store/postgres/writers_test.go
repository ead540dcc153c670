package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// TestWritersMigrationKeepsLastWrite: a resource written before the history of writers existed
// (migration 0008) starts it with its last write.
func TestWritersMigrationKeepsLastWrite(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s, err := postgres.Open(ctx, url, postgres.Options{})
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
	// Back to the schema before 0008 (and 0009 to 0019, which run again).
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`ALTER TABLE resources DROP COLUMN writers`, `DROP INDEX grants_ended`, `DROP INDEX names_token`, `DROP INDEX grants_session`,
		`DROP INDEX lease_sessions_owner_open`, `DROP INDEX grants_open_newest`,
		`DROP INDEX resources_owner`, `ALTER TABLE resources DROP COLUMN owner`, `ALTER TABLE waiters DROP COLUMN multi`,
		`ALTER TABLE grants DROP COLUMN shared`, `ALTER TABLE semaphores DROP COLUMN shared`,
		`DROP TABLE open_due`, `ALTER TABLE grants RESET (fillfactor)`, `DROP INDEX grants_open_name`, `DROP INDEX grants_open_owner`,
		`CREATE INDEX grants_open_name ON grants (name, expires_at) WHERE ended_at IS NULL`, `CREATE INDEX grants_open_owner ON grants (owner, expires_at) WHERE ended_at IS NULL`,
		`CREATE INDEX grants_open ON grants (expires_at) WHERE ended_at IS NULL`, `CREATE INDEX grants_open_session ON grants (session) WHERE ended_at IS NULL AND session <> ''`,
		`DROP INDEX resources_grant`, `ALTER TABLE resources DROP COLUMN grant_name`, `ALTER TABLE keys DROP COLUMN last_used`, `ALTER TABLE rejections DROP COLUMN key_id`,
		`DROP INDEX events_slots`,
		`DROP TRIGGER grants_open_inserted ON grants`, `DROP TRIGGER grants_open_updated ON grants`, `DROP TRIGGER grants_open_deleted ON grants`,
		`DROP FUNCTION open_grants_changed()`, `DROP TABLE open_grants_delta`, `DROP TABLE open_grants`,
		`DROP TABLE open_text`, `DELETE FROM goose_db_version WHERE version_id >= 8`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close(ctx)
	s = open(t, url, nil, postgres.Options{})
	got, err := s.ResourceWriters(ctx, "db")
	want := lease.Write{Version: 1, Token: l.Token, Lease: "job", Holder: "w1", At: r.UpdatedAt, Size: 3, ContentType: "text/plain"}
	if err != nil || len(got) != 1 || got[0] != want {
		t.Errorf("ResourceWriters() after the migration = %+v, %v; want [%+v]", got, err, want)
	}
}
