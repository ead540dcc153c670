package lease

import (
	"encoding/json"
	"time"
)

// Lease is a grant as its holder sees it. ID, the secret that renews and releases it, is set
// only in the answer to Acquire; stores keep only its hash.
type Lease struct {
	Name       string
	Holder     string
	ID         string
	Token      int64
	TTL        time.Duration
	AcquiredAt time.Time
	RenewedAt  time.Time
	ExpiresAt  time.Time
	LockDelay  time.Duration
	Metadata   json.RawMessage
	// ExtendedByRestart is how much the server's restarts added to this grant's expiry beyond
	// what its holder was last told (invariant 5, conservative restart), in total; zero for a
	// grant no restart stretched.
	ExtendedByRestart time.Duration
	// Handover is the request that the holder let this grant go, if one was made.
	Handover *Handover
	// Session is the Ref of the session the lease is held under ("" for none): it expires
	// with the session and is renewed by renewing the session.
	Session string
	// Limit is the semaphore's limit for a slot of one (0 for a plain lease), Slot its index;
	// Name is then the semaphore's name.
	Limit, Slot int
	// Mode is how the grant holds Name; a shared grant is slot Slot of the name's shared slots.
	Mode Mode
}

// End says how a lease ended.
type End string

// The ways a lease ends.
const (
	EndReleased End = "released"
	EndExpired  End = "expired"
	EndRevoked  End = "revoked"
)

// State is what anyone may know about a name: never the lease ID. For a free name it keeps the
// last holder and token, and how and when that lease ended.
type State struct {
	Name        string
	Held        bool
	Holder      string
	Token       int64
	TTL         time.Duration
	AcquiredAt  time.Time
	RenewedAt   time.Time
	ExpiresAt   time.Time
	EndedAt     time.Time // zero while held
	End         End       // empty while held
	LockDelay   time.Duration
	AvailableAt time.Time // when the name may be granted again
	Metadata    json.RawMessage
	Waiters     int
	// Limit is a semaphore's limit (0 for a plain lease), Slots the state of each of its slots
	// used so far; the fields above then sum them up: Held while any slot is, Token the
	// highest.
	Limit int
	Slots []State
	// Mode is ModeShared for a name whose current (or last) grants are shared ones: Slots are
	// then its shared slots used so far (Limit how many), Holders the held ones, and the
	// fields above sum them up (see SumShared). Otherwise ModeExclusive (or "" for a
	// semaphore).
	Mode    Mode
	Holders []State
	// Session is the Ref of the session the current, or last, grant was held under ("" for
	// none).
	Session string
	// ExtendedByRestart is how much the server's restarts added to the current, or last,
	// grant's expiry (see Lease.ExtendedByRestart).
	ExtendedByRestart time.Duration
}

// EventType is the kind of an event in a name's history.
type EventType string

// The event types. Per name, the events of one token run acquired → (renewed…) → one of
// released, expired or revoked; rejected events stand between them, at any time.
const (
	EventAcquired EventType = "acquired"
	EventRenewed  EventType = "renewed"
	EventReleased EventType = "released"
	EventExpired  EventType = "expired"
	EventRevoked  EventType = "revoked"
	EventRejected EventType = "rejected"
	// EventHandoverRequested asks the holder of Token to let it go (Event.Handover says to
	// whom and why; Actor who asked).
	EventHandoverRequested EventType = "handover_requested"

	// Audit events of admin actions on API keys; their Name is empty and Actor says who.
	EventKeyCreated EventType = "key_created"
	EventKeyRevoked EventType = "key_revoked"
	// EventResourceDeleted audits the deletion of a fenced resource; Resource names it.
	EventResourceDeleted EventType = "resource_deleted"
)

// Event is one entry of a name's history. For expired, At is the moment the lease expired,
// not when the server noticed.
type Event struct {
	Seq       int64
	Type      EventType
	Name      string
	Token     int64
	Holder    string
	At        time.Time
	ExpiresAt time.Time // for acquired and renewed
	// LockDelay is the grant's lock delay, for acquired: how long after an expiry of this
	// grant the name stays unavailable. Each grant keeps its own, so a history shows the
	// gap before every successor, not only the latest grant's.
	LockDelay time.Duration
	Metadata  json.RawMessage
	Resource  string    // for rejected
	Actor     string    // who did it, for admin actions: "label (key id)"
	Handover  *Handover // for handover_requested: To and Reason
	Session   string    // the Ref of the session a lease was held under, for its end
	Mode      Mode      // ModeShared for the events of a shared grant ("" otherwise)
}
