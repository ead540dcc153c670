package sqlite

import (
	"fmt"
	"os"
	"sync"
)

// DefaultReserve is the disk space a store holds beside its database by default (Options.Reserve).
const DefaultReserve = 8 << 20

// reserve is disk space held in a file beside the database (<db>-reserve) and given back when
// a write fails for want of space. On a full disk SQLite cannot even delete: a delete writes
// its pages to the WAL first. With the reserve given back, the operations that free space
// (deleting a resource, releasing or revoking a lease, closing a session, pruning history) run
// again at once and commit. The reserve is taken again as soon as there is room for it.
type reserve struct {
	path string
	size int64

	mu   sync.Mutex
	held bool
}

// openReserve takes the reserve if the disk has room for it; on a disk already full it starts
// given back.
func openReserve(path string, size int64) (*reserve, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the disk reserve %s: %w", path, err)
	}
	f.Close()
	r := &reserve{path: path, size: size}
	r.take()
	return r, nil
}

// take holds the reserve again, if the disk has room for all of it; it reports whether the
// reserve is held.
func (r *reserve) take() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held {
		return true
	}
	f, err := os.OpenFile(r.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := allocate(f, r.size); err != nil {
		f.Truncate(0)
		return false
	}
	r.held = true
	return true
}

// give gives the reserve back to the disk; it reports whether it was held.
func (r *reserve) give() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.held {
		return false
	}
	if err := os.Truncate(r.path, 0); err != nil {
		return false
	}
	r.held = false
	return true
}

// writeZeros makes f hold size bytes by writing them, on systems without fallocate.
func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, 64<<10)
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf[:min(int64(len(buf)), size-off)], off); err != nil {
			return err
		}
	}
	return f.Sync()
}
