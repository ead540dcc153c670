package web

import (
	"time"

	"github.com/a-h/templ"
)

// Triage is the summary at the top of the overview: what needs a look now, each number
// linking to the view that lists it. Every count is of what the viewer may see.
type Triage struct {
	// Held is the number of held leases.
	Held int
	// Soon expire within [SoonWindow]; Late had no renewal for more than half their ttl;
	// Stretched had their expiry extended by a restart of the server.
	Soon, Late, Stretched int
	// RejectedHour and RejectedDay count the writes refused in the last hour and day;
	// RejectedMore says the day's count stopped at the newest ones the page reads.
	RejectedHour, RejectedDay int
	RejectedMore              bool
	// Waiters is the number of acquires waiting in line; Waiting the names they wait for,
	// most waiters first.
	Waiters int
	Waiting []Waiting
	// Handovers are the pending handover requests of held leases, oldest first.
	Handovers []Handover
	// Started is when this server started; Epoch names that start ("ep_…"); empty hides both.
	Started time.Time
	Epoch   string
}

// SoonWindow is how close to its expiry a held lease counts as expiring soon in [Triage].
const SoonWindow = time.Minute

// RecentStart is how long after a start the summary says that the server restarted.
const RecentStart = 10 * time.Minute

// Waiting is one name with acquires waiting for it.
type Waiting struct {
	Name    string
	Waiters int
}

// Handover is a pending request that the holder of a lease let it go.
type Handover struct {
	// Name is the lease (a semaphore's name, for one of its slots); Holder holds the grant
	// asked, Token is that grant's.
	Name, Holder string
	Token        int64
	// To is the holder preferred next, empty for whoever waits first; Reason is free text.
	To, Reason string
	// By is who asked, "label (key id)"; At when.
	By string
	At time.Time
}

// overviewSortURL is the overview with the same filters, in another order.
func overviewSortURL(o Overview, sort string) templ.SafeURL {
	if sort == SortName {
		sort = ""
	}
	return pageURL("/", "prefix", o.Prefix, "q", o.Contains, "holder", o.Holder, "state", o.State, "sort", sort)
}

// ariaSort is the aria-sort value of a column header: "ascending" (or, for the orders that put
// the largest first, "descending") on the column the list is ordered by, "none" on the others
// that can order it.
func ariaSort(o Overview, sort string) string {
	if o.Sort == sort {
		if sort == SortLate || sort == SortNewest {
			return "descending"
		}
		return "ascending"
	}
	return "none"
}

// recentStart reports whether the server started within [RecentStart] of now.
func (t Triage) recentStart(now time.Time) bool {
	return !t.Started.IsZero() && now.Sub(t.Started) < RecentStart
}

// rejectedDayText is the day's count of refused writes, "1000+" style when it stopped short.
func rejectedDayText(t Triage) string {
	if t.RejectedMore {
		return itoa(t.RejectedDay) + "+"
	}
	return countText(t.RejectedDay)
}

// sortArrow shows the direction of the order a column header set.
func sortArrow(sort string) string {
	if sort == SortLate || sort == SortNewest {
		return "↓"
	}
	return "↑"
}
