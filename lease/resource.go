package lease

import (
	"strings"
	"time"
	"unicode/utf8"
)

// Resource is a fenced resource kept by leasekeeper: a value whose writes must carry a fencing
// token at least as high as the highest one it has accepted (its fence).
type Resource struct {
	Name        string
	Fence       int64
	Version     int64
	UpdatedAt   time.Time
	Size        int64
	ContentType string
	Lease       string // the last write's lease (Attribute), if any
	Holder      string // holder of the last write's token, when known
	Value       []byte // only when read with its value
}

// Write is one accepted write of a fenced resource, as its short history of writers keeps it.
type Write struct {
	Version     int64
	Token       int64
	Lease       string // the write's lease (Attribute), if any
	Holder      string // holder of the write's token, when known
	At          time.Time
	Size        int64
	ContentType string
}

// Rejection is a write refused because its token was stale.
type Rejection struct {
	ID             int64
	Resource       string
	Lease          string
	PresentedToken int64
	CurrentFence   int64
	Holder         string
	ClientAddr     string
	UserAgent      string
	Reason         string
	At             time.Time
	Source         string // RejectionSourceServer or RejectionSourceExternal
	KeyID          string // the API key that sent the write (or reported the rejection); empty when unknown
}

// Scope is the name prefixes a caller is limited to; empty reaches every name.
type Scope []string

// Has reports whether name is under one of the prefixes (always, for an empty scope).
func (s Scope) Has(name string) bool {
	if len(s) == 0 {
		return true
	}
	for _, p := range s {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Attribute is whom a fenced write or a rejection is put down to, as a caller limited to scope
// may learn it: the lease named with it (Lease-Name), else the lease its token was issued to,
// with that grant's holder. The grant (ownerName, ownerHolder; known false when the history no
// longer has it) is used only when it is in scope and is the lease named, if one is: a token
// never resolves to a name or a holder outside the caller's scope (invariant 8), and a holder
// is never put down to another lease than its own. Otherwise it is as if the token named no
// lease.
func Attribute(scope Scope, named, ownerName, ownerHolder string, known bool) (leaseName, holder string) {
	if !known || !scope.Has(ownerName) || named != "" && named != ownerName {
		return named, ""
	}
	return ownerName, ownerHolder
}

// Quota is what one API key's resources (those it wrote last) may hold; a zero field does
// not bound.
type Quota struct {
	Resources int   // how many
	Bytes     int64 // their values' bytes, in all
}

// CheckQuota decides whether a write of size bytes to a resource may go ahead, given how many
// other resources the writing key has (count) and their bytes (bytes); the resource written
// counts once, at its new size, whoever wrote it before. Codes: quota_exceeded.
func CheckQuota(q Quota, count int, bytes, size int64) *Error {
	switch {
	case q.Resources > 0 && count+1 > q.Resources:
		return Errorf(CodeQuotaExceeded, "this API key has %d resources, the most it may have: write one it has, or ask an admin to delete some", count)
	case q.Bytes > 0 && bytes+size > q.Bytes:
		return Errorf(CodeQuotaExceeded, "this API key's resources hold %d bytes; %d more would pass its quota of %d bytes", bytes, size, q.Bytes)
	}
	return nil
}

// MaxClientHeaderLen bounds what a rejection keeps of a header its client chose (User-Agent):
// the rest is cut, so a refused write cannot make the server hold a header as long as the
// server lets a request's headers be.
const MaxClientHeaderLen = 1024

// ClipHeader cuts a client's header to MaxClientHeaderLen bytes, at a character boundary.
func ClipHeader(s string) string {
	if len(s) <= MaxClientHeaderLen {
		return s
	}
	s = s[:MaxClientHeaderLen]
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		if r, n := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || n != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// Where a rejection was made.
const (
	RejectionSourceServer   = "leasekeeper"
	RejectionSourceExternal = "external"
)
