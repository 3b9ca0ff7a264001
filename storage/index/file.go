package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"path/filepath"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// littleEndianHost says whether a uint32 loaded from memory must be
// byte-swapped to read the big-endian slot it holds.
var littleEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// file is one mapped index file.
type file struct {
	path       string
	base       int64 // base timestamp = name
	mapping    vfs.Mapping
	data       []byte // mapping.Bytes(), exactly fileSize(slotCount, capacity) long
	slotCount  uint32
	capacity   uint32
	entriesOff int

	// refs counts the Index's own reference (dropped by DeleteBelow or
	// Close) plus one per Lookup or Flush in progress; the last release
	// unmaps.
	refs atomic.Int32
	// published is the number of entries readers may follow: entry i is
	// complete before published reaches i, and published reaches i before
	// any slot points to i.
	published atomic.Uint32

	// Writer state, guarded by Index.mu. For files other than the current
	// one it never changes.
	count     uint32
	slotsUsed uint32
	beginTS   int64
	endTS     int64
	beginPhy  int64
	endPhy    int64
	sealed    bool // no more entries go into this file
	dirty     bool // the durable header lacks FlagClean (required before writing)

	hdrMu sync.Mutex
	hdr   header // the last header written (and msynced); guarded by hdrMu
}

func newFile(path string, base int64, slotCount, capacity uint32) *file {
	return &file{
		path:       path,
		base:       base,
		slotCount:  slotCount,
		capacity:   capacity,
		entriesOff: HeaderRegionSize + SlotSize*int(slotCount),
		beginPhy:   -1,
		endPhy:     -1,
	}
}

// mapFile maps the first fileSize bytes of fh (which the caller then
// closes: the mapping outlives the descriptor).
func (f *file) mapFile(fh vfs.File) error {
	size := fileSize(f.slotCount, f.capacity)
	if size > math.MaxInt {
		return fmt.Errorf("%w: %s: %d bytes cannot be mapped", ErrCorrupt, f.path, size)
	}
	m, err := fh.Map(int(size))
	if err != nil {
		return fmt.Errorf("map %s: %w", f.path, err)
	}
	f.mapping = m
	f.data = m.Bytes()
	f.refs.Store(1)
	return nil
}

// release drops one reference; the last one unmaps the file.
func (f *file) release() error {
	if f.refs.Add(-1) != 0 {
		return nil
	}
	f.data = nil
	if err := f.mapping.Unmap(); err != nil {
		return fmt.Errorf("unmap %s: %w", filepath.Base(f.path), err)
	}
	return nil
}

func (f *file) slotPtr(k uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&f.data[HeaderRegionSize+SlotSize*int(k)]))
}

// loadSlot atomically reads slot k (k < slotCount).
func (f *file) loadSlot(k uint32) uint32 {
	v := atomic.LoadUint32(f.slotPtr(k))
	if littleEndianHost {
		v = bits.ReverseBytes32(v)
	}
	return v
}

// storeSlot atomically sets slot k to entry number v.
func (f *file) storeSlot(k, v uint32) {
	if littleEndianHost {
		v = bits.ReverseBytes32(v)
	}
	atomic.StoreUint32(f.slotPtr(k), v)
}

// entryBytes is entry i (1 <= i <= capacity).
func (f *file) entryBytes(i uint32) []byte {
	off := f.entriesOff + EntrySize*int(i-1)
	return f.data[off : off+EntrySize : off+EntrySize]
}

func (f *file) readEntry(i uint32) entry { return decodeEntry(f.entryBytes(i)) }

// entriesEnd is the byte offset just past entry n.
func (f *file) entriesEnd(n uint32) int { return f.entriesOff + EntrySize*int(n) }

// syncData msyncs slots and entries 1..n.
func (f *file) syncData(n uint32) error {
	if err := f.mapping.Sync(HeaderRegionSize, f.entriesEnd(n)); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Base(f.path), err)
	}
	return nil
}

// state builds a header from the writer state.
func (f *file) state(flags uint16, indexedPhy int64) header {
	return header{
		flags:      flags,
		slotCount:  f.slotCount,
		capacity:   f.capacity,
		baseTS:     f.base,
		beginTS:    f.beginTS,
		endTS:      f.endTS,
		beginPhy:   f.beginPhy,
		endPhy:     f.endPhy,
		indexedPhy: indexedPhy,
		slotsUsed:  f.slotsUsed,
		entryCount: f.count,
	}
}

// writeHeader makes h durable: copy A, msync, copy B, msync. The caller
// holds hdrMu. h.generation is set here.
func (f *file) writeHeader(h header) error {
	h.generation = f.hdr.generation + 1
	var buf [HeaderSize]byte
	h.encode(buf[:])
	for _, off := range [2]int{0, HeaderCopyOffset} {
		copy(f.data[off:off+HeaderSize], buf[:])
		if err := f.mapping.Sync(off, off+HeaderSize); err != nil {
			return fmt.Errorf("sync header of %s: %w", filepath.Base(f.path), err)
		}
	}
	f.hdr = h
	return nil
}

// setHeader installs a decoded header as the writer state.
func (f *file) setHeader(h header) {
	f.hdr = h
	f.count = h.entryCount
	f.published.Store(h.entryCount)
	f.slotsUsed = h.slotsUsed
	f.beginTS, f.endTS = h.beginTS, h.endTS
	f.beginPhy, f.endPhy = h.beginPhy, h.endPhy
}

// createFile creates, preallocates and maps a new empty file: name.tmp,
// fallocate, both header copies, fdatasync, rename, directory fsync.
func createFile(fs vfs.FS, dir string, base int64, slotCount, capacity uint32, indexedPhy int64) (*file, error) {
	path := filepath.Join(dir, fileName(base))
	f := newFile(path, base, slotCount, capacity)
	size := fileSize(slotCount, capacity)
	if size > math.MaxInt {
		return nil, fmt.Errorf("%w: file of %d bytes cannot be mapped", ErrInvalidArgument, size)
	}
	h := f.state(0, indexedPhy)
	h.generation = 1
	if err := writeNewFile(fs, path+".tmp", size, &h); err != nil {
		_ = fs.Remove(path + ".tmp")
		return nil, err
	}
	if err := fs.Rename(path+".tmp", path); err != nil {
		_ = fs.Remove(path + ".tmp")
		return nil, fmt.Errorf("rename %s.tmp: %w", path, err)
	}
	if err := mapNewFile(fs, dir, f); err != nil {
		// Best effort: an empty orphan would sit between this file's
		// predecessor and the one a retry creates (Open skips it anyway).
		_ = fs.Remove(path)
		return nil, err
	}
	f.hdr = h
	f.dirty = true // the header has no FlagClean
	return f, nil
}

// mapNewFile fsyncs the directory after the rename and maps f through a
// descriptor opened by its final name, so msync errors and error injection
// name the real file.
func mapNewFile(fs vfs.FS, dir string, f *file) error {
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	fh, err := fs.OpenReadWrite(f.path)
	if err != nil {
		return fmt.Errorf("open %s: %w", f.path, err)
	}
	err = f.mapFile(fh)
	if cerr := fh.Close(); err == nil && cerr != nil {
		_ = f.release()
		err = fmt.Errorf("close %s: %w", f.path, cerr)
	}
	return err
}

// writeNewFile creates tmp with size bytes (fallocate'd zeros) and both
// copies of h, and fdatasyncs it.
func writeNewFile(fs vfs.FS, tmp string, size int64, h *header) error {
	fh, err := fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	var region [HeaderRegionSize]byte
	h.encode(region[:])
	copy(region[HeaderCopyOffset:], region[:HeaderSize])
	if err = fh.Preallocate(size); err != nil {
		err = fmt.Errorf("preallocate %s: %w", tmp, err)
	} else if _, err = fh.WriteAt(region[:], 0); err != nil {
		err = fmt.Errorf("write header of %s: %w", tmp, err)
	} else if err = fh.Sync(); err != nil {
		err = fmt.Errorf("sync %s: %w", tmp, err)
	}
	if cerr := fh.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", tmp, cerr)
	}
	return err
}
