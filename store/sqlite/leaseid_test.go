package sqlite

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// lostFound fails unless err is lease_lost naming how the grant ended: the store found the
// grant of the ID (by its key) rather than answering that no grant has it.
func lostFound(t *testing.T, what string, err error) {
	t.Helper()
	if lease.ErrorCode(err) != lease.CodeLost || strings.Contains(err.Error(), "unknown") {
		t.Errorf("%s: %v; want lease_lost saying how the grant ended", what, err)
	}
}

// TestLeaseIDsByKey: new IDs carry their token and are kept as token-then-hash keys; IDs
// issued before (192 random bits, kept as their hash) still renew, release and replay after a
// restart; a stale ID of either kind is found and refused as lost, not as unknown.
func TestLeaseIDsByKey(t *testing.T) {
	ctx := context.Background()
	clock := lease.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	open := func() *Store {
		s, err := Open(ctx, path, Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	job, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if token, ok := lease.IDToken(job.ID); !ok || token != job.Token {
		t.Fatalf("IDToken(%q) = %d, %v; want the grant's token %d", job.ID, token, ok, job.Token)
	}
	var key []byte
	if err := s.r.QueryRow(`SELECT id_hash FROM grants WHERE token = ?`, job.Token).Scan(&key); err != nil {
		t.Fatal(err)
	}
	if want := idKey(job.ID); len(key) != 40 || !lease.SameHash(key, want) {
		t.Fatalf("id_hash = %x, want the token then the ID's hash %x", key, want)
	}
	var raw24 [24]byte
	for _, id := range []string{job.ID, lease.IDPrefix + base64.RawURLEncoding.EncodeToString(raw24[:])} {
		if !lease.SameHash(hashOf(idKey(id)), lease.HashID(id)) {
			t.Errorf("hashOf(idKey(%q)) = %x, want the ID's whole SHA-256", id, hashOf(idKey(id)))
		}
	}
	idem := store.AcquireParams{Name: "idem", Holder: "w", TTL: time.Minute, IdempotencyKey: "key-1"}
	first, err := s.Acquire(ctx, idem)
	if err != nil {
		t.Fatal(err)
	}

	// Both grants as they would have been made before IDs carried their token.
	var raw [24]byte
	rand.Read(raw[:])
	legacy := lease.IDPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	var salt []byte
	if err := s.r.QueryRow(`SELECT salt FROM idempotency`).Scan(&salt); err != nil {
		t.Fatal(err)
	}
	legacyIdem := lease.LegacyIdempotentID("key-1", salt)
	for token, id := range map[int64]string{job.Token: legacy, first.Token: legacyIdem} {
		if _, err := s.w.Exec(`UPDATE grants SET id_hash = ? WHERE token = ?`, lease.HashID(id), token); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = open()
	defer func() { s.Close() }()

	if _, err := s.Renew(ctx, "job", legacy, 0, nil); err != nil {
		t.Fatalf("renew with the ID issued before the upgrade: %v", err)
	}
	if _, err := s.Renew(ctx, "job", job.ID, 0, nil); lease.ErrorCode(err) != lease.CodeLost {
		t.Errorf("renew with an ID that is not the grant's: %v; want lease_lost", err)
	}
	again, err := s.Acquire(ctx, idem)
	if err != nil || again.ID != legacyIdem || again.Token != first.Token {
		t.Fatalf("replayed acquire = %q token %d, %v; want the ID issued before the upgrade %q, token %d", again.ID, again.Token, err, legacyIdem, first.Token)
	}
	if _, err := s.Renew(ctx, "idem", again.ID, 0, nil); err != nil {
		t.Errorf("renew with the replayed ID: %v", err)
	}

	// Stale IDs of either kind: the name has a newer grant, so the writer's memory does not
	// know them, and the store finds their grants by key.
	if err := s.Release(ctx, "job", legacy); err != nil {
		t.Fatal(err)
	}
	next, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w2", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "job", next.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: "w3", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Renew(ctx, "job", legacy, 0, nil)
	lostFound(t, "renew with a stale ID issued before the upgrade", err)
	_, err = s.Renew(ctx, "job", next.ID, 0, nil)
	lostFound(t, "renew with a stale ID", err)
	forged := lease.NewID(next.Token)
	if _, err := s.Renew(ctx, "job", forged, 0, nil); lease.ErrorCode(err) != lease.CodeLost || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("renew with a made-up ID carrying a real token: %v; want lease_lost, unknown", err)
	}
}
