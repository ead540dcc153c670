package faults

import (
	"path/filepath"
	"testing"
)

// powerLoop runs the workload against bin with its database on a disk that loses everything
// not fsynced; each cycle cuts the power at a random moment under load, remounts the disk with
// only its durable content, restarts the server and verifies every acknowledged operation.
func powerLoop(t *testing.T, bin string, n int) (*workload, int) {
	dir := t.TempDir()
	d := newDisk(nil)
	unmount := mountDisk(t, dir, d)
	unsyncedAtCut := 0
	w := loop(t, bin, filepath.Join(dir, "lk.db"), n, func(s *server) {
		unsyncedAtCut += d.unsynced()
		kept := d.cut()
		s.kill()
		unmount()
		d = newDisk(kept)
		unmount = mountDisk(t, dir, d)
	})
	return w, unsyncedAtCut
}

// TestPowerLoss: with synchronous=FULL no acknowledged operation is lost when the power goes.
func TestPowerLoss(t *testing.T) {
	w, unsynced := powerLoop(t, binary(t), cycles(3, 100))
	t.Logf("files with unsynced data at the cuts: %d", unsynced)
	w.report(t, "power loss")
}

// TestPowerLossCatchesSynchronousNormal is the negative control: the same store with
// synchronous=NORMAL (WAL commits not fsynced) must lose acknowledged operations.
func TestPowerLossCatchesSynchronousNormal(t *testing.T) {
	bin := binary(t, mutation{file: "store/sqlite/sqlite.go",
		find: `q.Set("_synchronous", "FULL")`, repl: `q.Set("_synchronous", "NORMAL")`})
	w, unsynced := powerLoop(t, bin, 3)
	t.Logf("power loss with synchronous=NORMAL: %s; files with unsynced data at the cuts: %d", &w.fig, unsynced)
	w.logFirst(t, 3)
	if w.fig.lost.Load() == 0 {
		t.Fatal("the power-loss check found no lost acknowledgement with synchronous=NORMAL")
	}
}
