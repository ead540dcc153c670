package sqlite

import (
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/store/parts"
)

// PartsMode is how Held finds the grants whose name or holder contains a part
// (Options.HeldParts); see package parts.
type PartsMode = parts.Mode

// The modes of Options.HeldParts.
const (
	PartsBackground = parts.Background
	PartsAtOnce     = parts.AtOnce
	PartsNever      = parts.Never
)

// The statements that read the index of parts' entries (package parts): the open grants
// after a key of grants_open_name (which holds name and holder), in its order, and those past
// a token, in order; and its ends: the events past a seq, through their rowid
// (TestPartsPlans), and the newest seq ever given (sqlite_sequence keeps it when the newest
// events are pruned) with the oldest kept. A round reads in a read transaction: one snapshot.
const (
	partsAfter = `SELECT token, name, holder FROM grants INDEXED BY grants_open_name
		WHERE ended_at IS NULL AND (name, holder, token) > (?, ?, ?) ORDER BY name, holder, token LIMIT ?`
	partsSince = `SELECT token, name, holder FROM grants INDEXED BY grants_open_newest
		WHERE ended_at IS NULL AND token > ? ORDER BY token LIMIT ?`
	partsLastSeq = `coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)`
	partsMarks   = `SELECT (SELECT value FROM meta WHERE key = 'last_token'), ` + partsLastSeq
	partsSeqs    = `SELECT ` + partsLastSeq + `, coalesce((SELECT min(seq) FROM events), 0)`
	partsEnds    = `SELECT token FROM events WHERE seq > ? AND seq <= ? AND type IN ('` +
		string(lease.EndReleased) + `', '` + string(lease.EndExpired) + `', '` + string(lease.EndRevoked) + `')`
)

// partsSQL is SQLite's SQL of the index of parts.
func partsSQL() parts.SQL {
	return parts.SQL{
		Marks: partsMarks,
		After: partsAfter,
		// The key is bound as text: to SQLite a blob sorts after every text.
		AfterArgs: func(name, holder []byte, token, chunk int64) []any {
			return []any{string(name), string(holder), token, chunk}
		},
		Since: partsSince,
		Seqs:  partsSeqs,
		Ends:  partsEnds,
		Wrap:  w,
	}
}
