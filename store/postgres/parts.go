package postgres

import (
	"database/sql"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store/parts"
)

// The statements that read the index of parts' entries (package parts): a build reads
// open_text (the open grants' token, name and holder, kept by triggers on grants) by its
// primary key, as the grants opened since are; the marks are the tokens row (every grant locks
// it, so tokens grow in commit order) and the event_seq row (taken by every transaction that
// records events and held to its end, so seqs are gapless and become visible in order); every
// end of a grant (end, and the fast path's UPDATE of ended_at) records a released, expired or
// revoked event with its token in the same transaction.
const (
	partsAfter = `SELECT token, name, holder FROM open_text WHERE token > $1 ORDER BY token LIMIT $2`
	partsMarks = `SELECT (SELECT last FROM tokens), (SELECT last FROM event_seq)`
	partsSeqs  = `SELECT (SELECT last FROM event_seq), coalesce((SELECT min(seq) FROM events), 0)`
	partsEnds  = `SELECT token FROM events WHERE seq > $1 AND seq <= $2 AND type IN ('` +
		string(lease.EndReleased) + `', '` + string(lease.EndExpired) + `', '` + string(lease.EndRevoked) + `')`
)

// partsSQL is PostgreSQL's SQL of the index of parts. A round reads the grants since and the
// ends in one snapshot: a read-only REPEATABLE READ transaction (READ COMMITTED would take a
// snapshot per statement, and an end read in the second might be of a grant the first missed).
func partsSQL() parts.SQL {
	return parts.SQL{
		Marks: partsMarks,
		After: partsAfter,
		AfterArgs: func(_, _ []byte, token, chunk int64) []any {
			return []any{token, chunk}
		},
		Since: partsAfter,
		Seqs:  partsSeqs,
		Ends:  partsEnds,
		Round: &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
		Wrap:  translate,
	}
}
