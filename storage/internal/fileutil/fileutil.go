// Package fileutil holds the file primitives the storage engines share:
// preallocation, fdatasync, directory fsync, atomic file replacement and a
// directory lock. Everything here is Linux/Unix first; it is deliberately
// small and has no knowledge of mqgate's formats.
package fileutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrLocked is returned by LockDir when another process holds the lock.
var ErrLocked = errors.New("fileutil: directory is locked by another process")

// Preallocate reserves size bytes for f with fallocate(2), so that later
// writes through a memory mapping can never hit ENOSPC (which would surface
// as SIGBUS). Filesystems without fallocate fall back to writing zeros.
func Preallocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("fallocate %s: %w", f.Name(), err)
	}
	return zeroFill(f, size)
}

func zeroFill(f *os.File, size int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for off := st.Size(); off < size; {
		n := int64(len(buf))
		if size-off < n {
			n = size - off
		}
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return fmt.Errorf("zero-fill %s: %w", f.Name(), err)
		}
		off += n
	}
	return nil
}

// Fdatasync flushes f's data (and the metadata needed to read it back).
func Fdatasync(f *os.File) error {
	return unix.Fdatasync(int(f.Fd()))
}

// SyncDir fsyncs a directory so that creates, renames and removes inside it
// are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

// WriteFileAtomic replaces path with data: write a temporary file, fsync
// it, rename it over path and fsync the directory (etcd's cut()).
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// DirLock is an exclusive advisory lock on a directory (flock on a LOCK
// file inside it), so that two processes never open one store.
type DirLock struct{ f *os.File }

// LockDir takes the lock or returns ErrLocked.
func LockDir(dir string) (*DirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, err
	}
	return &DirLock{f: f}, nil
}

// Unlock releases the lock. It is safe to call more than once.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor drops the flock
	l.f = nil
	return err
}

// DiskUsage returns the fraction of the filesystem holding dir that is in
// use (0..1), as df computes it for an unprivileged user.
func DiskUsage(dir string) (float64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	total := float64(st.Blocks) * float64(st.Bsize)
	avail := float64(st.Bavail) * float64(st.Bsize)
	free := float64(st.Bfree) * float64(st.Bsize)
	used := total - free
	if used+avail <= 0 {
		return 0, nil
	}
	return used / (used + avail), nil
}

// DiskBytes returns the size of the file system holding dir as df counts
// it for an unprivileged user (used plus available bytes): what the used
// fraction of DiskUsage is a fraction of.
func DiskBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Blocks-st.Bfree+st.Bavail) * int64(st.Bsize), nil
}

// WriteZeros writes zeros over [off, off+n) of f, so that the range has
// real, allocated blocks: a later write through a memory mapping into it can
// never hit ENOSPC (which would surface as SIGBUS), and its first write
// fault is cheap (fallocate'd blocks are unwritten extents, whose first
// write fault through a shared mapping waits for the file system journal).
// A full disk fails here, with ENOSPC. The range must hold no data the
// caller needs.
func WriteZeros(f interface {
	io.WriterAt
	Name() string
}, off, n int64) error {
	if n <= 0 {
		return nil
	}
	buf := make([]byte, min(n, 1<<20))
	for end := off + n; off < end; {
		m := min(int64(len(buf)), end-off)
		if _, err := f.WriteAt(buf[:m], off); err != nil {
			return fmt.Errorf("zero-fill %s: %w", f.Name(), err)
		}
		off += m
	}
	return nil
}

// Allocate makes the file system allocate the blocks of [off, off+n) of f
// (fallocate(2), mode 0: growing the file if the range passes its end,
// leaving it as it is otherwise), so that later writes there, through
// pwrite or a memory mapping, cannot fail for want of space. It reports
// false without error when the file system cannot allocate ahead (the
// range is left as it is: writes there may then still find the disk full).
func Allocate(f *os.File, off, n int64) (bool, error) {
	if n <= 0 {
		return true, nil
	}
	err := unix.Fallocate(int(f.Fd()), 0, off, n)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		return false, nil
	}
	return false, fmt.Errorf("fallocate %s [%d, %d): %w", f.Name(), off, off+n, err)
}

// PunchHole releases the blocks of [off, off+n) of f, which then reads as
// zeros; the size does not change. It reports false without error when the
// file system cannot punch holes (the range is left as it is).
func PunchHole(f *os.File, off, n int64) (bool, error) {
	if n <= 0 {
		return true, nil
	}
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		return false, nil
	}
	return false, fmt.Errorf("punch hole in %s [%d, %d): %w", f.Name(), off, off+n, err)
}

// NumberedNameWidth is the width of the numbered file names of the
// CommitLog, the ConsumeQueues and the index: a non-negative number printed
// as 20 decimal digits, so that lexical order is numeric order. Part of the
// on-disk format.
const NumberedNameWidth = 20

// NumberedName is the file name of number n (n >= 0).
func NumberedName(n int64) string { return fmt.Sprintf("%0*d", NumberedNameWidth, n) }

// ParseNumberedName returns the number of a NumberedName, and false for any
// other name (another width, a sign, a non-digit, or out of int64 range).
func ParseNumberedName(name string) (int64, bool) {
	if len(name) != NumberedNameWidth {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(name, 10, 64)
	return n, err == nil
}
