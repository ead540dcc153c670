package store

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/leasekeeper/leasekeeper/lease"
)

// What every backend encodes the same way, so that a client cannot tell them apart.

// EncodeCursor makes the opaque cursor of a page whose last key is key.
func EncodeCursor(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

// PageOf makes a page of items read with one more than limit: at most limit items, and the
// cursor of the last one's key when more remain.
func PageOf[T any](items []T, limit int, key func(T) string) Page[T] {
	if len(items) <= limit {
		return Page[T]{Items: items}
	}
	return Page[T]{Items: items[:limit], Next: EncodeCursor(key(items[limit-1]))}
}

// DecodeCursor returns the key of a cursor made by EncodeCursor. Codes: invalid_request.
func DecodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	// Every key a cursor is made of is UTF-8 text (names, numbers): one that decodes to other
	// bytes was not given out here, and PostgreSQL refuses such text in a query.
	if err != nil || !utf8.Valid(b) {
		return "", lease.Errorf(lease.CodeInvalid, "cursor %q is not one this server gave out", c)
	}
	return string(b), nil
}

// SeqKey is the cursor key of a seq or id.
func SeqKey(n int64) string { return strconv.FormatInt(n, 10) }

// DecodeSeqCursor returns the seq of a cursor made from SeqKey, 0 for none. Codes:
// invalid_request.
func DecodeSeqCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	s, err := DecodeCursor(c)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, lease.Errorf(lease.CodeInvalid, "cursor %q is not one this server gave out", c)
	}
	return n, nil
}

// PrefixRange returns bounds [lo, hi) of the names that start with prefix, in byte order. Names
// use only bytes below '~', so prefix+"~" bounds them.
func PrefixRange(prefix string) (lo, hi string) {
	if prefix == "" {
		return "", "~"
	}
	return prefix, prefix + "~"
}

// IdempotencyTTL is how long an acquire's Idempotency-Key is remembered.
const IdempotencyTTL = 24 * time.Hour

// Fingerprint identifies what an idempotent acquire asked for, so a key reused for another
// request is refused rather than answered with the wrong grant.
func Fingerprint(p AcquireParams) []byte {
	h := sha256.New()
	for _, s := range []string{p.Name, p.Holder, string(p.Metadata)} {
		binary.Write(h, binary.BigEndian, int64(len(s)))
		h.Write([]byte(s))
	}
	binary.Write(h, binary.BigEndian, [2]int64{p.TTL.Milliseconds(), p.LockDelay.Milliseconds()})
	if p.SessionID != "" {
		h.Write(lease.HashID(p.SessionID))
	}
	if p.Limit > 0 {
		binary.Write(h, binary.BigEndian, int64(p.Limit))
	}
	if p.Mode == lease.ModeShared {
		h.Write([]byte(p.Mode))
	}
	return h.Sum(nil)
}

// FingerprintAll identifies what an idempotent acquire of several names asked for: the names
// in their order and every field that decides the grants, so that the same key sent with
// anything else is refused.
func FingerprintAll(p AcquireAllParams) []byte {
	h := sha256.New()
	h.Write([]byte("all"))
	binary.Write(h, binary.BigEndian, int64(len(p.Names)))
	for _, n := range p.Names {
		h.Write(Fingerprint(p.One(n)))
	}
	return h.Sum(nil)
}

// AllKey is the key an idempotent acquire of several names keeps the grant of its i-th name
// under: one record per grant, each as a single acquire's (name, salt, token), all with the
// fingerprint of the whole request. The scoped key is hex, so key#i is never another
// request's key. Record 0 says whether the key was used, and for what.
func AllKey(key string, i int) string { return key + "#" + strconv.Itoa(i) }

// EventDetail is the stored form of what an event carries beyond its columns (a handover's
// target and reason), nil when it carries nothing.
func EventDetail(e lease.Event) *string {
	d := eventDetail{Session: e.Session, Mode: e.Mode}
	if e.Handover != nil {
		d.To, d.Reason = e.Handover.To, e.Handover.Reason
	}
	if d == (eventDetail{}) {
		return nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil // two strings always encode
	}
	s := string(b)
	return &s
}

// SetEventDetail fills e from the stored form EventDetail made; nil or unreadable sets nothing.
func SetEventDetail(e *lease.Event, detail *string) {
	var d eventDetail
	if detail == nil || json.Unmarshal([]byte(*detail), &d) != nil {
		return
	}
	e.Session, e.Mode = d.Session, d.Mode
	if e.Type == lease.EventHandoverRequested {
		e.Handover = &lease.Handover{Name: e.Name, Holder: e.Holder, Token: e.Token, To: d.To, Reason: d.Reason, By: e.Actor, At: e.At}
	}
}

type eventDetail struct {
	Mode    lease.Mode `json:"mode,omitempty"`
	To      string     `json:"to,omitempty"`
	Reason  string     `json:"reason,omitempty"`
	Session string     `json:"session,omitempty"`
}

// storedWrite is one entry of a resource's writers column, as both backends build it in SQL:
// an array of these, oldest first, at most WritersKept long.
type storedWrite struct {
	Version     int64  `json:"v"`
	Token       int64  `json:"t"`
	Lease       string `json:"l"`
	Holder      string `json:"h"`
	At          int64  `json:"at"`
	Size        int64  `json:"n"`
	ContentType string `json:"ct"`
}

// DecodeWriters reads a resource's writers column into its writes, newest first.
func DecodeWriters(b []byte) ([]lease.Write, error) {
	var stored []storedWrite
	if err := json.Unmarshal(b, &stored); err != nil {
		return nil, fmt.Errorf("read the writers of a resource: %w", err)
	}
	out := make([]lease.Write, len(stored))
	for i, x := range stored {
		out[len(stored)-1-i] = lease.Write{Version: x.Version, Token: x.Token, Lease: x.Lease, Holder: x.Holder,
			At: time.UnixMilli(x.At).UTC(), Size: x.Size, ContentType: x.ContentType}
	}
	return out, nil
}

// DecideMode decides an acquire of h.Name without a limit (lease.DecideMode), the name's
// semaphores row counting lim slots (shared ones if isShared); keep records the row's new
// count when the grant takes a slot it does not count as shared yet. It answers the grant's
// name (the name itself, or a shared slot's), its token, and whether it is shared.
func DecideMode(h lease.Holders, mode lease.Mode, now time.Time, last int64, lim int, isShared bool, keep func(lim int) error) (string, int64, bool, error) {
	slot, token, err := lease.DecideMode(h, mode, now, last)
	if err != nil {
		return "", 0, false, err
	}
	gname, n := lease.SharedGrant(h.Name, slot, lim, isShared)
	if n > 0 {
		err = keep(n)
	}
	return gname, token, slot >= 0, err
}
