package store

import "github.com/leasekeeper/leasekeeper/lease"

// Triage is what needs a look among the held leases under a prefix (see Store.Triage).
type Triage struct {
	// Soon is how many expire within the window asked for.
	Soon int
	// Late is how many had no renewal for more than half their ttl.
	Late int
	// Stretched is how many had their expiry extended by a server restart (invariant 5).
	Stretched int
	// Handovers are the pending handover requests of held leases, oldest first; for a
	// semaphore's slot, Name is the slot's ("sem#2").
	Handovers []lease.Handover
}
