package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatementsReadOnlyWhatTheyNeed: statements whose cost must not grow with every grant
// or name kept read through their indexes. A scan of grants read every grant ever kept at
// every prune; a scan of names, once per grant deleted (the foreign key of names.token), made
// pruning 5,000 grants among 100,000 names take 23 s under the writer lock; a session's page
// read every name.
func TestStatementsReadOnlyWhatTheyNeed(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "p.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		name, sql string
		args      int
		want      []string
	}{
		{"prune by age", pruneGrantsBefore, 1, []string{"SEARCH grants USING COVERING INDEX grants_ended", "SEARCH names USING COVERING INDEX names_token (token=?)"}},
		{"prune by rows", pruneGrantsBeyond, 1, []string{"SEARCH grants USING COVERING INDEX grants_ended", "SEARCH names USING COVERING INDEX names_token (token=?)"}},
		{"a session's page", sessionLeases, 1, []string{"SEARCH g USING INDEX grants_session (session=?)", "names_token (token=?)"}},
		{"renew a session's leases", sessionRenewLeases, 4, []string{"grants_session (session=? AND ended_at=?)"}},
		{"end a session's leases", sessionOpenLeases, 1, []string{"grants_session (session=? AND ended_at=?)"}},
		{"count a key's open sessions", sessionsOpenOwned, 2, []string{"lease_sessions_owner_open (owner=? AND expires_at>?)"}},
	} {
		rows, err := s.w.Query(`EXPLAIN QUERY PLAN `+tc.sql, make([]any, tc.args)...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		all := strings.Join(plan, "; ")
		for _, want := range tc.want {
			if !strings.Contains(all, want) {
				t.Errorf("plan to %s: %s; want %s", tc.name, all, want)
			}
		}
		if strings.Contains(all, "SCAN") {
			t.Errorf("plan to %s: %s; want no scan", tc.name, all)
		}
	}
}
