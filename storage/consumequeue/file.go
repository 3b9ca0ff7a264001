package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// dataFile is one memory-mapped data file of EntriesPerFile entries.
type dataFile struct {
	first int64  // logical offset of the file's first entry
	path  string // full path
	data  []byte // read-write mapping of the whole file (m.Bytes())
	m     vfs.Mapping
	fs    vfs.FS
	// reserved is how many bytes from the start of the file are known to
	// have blocks (written or fallocate'd); Put reserves more before it
	// writes beyond. Guarded by Queue.writeMu.
	reserved int64
	// fd is open only during Open's recovery (pread, pwrite, hole
	// punching); nil afterwards.
	fd vfs.File
}

// Block reservation ahead of the write position (see doc.go, "Allocation").
const (
	pageSize       = 4096
	minReserveStep = 4 << 10
	maxReserveStep = 1 << 20
)

// fileName returns the name of the data file whose first entry is first.
func fileName(first int64) string { return fileutil.NumberedName(first * EntrySize) }

// parseFileName returns the byte offset encoded in a data file name, or
// false for any other name.
func parseFileName(name string) (int64, bool) { return fileutil.ParseNumberedName(name) }

// createDir creates dir and its missing parents, and fsyncs the parent of
// every directory it created, so that a new queue's directory survives a
// crash together with the files fsynced into it.
func createDir(fs vfs.FS, dir string) error {
	return vfs.MkdirAllSync(fs, dir, 0o755)
}

// createDataFile creates and maps the sparse data file starting at first:
// <name>.tmp, ftruncate to full size, zeros written over the first page (its
// reserved blocks), fsync, rename, fsync the directory.
func createDataFile(fs vfs.FS, dir string, first int64, size int) (*dataFile, error) {
	path := filepath.Join(dir, fileName(first))
	tmp := path + tmpSuffix
	f, err := fs.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", tmp, err)
	}
	fail := func(err error) (*dataFile, error) {
		f.Close()
		fs.Remove(tmp)
		return nil, err
	}
	if err := f.Truncate(int64(size)); err != nil {
		return fail(fmt.Errorf("truncate %s: %w", tmp, err))
	}
	reserved := min(int64(pageSize), int64(size))
	if err := vfs.WriteZeros(f, 0, reserved); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("fsync %s: %w", tmp, err))
	}
	if err := fs.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("rename %s: %w", tmp, err))
	}
	if err := fs.SyncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	df, err := mapFile(fs, f, path, first, size)
	if err != nil {
		return nil, err
	}
	df.reserved = reserved
	return df, df.closeFD()
}

// openDataFile maps an existing data file and keeps its descriptor open
// for recovery (closeFD releases it). A file shorter than size is an error
// unless extend is set (the last file, whose tail was lost), in which case
// it is extended to size with ftruncate (sparse zeros) first.
func openDataFile(fs vfs.FS, path string, first int64, size int, extend bool) (*dataFile, error) {
	f, err := fs.OpenReadWrite(path)
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
		if err := f.Truncate(int64(size)); err != nil {
			f.Close()
			return nil, fmt.Errorf("extend %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("fsync %s: %w", path, err)
		}
	default:
		f.Close()
		return nil, fmt.Errorf("%w: %s is %d bytes, want %d (EntriesPerFile changed?)", ErrCorrupt, path, st.Size(), size)
	}
	return mapFile(fs, f, path, first, size)
}

// mapFile maps f; the descriptor stays in the dataFile until closeFD (the
// mapping outlives it). On failure f is closed.
func mapFile(fs vfs.FS, f vfs.File, path string, first int64, size int) (*dataFile, error) {
	m, err := f.Map(size)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &dataFile{first: first, path: path, data: m.Bytes(), m: m, fs: fs, fd: f}, nil
}

// closeFD closes the descriptor kept for recovery, if any.
func (f *dataFile) closeFD() error {
	if f.fd == nil {
		return nil
	}
	err := f.fd.Close()
	f.fd = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", f.path, err)
	}
	return nil
}

// reserve makes sure the blocks of the file's first need bytes exist,
// writing zeros over a step that doubles with what is already reserved
// (see doc.go, "Allocation"). Everything from the reserved end on lies
// beyond the write position, so it holds no entry. The caller holds
// Queue.writeMu.
func (f *dataFile) reserve(need int64) error {
	if need <= f.reserved {
		return nil
	}
	size := int64(len(f.data))
	step := min(max(f.reserved, minReserveStep), maxReserveStep)
	end := min(size, max(roundUp(need, pageSize), roundUp(f.reserved+step, pageSize)))
	fh, err := f.fs.OpenReadWrite(f.path)
	if err != nil {
		return fmt.Errorf("reserve blocks of %s: %w", f.path, err)
	}
	err = vfs.WriteZeros(fh, f.reserved, end-f.reserved)
	if closeErr := fh.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("close %s: %w", f.path, closeErr)
	}
	if err != nil {
		return err
	}
	f.reserved = end
	return nil
}

// roundUp rounds n up to a multiple of m.
func roundUp(n, m int64) int64 { return (n + m - 1) / m * m }

// readEntries preads the entries [from, from+len(dst)) of f into dst
// through the descriptor kept for recovery, without touching the mapping.
func (f *dataFile) readEntries(from int64, dst []Entry) error {
	buf := make([]byte, len(dst)*EntrySize)
	if _, err := f.fd.ReadAt(buf, (from-f.first)*EntrySize); err != nil {
		return fmt.Errorf("read %s: %w", f.path, err)
	}
	for i := range dst {
		dst[i] = decodeEntry(buf[i*EntrySize:])
	}
	return nil
}

// entryAt decodes the entry at logical offset off, which must be in f.
func (f *dataFile) entryAt(off int64) Entry {
	return decodeEntry(f.data[(off-f.first)*EntrySize:])
}

// unmap releases the mapping; f must not be used afterwards.
func (f *dataFile) unmap() error {
	err := errors.Join(f.m.Unmap(), f.closeFD())
	f.data, f.m = nil, nil
	if err != nil {
		return fmt.Errorf("unmap %s: %w", f.path, err)
	}
	return nil
}

// remove unmaps f and deletes its file. The caller syncs the directory.
func (f *dataFile) remove() error {
	err := f.unmap()
	if rmErr := f.fs.Remove(f.path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	return err
}
