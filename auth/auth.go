// Package auth is who may do what: API keys, their roles and name scopes, dashboard session
// secrets, and the check of a caller's right to an action. It has no I/O: keys are kept by the
// store (only as hashes) and presented by the HTTP layer.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/leasekeeper/leasekeeper/lease"
)

// Role is what a key may do.
type Role string

// The roles, each including the rights of the one before.
const (
	// Reader reads everything in its scope: every GET, the watch stream, the dashboard.
	Reader Role = "reader"
	// Writer is a reader that also acquires, renews and releases leases, writes fenced
	// resources and reports rejections, on names in its scope.
	Writer Role = "writer"
	// Admin may do everything: revoke leases, delete resources, manage keys.
	Admin Role = "admin"
)

// ParseRole checks a role's name. Codes: invalid_request.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case Reader, Writer, Admin:
		return r, nil
	}
	return "", lease.Errorf(lease.CodeInvalid, "role %q is not reader, writer or admin", s)
}

func (r Role) rank() int {
	switch r {
	case Reader:
		return 1
	case Writer:
		return 2
	case Admin:
		return 3
	}
	return 0
}

// Right is what an operation needs.
type Right int

// The rights an operation can need.
const (
	Read Right = iota + 1
	Write
	Manage // admin only
)

func (r Right) role() Role {
	switch r {
	case Read:
		return Reader
	case Write:
		return Writer
	}
	return Admin
}

// Key is an API key's record. The secret itself is never kept: only its Hash.
type Key struct {
	ID        string
	Label     string
	Role      Role
	Prefixes  []string // empty: every name
	CreatedAt time.Time
	CreatedBy string // actor, or empty for the bootstrap key
	RevokedAt time.Time
	RevokedBy string
	LastUsed  time.Time // the last use recorded (store.Store.TouchKey); zero if never
}

// Revoked reports whether the key was revoked.
func (k Key) Revoked() bool { return !k.RevokedAt.IsZero() }

// Principal returns the caller a live key makes.
func (k Key) Principal() Principal {
	return Principal{KeyID: k.ID, Label: k.Label, Role: k.Role, Prefixes: k.Prefixes}
}

// Limits of a key's fields.
const (
	MaxLabelLen    = 100
	MaxPrefixes    = 32
	SecretPrefix   = "lkk_"
	SessionPrefix  = "lks_"
	minSecretBytes = 32 // 256 bits
)

// NewSecret returns a fresh API key: 256 random bits after a recognisable prefix.
func NewSecret() string { return SecretPrefix + random(minSecretBytes) }

// NewSessionID returns a fresh dashboard session id: 256 random bits.
func NewSessionID() string { return SessionPrefix + random(32) }

// NewKeyID returns a key's public id: 80 random bits, short enough to type.
func NewKeyID() string {
	var b [10]byte
	rand.Read(b[:])
	return "key_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

func random(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Hash is what a store keeps of a key or session secret: its SHA-256. The secrets have 256
// random bits, so a plain hash cannot be reversed and needs no salt.
func Hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// MAC returns HMAC-SHA256 of the parts (separated by NUL) under key: for values that must not be
// recoverable from a copy of the database, such as idempotency keys chosen by clients.
func MAC(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for i, p := range parts {
		if i > 0 {
			m.Write([]byte{0})
		}
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// ValidateSecret checks the shape of a key given by an operator (LEASEKEEPER_ADMIN_KEY): at
// least 43 characters (256 bits in base64), printable ASCII without spaces.
func ValidateSecret(s string) error {
	if len(s) < 43 || len(s) > 256 {
		return fmt.Errorf("an API key must be 43 to 256 characters (256 random bits), got %d", len(s))
	}
	for _, c := range s {
		if c <= ' ' || c > '~' {
			return fmt.Errorf("an API key must be printable ASCII without spaces")
		}
	}
	return nil
}

// ValidateKey checks a new key's label, role and prefixes. Codes: invalid_request.
func ValidateKey(label string, role Role, prefixes []string) error {
	if label == "" || utf8.RuneCountInString(label) > MaxLabelLen || !utf8.ValidString(label) ||
		strings.IndexFunc(label, unicode.IsControl) >= 0 {
		return lease.Errorf(lease.CodeInvalid, "label must be 1 to %d characters without control characters", MaxLabelLen)
	}
	if _, err := ParseRole(string(role)); err != nil {
		return err
	}
	if len(prefixes) > MaxPrefixes {
		return lease.Errorf(lease.CodeInvalid, "a key takes at most %d prefixes, got %d", MaxPrefixes, len(prefixes))
	}
	for _, p := range prefixes {
		// A prefix is the start of a name: the name rules apply to it.
		if err := lease.ValidateName(p); err != nil {
			return lease.Errorf(lease.CodeInvalid, "prefix %q is not the start of a valid name", p)
		}
	}
	return nil
}

// CheckRevoke decides whether key k may be revoked while liveAdmins unrevoked admin keys exist
// (k among them if it is one): never the last admin key, which would lock every operator out.
// Codes: invalid_request.
func CheckRevoke(k Key, liveAdmins int) error {
	if k.Role == Admin && !k.Revoked() && liveAdmins <= 1 {
		return lease.Errorf(lease.CodeInvalid, "key %s is the last admin key: create another admin key before revoking it", k.ID)
	}
	return nil
}

// Principal is the caller of a request: the key it presented, or the anonymous admin of a
// server running with authentication off.
type Principal struct {
	KeyID    string
	Label    string
	Role     Role
	Prefixes []string // empty: every name
}

// Anonymous is every caller of a server with authentication off.
var Anonymous = Principal{Label: "anonymous (auth off)", Role: Admin}

// Actor names the principal in audit records: "label (key id)".
func (p Principal) Actor() string {
	if p.KeyID == "" {
		return p.Label
	}
	return p.Label + " (" + p.KeyID + ")"
}

// IsAdmin reports whether the principal is an admin.
func (p Principal) IsAdmin() bool { return p.Role == Admin }

// Scoped reports whether the principal is limited to some name prefixes.
func (p Principal) Scoped() bool { return len(p.Prefixes) > 0 && p.Role != Admin }

// InScope reports whether name is under one of the principal's prefixes. Admins and unscoped
// keys reach every name.
func (p Principal) InScope(name string) bool { return p.Scope().Has(name) }

// Scope is the names the principal reaches, as the store takes them: empty for admins and
// unscoped keys.
func (p Principal) Scope() lease.Scope {
	if !p.Scoped() {
		return nil
	}
	return lease.Scope(p.Prefixes)
}

// Allow checks that the principal has the right for every name given (lease and resource names
// alike). Codes: forbidden, saying which role or prefix was missing.
func (p Principal) Allow(r Right, names ...string) error {
	if p.Role.rank() < r.role().rank() {
		return lease.Errorf(lease.CodeForbidden, "this needs the %s role; key %s has %s", r.role(), p.describe(), p.Role)
	}
	for _, n := range names {
		if n != "" && !p.InScope(n) {
			return lease.Errorf(lease.CodeForbidden, "%q is outside the prefixes of key %s (%s)", n, p.describe(), strings.Join(p.Prefixes, ", "))
		}
	}
	return nil
}

func (p Principal) describe() string {
	if p.KeyID == "" {
		return fmt.Sprintf("%q", p.Label)
	}
	return p.KeyID
}

// Narrow answers how to list names starting with prefix for this principal: the prefix to ask
// the store for, and whether each item must still be checked with InScope (several of the key's
// prefixes fall under the one asked for). none is true when nothing under prefix is in scope.
func (p Principal) Narrow(prefix string) (narrowed string, check, none bool) {
	if !p.Scoped() {
		return prefix, false, false
	}
	var under []string
	for _, kp := range p.Prefixes {
		if strings.HasPrefix(prefix, kp) {
			return prefix, false, false // everything asked for is in scope
		}
		if strings.HasPrefix(kp, prefix) {
			under = append(under, kp)
		}
	}
	switch len(under) {
	case 0:
		return prefix, false, true
	case 1:
		return under[0], false, false
	}
	return prefix, true, false
}
