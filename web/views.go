package web

import (
	"encoding/json"
	"net/http"
	"time"
)

// FragmentHeader is the request header that static/app.js sends when it wants only the inner
// HTML of a page's live region (the XxxLive component) instead of the full page.
const FragmentHeader = "LK-Fragment"

// CSRFField is the name of the hidden form field that carries [LeaseDetail.CSRFToken] in the
// revoke form.
const CSRFField = "csrf_token"

// RevokeTokenField is the name of the revoke form's hidden field that carries the fencing
// token of the grant shown on the page, so that a form loaded for one holder never revokes a
// later holder's lease.
const RevokeTokenField = "token"

// IsFragment reports whether r asks for the live region only (header "LK-Fragment: 1").
func IsFragment(r *http.Request) bool {
	return r.Header.Get(FragmentHeader) == "1"
}

// Site is what every full page needs besides its content. Build it once at start-up.
type Site struct {
	// AssetVersion is appended to static asset URLs as ?v= so that browsers fetch them again
	// after an upgrade; use [AssetVersion]. Empty omits the query.
	AssetVersion string
	// Version is the build version shown in the footer; empty hides it.
	Version string
	// AuthOff shows a warning banner: the server runs without API keys.
	AuthOff bool
	// User names the signed-in key ("label (key id)") in the header; empty shows nobody.
	User string
	// SignedIn offers the sign-out button (the page was opened with a dashboard session).
	SignedIn bool
	// Admin links the keys page: the viewer is an admin.
	Admin bool
}

// Lease is the state of one name, held or free, on its page and in the overview's tables.
type Lease struct {
	// Name is the lease name. It is escaped wherever it is shown or put in a URL.
	Name string
	// Held reports whether an unexpired lease exists now.
	Held bool
	// Holder is the current holder, or for a free name the last one.
	Holder string
	// Token is the fencing token of the current, or last, grant.
	Token int64
	// AcquiredAt, RenewedAt and ExpiresAt are the times of the current, or last, grant. A free
	// name's ExpiresAt is the expiry its grant had when it ended; it is never counted down.
	AcquiredAt, RenewedAt, ExpiresAt time.Time
	// TTL is the lease duration.
	TTL time.Duration
	// LockDelay is how long the name stays unavailable after an expiry.
	LockDelay time.Duration
	// AvailableAt is when the name can be granted again; zero when it can be now.
	AvailableAt time.Time
	// EndedAt and Ended say when and how the last grant ended, for a free name: Ended is the
	// word shown in its badge ("released", "expired", "revoked").
	EndedAt time.Time
	Ended   string
	// Waiters is the number of acquire requests waiting in line.
	Waiters int
	// Metadata is the lease's metadata as JSON, shown compacted; nil or "null" for none.
	Metadata json.RawMessage
	// Rejections counts the refused writes that named this lease, up to [CountCap].
	Rejections int
	// Session is the public name ("ses_…") of the session the grant is, or was, held under;
	// empty for none.
	Session string
	// Limit is a semaphore's limit, 0 for a plain lease. A semaphore's Held says a slot is
	// held, SlotsHeld how many are, Token is the highest and ExpiresAt the soonest expiry.
	Limit, SlotsHeld int
	// Shared says the name is held (or was last held) by shared leases, Readers by how many
	// now; Held then says any is.
	Shared  bool
	Readers int
	// Writer says the lease is the exclusive grant of a name that readers take too.
	Writer bool
	// IsSlot says the lease is slot Slot of the semaphore Name (on a session's page).
	IsSlot bool
	Slot   int
	// Stretched is how much server restarts added to the grant's expiry; zero for none.
	Stretched time.Duration
	// Handover is the pending request that the holder let this lease go; nil for none.
	Handover *Handover
}

// Slot is one slot of a semaphore, on the semaphore's page.
type Slot struct {
	Index  int
	Held   bool
	Holder string
	Token  int64
	// ExpiresAt is when a held slot expires; TTL its duration.
	ExpiresAt time.Time
	TTL       time.Duration
	LockDelay time.Duration
	// Ended says how a free slot's last grant ended ("released", "expired", "revoked").
	Ended string
	// Session is the public name of the session the slot is held under; empty for none.
	Session string
}

// SessionInfo is a holder's session (not a dashboard sign-in), by its public name.
type SessionInfo struct {
	// Ref is its public name, "ses_…"; the secret ID is never shown.
	Ref    string
	Holder string
	TTL    time.Duration
	// CreatedAt, RenewedAt and ExpiresAt are its times; ClosedAt is zero while it is open.
	CreatedAt, RenewedAt, ExpiresAt, ClosedAt time.Time
	// Held is how many leases are held under it now.
	Held     int
	Metadata json.RawMessage
}

// SessionDetail is the props of a session's page (/sessions/{ref}).
type SessionDetail struct {
	// Now is the time the page is rendered for.
	Now     time.Time
	Session SessionInfo
	// Leases are the names whose current, or last, grant was made under the session, in name
	// order, that the viewer may read.
	Leases []Lease
}

// CountCap is where counts of rejections stop: beyond it the page says "1000+".
const CountCap = 1000

// Waiter is one acquire request waiting in line for a name.
type Waiter struct {
	Holder string
	Since  time.Time
}

// Event is one row of a name's history table.
type Event struct {
	Seq int64
	// Kind is the event's type as shown in its badge ("acquired", "renewed", "released",
	// "expired", "revoked", "rejected").
	Kind   string
	Token  int64
	Holder string
	// At is when it happened; for an expiry, the moment the lease expired.
	At time.Time
	// Resource is the resource that refused the write, for a rejection; otherwise empty.
	Resource string
	// Actor is who did an admin action (a revoke), "label (key id)"; otherwise empty.
	Actor string
	// LockDelay is the grant's lock delay, for an acquire; otherwise zero.
	LockDelay time.Duration
	// HandoverTo and HandoverReason are a handover request's target (empty for whoever waits
	// first) and reason.
	HandoverTo, HandoverReason string
}

// Rejection is one refused stale write.
type Rejection struct {
	ID       int64
	Resource string
	// Lease is the Lease-Name the write carried, if any.
	Lease          string
	PresentedToken int64
	// CurrentFence is the resource's fence at the time; 0 when unknown.
	CurrentFence int64
	// Holder held the presented token, when known.
	Holder     string
	ClientAddr string
	UserAgent  string
	Reason     string
	// External is true for a rejection reported by a resource outside leasekeeper.
	External bool
	At       time.Time
	// GrantsBehind counts the grants of Lease after the presented token up to the fence; -1
	// when unknown.
	GrantsBehind int
	// Late is how long after the presented grant ended the write came; zero when unknown.
	Late time.Duration
	// KeyID is the API key that sent the write (or reported it), KeyLabel its label; empty
	// when unknown (rejections recorded before keys were kept with them, or auth off).
	KeyID, KeyLabel string
}

// Resource is one fenced resource.
type Resource struct {
	Name        string
	Fence       int64
	Version     int64
	Size        int64
	ContentType string
	// Lease and Holder name the last writer, when known.
	Lease, Holder string
	UpdatedAt     time.Time
	// Rejections counts the refused writes to it, up to [CountCap].
	Rejections int
}

// Overview is the props of the overview page (/).
type Overview struct {
	// Now is the time the page is rendered for.
	Now time.Time
	// Host is the address shown in the curl example of the empty state, e.g. "localhost:8080".
	Host string
	// Prefix is the name prefix searched for (query parameter prefix); empty for all.
	Prefix string
	// Contains and Holder filter the held leases (query parameters q and holder): names that
	// contain Contains, holders that contain Holder; empty for all.
	Contains, Holder string
	// Sort orders the held leases (query parameter sort): [SortName] (the default),
	// [SortExpiry], [SortLate] or [SortNewest].
	Sort string
	// State keeps only the held leases expiring within a minute ([StateExpiring]) or whose
	// renewal is late ([StateLate]) (query parameter state); empty for all.
	State string
	// Cursor is the cursor of this page (query parameter cursor); empty on the first page.
	Cursor string
	// HeldCount is the number of held leases matching Prefix, over all pages; a semaphore
	// counts once, as it shows as one row.
	HeldCount int
	// Held is this page of held leases, in the order of Sort.
	Held []Lease
	// Matched is how many held leases match the filters (Contains, Holder, State) over all
	// pages, counted as HeldCount is.
	Matched int
	// NextCursor is the cursor of the next page of held leases; empty on the last page.
	NextCursor string
	// Freed are recently freed names, newest first (Held false, with EndedAt and Ended).
	Freed []Lease
	// Rejections are the newest rejected stale writes, newest first.
	Rejections []Rejection
	// Triage is the summary at the top: what needs a look now.
	Triage Triage
}

// The orders of the overview's held leases.
const (
	SortName   = "name"
	SortExpiry = "expiry" // soonest expiry first
	SortLate   = "late"   // longest overdue renewal first
	SortNewest = "newest" // latest grant first
)

// The states the overview's held leases can be filtered by.
const (
	StateExpiring = "expiring" // expiring within a minute
	StateLate     = "late"     // renewal late: none for more than half the ttl
)

// LeaseDetail is the props of a lease's page (/leases/{name}).
type LeaseDetail struct {
	// Now is the time the page is rendered for.
	Now time.Time
	// Lease is the state of the name.
	Lease Lease
	// Waiters are the acquires waiting in line, oldest first, as far as this server knows.
	Waiters []Waiter
	// Slots are a semaphore's slots used so far, by index; nil for a plain lease.
	Slots []Slot
	// Range is the timeline's span (query parameter range), one of [TimelineRanges]; empty
	// for the default, which fits the recent history.
	Range string
	// Timeline is the picture of recent grants.
	Timeline Timeline
	// Events is a page of the name's history, oldest first.
	Events []Event
	// NextCursor is the cursor of the next page of events (query parameter cursor); empty at
	// the end.
	NextCursor string
	// CSRFToken is the value of the revoke form's hidden field [CSRFField].
	CSRFToken string
	// CanRevoke shows the revoke form: the viewer is an admin.
	CanRevoke bool
	// Notice is a one-line message shown above the state, e.g. "Lease revoked."; empty for none.
	Notice string
	// Resources are the fenced resources last written under the lease's tokens (or its
	// slots'), in name order, that the viewer may read; at most [LeaseResourcesShown].
	Resources []Resource
}

// LeaseResourcesShown is how many resources a lease page lists at most.
const LeaseResourcesShown = 50

// RejectionList is the props of the rejections page (/rejections).
type RejectionList struct {
	// Now is the time the page is rendered for.
	Now time.Time
	// Resource, Lease and Holder are the filters (query parameters resource, lease and
	// holder); empty for all.
	Resource, Lease, Holder string
	// Source keeps only rejections made by leasekeeper ("leasekeeper") or reported by other
	// resources ("external"); empty for both.
	Source string
	// Range keeps only rejections of the last 15m, 1h, 6h or 24h (query parameter range; the
	// API's since); empty for all.
	Range string
	// Cursor is the cursor of this page; empty on the first page.
	Cursor string
	// Rejections is this page, newest first.
	Rejections []Rejection
	// NextCursor is the cursor of the next page; empty on the last page.
	NextCursor string
}

// ResourceList is the props of the resources page (/resources).
type ResourceList struct {
	// Now is the time the page is rendered for.
	Now time.Time
	// Cursor is the cursor of this page; empty on the first page.
	Cursor string
	// Resources is this page, ordered by name.
	Resources []Resource
	// NextCursor is the cursor of the next page; empty on the last page.
	NextCursor string
}

// ResourceDetail is the props of a resource's page (/resources/{name}).
type ResourceDetail struct {
	// Now is the time the page is rendered for.
	Now time.Time
	// Resource is its fence, version, size and last writer.
	Resource Resource
	// Rejections are the newest refused writes to it, newest first.
	Rejections []Rejection
	// Writers are its newest accepted writes, newest first (the store keeps the last 10).
	Writers []Write
}

// Write is one accepted write of a resource: who wrote which version, with which token.
type Write struct {
	Version, Token int64
	// Lease is the write's Lease-Name, if any; Holder the holder of its token, when known.
	Lease, Holder string
	At            time.Time
	Size          int64
	ContentType   string
}

// ErrorInfo is the props of the error page, for not found and every other failure.
type ErrorInfo struct {
	// Status is the HTTP status code, e.g. 404.
	Status int
	// Title is a short summary, e.g. "Not found"; empty uses http.StatusText(Status).
	Title string
	// Detail explains what happened and what to do, e.g. "No lease named x was ever taken."
	Detail string
	// RequestID identifies the request in the logs; empty hides it.
	RequestID string
}

// SignIn is the sign-in page.
type SignIn struct {
	// Next is the local path to return to after signing in.
	Next string
	// Error says why the last attempt failed; empty for none.
	Error string
}

// KeyField is the sign-in form's field for the API key.
const KeyField = "key"
