package sqlite

import (
	"context"
	"fmt"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store"
)

// Sessions lists sessions ordered by ref. See store.Store.
func (s *Store) Sessions(ctx context.Context, f store.SessionFilter) (store.Page[lease.Session], error) {
	after, err := store.DecodeCursor(f.Cursor)
	if err != nil {
		return store.Page[lease.Session]{}, err
	}
	limit := store.ClampLimit(f.Limit)
	now := s.clock.Now().UnixMilli()
	rows, err := s.r.QueryContext(ctx, sessionSelect+`WHERE ref > ?1 AND (NOT ?2 OR closed_at IS NULL AND expires_at > ?3)
		AND (?4 = '' OR owner = ?4) ORDER BY ref LIMIT ?5`, after, f.Open, now, f.Owner, limit+1)
	if err != nil {
		return store.Page[lease.Session]{}, fmt.Errorf("list sessions: %w", w(err))
	}
	page, err := collect(rows, limit, readSession, func(ss lease.Session) string { return ss.Ref })
	if err != nil {
		return store.Page[lease.Session]{}, fmt.Errorf("list sessions: %w", err)
	}
	return page, nil
}
