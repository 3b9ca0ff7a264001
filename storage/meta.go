package storage

import (
	"errors"
	"fmt"
	"os"
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

// ownMeta names the metadata files that describe this store's files
// rather than the log's content (the scrubber's position, quarantined
// ranges, repaired ranges, a replica's damage mark): a copy of the store for another replica
// leaves them out.
var ownMeta = map[string]bool{scrubFile: true, quarantineFile: true, repairFile: true, damageFile: true}

// MetaFiles reads every metadata file a copy of the store carries to
// another replica: the files of <dir>/config except the store's own
// (scrub position, quarantine, repairs) and unfinished replacements.
func (s *Store) MetaFiles() (map[string][]byte, error) {
	des, err := s.opts.FS.ReadDir(filepath.Join(s.opts.Dir, "config"))
	if errors.Is(err, os.ErrNotExist) {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(des))
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() || !CopiedMeta(name) {
			continue
		}
		b, err := s.ReadMeta(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // replaced meanwhile by a rename: the new one is read if listed
		}
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// CopiedMeta reports whether name is a metadata file a copy of the store
// carries (MetaFiles): a valid name, not a temporary file, not one of the
// store's own.
func CopiedMeta(name string) bool {
	return metaName.MatchString(name) && !ownMeta[name] && filepath.Ext(name) != ".tmp"
}

// FS is the file system the store writes through (Options.FS): its user
// writes its own files under Dir through it too (the broker's timer
// index), so that a test that records crash images sees them.
func (s *Store) FS() vfs.FS { return s.opts.FS }
