package postgres

import (
	"time"

	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// collect reads up to limit items from rows (queried with LIMIT limit+1) into a page whose Next
// is the cursor of its last item's key when more remain.
func collect[T any](rows pgx.Rows, limit int, scan func(pgx.Row) (T, error), key func(T) string) (store.Page[T], error) {
	defer rows.Close()
	page, err := store.Collect(rows, limit, func() (T, error) { return scan(rows) }, key)
	return page, translate(err)
}

// List returns leases ordered by name. See store.Store.
func (s *Store) List(ctx context.Context, f store.LeaseFilter) (store.Page[lease.State], error) {
	lq, err := store.CheckLeaseFilter(f)
	if err != nil {
		return store.Page[lease.State]{}, err
	}
	q := `SELECT ` + grantCols + ` FROM names n JOIN grants g ON g.token = n.token
		WHERE n.name > $1 AND n.name >= $2 AND n.name < $3 AND ` + lq.HeldCondition("$4::bigint") + ` ORDER BY n.name LIMIT $5`
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return store.Page[lease.State]{}, err
	}
	limit := lq.Limit
	rows, err := s.pool.Query(ctx, q, lq.After, lq.Lo, lq.Hi, now, limit+1)
	if err != nil {
		return store.Page[lease.State]{}, fmt.Errorf("list leases: %w", translate(err))
	}
	page, err := collect(rows, limit, func(r pgx.Row) (lease.State, error) {
		g, err := scanGrant(r)
		return g.state(now), err
	}, func(st lease.State) string { return st.Name })
	if err != nil {
		return page, fmt.Errorf("list leases: %w", err)
	}
	return page, nil
}

const eventCols = `seq, type, name, token, holder, at, expires_at, metadata, resource, actor, lock_delay_ms, detail`

func scanEvent(r pgx.Row) (lease.Event, error) {
	var e lease.Event
	var typ string
	var at int64
	var exp, delay *int64
	var md, res, detail *string
	if err := r.Scan(&e.Seq, &typ, &e.Name, &e.Token, &e.Holder, &at, &exp, &md, &res, &e.Actor, &delay, &detail); err != nil {
		return e, err
	}
	e.Type, e.At, e.Metadata, e.Resource = lease.EventType(typ), ms(at), raw(md), deref(res)
	if delay != nil {
		e.LockDelay = time.Duration(*delay) * time.Millisecond
	}
	store.SetEventDetail(&e, detail)
	if exp != nil {
		e.ExpiresAt = ms(*exp)
	}
	return e, nil
}

// Events returns events oldest first, or newest first. Seqs become visible in order (see
// insertEvents), so a reader resuming after seq n misses nothing. See store.Store.
func (s *Store) Events(ctx context.Context, f store.EventFilter) (store.Page[lease.Event], error) {
	eq, err := store.CheckEventFilter(f)
	if err != nil {
		return store.Page[lease.Event]{}, err
	}
	cmpSeq, order, bound, since, limit := eq.Cmp, eq.Order, eq.Bound, eq.Since, eq.Limit
	// Only events known to be durable: those up to the last published (see try).
	durable := s.published.Load()
	var rows pgx.Rows
	switch {
	case f.Name != "" && f.Slots:
		// The name's events (through events_name) and its slots' ("name#i", through
		// events_slots), each part in seq order, merged: no part sorts a history.
		rows, err = s.pool.Query(ctx, `(SELECT `+eventCols+` FROM events WHERE name = $1 AND seq `+cmpSeq+` $2 AND at >= $3
			AND seq <= $5 ORDER BY seq`+order+` LIMIT $4)
			UNION ALL
			(SELECT `+eventCols+` FROM events WHERE strpos(name, '#') > 0 AND split_part(name, '#', 1) = $1 AND seq `+cmpSeq+` $2
			AND at >= $3 AND seq <= $5 ORDER BY seq`+order+` LIMIT $4)
			ORDER BY 1`+order+` LIMIT $4`, f.Name, bound, since, limit+1, durable)
	case f.Name != "":
		rows, err = s.pool.Query(ctx, `SELECT `+eventCols+` FROM events WHERE name = $1 AND seq `+cmpSeq+` $2 AND at >= $3
			AND seq <= $5 ORDER BY seq`+order+` LIMIT $4`, f.Name, bound, since, limit+1, durable)
	default:
		lo, hi := store.PrefixRange(f.Prefix)
		rows, err = s.pool.Query(ctx, `SELECT `+eventCols+` FROM events WHERE seq `+cmpSeq+` $1 AND name >= $2 AND name < $3
			AND at >= $4 AND seq <= $6 ORDER BY seq`+order+` LIMIT $5`, bound, lo, hi, since, limit+1, durable)
	}
	if err != nil {
		return store.Page[lease.Event]{}, fmt.Errorf("list events: %w", translate(err))
	}
	page, err := collect(rows, limit, scanEvent, func(e lease.Event) string { return store.SeqKey(e.Seq) })
	if err != nil {
		return page, fmt.Errorf("list events: %w", err)
	}
	return page, nil
}

// LatestSeq returns the newest event's seq. See store.Store.
func (s *Store) LatestSeq(ctx context.Context) (int64, error) {
	var seq *int64
	if err := s.pool.QueryRow(ctx, `SELECT max(seq) FROM events WHERE seq <= $1`, s.published.Load()).Scan(&seq); err != nil {
		return 0, fmt.Errorf("latest event: %w", translate(err))
	}
	if seq == nil {
		return 0, nil
	}
	return *seq, nil
}
