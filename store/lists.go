package store

import (
	"unicode/utf8"

	"github.com/leasekeeper/leasekeeper/lease"
)

// The lists both backends page the same way: checked here once, so a cursor, a limit or a state
// means one thing whichever database answers.

// NameQuery is a checked page of a list by name: it starts after the name After and holds at
// most Limit items whose names lie in [Lo, Hi).
type NameQuery struct {
	After  string
	Limit  int
	Lo, Hi string
}

// CheckNamePage checks a cursor, a limit and a prefix of a list by name. Codes: invalid_request
// (a cursor this server did not give out, a prefix that is not UTF-8).
func CheckNamePage(cursor string, limit int, prefix string) (NameQuery, error) {
	q := NameQuery{Limit: ClampLimit(limit)}
	if !utf8.ValidString(prefix) {
		return q, lease.Errorf(lease.CodeInvalid, "prefix is not valid UTF-8")
	}
	if cursor != "" {
		var err error
		if q.After, err = DecodeCursor(cursor); err != nil {
			return q, err
		}
	}
	q.Lo, q.Hi = PrefixRange(prefix)
	return q, nil
}

// LeaseQuery is a checked LeaseFilter; State is "", "held" or "free".
type LeaseQuery struct {
	NameQuery
	State string
}

// CheckLeaseFilter checks f. Codes: invalid_request (a cursor this server did not give out, or a
// state other than held or free).
func CheckLeaseFilter(f LeaseFilter) (LeaseQuery, error) {
	switch f.State {
	case "", "held", "free":
	default:
		return LeaseQuery{}, lease.Errorf(lease.CodeInvalid, "state must be held or free, not %q", f.State)
	}
	nq, err := CheckNamePage(f.Cursor, f.Limit, f.Prefix)
	return LeaseQuery{NameQuery: nq, State: f.State}, err
}

// RejectionQuery is a checked RejectionFilter's page: rejections whose id is below Before, at
// or after Since (Unix milliseconds), at most Limit of them, newest first.
type RejectionQuery struct {
	Before, Since int64
	Limit         int
}

// CheckRejectionFilter checks f's page. Codes: invalid_request (a cursor this server did not
// give out).
func CheckRejectionFilter(f RejectionFilter) (RejectionQuery, error) {
	q := RejectionQuery{Before: 1<<63 - 1, Since: -1 << 62, Limit: ClampLimit(f.Limit)}
	if f.Cursor != "" {
		c, err := DecodeSeqCursor(f.Cursor)
		if err != nil {
			return q, err
		}
		q.Before = c
	}
	if !f.Since.IsZero() {
		q.Since = f.Since.UnixMilli()
	}
	return q, nil
}

// HeldCondition is the SQL condition on grant g that State asks for, with now as the parameter
// param ("" when any state will do: then param is still mentioned, so that both backends bind
// the same arguments).
func (q LeaseQuery) HeldCondition(param string) string {
	switch q.State {
	case "held":
		return `g.ended_at IS NULL AND g.expires_at > ` + param
	case "free":
		return `NOT (g.ended_at IS NULL AND g.expires_at > ` + param + `)`
	}
	return param + ` IS NOT NULL`
}

// EventQuery is a checked EventFilter: events whose seq compares to Bound by Cmp (">" oldest
// first, "<" newest first), ordered by seq in Order ("" or " DESC"), at or after Since (Unix
// milliseconds), at most Limit of them.
type EventQuery struct {
	Cmp, Order string
	Bound      int64
	Since      int64
	Limit      int
}

// CheckEventFilter checks f. Codes: invalid_request (a cursor this server did not give out).
func CheckEventFilter(f EventFilter) (EventQuery, error) {
	after, err := DecodeSeqCursor(f.Cursor)
	if err != nil {
		return EventQuery{}, err
	}
	q := EventQuery{Cmp: ">", Bound: max(after, f.AfterSeq), Since: -1 << 62, Limit: ClampLimit(f.Limit)}
	if !f.Since.IsZero() {
		q.Since = f.Since.UnixMilli()
	}
	if f.Newest {
		q.Cmp, q.Order = "<", " DESC"
		if f.Cursor == "" {
			q.Bound = 1<<63 - 1
		}
	}
	return q, nil
}

// Collect reads the items of rows (queried with LIMIT limit+1), each by scan, into a page whose
// Next is the cursor of its last item's key when more remain. It does not close rows.
func Collect[T any](rows Rows, limit int, scan func() (T, error), key func(T) string) (Page[T], error) {
	var items []T
	for rows.Next() {
		item, err := scan()
		if err != nil {
			return Page[T]{}, err
		}
		items = append(items, item)
	}
	if err := rows.Err(); err != nil {
		return Page[T]{}, err
	}
	return PageOf(items, limit, key), nil
}

// CheckNames bounds a lookup of several names at once. Codes: invalid_request for more than
// MaxLimit.
func CheckNames(names []string) error {
	if len(names) > MaxLimit {
		return lease.Errorf(lease.CodeInvalid, "at most %d names at once, not %d", MaxLimit, len(names))
	}
	return nil
}
