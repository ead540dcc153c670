package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekeeper/leasekeeper/store"
)

// Triage counts the held leases under prefix that need a look, and lists their pending
// handovers. See store.Store.
func (s *Store) Triage(ctx context.Context, prefix string, within time.Duration) (store.Triage, error) {
	var out store.Triage
	now := s.clock.Now().UnixMilli()
	lo, hi := store.PrefixRange(prefix)
	// Each count reads a range of an index of the open grants: expiring soon by expiry, late by
	// the instant a renewal is late (from that index alone, less the few past expiry not yet
	// recorded, found by expiry: reading each late row for its expiry took seconds with most
	// of a million late), so neither grows with the held leases that need no look.
	// A restart's stretch is counted only when the start stretched any (StretchedAtStart): it
	// stretched every grant open then, the tokens up to stretchTop. Without a prefix, those are
	// the open grants (meta.open_grants) less the ones granted since (grants_open_newest from
	// stretchTop on: few, soon after a restart); with one, the prefix's range of
	// grants_open_name, which holds the token (its rowid); either way less those past expiry
	// not yet recorded. Reading each open row for its restart_ext_ms took seconds at a million
	// (BENCHMARKS.md).
	stretched := `(SELECT count(*) FROM grants INDEXED BY grants_open_name WHERE ended_at IS NULL AND token <= ?5
		AND name >= ?3 AND name < ?4)`
	if prefix == "" {
		stretched = `(SELECT value FROM meta WHERE key = 'open_grants')
		- (SELECT count(*) FROM grants INDEXED BY grants_open_newest WHERE ended_at IS NULL AND token > ?5)`
	}
	err := s.r.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM grants INDEXED BY grants_open WHERE ended_at IS NULL AND expires_at > ?1 AND expires_at <= ?2
			AND name >= ?3 AND name < ?4),
		(SELECT count(*) FROM grants INDEXED BY grants_open_late WHERE ended_at IS NULL AND renewed_at + ttl_ms / 2 < ?1
			AND name >= ?3 AND name < ?4) - (SELECT count(*) FROM grants INDEXED BY grants_open WHERE ended_at IS NULL
			AND expires_at <= ?1 AND renewed_at + ttl_ms / 2 < ?1 AND name >= ?3 AND name < ?4),
		CASE WHEN ?5 > 0 THEN `+stretched+` - (SELECT count(*) FROM grants INDEXED BY grants_open WHERE ended_at IS NULL
			AND expires_at <= ?1 AND token <= ?5 AND name >= ?3 AND name < ?4) ELSE 0 END`,
		now, now+within.Milliseconds(), lo, hi, s.stretchTop).Scan(&out.Soon, &out.Late, &out.Stretched)
	if err != nil {
		return store.Triage{}, fmt.Errorf("count leases to look at: %w", w(err))
	}
	rows, err := s.r.QueryContext(ctx, triageHandovers, now, lo, hi, store.MaxLimit)
	if err != nil {
		return store.Triage{}, fmt.Errorf("list pending handovers: %w", w(err))
	}
	defer rows.Close()
	if out.Handovers, err = store.ScanHandovers(rows); err != nil {
		return store.Triage{}, fmt.Errorf("list pending handovers: %w", w(err))
	}
	return out, nil
}

// triageHandovers lists the pending handovers of held leases in a name range. CROSS JOIN
// makes SQLite read the few handovers and each one's grant by key: left to choose, it walked
// every open grant in the range for the handovers of a few (100 ms per dashboard page at a
// million: BENCHMARKS.md).
const triageHandovers = `SELECT ` + store.TriageHandoverCols + `
	FROM handovers h CROSS JOIN grants g ON g.token = h.token
	WHERE g.ended_at IS NULL AND g.expires_at > ? AND g.name >= ? AND g.name < ?
	ORDER BY h.requested_at, h.token LIMIT ?`
