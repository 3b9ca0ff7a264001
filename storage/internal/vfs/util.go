package vfs

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
)

// WriteFileAtomic replaces path with data on fs: a temporary file
// (<path>.tmp, mode perm), written, fdatasync'd, renamed over path, then
// the directory fsync'd (etcd's cut()). A crash leaves either the old file
// or the new one, never a mix; a leftover .tmp is the caller's to ignore.
func WriteFileAtomic(fs FS, path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := fs.CreatePerm(tmp, perm)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		_ = f.Close()
		_ = fs.Remove(tmp)
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = fs.Remove(tmp)
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		_ = fs.Remove(tmp)
		return err
	}
	return fs.SyncDir(filepath.Dir(path))
}

// MkdirAllSync creates dir and its missing parents and fsyncs the parent
// of every directory it created (deepest first), so that the new
// directories survive a crash together with the files later fsynced into
// them.
func MkdirAllSync(fs FS, dir string, perm os.FileMode) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		_, err := fs.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range created {
		if err := fs.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// WriteZeros writes zeros over [off, off+n) of f, so that the range has
// real, allocated blocks (see fileutil.WriteZeros).
func WriteZeros(f File, off, n int64) error { return fileutil.WriteZeros(f, off, n) }
