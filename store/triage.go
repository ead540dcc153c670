package store

import (
	"time"

	"github.com/leasekeeper/leasekeeper/lease"
)

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

// Rows is what both backends' query results offer.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// TriageHandoverCols are the columns ScanHandovers reads, from handovers h joined to grants g.
const TriageHandoverCols = `g.name, g.holder, h.token, h.to_holder, h.reason, h.requested_by, h.requested_at`

// ScanHandovers reads the rows of a query of TriageHandoverCols.
func ScanHandovers(rows Rows) ([]lease.Handover, error) {
	var out []lease.Handover
	for rows.Next() {
		var h lease.Handover
		var at int64
		if err := rows.Scan(&h.Name, &h.Holder, &h.Token, &h.To, &h.Reason, &h.By, &at); err != nil {
			return nil, err
		}
		h.At = time.UnixMilli(at).UTC()
		out = append(out, h)
	}
	return out, rows.Err()
}
