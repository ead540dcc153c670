package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

func (e *env) createKey(label string, role auth.Role, prefixes ...string) (auth.Key, string) {
	e.t.Helper()
	secret := auth.NewSecret()
	k := auth.Key{ID: auth.NewKeyID(), Label: label, Role: role, Prefixes: prefixes, CreatedBy: "root (key_root)"}
	created, err := e.s.CreateKey(e.ctx, k, auth.Hash(secret), false)
	if err != nil || !created {
		e.t.Fatalf("CreateKey(%q) = %v, %v; want created", label, created, err)
	}
	return k, secret
}

func testKeys(t *testing.T, e *env) {
	k, secret := e.createKey("billing workers", auth.Writer, "billing-", "jobs:")
	got, err := e.s.KeyByHash(e.ctx, auth.Hash(secret))
	if err != nil {
		t.Fatalf("KeyByHash() = %v", err)
	}
	want := k
	want.CreatedAt = t0
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("KeyByHash() differs (-want +got):\n%s", diff)
	}
	wantCode(t, "KeyByHash(unknown)", func() error { _, err := e.s.KeyByHash(e.ctx, auth.Hash("nope")); return err }(), lease.CodeNotFound)

	_, err = e.s.CreateKey(e.ctx, auth.Key{ID: k.ID, Label: "dup", Role: auth.Reader}, auth.Hash(auth.NewSecret()), false)
	wantCode(t, "CreateKey(same id)", err, lease.CodeInvalid)

	e.clock.Advance(time.Second)
	r, err := e.s.RevokeKey(e.ctx, k.ID, "root (key_root)")
	if err != nil || !r.Revoked() || r.RevokedBy != "root (key_root)" {
		t.Fatalf("RevokeKey() = %+v, %v; want revoked by root", r, err)
	}
	got, err = e.s.KeyByHash(e.ctx, auth.Hash(secret))
	if err != nil || !got.Revoked() || !got.RevokedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("KeyByHash(revoked) = %+v, %v; want revoked at %v", got, err, t0.Add(time.Second))
	}
	if _, err := e.s.RevokeKey(e.ctx, k.ID, "again"); err != nil {
		t.Errorf("RevokeKey(revoked) = %v, want nil", err)
	}
	_, err = e.s.RevokeKey(e.ctx, "key_missing", "root")
	wantCode(t, "RevokeKey(unknown)", err, lease.CodeNotFound)

	keys, err := e.s.Keys(e.ctx)
	if err != nil || len(keys) != 1 || keys[0].ID != k.ID || keys[0].RevokedBy != "root (key_root)" {
		t.Errorf("Keys() = %+v, %v; want the one revoked key", keys, err)
	}
	// Creation and revocation are audited on the event history, naming who did it.
	p, err := e.s.Events(e.ctx, store.EventFilter{Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var audit []string
	for _, ev := range p.Items {
		audit = append(audit, string(ev.Type)+" by "+ev.Actor)
	}
	if diff := cmp.Diff([]string{"key_created by root (key_root)", "key_revoked by root (key_root)"}, audit); diff != "" {
		t.Errorf("audit events differ (-want +got):\n%s", diff)
	}
}

func testKeyBootstrap(t *testing.T, e *env) {
	first := auth.Key{ID: auth.NewKeyID(), Label: "bootstrap admin", Role: auth.Admin}
	created, err := e.s.CreateKey(e.ctx, first, auth.Hash(auth.NewSecret()), true)
	if err != nil || !created {
		t.Fatalf("CreateKey(onlyIfNone, empty) = %v, %v; want created", created, err)
	}
	created, err = e.s.CreateKey(e.ctx, auth.Key{ID: auth.NewKeyID(), Label: "second", Role: auth.Admin}, auth.Hash(auth.NewSecret()), true)
	if err != nil || created {
		t.Fatalf("CreateKey(onlyIfNone, one key) = %v, %v; want not created", created, err)
	}
	// Keys survive a restart.
	e.restart()
	keys, err := e.s.Keys(e.ctx)
	if err != nil || len(keys) != 1 || keys[0].ID != first.ID {
		t.Errorf("Keys() after restart = %+v, %v; want the bootstrap key alone", keys, err)
	}
}

// testLastAdmin: the last unrevoked admin key cannot be revoked (every operator would be locked
// out), decided in the revocation's own transaction.
func testLastAdmin(t *testing.T, e *env) {
	a, _ := e.createKey("admin a", auth.Admin)
	b, _ := e.createKey("admin b", auth.Admin)
	r, _ := e.createKey("reader", auth.Reader)
	if _, err := e.s.RevokeKey(e.ctx, r.ID, "a"); err != nil {
		t.Fatalf("RevokeKey(reader) = %v", err)
	}
	if _, err := e.s.RevokeKey(e.ctx, a.ID, "b"); err != nil {
		t.Fatalf("RevokeKey(one of two admins) = %v", err)
	}
	_, err := e.s.RevokeKey(e.ctx, b.ID, "b")
	wantCode(t, "RevokeKey(the last admin)", err, lease.CodeInvalid)
	// Two admins revoking each other at once: exactly one succeeds.
	c, _ := e.createKey("admin c", auth.Admin)
	errs := make(chan error, 2)
	for _, id := range []string{b.ID, c.ID} {
		go func() {
			_, err := e.s.RevokeKey(e.ctx, id, "race")
			errs <- err
		}()
	}
	failed := 0
	for range 2 {
		select {
		case err := <-errs:
			if err != nil {
				wantCode(t, "RevokeKey(racing for the last admin)", err, lease.CodeInvalid)
				failed++
			}
		case <-time.After(10 * time.Second):
			t.Fatal("RevokeKey did not return within 10 s")
		}
	}
	live := 0
	keys, _ := e.s.Keys(e.ctx)
	for _, k := range keys {
		if k.Role == auth.Admin && !k.Revoked() {
			live++
		}
	}
	if failed != 1 || live != 1 {
		t.Errorf("two racing revocations of the last two admins: %d refused, %d admins left; want 1 and 1", failed, live)
	}
}

func testSessions(t *testing.T, e *env) {
	k, _ := e.createKey("ops", auth.Reader)
	h := auth.Hash(auth.NewSessionID())
	if err := e.s.CreateSignIn(e.ctx, h, k.ID, t0.Add(time.Hour), 0); err != nil {
		t.Fatalf("CreateSignIn() = %v", err)
	}
	ses, err := e.s.SignIn(e.ctx, h)
	if err != nil || ses.Key.ID != k.ID || !ses.LastSeen.Equal(t0) || !ses.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("SignIn() = %+v, %v; want key %s seen at %v", ses, err, k.ID, t0)
	}
	e.clock.Advance(time.Minute)
	if err := e.s.TouchSignIn(e.ctx, h); err != nil {
		t.Fatal(err)
	}
	if ses, _ := e.s.SignIn(e.ctx, h); !ses.LastSeen.Equal(t0.Add(time.Minute)) {
		t.Errorf("SignIn() after touch: last seen %v, want %v", ses.LastSeen, t0.Add(time.Minute))
	}
	// Past its expiry a session is gone, and Prune deletes it.
	e.clock.Advance(time.Hour)
	_, err = e.s.SignIn(e.ctx, h)
	wantCode(t, "SignIn(expired)", err, lease.CodeNotFound)

	// Sign-out and key revocation end sessions at once.
	h2, h3 := auth.Hash(auth.NewSessionID()), auth.Hash(auth.NewSessionID())
	for _, x := range [][]byte{h2, h3} {
		if err := e.s.CreateSignIn(e.ctx, x, k.ID, e.clock.Now().Add(time.Hour), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.s.DeleteSignIn(e.ctx, h2); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.SignIn(e.ctx, h2)
	wantCode(t, "SignIn(signed out)", err, lease.CodeNotFound)
	if _, err := e.s.RevokeKey(e.ctx, k.ID, "root"); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.SignIn(e.ctx, h3)
	wantCode(t, "SignIn(key revoked)", err, lease.CodeNotFound)
	if err := e.s.Prune(e.ctx, store.Retention{}); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(h, h2) {
		t.Fatal("session hashes collide")
	}
}

func testMaxHeld(t *testing.T, e *env) {
	p := store.AcquireParams{Holder: "w", TTL: time.Minute, Owner: "key_a", MaxHeld: 2}
	for _, n := range []string{"a1", "a2"} {
		p.Name = n
		if _, err := e.s.Acquire(e.ctx, p); err != nil {
			t.Fatalf("Acquire(%q) = %v", n, err)
		}
	}
	p.Name = "a3"
	_, err := e.s.Acquire(e.ctx, p)
	wantCode(t, "Acquire(third lease of a key capped at 2)", err, lease.CodeTooManyLeases)
	// Another key is not affected; an expired lease no longer counts.
	if _, err := e.s.Acquire(e.ctx, store.AcquireParams{Name: "b1", Holder: "w", TTL: time.Minute, Owner: "key_b", MaxHeld: 2}); err != nil {
		t.Fatalf("Acquire(other key) = %v", err)
	}
	e.clock.Advance(2 * time.Minute)
	if _, err := e.s.Acquire(e.ctx, p); err != nil {
		t.Fatalf("Acquire(a3) after the key's leases expired = %v", err)
	}
}

func testRevokeActor(t *testing.T, e *env) {
	e.acquire("job", "w", time.Minute)
	if err := e.s.Revoke(e.ctx, "job", 0, "ops (key_123)"); err != nil {
		t.Fatal(err)
	}
	evs := e.events("job")
	if last := evs[len(evs)-1]; last.Type != lease.EventRevoked || last.Actor != "ops (key_123)" {
		t.Errorf("last event = %s by %q, want revoked by %q", last.Type, last.Actor, "ops (key_123)")
	}
	if evs[0].Actor != "" {
		t.Errorf("acquired event actor = %q, want none", evs[0].Actor)
	}
}

func testMaxOpenSessions(t *testing.T, e *env) {
	p := store.SessionParams{Holder: "w", TTL: time.Minute, Owner: "key_a", MaxOpen: 2}
	open := func(what string, p store.SessionParams) lease.Session {
		t.Helper()
		ss, err := e.s.OpenSession(e.ctx, p)
		if err != nil {
			t.Fatalf("OpenSession(%s) = %v", what, err)
		}
		return ss
	}
	first := open("first", p)
	open("second", p)
	_, err := e.s.OpenSession(e.ctx, p)
	wantCode(t, "OpenSession(third session of a key capped at 2)", err, lease.CodeTooManySessions)
	// Another key is not affected; a closed session, and then expired ones, no longer count.
	open("other key", store.SessionParams{Holder: "w", TTL: time.Minute, Owner: "key_b", MaxOpen: 2})
	if _, err := e.s.CloseSession(e.ctx, first.ID, "key_a"); err != nil {
		t.Fatalf("CloseSession(first) = %v", err)
	}
	open("third, after the first closed", p)
	_, err = e.s.OpenSession(e.ctx, p)
	wantCode(t, "OpenSession(again at the cap)", err, lease.CodeTooManySessions)
	e.clock.Advance(2 * time.Minute)
	open("after the key's sessions expired", p)
}

// testSessionsKept checks the cap on one key's dashboard sessions: a new session ends the
// key's oldest past keep, in the same transaction, and no other key's.
func testSessionsKept(t *testing.T, e *env) {
	k, _ := e.createKey("ops", auth.Reader)
	other, _ := e.createKey("other", auth.Reader)
	oh := auth.Hash(auth.NewSessionID())
	if err := e.s.CreateSignIn(e.ctx, oh, other.ID, e.clock.Now().Add(time.Hour), 1); err != nil {
		t.Fatal(err)
	}
	var hs [][]byte
	for range 5 {
		e.clock.Advance(time.Second)
		h := auth.Hash(auth.NewSessionID())
		if err := e.s.CreateSignIn(e.ctx, h, k.ID, e.clock.Now().Add(time.Hour), 3); err != nil {
			t.Fatalf("CreateSignIn() = %v", err)
		}
		hs = append(hs, h)
	}
	// Which of two sessions of one millisecond is older is not known (the database's clock
	// may be the one in use): count them, and the newest must be among them.
	live := 0
	for _, h := range hs {
		if _, err := e.s.SignIn(e.ctx, h); err == nil {
			live++
		}
	}
	if _, err := e.s.SignIn(e.ctx, hs[len(hs)-1]); live != 3 || err != nil {
		t.Errorf("5 sessions with keep 3: %d live, the newest %v; want 3, the newest among them", live, err)
	}
	if _, err := e.s.SignIn(e.ctx, oh); err != nil {
		t.Errorf("another key's session ended: %v", err)
	}
	// keep 1 leaves the new session alone, even on the same millisecond as the others.
	h := auth.Hash(auth.NewSessionID())
	if err := e.s.CreateSignIn(e.ctx, h, k.ID, e.clock.Now().Add(time.Hour), 1); err != nil {
		t.Fatal(err)
	}
	for i, x := range append(hs, h) {
		_, err := e.s.SignIn(e.ctx, x)
		if live := err == nil; live != (i == len(hs)) {
			t.Errorf("after keep 1, session %d: live = %v, want %v", i+1, live, i == len(hs))
		}
	}
}
