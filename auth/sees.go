package auth

import "github.com/leasekeeper/leasekeeper/lease"

// What a key sees is its scope, whichever way it asks (invariant 8): these settle it for
// the records a list or a stream shows.

// SeesEvent reports whether the principal may see an event: one whose name and resource, each
// when it has one, are both in its scope (a rejection of a resource outside it does not show
// on a lease inside, nor the reverse); the audit events of keys only for admins.
func (p Principal) SeesEvent(e lease.Event) bool {
	switch e.Type {
	case lease.EventKeyCreated, lease.EventKeyRevoked:
		return p.IsAdmin()
	}
	return (e.Name != "" || e.Resource != "") && (e.Name == "" || p.InScope(e.Name)) && (e.Resource == "" || p.InScope(e.Resource))
}

// SeesRejection reports whether the principal may see a rejection: one whose resource and
// lease (when it names one) are both in its scope.
func (p Principal) SeesRejection(r lease.Rejection) bool {
	return p.InScope(r.Resource) && (r.Lease == "" || p.InScope(r.Lease))
}

// ListScope narrows a list under prefix to what the principal may read: the prefix to ask the
// store for, a check for each item's names (nil when every item is in scope), and none when
// nothing under prefix is.
func (p Principal) ListScope(prefix string) (narrowed string, keep func(names ...string) bool, none bool) {
	narrowed, check, none := p.Narrow(prefix)
	if check {
		keep = func(names ...string) bool {
			for _, n := range names {
				if n != "" && p.InScope(n) {
					return true
				}
			}
			return false
		}
	}
	return narrowed, keep, none
}

// Attributed is a write's lease and holder as the principal may see them, on a resource in
// its scope: both empty when the lease is outside it, as for a token that named no lease.
func (p Principal) Attributed(leaseName, holder string) (string, string) {
	if leaseName != "" && !p.InScope(leaseName) {
		return "", ""
	}
	return leaseName, holder
}
