package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
	"github.com/mqgate/mqgate/storage/internal/mmap"
)

// fileNameDigits is the width of a data file name. Part of the on-disk
// format; never change.
const fileNameDigits = 20

// dataFile is one memory-mapped data file of EntriesPerFile entries.
type dataFile struct {
	first int64  // logical offset of the file's first entry
	path  string // full path
	data  []byte // read-write mapping of the whole file
}

// fileName returns the name of the data file whose first entry is first.
func fileName(first int64) string {
	return fmt.Sprintf("%0*d", fileNameDigits, first*EntrySize)
}

// parseFileName returns the byte offset encoded in a data file name, or
// false when name is not one.
func parseFileName(name string) (int64, bool) {
	if len(name) != fileNameDigits {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name, 10, 64)
	return v, err == nil
}

// createDir creates dir and its missing parents, and fsyncs the parent of
// every directory it created, so that a new queue's directory survives a
// crash together with the files fsynced into it.
func createDir(dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		_, err := os.Stat(d)
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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created { // deepest first
		if err := fileutil.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// createDataFile creates, preallocates and maps the data file starting at
// first: write <name>.tmp, fallocate, fsync, rename, fsync the directory.
func createDataFile(dir string, first int64, size int) (*dataFile, error) {
	path := filepath.Join(dir, fileName(first))
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", tmp, err)
	}
	fail := func(err error) (*dataFile, error) {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	if err := fileutil.Preallocate(f, int64(size)); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("fsync %s: %w", tmp, err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("rename %s: %w", tmp, err))
	}
	if err := fileutil.SyncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return mapFile(f, path, first, size)
}

// openDataFile maps an existing data file. A file shorter than size is an
// error unless extend is set (the last file, whose tail was lost), in which
// case it is extended with zeros first.
func openDataFile(path string, first int64, size int, extend bool) (*dataFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	switch {
	case st.Size() == int64(size):
	case st.Size() < int64(size) && extend:
		if err := fileutil.Preallocate(f, int64(size)); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("fsync %s: %w", path, err)
		}
	default:
		f.Close()
		return nil, fmt.Errorf("%w: %s is %d bytes, want %d (EntriesPerFile changed?)", ErrCorrupt, path, st.Size(), size)
	}
	return mapFile(f, path, first, size)
}

// mapFile maps f and closes the descriptor: the mapping outlives it.
func mapFile(f *os.File, path string, first int64, size int) (*dataFile, error) {
	data, err := mmap.Map(f, size)
	closeErr := f.Close()
	if err != nil {
		return nil, err
	}
	if closeErr != nil {
		mmap.Unmap(data)
		return nil, fmt.Errorf("close %s: %w", path, closeErr)
	}
	return &dataFile{first: first, path: path, data: data}, nil
}

// entryAt decodes the entry at logical offset off, which must be in f.
func (f *dataFile) entryAt(off int64) Entry {
	return decodeEntry(f.data[(off-f.first)*EntrySize:])
}

// unmap releases the mapping; f must not be used afterwards.
func (f *dataFile) unmap() error {
	err := mmap.Unmap(f.data)
	f.data = nil
	if err != nil {
		return fmt.Errorf("unmap %s: %w", f.path, err)
	}
	return nil
}

// remove unmaps f and deletes its file. The caller syncs the directory.
func (f *dataFile) remove() error {
	err := f.unmap()
	if rmErr := os.Remove(f.path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	return err
}
