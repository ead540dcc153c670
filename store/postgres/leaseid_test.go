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

// TestLegacyIdempotentReplay: a grant made under an Idempotency-Key before lease IDs carried
// their token is replayed with the ID it was given then, which still renews it.
func TestLegacyIdempotentReplay(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	s := open(t, url, nil, postgres.Options{})
	p := store.AcquireParams{Name: "job", Holder: "w", TTL: time.Minute, IdempotencyKey: "key-1"}
	first, err := s.Acquire(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if token, ok := lease.IDToken(first.ID); !ok || token != first.Token {
		t.Fatalf("IDToken(%q) = %d, %v; want the grant's token %d", first.ID, token, ok, first.Token)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var salt []byte
	if err := conn.QueryRow(ctx, `SELECT salt FROM idempotency`).Scan(&salt); err != nil {
		t.Fatal(err)
	}
	legacy := lease.LegacyIdempotentID("key-1", salt)
	if _, err := conn.Exec(ctx, `UPDATE grants SET id_hash = $1 WHERE token = $2`, lease.HashID(legacy), first.Token); err != nil {
		t.Fatal(err)
	}
	again, err := s.Acquire(ctx, p)
	if err != nil || again.ID != legacy || again.Token != first.Token {
		t.Fatalf("replayed acquire = %q token %d, %v; want %q token %d", again.ID, again.Token, err, legacy, first.Token)
	}
	if _, err := s.Renew(ctx, "job", again.ID, 0, nil); err != nil {
		t.Errorf("renew with the replayed ID: %v", err)
	}
}
