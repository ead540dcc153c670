package lease

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
)

// IDPrefix starts every lease ID, so a leaked one is easy to recognise in logs and scanners.
const IDPrefix = "lk_"

// NewID returns a fresh lease ID: 192 random bits.
func NewID() string {
	var b [24]byte
	rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return IDPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// EpochPrefix starts every server epoch.
const EpochPrefix = "ep_"

// NewEpoch returns a fresh server epoch: 64 random bits that name one start of a server
// process, so that a holder can tell that the server answering it has restarted.
func NewEpoch() string {
	var b [8]byte
	rand.Read(b[:])
	return EpochPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// NewSalt returns 16 random bytes.
func NewSalt() []byte {
	b := make([]byte, 16)
	rand.Read(b)
	return b
}

// IdempotentID returns the lease ID of a grant made under an Idempotency-Key: HMAC-SHA256 of a
// random per-grant salt keyed by the client's key. The server stores only the salt and hashes,
// so it can answer a retry with the same ID without ever storing the ID itself.
func IdempotentID(key string, salt []byte) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(salt)
	return IDPrefix + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:24])
}

// HashID returns the SHA-256 of a lease ID or idempotency key: what stores keep.
func HashID(id string) []byte {
	// Copied into a buffer on the stack, which fits lease IDs and most keys: []byte(id)
	// takes an allocation for anything longer than 32 bytes, as lease IDs are.
	var buf [64]byte
	h := sha256.Sum256(append(buf[:0], id...))
	return h[:]
}

// SameHash compares two hashes in constant time.
func SameHash(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }
