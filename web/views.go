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
}

// End is how a lease ended.
type End string

// The ways a lease ends.
const (
	EndReleased End = "released" // its holder released it
	EndExpired  End = "expired"  // its ttl ran out; the lock delay applies after it
	EndRevoked  End = "revoked"  // an administrator revoked it
)

// EventType is the type of a lease event, as in the API and the watch stream.
type EventType string

// The event types.
const (
	EventAcquired EventType = "acquired"
	EventRenewed  EventType = "renewed"
	EventReleased EventType = "released"
	EventExpired  EventType = "expired"
	EventRevoked  EventType = "revoked"
	EventRejected EventType = "rejected"
)

// Source says who refused a stale write.
type Source string

// The sources of rejections.
const (
	SourceLeasekeeper Source = "leasekeeper" // a fenced resource kept by leasekeeper
	SourceExternal    Source = "external"    // a resource elsewhere that reported it (POST /v1/rejections)
)

// Lease is the state of one name, held or free, as the API's LeaseState.
type Lease struct {
	// Name is the lease name. It is escaped wherever it is shown or put in a URL.
	Name string
	// Held reports whether an unexpired lease exists now.
	Held bool
	// Holder is the current holder, or for a free name the last one.
	Holder string
	// Token is the fencing token of the current, or last, grant.
	Token int64
	// AcquiredAt, RenewedAt and ExpiresAt are the times of the current, or last, grant.
	AcquiredAt, RenewedAt, ExpiresAt time.Time
	// TTL is the lease duration.
	TTL time.Duration
	// LockDelay is how long the name stays unavailable after an expiry.
	LockDelay time.Duration
	// AvailableAt is when the name can be granted again; zero when it can be now.
	AvailableAt time.Time
	// EndedAt and End say when and how the last grant ended, for a free name.
	EndedAt time.Time
	End     End
	// Waiters is the number of acquire requests waiting in line.
	Waiters int
	// Metadata is the lease's metadata as JSON, shown compacted; nil or "null" for none.
	Metadata json.RawMessage
}

// Event is one entry of a name's history, as the API's Event.
type Event struct {
	Seq    int64
	Type   EventType
	Token  int64
	Holder string
	// At is when it happened; for EventExpired, the moment the lease expired.
	At time.Time
	// ExpiresAt is the expiry the event set, for acquired and renewed; otherwise zero.
	ExpiresAt time.Time
	// Resource is the resource that refused the write, for rejected; otherwise empty.
	Resource string
	// Actor is who did an admin action (a revoke), "label (key id)"; otherwise empty.
	Actor string
}

// Rejection is one refused stale write, as the API's Rejection.
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
	Source     Source
	At         time.Time
}

// Resource is one fenced resource, as the API's ResourceInfo.
type Resource struct {
	Name        string
	Fence       int64
	Version     int64
	Size        int64
	ContentType string
	// Lease and Holder name the last writer, when known.
	Lease, Holder string
	UpdatedAt     time.Time
}

// Overview is the props of the overview page (/).
type Overview struct {
	// Now is the time the page is rendered for.
	Now time.Time
	// Host is the address shown in the curl example of the empty state, e.g. "localhost:8080".
	Host string
	// Prefix is the name prefix searched for (query parameter prefix); empty for all.
	Prefix string
	// Cursor is the cursor of this page (query parameter cursor); empty on the first page.
	Cursor string
	// HeldCount is the number of held leases matching Prefix, over all pages.
	HeldCount int
	// Held is this page of held leases, ordered by name.
	Held []Lease
	// NextCursor is the cursor of the next page of held leases; empty on the last page.
	NextCursor string
	// Freed are recently freed names, newest first (Held false, with EndedAt and End).
	Freed []Lease
	// Rejections are the newest rejected stale writes, newest first.
	Rejections []Rejection
}

// LeaseDetail is the props of a lease's page (/leases/{name}).
type LeaseDetail struct {
	// Now is the time the page is rendered for.
	Now time.Time
	// Lease is the state of the name.
	Lease Lease
	// Timeline is the picture of recent grants; see [TimelineFromEvents].
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
}

// RejectionList is the props of the rejections page (/rejections).
type RejectionList struct {
	// Now is the time the page is rendered for.
	Now time.Time
	// Resource and Lease are the filters (query parameters resource and lease); empty for all.
	Resource, Lease string
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
