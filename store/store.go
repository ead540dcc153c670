// Package store declares what leasekeeper needs from persistence: one interface made of roles,
// with one transaction per operation and the invariants of docs/DESIGN.md checked inside it.
// Backends live in subpackages (store/sqlite, store/postgres); store/storetest is the
// conformance suite every backend passes. What both backends do the same way (cursors, pages,
// the checks of list filters) lives here too.
package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
)

// Store is the persistence of leases, events, fenced resources and rejections, and of the keys
// and sign-ins that guard them: every role below, plus Ping and Close. Every method runs in one
// transaction; errors are *lease.Error with the codes listed, or internal errors. Time comes
// from the store's clock, read once per operation. A part of the server that needs less
// declares the methods it uses (queue.Store, watch.Store, expiry.Store) or takes a role.
type Store interface {
	Leases
	LeaseSessions
	Reads
	Resources
	Upkeep
	Overview
	APIKeys
	SignIns

	// Ping checks that the database answers.
	Ping(ctx context.Context) error

	// Close stops the store. Operations after Close fail.
	Close() error
}

// Leases changes leases: grant, renew, release, revoke, and ask a holder to hand over.
type Leases interface {
	// Acquire grants the lease on a free name (one past its lock delay) with a fresh token
	// (invariant 2), and answers only after the grant is durable (invariant 3). An expired but
	// unrecorded lease is recorded as expired first, at its expiry. With an idempotency key, a
	// retry of a grant that is still current returns it again, with the same lease ID.
	// Codes: lease_held (with holder, expiry and availability), lease_lost (the key's grant has
	// ended), invalid_request (key reused for another request), too_many_leases (Owner holds
	// MaxHeld leases already).
	Acquire(ctx context.Context, p AcquireParams) (lease.Lease, error)

	// AcquireAll grants every name of p.Names or none, in one transaction: each name is
	// decided by Acquire's rule, and the grants are written only when every name is free, in
	// the order asked, each with its own lease ID and a token from the one counter. A name
	// refused leaves the others untouched (an expiry recorded on the way stays recorded).
	// Codes: lease_held (Held lists the names held or in their lock delay), limit_mismatch (a
	// name held as a semaphore), too_many_leases (Owner would hold more than MaxHeld), and
	// those of a session as Acquire's.
	AcquireAll(ctx context.Context, p AcquireAllParams) ([]lease.Lease, error)

	// Renew extends the unexpired lease whose ID is id to now+ttl (ttl 0 keeps the lease's).
	// Codes: lease_lost when id is not the current unexpired lease of name (invariant 6);
	// invalid_request for a lease held under a session (renew the session).
	// With metadata (a normalized JSON object) it also replaces the lease's metadata and the
	// renewed event carries it (a leader proclaiming a new value); nil keeps it.
	Renew(ctx context.Context, name, id string, ttl time.Duration, metadata json.RawMessage) (lease.Lease, error)

	// Release ends the lease whose ID is id. A repeat by the same ID answers nil.
	// Codes: lease_lost when the lease had expired or was revoked, or id is not name's.
	Release(ctx context.Context, name, id string) error

	// Revoke ends the current lease on name, if any, recording actor (who revoked it) on the
	// revoked event. With a non-zero token it ends the lease only if token is that lease's, so a
	// revoke aimed at one holder never ends a successor's.
	// Codes: not_found for a name never used; lease_lost when token is not the current
	// unexpired lease's.
	Revoke(ctx context.Context, name string, token int64, actor string) error

	// RequestHandover asks the holder of name's current lease to let it go: it records h (To,
	// Reason, By) for that grant, with a handover_requested event, and answers it with the
	// token and time set. The holder's renewals carry it until the grant ends; a repeat
	// replaces it. Nothing ends the lease. Codes: not_found for a name never used, not_held
	// when nobody holds it now, invalid_request when h.To names the holder itself.
	RequestHandover(ctx context.Context, name string, h lease.Handover) (lease.Handover, error)
}

// LeaseSessions keeps holders' sessions: the leases held under one end together (PRIMITIVES.md
// S1, S2).
type LeaseSessions interface {
	// OpenSession opens a session of p.Holder for p.TTL, storing only the hash of its new ID,
	// which the answer alone carries. Codes: too_many_sessions (Owner has MaxOpen sessions open,
	// neither closed nor expired, already).
	OpenSession(ctx context.Context, p SessionParams) (lease.Session, error)

	// RenewSession extends the session whose ID is id, and in the same transaction every
	// lease held under it, to now+ttl (ttl 0 keeps the session's): a lease under a session
	// expires with it (invariant S2). Codes: not_found (no such session), session_lost (it
	// expired or was closed).
	// Only the key that opened it may, or any key when by is "" (an admin): else forbidden.
	RenewSession(ctx context.Context, id, by string, ttl time.Duration) (lease.Session, error)

	// CloseSession closes the session whose ID is id and releases every lease held under it,
	// all in one transaction (invariant S1). A repeat changes nothing. Codes: not_found,
	// session_lost (it had expired: its leases expired with it).
	// Only the key that opened it may, or any key when by is "": else forbidden.
	CloseSession(ctx context.Context, id, by string) (lease.Session, error)

	// SessionByRef returns the session whose public name is ref (lease.SessionRef), with
	// Leases the count of leases held under it now, and the state of every name whose current
	// (or last) grant was made under it, ordered by name (slots as "name#i"), at most
	// MaxLimit. It is for viewers: it needs no ID and reveals none. Codes: not_found.
	SessionByRef(ctx context.Context, ref string) (lease.Session, []lease.State, error)

	// Sessions lists holders' sessions ordered by ref, for viewers (no ID): only open ones
	// with f.Open, only those opened by key f.Owner when it is set. Codes: invalid_request
	// for a bad cursor.
	Sessions(ctx context.Context, f SessionFilter) (Page[lease.Session], error)
}

// Reads answers the state of leases and their history.
type Reads interface {
	// Get returns the state of name. Codes: not_found for a name never used.
	Get(ctx context.Context, name string) (lease.State, error)

	// List returns leases ordered by name. Codes: invalid_request for a bad cursor.
	List(ctx context.Context, f LeaseFilter) (Page[lease.State], error)

	// Events returns events in seq order (reversed with Newest). Codes: invalid_request for a
	// bad cursor.
	Events(ctx context.Context, f EventFilter) (Page[lease.Event], error)

	// LatestSeq returns the seq of the newest event, 0 when there is none.
	LatestSeq(ctx context.Context) (int64, error)
}

// Resources keeps fenced resources and the rejections of stale writes (invariant 7).
type Resources interface {
	// PutResource writes a fenced resource iff the token is at least its fence, and with a
	// lease name also iff the token is that lease's current unexpired token (invariant 7). A
	// token above every token this store has issued is refused too: accepted, it would raise
	// the fence past every grant to come. A refused write is recorded as a rejection and a
	// rejected event, and changes nothing else.
	// A write whose token passes but whose IfVersion or IfAbsent does not hold changes nothing
	// and is no rejection: the fence is checked first, so a stale token is always refused and
	// recorded as one, whatever the condition.
	// With a Scope (the caller is limited to some names), the token's grant names the write's
	// lease and holder only when it is in scope (lease.Attribute), and the last issued token is
	// lease.ScopedLastToken: nothing outside the scope shows through the token (invariant 8).
	// Codes: stale_token, token_not_issued (both with presented token and current fence),
	// precondition_failed, quota_exceeded.
	PutResource(ctx context.Context, w ResourceWrite) (lease.Resource, error)

	// DeleteResource deletes a fenced resource with its value and its fence: the next write
	// to the name starts it again at version 1, with any issued token. Its rejections stay. A
	// resource_deleted event records actor, who deleted it.
	// Codes: not_found for a resource that does not exist.
	DeleteResource(ctx context.Context, name, actor string) error

	// GetResource returns a resource with its value. Codes: not_found.
	GetResource(ctx context.Context, name string) (lease.Resource, error)

	// ResourceWriters returns the last WritersKept accepted writes of a resource, newest
	// first. Refused writes are not among them; deleting the resource forgets them.
	// Codes: not_found for a resource that does not exist.
	ResourceWriters(ctx context.Context, name string) ([]lease.Write, error)

	// ListResources returns resources (without values) ordered by name.
	ListResources(ctx context.Context, f ResourceFilter) (Page[lease.Resource], error)

	// RecordRejection records a rejection made by a resource outside leasekeeper, and a
	// rejected event on its lease when the lease or the token's grant is known. The token's
	// grant fills the lease and holder as lease.Attribute says for a caller limited to scope
	// (empty: every name).
	RecordRejection(ctx context.Context, r lease.Rejection, scope lease.Scope) (lease.Rejection, error)

	// Rejections returns rejections, newest first.
	Rejections(ctx context.Context, f RejectionFilter) (Page[lease.Rejection], error)

	// LeaseResources returns up to limit resources (without values), ordered by name, whose
	// last accepted write carried a token granted on name or one of its slots (GrantName, with
	// or without Lease-Name, whatever the writer's scope), through an index. It applies no
	// scope: callers show only the resources and leases theirs reaches.
	LeaseResources(ctx context.Context, name string, limit int) ([]lease.Resource, error)

	// TokenGrants returns, for each of tokens whose grant the history still has (ended grants
	// go with the retention), the name, holder, mode and time it was issued with. It applies no scope:
	// callers put each through lease.Attribute for theirs. Codes: invalid_request for more than
	// MaxLimit tokens.
	TokenGrants(ctx context.Context, tokens []int64) (map[int64]TokenGrant, error)
}

// SweepLimit bounds the expiries one ExpireDue records, in one write: a million leases that
// expire at once (their holders gone together, or a replica back after an outage) are swept in
// writes of this many, between which every other write goes on, instead of one write that held
// the writer (SQLite) or the replica's start (PostgreSQL, 4.6 s for 15,768 expiries) for as
// long as all of them took.
const SweepLimit = 1000

// Upkeep is the sweeper's: expiries recorded on time, and history pruned.
type Upkeep interface {
	// ExpireDue records leases whose expiry has passed as expired, at their expiry, at most
	// SweepLimit of them, oldest expiry first; persists the server's time; and returns when the
	// next open lease expires (zero if none): no later than now when more are due, so that the
	// sweeper calls again at once.
	ExpireDue(ctx context.Context) (expired int, next time.Time, err error)

	// Prune deletes history past the retention: events, rejections, ended grants and ended
	// sessions older than r.Age or beyond the newest r.Rows (each name's last grant stays),
	// idempotency keys older than 24 h, and expired dashboard sessions.
	Prune(ctx context.Context, r Retention) error
}

// Overview answers the dashboard's views of the held leases.
type Overview interface {
	// Held returns a page of the leases held now that match f, over all of them, in f's order
	// (a keyset: a page is the same whatever was read before it), with how many rows match
	// over all pages. A semaphore is one row, counted once: the first of its held slots that
	// match, in that order; the caller shows the semaphore there. Codes: invalid_request for
	// an unknown state or order, or a cursor not given out for f's order.
	Held(ctx context.Context, f HeldFilter) (HeldPage, error)

	// HeldCount returns how many leases whose names start with prefix are held now.
	HeldCount(ctx context.Context, prefix string) (int, error)

	// Triage counts what the dashboard's summary shows of the held leases whose names start
	// with prefix: how many expire within the window, are late to renew (no renewal for more
	// than half their ttl) or were stretched by a restart, and the pending handover requests
	// of held leases, oldest first, at most MaxLimit. A semaphore's slots count one by one.
	Triage(ctx context.Context, prefix string, within time.Duration) (Triage, error)

	// RecentlyFreed returns up to limit names (starting with prefix) that are free now, the
	// most recently freed first, with their last holder and how their last lease ended.
	RecentlyFreed(ctx context.Context, prefix string, limit int) ([]lease.State, error)

	// SharedNames returns which of names take shared leases (were ever held shared), so that
	// the exclusive holder of one reads as its writer. Codes: invalid_request for more than
	// MaxLimit names.
	SharedNames(ctx context.Context, names []string) (map[string]bool, error)
}

// APIKeys keeps the API keys, by the hashes of their secrets (invariant 8).
type APIKeys interface {
	// CreateKey stores a new API key by the hash of its secret and records a key_created event
	// naming k.CreatedBy. With onlyIfNone, it stores the key only while no key exists at all (the
	// bootstrap admin key) and reports created false otherwise. Codes: invalid_request (an id or
	// hash already in use).
	CreateKey(ctx context.Context, k auth.Key, hash []byte, onlyIfNone bool) (created bool, err error)

	// KeyByHash returns the key whose secret hashes to hash, revoked or not. Codes: not_found.
	KeyByHash(ctx context.Context, hash []byte) (auth.Key, error)

	// Keys returns every key, revoked ones included, oldest first.
	Keys(ctx context.Context) ([]auth.Key, error)

	// TouchKey records that key id was used now (by the store's clock), never moving its last
	// use back. It is a write: callers bound how often they call it (handlers do once a minute
	// per key at most). A key that does not exist changes nothing.
	TouchKey(ctx context.Context, id string) error

	// RevokeKey revokes a key at once, ends its dashboard sessions, and records a key_revoked
	// event naming actor. Revoking a revoked key changes nothing. Codes: not_found,
	// invalid_request for the last unrevoked admin key (checked in the same transaction).
	RevokeKey(ctx context.Context, id, actor string) (auth.Key, error)
}

// SignIns keeps the dashboard's sign-ins (cookies), by the hashes of their secrets.
type SignIns interface {
	// CreateSignIn stores a dashboard sign-in of key keyID by the hash of its secret, valid
	// until expires at the latest. With keep > 0 the key keeps its keep newest sign-ins, this
	// one among them: older ones end in the same transaction.
	CreateSignIn(ctx context.Context, hash []byte, keyID string, expires time.Time, keep int) error

	// SignIn returns the dashboard sign-in whose secret hashes to hash, with its key. Codes:
	// not_found (also for a sign-in past its expiry).
	SignIn(ctx context.Context, hash []byte) (SignIn, error)

	// TouchSignIn records that a sign-in was used now, for its idle expiry.
	TouchSignIn(ctx context.Context, hash []byte) error

	// DeleteSignIn ends a sign-in (sign-out). Deleting a missing one changes nothing.
	DeleteSignIn(ctx context.Context, hash []byte) error
}

// Retention bounds the history a store keeps. Zero fields do not bound.
type Retention struct {
	Age  time.Duration // history older than this goes
	Rows int           // at most this many events, rejections, ended grants and ended sessions (each) are kept
}

// AcquireParams is a validated acquire request.
type AcquireParams struct {
	Name           string
	Holder         string
	TTL            time.Duration
	LockDelay      time.Duration
	Metadata       json.RawMessage
	IdempotencyKey string
	// Owner is the id of the API key acquiring; with MaxHeld > 0 the acquire is refused with
	// too_many_leases when Owner already holds MaxHeld unexpired leases.
	Owner   string
	MaxHeld int
	// Limit, when above 0, acquires one of Limit slots of the semaphore Name (lease.SlotName):
	// the first free one. Codes: limit_mismatch when the name is held with another limit (or
	// as a plain lease, or with a limit by a plain acquire), lease_held when every slot is.
	Limit int
	// Mode is how the grant holds Name: exclusive ("" too) or shared (lease.DecideMode). A
	// shared grant is a slot "Name#i" of the name; it is refused (lease_held) while the
	// name's exclusive grant is held, and an exclusive one while any shared grant is. Never
	// with a Limit.
	Mode lease.Mode
	// SessionID, when set, acquires under that session instead of for TTL: the lease expires
	// with the session. Codes: not_found (no such session), session_lost, forbidden (a session
	// of another key than Owner, unless Owner is "").
	SessionID string
	// ReplayOnly, with an IdempotencyKey, only answers a retry: the key's grant (or its
	// verdict) when the key has one, and otherwise lease_held (NotReplayed) with nothing
	// written. A server's own line asks it before it refuses or queues a request while others
	// wait: a retry whose first answer was lost is answered its grant, not the line.
	ReplayOnly bool
}

// NotReplayed is the lease_held error of a ReplayOnly acquire whose key has no grant.
func NotReplayed(name string) error {
	return lease.Errorf(lease.CodeHeld, "lease %q: no grant under this idempotency key, and others wait for it", name)
}

// AcquireAllParams is a validated acquire of several names, all or none.
type AcquireAllParams struct {
	Names     []string // 1 to lease.MaxNames, none twice
	Holder    string
	TTL       time.Duration
	LockDelay time.Duration
	Metadata  json.RawMessage
	// Owner and MaxHeld cap the key's leases as AcquireParams's do, counting every grant.
	Owner   string
	MaxHeld int
	// SessionID, when set, holds every lease under that session (see AcquireParams).
	SessionID string
	// Mode is the mode of every grant: "" or lease.ModeExclusive, or lease.ModeShared.
	Mode lease.Mode
	// IdempotencyKey, when set (already scoped to the caller by the server, as AcquireParams's
	// is), makes a retry answer the grants of the first request while they are all current,
	// without new grants (see AllKey, FingerprintAll).
	IdempotencyKey string
	// ReplayOnly, with an IdempotencyKey, only answers a retry (see AcquireParams).
	ReplayOnly bool
}

// One is the acquire of one of p's names, as Acquire's rule decides it.
func (p AcquireAllParams) One(name string) AcquireParams {
	return AcquireParams{Name: name, Holder: p.Holder, TTL: p.TTL, LockDelay: p.LockDelay, Metadata: p.Metadata,
		Owner: p.Owner, MaxHeld: p.MaxHeld, SessionID: p.SessionID, Mode: p.Mode}
}

// SessionParams is a validated request to open a session.
type SessionParams struct {
	Holder   string
	TTL      time.Duration
	Metadata json.RawMessage
	// Owner is the id of the API key opening; with MaxOpen > 0 the open is refused with
	// too_many_sessions when Owner already has MaxOpen sessions open.
	Owner   string
	MaxOpen int
}

// SignIn is a dashboard sign-in (its session): the key that signed in and when it was last
// used. Not to be confused with lease.Session, a holder's session.
type SignIn struct {
	Key       auth.Key
	CreatedAt time.Time
	LastSeen  time.Time
	ExpiresAt time.Time
}

// LeaseFilter selects leases for List.
type LeaseFilter struct {
	Prefix string
	State  string // "", "held" or "free"
	Limit  int
	Cursor string
}

// EventFilter selects events. With Name empty, all names; Prefix restricts by name prefix.
// Since keeps events at or after that time. Newest pages from the newest event backwards
// (each page still newest first), for views that show the recent end of a long history.
type EventFilter struct {
	Name string
	// Slots, with Name, adds the events of Name's slots ("Name#i": a semaphore's, or the
	// shared grants of a name readers take), each still under its slot's name, in one seq order.
	Slots    bool
	Prefix   string
	AfterSeq int64
	Since    time.Time
	Newest   bool
	Limit    int
	Cursor   string
}

// ResourceWrite is a fenced write.
type ResourceWrite struct {
	Name        string
	Token       int64
	LeaseName   string
	Value       []byte
	ContentType string
	ClientAddr  string
	UserAgent   string
	// Scope is the names the writer reaches; empty for every name.
	Scope lease.Scope
	// Owner is the id of the API key writing: the resource counts against it from then on.
	// With a Quota, a write that would take Owner's resources past it is refused with
	// quota_exceeded and changes nothing (checked after the fence and the condition).
	Owner string
	Quota lease.Quota
	// IfVersion, when above 0, applies the write only while the resource is at that version
	// (HTTP If-Match), and lease.AnyVersion only while it exists (If-Match: *); IfAbsent only while it does not exist (If-None-Match: *). Both are
	// checked after the fence, in the write's transaction.
	IfVersion int64
	IfAbsent  bool
}

// ResourceFilter selects resources.
type ResourceFilter struct {
	Prefix string
	Limit  int
	Cursor string
}

// RejectionFilter selects rejections.
type RejectionFilter struct {
	Resource string
	Lease    string
	Since    time.Time
	Limit    int
	Cursor   string
}

// Page is one page of a list; Next is empty at the end.
type Page[T any] struct {
	Items []T
	Next  string
}

// GrantName is what a write records as its token's grant, for LeaseResources: the name of the
// grant (ownerName, a slot's name for a semaphore) when it is known, else "".
func GrantName(ownerName string, known bool) string {
	if !known {
		return ""
	}
	return ownerName
}

// TokenGrant is the grant a token was issued to: its name (a slot's, "name#i", for a semaphore
// or a reader), holder, mode and time. None of it changes once the token is issued.
type TokenGrant struct {
	Name       string
	Holder     string
	Shared     bool // a shared (read) grant's token: fenced writes refuse it (shared_token)
	AcquiredAt time.Time
}

// WritersKept is how many of its newest accepted writes a resource keeps (ResourceWriters).
const WritersKept = 10

// Default and largest page sizes.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// ClampLimit turns a requested page size into one within [1, MaxLimit], DefaultLimit for 0.
func ClampLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultLimit
	case n > MaxLimit:
		return MaxLimit
	}
	return n
}
