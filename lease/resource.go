package lease

import "time"

// Resource is a fenced resource kept by leasekeeper: a value whose writes must carry a fencing
// token at least as high as the highest one it has accepted (its fence).
type Resource struct {
	Name        string
	Fence       int64
	Version     int64
	UpdatedAt   time.Time
	Size        int64
	ContentType string
	Lease       string // Lease-Name of the last write, if any
	Holder      string // holder of the last write's token, when known
	Value       []byte // only when read with its value
}

// Write is one accepted write of a fenced resource, as its short history of writers keeps it.
type Write struct {
	Version     int64
	Token       int64
	Lease       string // Lease-Name of the write, if any
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
}

// Where a rejection was made.
const (
	RejectionSourceServer   = "leasekeeper"
	RejectionSourceExternal = "external"
)
