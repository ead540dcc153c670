package lease_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for i := range 1000 {
		token := int64(1796000000000000 + i)
		id := lease.NewID(token)
		if !strings.HasPrefix(id, lease.IDPrefix) || len(id) != len(lease.IDPrefix)+43 {
			t.Fatalf("NewID() = %q, want %q + 43 characters", id, lease.IDPrefix)
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(id, lease.IDPrefix))
		if err != nil || len(raw) != 32 {
			t.Fatalf("NewID() = %q: %d bytes, %v; want 32 (the token, then 192 random bits)", id, len(raw), err)
		}
		if got, ok := lease.IDToken(id); !ok || got != token {
			t.Fatalf("IDToken(NewID(%d)) = %d, %v", token, got, ok)
		}
		if seen[id] || seen[id[len(lease.IDPrefix)+11:]] {
			t.Fatalf("NewID() = %q twice, or its random part", id)
		}
		seen[id], seen[id[len(lease.IDPrefix)+11:]] = true, true
	}
	if a, b := lease.NewID(7), lease.NewID(7); a == b {
		t.Errorf("NewID(7) twice = %q: the same ID", a)
	}
}

// TestIDToken: an ID from before IDs carried their token (192 random bits), and strings that
// are no ID, carry none.
func TestIDToken(t *testing.T) {
	legacy := lease.IDPrefix + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, 24))
	for _, id := range []string{legacy, "", "lk_", "lk_notanid", "xx_" + lease.NewID(5)[3:], lease.NewID(5) + "A",
		lease.NewID(5)[:len(lease.NewID(5))-1], strings.Replace(lease.NewID(5), "lk_", "lk_!", 1)} {
		if token, ok := lease.IDToken(id); ok {
			t.Errorf("IDToken(%q) = %d, true; want none", id, token)
		}
	}
	if token, ok := lease.IDToken(lease.NewID(-3)); !ok || token != -3 {
		t.Errorf("IDToken(NewID(-3)) = %d, %v", token, ok)
	}
}

func TestNewSalt(t *testing.T) {
	a, b := lease.NewSalt(), lease.NewSalt()
	if len(a) != 16 || len(b) != 16 || bytes.Equal(a, b) {
		t.Errorf("NewSalt() = %x, %x; want two different 16-byte salts", a, b)
	}
}

func TestIdempotentID(t *testing.T) {
	salt1, salt2 := []byte("0123456789abcdef"), []byte("fedcba9876543210")
	a := lease.IdempotentID("key-1", salt1, 42)
	if !strings.HasPrefix(a, lease.IDPrefix) || len(a) != len(lease.NewID(42)) {
		t.Errorf("IdempotentID() = %q, want the shape of NewID", a)
	}
	if token, ok := lease.IDToken(a); !ok || token != 42 {
		t.Errorf("IDToken(IdempotentID(token 42)) = %d, %v", token, ok)
	}
	if again := lease.IdempotentID("key-1", append([]byte(nil), salt1...), 42); again != a {
		t.Errorf("IdempotentID(same key, same salt) = %q then %q, want deterministic", a, again)
	}
	legacy := lease.LegacyIdempotentID("key-1", salt1)
	if !strings.HasPrefix(legacy, lease.IDPrefix) || len(legacy) != len(lease.IDPrefix)+32 {
		t.Errorf("LegacyIdempotentID() = %q, want the 32-character IDs of before", legacy)
	}
	if _, ok := lease.IDToken(legacy); ok {
		t.Errorf("IDToken(LegacyIdempotentID()) found a token")
	}
	for what, other := range map[string]string{
		"other salt":          lease.IdempotentID("key-1", salt2, 42),
		"other key":           lease.IdempotentID("key-2", salt1, 42),
		"key as salt swapped": lease.IdempotentID(string(salt1), []byte("key-1"), 42),
		"empty key":           lease.IdempotentID("", salt1, 42),
		"legacy":              legacy,
	} {
		if other == a || other[len(other)-32:] == a[len(a)-32:] {
			t.Errorf("IdempotentID with %s = %q, same as the first (or its secret part)", what, other)
		}
	}
}

func TestHashID(t *testing.T) {
	id := lease.NewID(1)
	h := lease.HashID(id)
	if len(h) != 32 {
		t.Fatalf("HashID() = %d bytes, want 32 (SHA-256)", len(h))
	}
	if !lease.SameHash(h, lease.HashID(id)) {
		t.Errorf("SameHash(HashID(id), HashID(id)) = false")
	}
	if lease.SameHash(h, lease.HashID(id+"x")) || lease.SameHash(h, h[:31]) || lease.SameHash(h, nil) {
		t.Errorf("SameHash() = true for different hashes")
	}
	if bytes.Contains(h, []byte(id)) {
		t.Errorf("HashID() contains the ID itself")
	}
}

// Stores keep HashID's values: it is SHA-256 of the ID's bytes, whatever their length (short
// ones are copied to the stack first, longer ones not).
func TestHashIDIsSHA256(t *testing.T) {
	for n := range 200 {
		id := strings.Repeat("lk_", n/3+1)[:n]
		if got, want := lease.HashID(id), sha256.Sum256([]byte(id)); !bytes.Equal(got, want[:]) {
			t.Errorf("HashID(%d bytes) = %x, want %x", n, got, want)
		}
	}
}

func TestErrorCode(t *testing.T) {
	held := lease.Errorf(lease.CodeHeld, "lease %q is held by %q", "job", "w1")
	tests := []struct {
		name string
		err  error
		want lease.Code
	}{
		{"Nil", nil, ""},
		{"Domain", held, lease.CodeHeld},
		{"Wrapped", fmt.Errorf("acquire: %w", held), lease.CodeHeld},
		{"WrappedTwice", fmt.Errorf("http: %w", fmt.Errorf("store: %w", lease.Errorf(lease.CodeLost, "gone"))), lease.CodeLost},
		{"Joined", errors.Join(io.EOF, lease.Errorf(lease.CodeStale, "old")), lease.CodeStale},
		{"Plain", io.EOF, lease.CodeInternal},
		{"WrappedPlain", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), lease.CodeInternal},
		{"NotWrapped", fmt.Errorf("acquire: %v", held), lease.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lease.ErrorCode(tt.err); got != tt.want {
				t.Errorf("ErrorCode(%v) = %q, want %q", tt.err, got, tt.want)
			}
			if tt.want != "" && !lease.IsCode(tt.err, tt.want) {
				t.Errorf("IsCode(%v, %q) = false", tt.err, tt.want)
			}
			if lease.IsCode(tt.err, lease.CodeNotFound) {
				t.Errorf("IsCode(%v, not_found) = true", tt.err)
			}
		})
	}
	if lease.IsCode(nil, "") {
		t.Errorf("IsCode(nil, \"\") = true, want false")
	}
	if got, want := held.Error(), `lease_held: lease "job" is held by "w1"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var le *lease.Error
	if !errors.As(fmt.Errorf("x: %w", held), &le) || le != held {
		t.Errorf("errors.As did not find the *Error through wrapping")
	}
}

func TestIdempotentReplay(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	r := lease.Idempotent{Name: "a", Fingerprint: []byte{1}, Salt: []byte("salt"), Token: 42, CreatedAt: t0}
	if !r.Remembered(t0.Add(time.Hour-time.Millisecond), time.Hour) || r.Remembered(t0.Add(time.Hour), time.Hour) {
		t.Error("a record is remembered for exactly its ttl")
	}
	if err := r.CheckRetry("a", []byte{1}); err != nil {
		t.Errorf("the same request: %v", err)
	}
	for _, c := range []struct {
		name string
		fp   []byte
	}{{"b", []byte{1}}, {"a", []byte{2}}} {
		if err := r.CheckRetry(c.name, c.fp); !lease.IsCode(err, lease.CodeInvalid) {
			t.Errorf("retry of %q with fingerprint %v: %v, want invalid_request", c.name, c.fp, err)
		}
	}
	want := lease.IdempotentID("key", r.Salt, r.Token)
	l, err := r.Replay("key", lease.Lease{Name: "a", Token: 42}, true, "", func(id string) bool { return id == want })
	if err != nil || l.ID != want {
		t.Errorf("replay of a held grant: %q, %v; want ID %q", l.ID, err, want)
	}
	legacy := lease.LegacyIdempotentID("key", r.Salt)
	if l, _ := r.Replay("key", lease.Lease{Name: "a", Token: 42}, true, "", func(id string) bool { return id == legacy }); l.ID != legacy {
		t.Errorf("replay of a grant made before IDs carried their token: ID %q, want %q", l.ID, legacy)
	}
	if _, err := r.Replay("key", lease.Lease{Name: "a", Token: 42}, false, "expired", func(string) bool { return true }); !lease.IsCode(err, lease.CodeLost) {
		t.Errorf("replay of an ended grant: %v, want lease_lost", err)
	}
}
