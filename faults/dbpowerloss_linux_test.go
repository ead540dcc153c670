package faults

import (
	"os"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

// TestDatabasePowerLoss runs TestDatabaseCrash's rounds with PostgreSQL's WAL on the power-loss
// disk (powerfs_linux_test.go) and fsync on: each fault stops the database as a crash does and
// then keeps, of the WAL, only what PostgreSQL had fsynced, as a power cut would. The data files
// stay on the machine's disk, whole: PostgreSQL writes a data page only after the WAL that
// describes it is fsynced, so they hold nothing the kept WAL does not, and recovery starts from
// the last checkpoint, whose WAL was fsynced before it was recorded.
func TestDatabasePowerLoss(t *testing.T) {
	bin := binary(t)
	// Not t.TempDir: the postgres user must reach the mount point.
	wal, err := os.MkdirTemp("", "lk-wal-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(wal) })
	if err := os.Chmod(wal, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := &pgtest.Server{WALDir: wal, Settings: []string{"fsync=on", "synchronous_commit=on", "wal_writer_delay=10000ms"}}
	// Each mount's cleanup unmounts it: the cluster stops first (cleanups run last in, first out).
	mount := func(d *disk) func() {
		unmount := mountDisk(t, wal, d)
		t.Cleanup(srv.Stop)
		return unmount
	}
	d := newDisk(nil)
	unmount := mount(d)
	unsynced := 0
	w := dbFaultLoop(t, bin, srv, cycles(3, 20), func() {
		srv.Down(t, "immediate")
		unsynced += d.unsynced()
		kept := d.cut()
		unmount()
		d = newDisk(kept)
		unmount = mount(d)
	}, func() { srv.Up(t) })
	t.Logf("WAL files with unsynced data at the cuts: %d", unsynced)
	w.report(t, "PostgreSQL power loss")
}
