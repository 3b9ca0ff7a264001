package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// indexFiles are the files of raft/index: file base holds the entries of
// Raft indexes [base, base+per), entry i at (i-base)*IndexEntrySize.
type indexFiles struct {
	fs  vfs.FS
	dir string
	per uint64 // entries per file
	// tail is the open file of the last base written (tailBase).
	tail     vfs.File
	tailBase uint64
}

// base is the base of the file holding index i (>= 1).
func (x *indexFiles) base(i uint64) uint64 { return (i-1)/x.per*x.per + 1 }

func (x *indexFiles) path(base uint64) string {
	return filepath.Join(x.dir, fileutil.NumberedName(int64(base)))
}

// list returns the bases of the index files, in order.
func (x *indexFiles) list() ([]uint64, error) {
	des, err := x.fs.ReadDir(x.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var bases []uint64
	for _, de := range des {
		if n, ok := fileutil.ParseNumberedName(de.Name()); ok && n > 0 && !de.IsDir() {
			bases = append(bases, uint64(n))
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// read returns the bytes of the file base (nil if it is missing).
func (x *indexFiles) read(base uint64) ([]byte, error) {
	b, err := x.fs.ReadFile(x.path(base))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// open returns the file base for writing, creating it (and syncing the
// directory) if needed.
func (x *indexFiles) open(base uint64) (vfs.File, error) {
	if x.tail != nil && x.tailBase == base {
		return x.tail, nil
	}
	if x.tail != nil {
		if err := x.tail.Close(); err != nil {
			return nil, err
		}
		x.tail = nil
	}
	p := x.path(base)
	f, err := x.fs.OpenReadWrite(p)
	if errors.Is(err, os.ErrNotExist) {
		if f, err = x.fs.Create(p); err == nil {
			err = x.fs.SyncDir(x.dir)
		}
	}
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		return nil, fmt.Errorf("open raft index file %s: %w", p, err)
	}
	x.tail, x.tailBase = f, base
	return f, nil
}

// write writes the entries es (consecutive indexes) and fdatasyncs every
// file written.
func (x *indexFiles) write(es []entry) error {
	if err := x.writeUnsynced(es); err != nil {
		return err
	}
	return x.syncTail()
}

// syncTail fdatasyncs the file written last.
func (x *indexFiles) syncTail() error {
	if x.tail == nil {
		return nil
	}
	if err := x.tail.Sync(); err != nil {
		return fmt.Errorf("sync raft index: %w", err)
	}
	return nil
}

// writeUnsynced writes the entries es and fdatasyncs every file written
// but the last (syncTail's).
func (x *indexFiles) writeUnsynced(es []entry) error {
	for len(es) > 0 {
		base := x.base(es[0].index)
		n := min(uint64(len(es)), base+x.per-es[0].index)
		buf := make([]byte, n*IndexEntrySize)
		for k := uint64(0); k < n; k++ {
			putIndexEntry(buf[k*IndexEntrySize:], es[k])
		}
		f, err := x.open(base)
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(buf, int64(es[0].index-base)*IndexEntrySize); err != nil {
			return fmt.Errorf("write raft index: %w", err)
		}
		es = es[n:]
		if len(es) > 0 {
			if err := f.Sync(); err != nil {
				return fmt.Errorf("sync raft index: %w", err)
			}
		}
	}
	return nil
}

// truncateFrom removes the entries from index i on: the file holding i
// is cut at i's slot, the files after it are removed (newest first).
func (x *indexFiles) truncateFrom(i uint64) error {
	bases, err := x.list()
	if err != nil {
		return err
	}
	keep := x.base(i)
	removed := false
	for k := len(bases) - 1; k >= 0 && bases[k] > keep; k-- {
		if x.tail != nil && x.tailBase == bases[k] {
			_ = x.tail.Close()
			x.tail = nil
		}
		if err := x.fs.Remove(x.path(bases[k])); err != nil {
			return fmt.Errorf("remove raft index file: %w", err)
		}
		removed = true
	}
	if removed {
		if err := x.fs.SyncDir(x.dir); err != nil {
			return err
		}
	}
	f, err := x.open(keep)
	if err != nil {
		return err
	}
	if err := f.Truncate(int64(i-keep) * IndexEntrySize); err != nil {
		return fmt.Errorf("truncate raft index: %w", err)
	}
	return f.Sync()
}

// syncFrom fdatasyncs the files holding index i and after: entries read
// at Open may have been in the page cache only (a process crash), and
// Raft acknowledges what it reads as durable.
func (x *indexFiles) syncFrom(i uint64) error {
	bases, err := x.list()
	if err != nil {
		return err
	}
	for _, b := range bases {
		if b+x.per <= i {
			continue
		}
		f, err := x.open(b)
		if err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync raft index: %w", err)
		}
	}
	return nil
}

// removeBelow removes the files whose every entry is below i.
func (x *indexFiles) removeBelow(i uint64) error {
	bases, err := x.list()
	if err != nil {
		return err
	}
	removed := false
	for _, b := range bases {
		if b+x.per > i {
			break
		}
		if x.tail != nil && x.tailBase == b {
			_ = x.tail.Close()
			x.tail = nil
		}
		if err := x.fs.Remove(x.path(b)); err != nil {
			return fmt.Errorf("remove raft index file: %w", err)
		}
		removed = true
	}
	if removed {
		return x.fs.SyncDir(x.dir)
	}
	return nil
}

// removeAll removes every index file.
func (x *indexFiles) removeAll() error { return x.removeBelow(^uint64(0) - x.per) }

func (x *indexFiles) close() error {
	if x.tail == nil {
		return nil
	}
	err := x.tail.Close()
	x.tail = nil
	return err
}
