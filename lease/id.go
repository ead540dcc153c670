package lease

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"time"
)

// IDPrefix starts every lease ID, so a leaked one is easy to recognise in logs and scanners.
const IDPrefix = "lk_"

// NewID returns a fresh lease ID for the grant of token: the token, then 192 random bits. The
// token is public (every reader sees it); the random bits are the capability. Carrying the
// token lets a store find the grant of an ID by its token, and keep what it stores of IDs in
// the order grants are made.
func NewID(token int64) string {
	var b [32]byte
	binary.BigEndian.PutUint64(b[:8], uint64(token))
	rand.Read(b[8:]) // never fails (crypto/rand panics instead)
	return IDPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// IDToken returns the token an ID carries. IDs issued before they carried one (192 random
// bits alone) and strings that are no ID carry none.
func IDToken(id string) (token int64, ok bool) {
	enc, found := strings.CutPrefix(id, IDPrefix)
	if !found || base64.RawURLEncoding.DecodedLen(len(enc)) != 32 {
		return 0, false
	}
	var b [32]byte
	if n, err := base64.RawURLEncoding.Decode(b[:], []byte(enc)); err != nil || n != 32 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b[:8])), true
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

// IdempotentID returns the lease ID of the grant of token made under an Idempotency-Key: the
// token, then HMAC-SHA256 of a random per-grant salt keyed by the client's key. The server
// stores only the salt and hashes, so it can answer a retry with the same ID without ever
// storing the ID itself.
func IdempotentID(key string, salt []byte, token int64) string {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 32), uint64(token))
	return IDPrefix + base64.RawURLEncoding.EncodeToString(append(b, idempotentMAC(key, salt)...))
}

// LegacyIdempotentID is IdempotentID as it was before IDs carried their token: a retry of a
// grant made then gets the ID it was given then.
func LegacyIdempotentID(key string, salt []byte) string {
	return IDPrefix + base64.RawURLEncoding.EncodeToString(idempotentMAC(key, salt))
}

// idempotentMAC is the 24 bytes of an idempotent ID that only the client's key can make.
func idempotentMAC(key string, salt []byte) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(salt)
	return m.Sum(nil)[:24]
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

// Idempotent is what a store keeps of an acquire made under an Idempotency-Key (besides the
// key's hash): the name and fingerprint of the request, the salt of its lease ID, the token it
// was granted and when.
type Idempotent struct {
	Name        string
	Fingerprint []byte
	Salt        []byte
	Token       int64
	CreatedAt   time.Time
}

// Remembered reports whether the record still answers retries at now: for ttl after it was made.
func (r Idempotent) Remembered(now time.Time, ttl time.Duration) bool {
	return r.CreatedAt.After(now.Add(-ttl))
}

// CheckRetry refuses a retry that asks for something else than the first request did (another
// name, or another fingerprint). Codes: invalid_request.
func (r Idempotent) CheckRetry(name string, fingerprint []byte) error {
	if name != r.Name || !bytes.Equal(fingerprint, r.Fingerprint) {
		return Errorf(CodeInvalid, "Idempotency-Key was already used for a different request")
	}
	return nil
}

// Replay answers a retry of the request key with the lease it was granted, g, read and settled
// in the retry's transaction: that lease again, with its ID, while it is held. isID tells
// whether an ID is the one the store keeps (a hash of) for g. Codes: lease_lost when it has
// ended (ended says how).
func (r Idempotent) Replay(key string, g Lease, held bool, ended string, isID func(id string) bool) (Lease, error) {
	if !held {
		return Lease{}, Errorf(CodeLost, "the lease granted to this Idempotency-Key (token %d) has %s", r.Token, ended)
	}
	g.ID = IdempotentID(key, r.Salt, r.Token)
	if !isID(g.ID) {
		g.ID = LegacyIdempotentID(key, r.Salt) // granted before IDs carried their token
	}
	return g, nil
}
