package sqlite

import (
	"errors"
	"os"
	"syscall"
)

// allocate makes f hold size bytes of disk, not a sparse file's promise of them.
func allocate(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return writeZeros(f, size)
	}
	return err
}
