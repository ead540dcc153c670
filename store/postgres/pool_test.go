package postgres

import "testing"

// TestPoolConfigSessionSettings: every connection of the store commits synchronously (a write
// is answered after its flush, which waits for the disk only then) and runs without JIT (which
// spent 370 ms compiling a 0.2 ms page of the overview at a million leases), unless the URL
// sets jit itself; the pool's size follows pool_max_conns, then the option, then the default.
// No database is needed: this is the configuration the pool opens connections with.
func TestPoolConfigSessionSettings(t *testing.T) {
	for _, tc := range []struct {
		url      string
		maxConns int
		jit      string
		conns    int32
	}{
		{"postgres://u@/db?host=/tmp", 0, "off", DefaultMaxConns},
		{"postgres://u@/db?host=/tmp", 5, "off", 5},
		{"postgres://u@/db?host=/tmp&jit=on&pool_max_conns=3", 5, "on", 3},
		{"host=/tmp user=u dbname=db pool_max_conns=7", 0, "off", 7},
	} {
		cfg, err := poolConfig(tc.url, tc.maxConns)
		if err != nil {
			t.Fatalf("poolConfig(%q) = %v", tc.url, err)
		}
		params := cfg.ConnConfig.RuntimeParams
		if params["jit"] != tc.jit || params["synchronous_commit"] != "on" || cfg.MaxConns != tc.conns {
			t.Errorf("poolConfig(%q, %d): jit %q, synchronous_commit %q, %d connections; want jit %q, on, %d",
				tc.url, tc.maxConns, params["jit"], params["synchronous_commit"], cfg.MaxConns, tc.jit, tc.conns)
		}
	}
}
