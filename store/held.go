package store

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/leasekeeper/leasekeeper/lease"
)

// HeldFilter selects the held leases of Held: every filter applies to all of them, in the
// database, before the order and the page.
type HeldFilter struct {
	Prefix string
	// Within, when not empty, keeps only names under one of these prefixes (a scoped key's).
	Within []string
	// Contains keeps names that contain it; Holder, holders that contain it.
	Contains, Holder string
	// State is "" (every held lease), HeldExpiring or HeldLate.
	State string
	// Order is OrderName (the default for ""), OrderExpiry, OrderLate or OrderNewest.
	Order  string
	Limit  int
	Cursor string
}

// The states Held filters by.
const (
	// HeldExpiring keeps the leases that expire within ExpiringWithin.
	HeldExpiring = "expiring"
	// HeldLate keeps the plain leases (not a semaphore's slots) whose holder has not renewed for
	// more than half their ttl: clients renew well before that.
	HeldLate = "late"
)

// ExpiringWithin is how soon a lease must expire to be HeldExpiring.
const ExpiringWithin = time.Minute

// The orders of Held; each is a keyset over an index, ties broken by token.
const (
	OrderName   = "name"
	OrderExpiry = "expiry" // soonest expiry first
	OrderLate   = "late"   // longest overdue renewal first: by renewed_at + ttl/2
	OrderNewest = "newest" // latest grant first: by token, descending
)

// HeldPage is one page of Held: Total is how many rows match over all pages, a semaphore
// counting once, as it shows.
type HeldPage struct {
	Items []lease.State
	Next  string
	Total int
}

// HeldKey is the position of a row in a Held order: Name in OrderName; N (the expiry or the
// late mark, in milliseconds) and Token in the others.
type HeldKey struct {
	Name     string
	N, Token int64
}

// LateMark is the instant after which the lease st is late (OrderLate's key): its last renewal
// plus half its ttl, in milliseconds, as both backends compute it in SQL.
func LateMark(st lease.State) int64 {
	return st.RenewedAt.UnixMilli() + st.TTL.Milliseconds()/2
}

// KeyOf is st's position in order.
func KeyOf(order string, st lease.State) HeldKey {
	switch order {
	case OrderExpiry:
		return HeldKey{N: st.ExpiresAt.UnixMilli(), Token: st.Token}
	case OrderLate:
		return HeldKey{N: LateMark(st), Token: st.Token}
	case OrderNewest:
		return HeldKey{Token: st.Token}
	}
	return HeldKey{Name: st.Name}
}

// CheckHeld validates f, fills in the default order and page size, and decodes its cursor
// (zero for the first page). Codes: invalid_request for an unknown state or order, or a cursor
// that is not one of this order's.
func CheckHeld(f HeldFilter) (HeldFilter, HeldKey, bool, error) {
	if f.Order == "" {
		f.Order = OrderName
	}
	switch f.Order {
	case OrderName, OrderExpiry, OrderLate, OrderNewest:
	default:
		return f, HeldKey{}, false, lease.Errorf(lease.CodeInvalid, "order must be name, expiry, late or newest, not %q", f.Order)
	}
	switch f.State {
	case "", HeldExpiring, HeldLate:
	default:
		return f, HeldKey{}, false, lease.Errorf(lease.CodeInvalid, "state must be expiring or late, not %q", f.State)
	}
	for _, part := range []struct{ what, s string }{{"q", f.Contains}, {"holder", f.Holder}, {"prefix", f.Prefix}} {
		if !utf8.ValidString(part.s) {
			return f, HeldKey{}, false, lease.Errorf(lease.CodeInvalid, "%s is not valid UTF-8", part.what)
		}
	}
	f.Limit = ClampLimit(f.Limit)
	if f.Cursor == "" {
		return f, HeldKey{}, false, nil
	}
	raw, err := DecodeCursor(f.Cursor)
	if err != nil {
		return f, HeldKey{}, false, err
	}
	bad := lease.Errorf(lease.CodeInvalid, "cursor %q is not one this server gave out for order %s", f.Cursor, f.Order)
	order, rest, ok := strings.Cut(raw, ":")
	if !ok || order != f.Order {
		return f, HeldKey{}, false, bad
	}
	if f.Order == OrderName {
		return f, HeldKey{Name: rest}, true, nil
	}
	n, t, ok := strings.Cut(rest, ":")
	var k HeldKey
	var e1, e2 error
	k.N, e1 = strconv.ParseInt(n, 10, 64)
	k.Token, e2 = strconv.ParseInt(t, 10, 64)
	if !ok || e1 != nil || e2 != nil {
		return f, HeldKey{}, false, bad
	}
	return f, k, true, nil
}

// HeldPageOf makes a page of items read with one more than limit.
func HeldPageOf(items []lease.State, limit int, order string, total int) HeldPage {
	p := PageOf(items, limit, func(st lease.State) string {
		k := KeyOf(order, st)
		if order == OrderName {
			return order + ":" + k.Name
		}
		return order + ":" + strconv.FormatInt(k.N, 10) + ":" + strconv.FormatInt(k.Token, 10)
	})
	return HeldPage{Items: p.Items, Next: p.Next, Total: total}
}
