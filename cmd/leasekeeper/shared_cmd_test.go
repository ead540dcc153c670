package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSharedCommands: acquire, lock and run take --shared: shared leases of a name are held
// together and say so; an exclusive acquire beside them is held off (exit 75); run hands CMD
// its shared slot.
func TestSharedCommands(t *testing.T) {
	srv := newTestServer(t)
	for i := range 2 {
		out, errOut, code := cli(t, srv, "acquire", "--shared", "--ttl", "1m", "--json", "cfg")
		var g leaseJSON
		if code != 0 || jsonDecode(out, &g) != nil || g.Mode != "shared" || g.Token == 0 {
			t.Fatalf("acquire --shared #%d: exit %d %q %q; want a shared grant", i, code, out, errOut)
		}
	}
	if _, errOut, code := cli(t, srv, "acquire", "--ttl", "1m", "cfg"); code != exTempFail {
		t.Errorf("acquire (exclusive) beside readers: exit %d %q, want %d", code, errOut, exTempFail)
	}
	h := start(t, srv, "lock", "--shared", "cfg")
	if out := h.waitOutput(t, "mode"); !strings.Contains(strings.Join(strings.Fields(out), " "), "mode shared") {
		t.Errorf("lock --shared printed %q, want mode shared", out)
	}
	h.stop()
	if code := h.exit(t, 10*time.Second); code != 0 {
		t.Errorf("lock --shared exit %d after the interrupt, want 0", code)
	}
	out := filepath.Join(t.TempDir(), "out")
	t.Setenv("OUT", out)
	if _, errOut, code := cli(t, srv, "run", "--name", "cfg", "--shared", "--", "sh", "-c", `echo "$LEASEKEEPER_SLOT" > "$OUT"`); code != 0 {
		t.Fatalf("run --shared: exit %d %q", code, errOut)
	}
	// Slots 0 and 1 are held by the acquires; lock's slot 2 was released.
	if s := waitFile(t, out, 10*time.Second); s != "2" {
		t.Errorf("CMD saw LEASEKEEPER_SLOT=%q, want 2", s)
	}
}
