package storage

import (
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// Small metadata files (topic and group configuration, the receipt key,
// offset snapshots) live in <dir>/config/<name>, each replaced atomically.

var metaName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// MetaPath is the path of metadata file name.
func (s *Store) MetaPath(name string) string {
	return filepath.Join(s.opts.Dir, "config", name)
}

// ReadMeta returns the content of metadata file name, or os.ErrNotExist.
func (s *Store) ReadMeta(name string) ([]byte, error) {
	if !metaName.MatchString(name) {
		return nil, fmt.Errorf("%w: metadata name %q", ErrInvalidMessage, name)
	}
	return s.opts.FS.ReadFile(s.MetaPath(name))
}

// WriteMeta replaces metadata file name with data durably (tmp, fsync,
// rename, directory fsync).
func (s *Store) WriteMeta(name string, data []byte) error {
	if !metaName.MatchString(name) {
		return fmt.Errorf("%w: metadata name %q", ErrInvalidMessage, name)
	}
	dir := filepath.Join(s.opts.Dir, "config")
	if err := vfs.MkdirAllSync(s.opts.FS, dir, 0o700); err != nil {
		return err
	}
	return vfs.WriteFileAtomic(s.opts.FS, s.MetaPath(name), data, 0o600)
}

// FS is the file system the store writes through (Options.FS): its user
// writes its own files under Dir through it too (the broker's timer
// index), so that a test that records crash images sees them.
func (s *Store) FS() vfs.FS { return s.opts.FS }
