package lease

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Session holds many leases with one keepalive: every lease acquired under it expires when
// the session does, renewing the session renews them all, and closing it releases them all
// in one transaction. ID, the secret that renews, closes and acquires under the session, is
// set only in the answer that opened it; stores keep only its hash. Ref names the session in
// public (events, state): it is derived from the hash and reveals nothing of ID.
type Session struct {
	ID        string
	Ref       string
	Holder    string
	TTL       time.Duration
	Metadata  json.RawMessage
	CreatedAt time.Time
	RenewedAt time.Time
	ExpiresAt time.Time
	ClosedAt  time.Time // zero while open
	Leases    int       // leases held under it now, in answers that say
	Owner     string    // the API key that opened it; only it (or an admin) acts on it
}

// CheckSessionOwner refuses an act on s by the API key by ("" for an admin, or a server
// without keys) unless by opened it: a session's leases may lie outside another key's prefixes.
func CheckSessionOwner(s Session, by string) error {
	if by != "" && s.Owner != by {
		return Errorf(CodeForbidden, "session %s belongs to another API key", s.Ref)
	}
	return nil
}

// SessionIDPrefix starts every session ID; SessionRefPrefix every session's public name.
const (
	SessionIDPrefix  = "lks_"
	SessionRefPrefix = "ses_"
)

// NewSessionID returns a fresh session ID: 192 random bits.
func NewSessionID() string {
	var b [24]byte
	rand.Read(b[:])
	return SessionIDPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// SessionRef returns the public name of the session whose ID hashes to hash (HashID).
func SessionRef(hash []byte) string {
	h := sha256.Sum256(append([]byte("session-ref:"), hash...))
	return SessionRefPrefix + hex.EncodeToString(h[:8])
}

// OpenAt reports whether the session is open and unexpired at now.
func (s Session) OpenAt(now time.Time) bool { return s.ClosedAt.IsZero() && s.ExpiresAt.After(now) }

// sessionLost is the error of an act under a session that has ended.
func sessionLost(s Session, now time.Time) *Error {
	if !s.ClosedAt.IsZero() {
		return Errorf(CodeSessionLost, "session %s was closed at %s", s.Ref, s.ClosedAt.UTC().Format(time.RFC3339Nano))
	}
	return Errorf(CodeSessionLost, "session %s expired at %s", s.Ref, s.ExpiresAt.UTC().Format(time.RFC3339Nano))
}

// DecideSessionRenew decides a renewal of s at now: s extended to now + ttl (0 keeps its ttl),
// or session_lost once it has expired or was closed. Every lease under s moves with it.
func DecideSessionRenew(s Session, ttl time.Duration, now time.Time) (Session, error) {
	if !s.OpenAt(now) {
		return s, sessionLost(s, now)
	}
	if ttl > 0 {
		s.TTL = ttl
	}
	s.RenewedAt, s.ExpiresAt = now, now.Add(s.TTL)
	return s, nil
}

// DecideSessionClose decides a close of s at now: end reports that s closes now, with every
// lease under it released; closing a closed session again changes nothing and is no error;
// an expired one is session_lost (its leases expired with it).
func DecideSessionClose(s Session, now time.Time) (end bool, err error) {
	switch {
	case s.OpenAt(now):
		return true, nil
	case !s.ClosedAt.IsZero():
		return false, nil
	}
	return false, sessionLost(s, now)
}

// SessionGrant is the grant an acquire under the open session s makes at now: it expires with
// the session (invariant S2), or session_lost when s has ended.
func SessionGrant(s Session, name, holder string, token int64, lockDelay time.Duration, now time.Time) (Grant, error) {
	if !s.OpenAt(now) {
		return Grant{}, sessionLost(s, now)
	}
	g := NewGrant(name, holder, token, s.TTL, lockDelay, now)
	g.ExpiresAt = s.ExpiresAt
	return g, nil
}
