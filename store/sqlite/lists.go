package sqlite

import (
	"time"

	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// collect reads up to limit items from rows (queried with LIMIT limit+1) into a page whose Next
// is the cursor of its last item's key when more remain.
func collect[T any](rows *sql.Rows, limit int, scan func(scanner) (T, error), key func(T) string) (store.Page[T], error) {
	defer rows.Close()
	page, err := store.Collect(rows, limit, func() (T, error) { return scan(rows) }, key)
	return page, w(err)
}

// List returns leases ordered by name. See store.Store.
func (s *Store) List(ctx context.Context, f store.LeaseFilter) (store.Page[lease.State], error) {
	lq, err := store.CheckLeaseFilter(f)
	if err != nil {
		return store.Page[lease.State]{}, err
	}
	now := s.clock.Now().UnixMilli()
	q := `SELECT ` + grantCols + ` FROM names n JOIN grants g ON g.token = n.token
		WHERE n.name > ?1 AND n.name >= ?2 AND n.name < ?3 AND ` + lq.HeldCondition("?4") + ` ORDER BY n.name LIMIT ?5`
	limit := lq.Limit
	rows, err := s.r.QueryContext(ctx, q, lq.After, lq.Lo, lq.Hi, now, limit+1)
	if err != nil {
		return store.Page[lease.State]{}, fmt.Errorf("list leases: %w", w(err))
	}
	page, err := collect(rows, limit, func(r scanner) (lease.State, error) {
		g, err := scanGrant(r)
		return g.state(now), err
	}, func(st lease.State) string { return st.Name })
	if err != nil {
		return page, fmt.Errorf("list leases: %w", err)
	}
	return page, nil
}

const eventCols = `seq, type, name, token, holder, at, expires_at, metadata, resource, actor, lock_delay_ms, detail`

// eventColsByName is eventCols of events e found through events_by_name b. The seq is b's (the
// same), so that SQLite sees the rows come in the order of b's key and sorts none of them.
var eventColsByName = "b.seq, e." + strings.ReplaceAll(strings.TrimPrefix(eventCols, "seq, "), ", ", ", e.")

func scanEvent(r scanner) (lease.Event, error) {
	var e lease.Event
	var typ string
	var at int64
	var exp, delay sql.NullInt64
	var md, res sql.NullString
	var detail *string
	if err := r.Scan(&e.Seq, &typ, &e.Name, &e.Token, &e.Holder, &at, &exp, &md, &res, &e.Actor, &delay, &detail); err != nil {
		return e, err
	}
	e.Type, e.At, e.Metadata, e.Resource = lease.EventType(typ), ms(at), raw(md), res.String
	e.LockDelay = time.Duration(delay.Int64) * time.Millisecond
	store.SetEventDetail(&e, detail)
	if exp.Valid {
		e.ExpiresAt = ms(exp.Int64)
	}
	return e, nil
}

// Events returns events oldest first, or newest first. See store.Store.
func (s *Store) Events(ctx context.Context, f store.EventFilter) (store.Page[lease.Event], error) {
	eq, err := store.CheckEventFilter(f)
	if err != nil {
		return store.Page[lease.Event]{}, err
	}
	cmpSeq, order, bound, since, limit := eq.Cmp, eq.Order, eq.Bound, eq.Since, eq.Limit
	var rows *sql.Rows
	if f.Name != "" {
		// The events up to meta.events_indexed through events_by_name, the newer ones (a few
		// thousand at most) by seq; one statement, so one snapshot of both and of the mark.
		// With its slots ("name#0" to "name#999", all between "name#" and "name$"): two more
		// parts, each in seq order through its index, which SQLite merges with the name's own
		// events (a compound ORDER BY), so a name without slots costs what it did.
		slots := ""
		if f.Slots {
			slots = ` UNION ALL
			SELECT ` + eventColsByName + ` FROM events_by_name b CROSS JOIN events e ON e.seq = b.seq
			WHERE b.name > ?1 || '#' AND b.name < ?1 || '$' AND b.seq ` + cmpSeq + ` ?2
			AND b.seq <= (SELECT value FROM meta WHERE key = 'events_indexed') AND e.at >= ?3
			UNION ALL
			SELECT ` + eventCols + ` FROM events WHERE seq > (SELECT value FROM meta WHERE key = 'events_indexed')
			AND name > ?1 || '#' AND name < ?1 || '$' AND seq ` + cmpSeq + ` ?2 AND at >= ?3`
		}
		rows, err = s.r.QueryContext(ctx, `SELECT `+eventColsByName+` FROM events_by_name b CROSS JOIN events e ON e.seq = b.seq
			WHERE b.name = ?1 AND b.seq `+cmpSeq+` ?2 AND b.seq <= (SELECT value FROM meta WHERE key = 'events_indexed') AND e.at >= ?3
			UNION ALL
			SELECT `+eventCols+` FROM events WHERE seq > (SELECT value FROM meta WHERE key = 'events_indexed') AND seq `+cmpSeq+` ?2
			AND name = ?1 AND at >= ?3`+slots+`
			ORDER BY 1`+order+` LIMIT ?4`,
			f.Name, bound, since, limit+1)
	} else {
		lo, hi := store.PrefixRange(f.Prefix)
		rows, err = s.r.QueryContext(ctx, `SELECT `+eventCols+` FROM events WHERE seq `+cmpSeq+` ? AND name >= ? AND name < ? AND at >= ? ORDER BY seq`+order+` LIMIT ?`,
			bound, lo, hi, since, limit+1)
	}
	if err != nil {
		return store.Page[lease.Event]{}, fmt.Errorf("list events: %w", w(err))
	}
	page, err := collect(rows, limit, scanEvent, func(e lease.Event) string { return store.SeqKey(e.Seq) })
	if err != nil {
		return page, fmt.Errorf("list events: %w", err)
	}
	return page, nil
}

// LatestSeq returns the newest event's seq. See store.Store.
func (s *Store) LatestSeq(ctx context.Context) (int64, error) {
	var seq sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT max(seq) FROM events`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("latest event: %w", w(err))
	}
	return seq.Int64, nil
}
