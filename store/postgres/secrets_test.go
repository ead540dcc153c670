package postgres_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/store"
	"github.com/leasekeeper/leasekeeper/store/postgres"
)

// TestNoSecretsStored (invariant 8): a dump of the whole database holds no lease ID, no
// idempotency key and no API key or session secret in plain text, only their hashes.
func TestNoSecretsStored(t *testing.T) {
	url := srv.NewDatabase(t)
	bin := pgBin(t)
	s := open(t, url, nil, postgres.Options{})
	ctx := context.Background()
	plain, err := s.Acquire(ctx, store.AcquireParams{Name: "a", Holder: "w", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	idem := "idem-key-0123456789-secret"
	replayed, err := s.Acquire(ctx, store.AcquireParams{Name: "b", Holder: "w", TTL: time.Minute, IdempotencyKey: idem})
	if err != nil {
		t.Fatal(err)
	}
	keySecret, sessionSecret := auth.NewSecret(), auth.NewSecret()
	k := auth.Key{ID: auth.NewKeyID(), Label: "k", Role: auth.Admin}
	if _, err := s.CreateKey(ctx, k, auth.Hash(keySecret), false); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSignIn(ctx, auth.Hash(sessionSecret), k.ID, time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	held, err := s.OpenSession(ctx, store.SessionParams{Holder: "w", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(bin, "pg_dump"), "--format=plain", "--data-only", url).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	if !bytes.Contains(out, []byte(k.ID)) {
		t.Fatalf("the dump does not hold key id %s: not a dump of this database", k.ID)
	}
	for what, secret := range map[string]string{"lease ID": plain.ID, "idempotent lease ID": replayed.ID,
		"idempotency key": idem, "API key": keySecret, "session": sessionSecret, "lease session ID": held.ID} {
		// bytea columns are dumped in hex.
		if bytes.Contains(out, []byte(secret)) || bytes.Contains(out, []byte(hex.EncodeToString([]byte(secret)))) {
			t.Errorf("the database holds a %s in plain text", what)
		}
	}
}
