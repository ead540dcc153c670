//go:build !linux

package sqlite

import "os"

// allocate makes f hold size bytes of disk, not a sparse file's promise of them.
func allocate(f *os.File, size int64) error { return writeZeros(f, size) }
