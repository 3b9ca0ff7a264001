package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
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
	return os.ReadFile(s.MetaPath(name))
}

// WriteMeta replaces metadata file name with data durably (tmp, fsync,
// rename, directory fsync).
func (s *Store) WriteMeta(name string, data []byte) error {
	if !metaName.MatchString(name) {
		return fmt.Errorf("%w: metadata name %q", ErrInvalidMessage, name)
	}
	dir := filepath.Join(s.opts.Dir, "config")
	if err := os.MkdirAll(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return fileutil.WriteFileAtomic(s.MetaPath(name), data, 0o600)
}
