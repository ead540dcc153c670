package faults

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// disk is a flat in-memory filesystem served over FUSE that behaves like a disk with a volatile
// write cache: writes are visible at once but become durable only when the file is fsynced.
// A power cut keeps, for each file, the content of its last fsync and nothing written after.
// Creating, renaming and removing a file are durable at once (as on a journaling filesystem
// that commits metadata before the data it orders), which favours the server, never hides a
// lost fsync of data.
type disk struct {
	fs.Inode
	mu    sync.Mutex
	files map[string]*file
	dirs  map[string]*emptyDir // made durable at once, as files are created
	dead  bool                 // the power is off: every change fails
}

// emptyDir is a subdirectory that stays empty: PostgreSQL makes pg_wal/archive_status and,
// without WAL archiving, never writes in it.
type emptyDir struct{ fs.Inode }

type file struct {
	fs.Inode
	d      *disk
	data   []byte // what a reader sees now
	synced []byte // what survives a power cut
	mode   uint32
}

var (
	_ fs.NodeOnAdder   = (*disk)(nil)
	_ fs.NodeCreater   = (*disk)(nil)
	_ fs.NodeUnlinker  = (*disk)(nil)
	_ fs.NodeRenamer   = (*disk)(nil)
	_ fs.NodeFsyncer   = (*disk)(nil)
	_ fs.NodeGetattrer = (*disk)(nil)
	_ fs.NodeSetattrer = (*disk)(nil)
	_ fs.NodeMkdirer   = (*disk)(nil)
	_ fs.NodeOpener    = (*file)(nil)
	_ fs.NodeReader    = (*file)(nil)
	_ fs.NodeWriter    = (*file)(nil)
	_ fs.NodeFsyncer   = (*file)(nil)
	_ fs.NodeFlusher   = (*file)(nil)
	_ fs.NodeGetattrer = (*file)(nil)
	_ fs.NodeSetattrer = (*file)(nil)
)

// newDisk returns a disk holding files (name → content), all of it durable; a name ending in
// a slash is an empty directory.
func newDisk(files map[string][]byte) *disk {
	d := &disk{files: map[string]*file{}, dirs: map[string]*emptyDir{}}
	for name, b := range files {
		if dir, ok := strings.CutSuffix(name, "/"); ok {
			d.dirs[dir] = &emptyDir{}
			continue
		}
		d.files[name] = &file{d: d, data: clone(b), synced: clone(b), mode: 0o600}
	}
	return d
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func (d *disk) OnAdd(ctx context.Context) {
	for name, f := range d.files {
		d.AddChild(name, d.NewPersistentInode(ctx, f, fs.StableAttr{Mode: syscall.S_IFREG}), false)
	}
	for name, e := range d.dirs {
		d.AddChild(name, d.NewPersistentInode(ctx, e, fs.StableAttr{Mode: syscall.S_IFDIR}), false)
	}
}

func (d *disk) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o777
	return 0
}

// Setattr accepts a change of mode or owner and keeps none: the disk's root is open to all.
func (d *disk) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o777
	return 0
}

func (d *disk) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, syscall.EIO
	}
	e := &emptyDir{}
	d.dirs[name] = e
	out.Mode = syscall.S_IFDIR | 0o777
	return d.NewPersistentInode(ctx, e, fs.StableAttr{Mode: syscall.S_IFDIR}), 0
}

func (d *disk) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, nil, 0, syscall.EIO
	}
	f := &file{d: d, mode: mode & 0o7777}
	d.files[name] = f
	out.Mode = syscall.S_IFREG | f.mode
	return d.NewPersistentInode(ctx, f, fs.StableAttr{Mode: syscall.S_IFREG}), nil, 0, 0
}

func (d *disk) Unlink(ctx context.Context, name string) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return syscall.EIO
	}
	delete(d.files, name)
	return 0
}

func (d *disk) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return syscall.EIO
	}
	if newParent.EmbeddedInode() != d.EmbeddedInode() || flags != 0 {
		return syscall.ENOTSUP
	}
	d.files[newName] = d.files[name]
	delete(d.files, name)
	return 0
}

func (d *disk) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return syscall.EIO
	}
	return 0
}

// cut switches the power off: from now on every change fails, and the returned files are what
// the disk holds when it comes back: each file's content at its last fsync.
func (d *disk) cut() map[string][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	out := map[string][]byte{}
	for name, f := range d.files {
		out[name] = clone(f.synced)
	}
	for name := range d.dirs {
		out[name+"/"] = nil
	}
	return out
}

// unsynced counts the bytes that differ from the durable content (for the figures).
func (d *disk) unsynced() (files int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.files {
		if string(f.data) != string(f.synced) {
			files++
		}
	}
	return files
}

func (f *file) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, 0
}

func (f *file) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	off = min(off, int64(len(f.data)))
	end := min(off+int64(len(dest)), int64(len(f.data)))
	return fuse.ReadResultData(clone(f.data[off:end])), 0
}

func (f *file) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if f.d.dead {
		return 0, syscall.EIO
	}
	if end := off + int64(len(data)); end > int64(len(f.data)) {
		f.data = append(f.data, make([]byte, end-int64(len(f.data)))...)
	}
	copy(f.data[off:], data)
	return uint32(len(data)), 0
}

func (f *file) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if f.d.dead {
		return syscall.EIO
	}
	f.synced = clone(f.data)
	return 0
}

func (f *file) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

func (f *file) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	out.Mode = syscall.S_IFREG | f.mode
	out.Size = uint64(len(f.data))
	out.Blocks = (out.Size + 511) / 512
	return 0
}

func (f *file) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if f.d.dead {
		return syscall.EIO
	}
	if sz, ok := in.GetSize(); ok {
		if sz <= uint64(len(f.data)) {
			f.data = f.data[:sz]
		} else {
			f.data = append(f.data, make([]byte, sz-uint64(len(f.data)))...)
		}
	}
	if m, ok := in.GetMode(); ok {
		f.mode = m & 0o7777
	}
	out.Mode = syscall.S_IFREG | f.mode
	out.Size = uint64(len(f.data))
	return 0
}

// mountDisk serves d at dir until the returned function unmounts it.
func mountDisk(t testing.TB, dir string, d *disk) func() {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		skipUnlessRequired(t, fmt.Sprintf("power-loss test: %v", err))
	}
	if os.Geteuid() != 0 {
		skipUnlessRequired(t, "power-loss test: mounting the test filesystem directly needs root")
	}
	srv, err := fs.Mount(dir, d, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMountStrict: true, FsName: "powerloss", Name: "powerloss", MaxWrite: 1 << 20,
		AllowOther: true}}) // PostgreSQL's WAL on it is written by the postgres user
	if err != nil {
		t.Fatalf("mount the power-loss filesystem at %s: %v", dir, err)
	}
	var once sync.Once
	unmount := func() {
		once.Do(func() {
			if err := srv.Unmount(); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
	}
	t.Cleanup(unmount)
	return unmount
}
