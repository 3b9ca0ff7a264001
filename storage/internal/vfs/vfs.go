// Package vfs is the small file-system seam of the storage engines: an FS
// and File interface covering exactly what commitlog, consumequeue and index
// do to files (create, preallocate, fdatasync, map, msync, rename, directory
// fsync), an implementation over the operating system (OS), and an
// error-injecting wrapper (NewErrorFS) for tests, in the spirit of pebble's
// vfs/errorfs.
//
// Production code always runs on OS(); tests wrap it with NewErrorFS to make
// the n-th msync or fallocate fail. Nothing here knows about mqgate's
// formats.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
	"github.com/mqgate/mqgate/storage/internal/mmap"
	"golang.org/x/sys/unix"
)

// FS is the file system the storage engines use. Paths are ordinary OS
// paths.
type FS interface {
	// Create creates (or truncates) name for reading and writing.
	Create(name string) (File, error)
	// CreatePerm is Create with the permission bits of a new file.
	CreatePerm(name string, perm os.FileMode) (File, error)
	// ReadFile returns the content of name.
	ReadFile(name string) ([]byte, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// Rename renames oldname to newname (rename(2): atomic, replaces newname).
	Rename(oldname, newname string) error
	// Remove removes a file.
	Remove(name string) error
	// RemoveAll removes path and everything below it; a missing path is
	// no error.
	RemoveAll(path string) error
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists dir sorted by name.
	ReadDir(dir string) ([]os.DirEntry, error)
	// Stat describes name.
	Stat(name string) (os.FileInfo, error)
	// SyncDir fsyncs a directory so that creates, renames and removes in it
	// are durable.
	SyncDir(dir string) error
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Name is the path the file was opened with.
	Name() string
	// Stat describes the open file.
	Stat() (os.FileInfo, error)
	// Preallocate reserves size bytes (fallocate(2)), extending the file.
	Preallocate(size int64) error
	// Allocate allocates the blocks of [off, off+n) (fallocate(2)),
	// extending the file only if the range passes its end. It reports
	// false without error when the file system cannot allocate ahead.
	Allocate(off, n int64) (bool, error)
	// Sync makes the file's data durable (fdatasync(2)).
	Sync() error
	// Truncate changes the file's size (ftruncate(2)); growing it adds a
	// hole.
	Truncate(size int64) error
	// PunchHole releases the blocks of [off, off+n), which then read as
	// zeros, keeping the size. It reports false without error when the
	// file system cannot punch holes (the range is left as it is).
	PunchHole(off, n int64) (bool, error)
	// SeekData returns the start of the first region holding data at or
	// after off (lseek SEEK_DATA), or -1 when the rest of the file is a hole
	// and therefore reads as zeros. A file system that cannot tell returns
	// off: callers must treat "data" as "maybe non-zero".
	SeekData(off int64) (int64, error)
	// SeekHole returns the start of the first hole at or after off (lseek
	// SEEK_HOLE); the end of the file counts as a hole.
	SeekHole(off int64) (int64, error)
	// Map maps the first size bytes of the file read-write and shared. The
	// mapping stays valid after the file is closed.
	Map(size int) (Mapping, error)
}

// Mapping is a shared read-write memory mapping of a file region.
type Mapping interface {
	// Bytes is the mapped memory. It must not be used after Unmap.
	Bytes() []byte
	// Sync writes Bytes()[from:to] back to the file and waits for the
	// device (msync MS_SYNC).
	Sync(from, to int) error
	// Unmap releases the mapping.
	Unmap() error
}

// OS returns the FS backed by the operating system.
func OS() FS { return osFS{} }

type osFS struct{}

func (fs osFS) Create(name string) (File, error) { return fs.CreatePerm(name, 0o644) }

func (osFS) CreatePerm(name string, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(path string) error                 { return os.RemoveAll(path) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) ReadDir(dir string) ([]os.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }
func (osFS) SyncDir(dir string) error                    { return fileutil.SyncDir(dir) }

type osFile struct{ *os.File }

func (f osFile) Preallocate(size int64) error { return fileutil.Preallocate(f.File, size) }

func (f osFile) Sync() error {
	if err := fileutil.Fdatasync(f.File); err != nil {
		return fmt.Errorf("fdatasync %s: %w", f.Name(), err)
	}
	return nil
}

func (f osFile) Allocate(off, n int64) (bool, error) { return fileutil.Allocate(f.File, off, n) }

func (f osFile) PunchHole(off, n int64) (bool, error) { return fileutil.PunchHole(f.File, off, n) }

func (f osFile) SeekData(off int64) (int64, error) {
	n, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, unix.ENXIO):
		return -1, nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP):
		return off, nil // no hole support: everything may be data
	default:
		return 0, fmt.Errorf("seek data %s: %w", f.Name(), err)
	}
}

func (f osFile) SeekHole(off int64) (int64, error) {
	n, err := unix.Seek(int(f.Fd()), off, unix.SEEK_HOLE)
	if err == nil {
		return n, nil
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENXIO) {
		st, serr := f.File.Stat()
		if serr != nil {
			return 0, serr
		}
		return st.Size(), nil
	}
	return 0, fmt.Errorf("seek hole %s: %w", f.Name(), err)
}

func (f osFile) Map(size int) (Mapping, error) {
	b, err := mmap.Map(f.File, size)
	if err != nil {
		return nil, err
	}
	return &osMapping{name: filepath.Base(f.Name()), data: b}, nil
}

type osMapping struct {
	name string
	data []byte
}

func (m *osMapping) Bytes() []byte { return m.data }

func (m *osMapping) Sync(from, to int) error {
	if err := mmap.Sync(m.data, from, to); err != nil {
		return fmt.Errorf("msync %s [%d,%d): %w", m.name, from, to, err)
	}
	return nil
}

func (m *osMapping) Unmap() error {
	err := mmap.Unmap(m.data)
	m.data = nil
	return err
}
