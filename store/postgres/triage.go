package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekeeper/leasekeeper/store"
)

// Triage counts the held leases under prefix that need a look, and lists their pending
// handovers, by the database's clock. Restarts of a replica stretch nothing here (the clock
// lives in the database), so Stretched is always 0. See store.Store.
func (s *Store) Triage(ctx context.Context, prefix string, within time.Duration) (store.Triage, error) {
	var out store.Triage
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return store.Triage{}, err
	}
	lo, hi := store.PrefixRange(prefix)
	// Each count reads a range of an index of open_due (by expiry; by the instant a renewal is
	// late), so neither grows with the held leases that need no look.
	err = s.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM open_due WHERE expires_at > $1 AND expires_at <= $2 AND name >= $3 AND name < $4),
		(SELECT count(*) FROM open_due WHERE late_at < $1 AND expires_at > $1 AND name >= $3 AND name < $4)`, custom,
		now, now+within.Milliseconds(), lo, hi).Scan(&out.Soon, &out.Late)
	if err != nil {
		return store.Triage{}, fmt.Errorf("count leases to look at: %w", translate(err))
	}
	rows, err := s.pool.Query(ctx, `SELECT `+store.TriageHandoverCols+`
		FROM handovers h JOIN grants g ON g.token = h.token
		WHERE g.ended_at IS NULL AND g.expires_at > $1 AND g.name >= $2 AND g.name < $3
		ORDER BY h.requested_at, h.token LIMIT $4`, custom, now, lo, hi, store.MaxLimit)
	if err != nil {
		return store.Triage{}, fmt.Errorf("list pending handovers: %w", translate(err))
	}
	defer rows.Close()
	if out.Handovers, err = store.ScanHandovers(rows); err != nil {
		return store.Triage{}, fmt.Errorf("list pending handovers: %w", translate(err))
	}
	return out, nil
}
