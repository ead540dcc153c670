// Package heldsql writes the SQL of store.Store's Held for both backends, whose schemas agree
// on the grants and semaphores tables: the filters as conditions on an open grant, each order
// as a keyset over its index, the count, and one row per semaphore.
package heldsql

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/leasekeeper/leasekeeper/store"
)

// Dialect is what differs between the backends' SQL.
type Dialect struct {
	// Instr is the function that finds a substring: instr(s, sub) or strpos(s, sub).
	Instr string
	// Param starts a named parameter: ':' (SQLite) or '@' (pgx).
	Param byte
	// Hints says that statements name the index they read (SQLite's INDEXED BY); without, the
	// database's planner chooses.
	Hints bool
	// Narrow is the most matches a page reads through its filter's index and sorts (with
	// Hints); 0 is NarrowRows, -1 never.
	Narrow int
	// OpenGrants, when set, is an expression that counts every open grant cheaply (SQLite's
	// meta.open_grants): the count of an unfiltered Held starts from it.
	OpenGrants string
	// Like says that a part of a name or holder is found with LIKE and an escaped pattern in
	// the table open_text, which PostgreSQL's trigram indexes answer, rather than with Instr,
	// which reads every candidate row. (SQLite's LIKE ignores case.)
	Like bool
	// Among is the subquery that lists the tokens of the JSON array argument "among" (see
	// Query.Among); empty is SQLite's json_each. PostgreSQL reads it as jsonb, and a text
	// element compared with a bigint token would fail.
	Among string
	// Due says that the counts and pages that filter or order by expiry or late mark read the
	// table open_due (token, name, expires_at, late_at), which holds the open grants alone,
	// and a page then reads its rows from grants by token: the indexes of PostgreSQL's grants
	// read neither instant, so that a renewal updates its row in place (migration 0019).
	// Without, they are the grant's own columns.
	Due bool
}

// Dialects of the backends.
var (
	SQLite   = Dialect{Instr: "instr", Param: ':', Hints: true}
	Postgres = Dialect{Instr: "strpos", Param: '@', Like: true, Due: true,
		Among:      `SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:among AS jsonb))`,
		OpenGrants: `((SELECT n FROM open_grants) + (SELECT coalesce(sum(n), 0) FROM open_grants_delta))`}
)

// LikePattern is a LIKE pattern that matches the strings that contain part, its wildcards
// and the escape character escaped (the default escape character, backslash).
func LikePattern(part string) string {
	return "%" + likeEscaper.Replace(part) + "%"
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

// NarrowRows is the most matches a page reads through its filter's index and sorts; with
// more, it walks the order's index and checks the filter on each row (it meets a page of
// matches soon). The count, read first, tells which.
const NarrowRows = 5000

// NarrowBound is d.Narrow with its default: the most matches a page sorts, 0 for none.
func (d Dialect) NarrowBound() int {
	switch {
	case d.Narrow == 0:
		return NarrowRows
	case d.Narrow < 0:
		return 0
	}
	return d.Narrow
}

// orderIndex is the index each order walks.
var orderIndex = map[string]string{
	store.OrderName:   "grants_open_name",
	store.OrderExpiry: "grants_open",
	store.OrderLate:   "grants_open_late",
	store.OrderNewest: "grants_open_newest",
}

// A source is where a statement reads the grant it names: the grants table; open_due, the
// open grants' names, expiries and late marks with an index of each instant (a dialect with
// Due); or open_text, the open grants' names and holders with trigram indexes (a dialect with
// Like). The two hold the open grants alone.
type source int

const (
	fromGrants source = iota
	fromDue
	fromText
)

// rel is the grant a, read from src.
type rel struct {
	a   string
	src source
}

// rel is the grant a, read from open_due when the dialect has it and due is set (the
// statement orders or filters by expiry or late mark), else from grants.
func (q Query) rel(a string, due bool) rel {
	if q.d.Due && due {
		return rel{a, fromDue}
	}
	return rel{a, fromGrants}
}

// orderKey is the order's key of the grant r, and what the order sorts by.
func (q Query) orderKey(r rel) (key, orderBy string) {
	switch q.f.Order {
	case store.OrderExpiry:
		return r.expiry(), r.expiry() + ", " + r.a + ".token"
	case store.OrderLate:
		return r.late(), r.late() + ", " + r.a + ".token"
	case store.OrderNewest:
		return r.a + ".token", r.a + ".token DESC"
	}
	return r.a + ".name", r.a + ".name"
}

// expiry is the expiry of the open grant r.
func (r rel) expiry() string {
	return r.a + ".expires_at"
}

// late is the instant at which a renewal of the open grant r is late: half its TTL after its
// last renewal.
func (r rel) late() string {
	if r.src == fromDue {
		return r.a + ".late_at"
	}
	return fmt.Sprintf("%[1]s.renewed_at + %[1]s.ttl_ms / 2", r.a)
}

// wantsDue reports whether the page orders or filters by expiry or late mark, which a dialect
// with Due reads through open_due.
func (q Query) wantsDue() bool {
	return q.f.Order == store.OrderExpiry || q.f.Order == store.OrderLate || q.f.State != ""
}

// Query is the SQL of one Held call, for the checked filter f (store.CheckHeld) at now.
type Query struct {
	d    Dialect
	f    store.HeldFilter
	cols string
	// among, when set, restricts every statement to the grants whose tokens the JSON array
	// argument "among" lists (see Among).
	among bool
	// open, when set, is Count's first term, given as the argument "open" (see OpenCounted).
	open bool
	// bound, when set, is where Page's walk of its order's index begins (see Bound).
	bound bool
	// Args are the statements' named arguments.
	Args map[string]any
}

// New makes the query of f at now (milliseconds); cols are the columns each row reads, of the
// grant g.
func New(d Dialect, f store.HeldFilter, now int64, cols string) Query {
	lo, hi := store.PrefixRange(f.Prefix)
	q := Query{d: d, f: f, cols: cols, Args: map[string]any{"now": now, "lo": lo, "hi": hi,
		"soon": now + store.ExpiringWithin.Milliseconds(), "q": f.Contains, "holder": f.Holder, "limit": f.Limit + 1}}
	if d.Like {
		q.Args["q"], q.Args["holder"] = LikePattern(f.Contains), LikePattern(f.Holder)
	}
	for i, p := range f.Within {
		q.Args["wlo"+strconv.Itoa(i)], q.Args["whi"+strconv.Itoa(i)] = store.PrefixRange(p)
	}
	return q
}

// sql puts the dialect's parameter marks and function names in s, written with ':' and instr.
func (q Query) sql(s string) string {
	if q.d.Param != ':' {
		s = strings.ReplaceAll(s, ":", string(q.d.Param))
	}
	return strings.ReplaceAll(s, "instr(", q.d.Instr+"(")
}

// from is the table of r: "grants a", reading index when the dialect names indexes.
func (q Query) from(r rel, index string) string {
	a := r.a
	switch {
	case r.src == fromDue:
		return "open_due " + a
	case r.src == fromText:
		return "open_text " + a
	case q.d.Hints && !q.among:
		return "grants " + a + " INDEXED BY " + index
	}
	return "grants " + a
}

// filters are the conditions of f on the open grant r, but its expiry. (open_due and
// open_text hold the open grants alone.)
func (q Query) filters(r rel) string {
	a := r.a
	var b strings.Builder
	if r.src == fromGrants {
		fmt.Fprintf(&b, "%s.ended_at IS NULL AND ", a)
	}
	fmt.Fprintf(&b, "%[1]s.name >= :lo AND %[1]s.name < :hi", a)
	if q.among && a != "h" {
		among := q.d.Among
		if among == "" {
			among = "SELECT value FROM json_each(:among)"
		}
		fmt.Fprintf(&b, " AND %s.token IN (%s)", a, among)
	}
	if len(q.f.Within) > 0 {
		var or []string
		for i := range q.f.Within {
			or = append(or, fmt.Sprintf("%[1]s.name >= :wlo%[2]d AND %[1]s.name < :whi%[2]d", a, i))
		}
		b.WriteString(" AND (" + strings.Join(or, " OR ") + ")")
	}
	match := " AND instr(%[1]s.%[2]s, :%[3]s) > 0"
	switch {
	case r.src == fromText:
		match = " AND %[1]s.%[2]s LIKE :%[3]s"
	case q.d.Like:
		// open_text: the open grants' names and holders, trigram-indexed, kept apart from
		// grants so that a renewal does not write trigram entries (migration 0017).
		match = " AND %[1]s.token IN (SELECT t.token FROM open_text t WHERE t.%[2]s LIKE :%[3]s)"
	}
	if q.f.Contains != "" {
		fmt.Fprintf(&b, match, a, "name", "q")
	}
	if q.f.Holder != "" {
		fmt.Fprintf(&b, match, a, "holder", "holder")
	}
	switch q.f.State {
	case store.HeldExpiring:
		fmt.Fprintf(&b, " AND %s <= :soon", r.expiry())
	case store.HeldLate:
		fmt.Fprintf(&b, " AND %s < :now AND %s", r.late(), q.plain(a))
	}
	return b.String()
}

// slotMark is what a semaphore's slot has in its name (lease.SlotName) and a plain grant's
// name has not: plain in SQL and Plain in Go.
const slotMark = "#"

// plain is the condition that the grant a is no semaphore's slot (its name has no '#').
// PostgreSQL estimates "strpos(...) = 0" at 0.5 % of the rows, so small that it joins the
// grants it then reads whole to the late or expiring ones; NOT LIKE it estimates from the
// statistics of the names: nearly every row.
func (q Query) plain(a string) string {
	if q.d.Like {
		return a + ".name NOT LIKE '%" + slotMark + "%'"
	}
	return "instr(" + a + ".name, '" + slotMark + "') = 0"
}

// Plain reports whether a grant named name is no semaphore's slot: plain's rule, in Go.
func Plain(name []byte) bool {
	return bytes.IndexByte(name, slotMark[0]) < 0
}

// match is filters and unexpired.
func (q Query) match(r rel) string {
	return q.filters(r) + " AND " + r.expiry() + " > :now"
}

// filterIndex is the index that holds the fewest candidates of the filter.
func (q Query) filterIndex() string {
	switch q.f.State {
	case store.HeldExpiring:
		return "grants_open"
	case store.HeldLate:
		return "grants_open_late"
	}
	return "grants_open_name"
}

// Sifted reports whether f filters by name or holder, which Sieve can do.
func (q Query) Sifted() bool { return q.f.Contains != "" || q.f.Holder != "" }

// Sift is the filters of a Query on a grant's name and holder (its prefix, Within, Contains
// and Holder) as a rule in Go, for a search outside SQL (the index of parts, package parts),
// with the same answers as filters' SQL on both backends: a range compares bytes, as SQLite's
// BINARY collation (memcmp) and PostgreSQL's "C" collation of names do, and a part is found as
// instr or an escaped LIKE pattern finds it, case and '%' and '_' as they are.
type Sift struct {
	lo, hi           []byte
	within           [][2][]byte
	contains, holder []byte
	counts           bool
	order            string        // the page's order, for Bound
	after            store.HeldKey // the key the page follows, when more
	more             bool
}

// After is s for the page after the key after (the first page when more is false), so that
// Bound and Later know where the page begins.
func (s Sift) After(after store.HeldKey, more bool) Sift {
	s.after, s.more = after, more
	return s
}

// Bounds reports whether a search outside SQL can bound the page's walk of its order's index
// (Query.Bound): the orders by name and by token. It knows nothing of expiries.
func (s Sift) Bounds() bool {
	return s.order != store.OrderExpiry && s.order != store.OrderLate
}

// Later reports whether a grant of this name and token comes after the key the page follows
// (every one, on the first page), in an order that Bounds.
func (s Sift) Later(name []byte, token int64) bool {
	switch {
	case !s.more:
		return true
	case s.order == store.OrderNewest:
		return token < s.after.Token
	}
	return string(name) > s.after.Name
}

// Before reports whether the grant (name, token) comes before (a, at) in an order that
// Bounds: which of two is the better bound.
func (s Sift) Before(name []byte, token int64, a []byte, at int64) bool {
	if s.order == store.OrderNewest {
		return token > at
	}
	return bytes.Compare(name, a) < 0
}

// Sift is q's filters on name and holder. See Sift.Counts for when they count.
func (q Query) Sift() Sift {
	lo, hi := store.PrefixRange(q.f.Prefix)
	s := Sift{lo: []byte(lo), hi: []byte(hi), contains: []byte(q.f.Contains), holder: []byte(q.f.Holder), order: q.f.Order}
	for _, p := range q.f.Within {
		lo, hi := store.PrefixRange(p)
		s.within = append(s.within, [2][]byte{[]byte(lo), []byte(hi)})
	}
	// instr steps through its haystack a character at a time, so a part of invalid UTF-8 (a
	// lone continuation byte) is not found inside a character where bytes.Contains finds it:
	// only a valid part is found alike (names and holders are valid UTF-8).
	s.counts = q.f.State == "" && !q.among && utf8.Valid(s.contains) && utf8.Valid(s.holder)
	return s
}

// Counts reports whether the open grants that pass Match and Plain are Count's first term
// (OpenCounted's n): for a filter without a State, whose parts are valid UTF-8.
func (s Sift) Counts() bool { return s.counts }

// Parts are the parts of the name and of the holder a match contains (empty: no condition).
func (s Sift) Parts() (name, holder []byte) { return s.contains, s.holder }

// Match reports whether a grant with this name and holder passes the filters on them: the
// rules of filters, but the open and expiry conditions, which the caller knows.
func (s Sift) Match(name, holder []byte) bool {
	return s.MatchName(name) && bytes.Contains(holder, s.holder)
}

// MatchName is Match's rules on the name alone, for a caller that knows the holder passes.
func (s Sift) MatchName(name []byte) bool {
	if compare(name, s.lo) < 0 || compare(name, s.hi) >= 0 {
		return false
	}
	if len(s.within) > 0 {
		in := false
		for _, r := range s.within {
			if compare(name, r[0]) >= 0 && compare(name, r[1]) < 0 {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	return bytes.Contains(name, s.contains)
}

// compare is bytes.Compare, told by the first bytes where it can (most names against a range:
// a call of bytes.Compare was a third of the time of a filter that a million names pass).
func compare(a, b []byte) int {
	switch {
	case len(b) == 0:
		return min(len(a), 1)
	case len(a) == 0:
		return -1
	case a[0] != b[0]:
		return cmp.Compare(a[0], b[0])
	}
	return bytes.Compare(a, b)
}

// argsWith is extra with q's arguments added: a new map for a statement or a derived Query
// (the Args of q and of its copies are one map, never written).
func (q Query) argsWith(extra map[string]any) map[string]any {
	maps.Copy(extra, q.Args)
	return extra
}

// Sieve is the statement that lists the tokens of the open grants that pass the filters on
// name and holder, through grants_open_name alone (it holds both), at most limit: the one walk
// over that index a rare match needs. Only for a dialect with Hints (SQLite), and a filter
// with Contains or Holder.
func (q Query) Sieve(limit int) (string, map[string]any) {
	args := q.argsWith(map[string]any{"sieve": limit})
	a := q.rel("a", false)
	return q.sql(`SELECT a.token FROM ` + q.from(a, "grants_open_name") + ` WHERE ` + q.filters(a) + ` LIMIT :sieve`), args
}

// Among is q restricted to the grants whose tokens are listed, as a JSON array, a Sieve's
// answer: its Count and Page read those rows by token instead of walking an index.
func (q Query) Among(tokens string) Query {
	args := q.argsWith(map[string]any{"among": tokens})
	q.among, q.Args = true, args
	return q
}

// OpenCounted is q with Count's first term given as n, counted outside SQL (SQLite's index of
// parts): the open grants that are no semaphore's slot and pass the filters on name and holder,
// by Sift's Match and Plain. Its Count reads the other terms alone: the open grants past expiry
// that the sweeper has not recorded (through grants_open: a few) and the semaphores with a
// held slot that matches. Only for a Query whose Sift counts (no State), not restricted by
// Among.
func (q Query) OpenCounted(n int) Query {
	args := q.argsWith(map[string]any{"open": n})
	q.open, q.Args = true, args
	return q
}

// Bound is q with its Page's walk of the order's index begun at the first grant that passes the
// filters on name and holder after the page's key, found outside SQL (the index of parts): by
// name at name, by token (newest first) at token. The grants it skips pass no filter, and
// where the walk met thousands of them (names that sort before the matches', grants newer than
// theirs), it read each against open_text. Only for an order that Sift.Bounds.
func (q Query) Bound(name string, token int64) Query {
	args := q.argsWith(map[string]any{"from": name, "upto": token})
	q.bound, q.Args = true, args
	return q
}

// Count is the statement that counts the rows of every page: the open grants that match
// (through the filter's index, or given: OpenCounted), less the few open ones past expiry that
// the sweeper has not recorded yet (through grants_open), plus one per semaphore with a held
// slot that matches.
func (q Query) Count() string {
	plain := q.plain("a")
	var c string
	switch {
	case q.open && q.f.State == "" && !q.among:
		c = `SELECT :open`
	case q.f.State == store.HeldExpiring:
		// grants_open's range gives the unexpired ones directly.
		a := q.rel("a", true)
		c = `SELECT (SELECT count(*) FROM ` + q.from(a, q.filterIndex()) + ` WHERE ` + q.filters(a) + ` AND ` + plain + ` AND ` + a.expiry() + ` > :now)`
	case q.d.OpenGrants != "" && !q.among && q.f.Prefix == "" && len(q.f.Within) == 0 && !q.Sifted() && q.f.State == "":
		// Every open grant but the semaphores' slots, without a walk over them (SQLite's
		// CROSS JOIN keeps the semaphores the outer loop).
		join := "JOIN"
		if q.d.Hints {
			join = "CROSS JOIN"
		}
		c = `SELECT ` + q.d.OpenGrants + ` - (SELECT count(*) FROM semaphores m ` + join + ` ` + q.from(q.rel("a", false), "grants_open_name") + `
			ON a.ended_at IS NULL AND a.name > m.name || '#' AND a.name < m.name || '$')`
	default:
		a := q.rel("a", q.f.State == store.HeldLate)
		if q.d.Like && q.Sifted() && q.f.State == "" {
			// The open grants whose name or holder has the part are open_text's rows that
			// its trigram indexes find: no grant is read.
			a = rel{"a", fromText}
		}
		c = `SELECT (SELECT count(*) FROM ` + q.from(a, q.filterIndex()) + ` WHERE ` + q.filters(a) + ` AND ` + plain + `)`
	}
	if q.f.State != store.HeldExpiring {
		a := q.rel("a", true)
		c += ` - (SELECT count(*) FROM ` + q.from(a, "grants_open") + ` WHERE ` + a.expiry() + ` <= :now AND ` + q.filters(a) + ` AND ` + plain + `)`
	}
	if q.f.State != store.HeldLate { // a slot is never late
		a := q.rel("a", false)
		c += ` + (SELECT count(*) FROM semaphores m WHERE m.name < :hi AND m.name || '$' > :lo AND EXISTS (
		SELECT 1 FROM ` + q.from(a, "grants_open_name") + ` WHERE ` + q.match(a) + ` AND a.name > m.name || '#' AND a.name < m.name || '$'))`
	}
	return q.sql(c)
}

// Page is the statement of the page after the key after (the first page when more is false),
// given the total Count answered, with its arguments. A semaphore's slot is a row only when
// no other held slot of it that matches comes before it in the order.
func (q Query) Page(total int, after store.HeldKey, more bool) (string, map[string]any) {
	index := orderIndex[q.f.Order]
	if total <= q.d.NarrowBound() {
		index = q.filterIndex()
	}
	due := q.wantsDue()
	g, h := q.rel("g", due), q.rel("h", due)
	gk, orderBy := q.orderKey(g)
	hk, _ := q.orderKey(h)
	var keyset, before string
	switch q.f.Order {
	case store.OrderName:
		keyset, before = "g.name > :after", "h.name < g.name"
	case store.OrderNewest:
		keyset, before = "g.token < :t", "h.token > g.token"
	default:
		keyset = fmt.Sprintf("%[1]s >= :n AND (%[1]s > :n OR g.token > :t)", gk)
		before = fmt.Sprintf("(%[1]s < %[2]s OR %[1]s = %[2]s AND h.token < g.token)", hk, gk)
	}
	cols := q.cols
	if g.src == fromDue {
		cols = "g.token, g.name, g.expires_at, g.late_at"
	}
	s := `SELECT ` + cols + ` FROM ` + q.from(g, index) + ` WHERE ` + q.match(g)
	switch {
	case !q.bound:
	case q.f.Order == store.OrderNewest:
		s += ` AND g.token <= :upto`
	case q.f.Order != store.OrderExpiry && q.f.Order != store.OrderLate:
		s += ` AND g.name >= :from`
	}
	args := q.Args
	if more {
		s += ` AND ` + keyset
		args = q.argsWith(map[string]any{"after": after.Name, "n": after.N, "t": after.Token})
	}
	s += ` AND (instr(g.name, '#') = 0 OR NOT EXISTS (SELECT 1 FROM ` + q.from(h, "grants_open_name") + ` WHERE ` + q.match(h) + `
		AND h.name > substr(g.name, 1, instr(g.name, '#')) AND h.name < substr(g.name, 1, instr(g.name, '#') - 1) || '$' AND ` + before + `))
		ORDER BY ` + orderBy + ` LIMIT :limit`
	if g.src == fromDue {
		// The page is found in open_due alone (the planner, costing a lookup in grants for
		// each of thousands of late or expiring grants, read all of grants instead: 400 ms at
		// a million); its grants are then read by token.
		_, pageOrder := q.orderKey(rel{"p", fromDue})
		s = `SELECT ` + q.cols + ` FROM (` + s + `) p JOIN grants g ON g.token = p.token ORDER BY ` + pageOrder
	}
	return q.sql(s), args
}
