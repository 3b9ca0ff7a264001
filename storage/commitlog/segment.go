package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// File name suffixes; part of the on-disk format; never change.
const (
	tmpSuffix    = ".tmp"
	brokenSuffix = ".broken"
)

// segment is one mapped segment file. base and size never change. data is
// read under mu.RLock (readers, the flusher); the single appender writes
// the file below Written with pwrite (never through the mapping: see the
// package documentation, "Writes"); release takes mu.Lock, so a mapping
// is never unmapped while someone is inside it.
type segment struct {
	base int64
	size int64
	path string

	mu      sync.RWMutex
	mapping vfs.Mapping // nil for an empty file or after release
	data    []byte      // mapping.Bytes(); nil after release

	// allocated: the file's blocks below this (relative) offset are
	// allocated, so writes there cannot fail for want of space (see
	// "Disk space" in doc.go). It only grows; allocate raises it.
	allocated atomic.Int64

	// file is the open segment file: the appender pwrites records into
	// it and the flusher fdatasyncs it. The flusher closes it (under
	// mu.Lock) once the segment is sealed and flushed, release if it is
	// still open. The appender uses it only below Written's final value
	// for this segment, so the flusher never closes it under the
	// appender.
	file vfs.File
}

func (s *segment) end() int64 { return s.base + s.size }

// allocPage rounds allocations: fallocate works in blocks.
const allocPage = 4096

// allocate makes the blocks of the segment below the relative offset to
// (rounded up to a page, capped at the size) allocated, if they are not
// yet. It takes mu.RLock, so the file is not closed under it. A file
// system that cannot allocate ahead counts as allocated: writes there
// may then still meet a full disk, as they would without this.
func (s *segment) allocate(to int64) error {
	to = min(s.size, (to+allocPage-1)/allocPage*allocPage)
	from := s.allocated.Load()
	if from >= to {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.file == nil {
		return nil // sealed and flushed: nothing writes it again
	}
	ok, err := s.file.Allocate(from, to-from)
	if err != nil {
		return err
	}
	if !ok {
		to = s.size
	}
	for {
		cur := s.allocated.Load()
		if cur >= to || s.allocated.CompareAndSwap(cur, to) {
			return nil
		}
	}
}

// room is how many bytes past the relative offset rel are allocated.
func (s *segment) room(rel int64) int64 { return max(0, s.allocated.Load()-rel) }

// release closes the file and unmaps the segment once no reader is inside
// it.
func (s *segment) release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.file != nil {
		if err := s.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", s.path, err))
		}
		s.file = nil
	}
	if s.mapping != nil {
		if err := s.mapping.Unmap(); err != nil {
			errs = append(errs, fmt.Errorf("unmap %s: %w", s.path, err))
		}
	}
	s.mapping, s.data = nil, nil
	return errors.Join(errs...)
}

// closeFile closes the file of a sealed, flushed segment: nothing writes
// or syncs it again, and a log of many small segments keeps one open file
// per unflushed segment, not one per segment.
func (s *segment) closeFile() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file == nil {
		return nil
	}
	err := s.file.Close()
	s.file = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	return nil
}

// segmentName is the file name of the segment starting at base.
func segmentName(base int64) string { return fileutil.NumberedName(base) }

// parseSegmentName returns the base offset encoded in a segment file name.
func parseSegmentName(name string) (int64, bool) { return fileutil.ParseNumberedName(name) }

// createSegment makes a new, zero-filled segment of size bytes the durable
// way: <name>.tmp, ftruncate to size (a sparse file), fallocate of its
// first alloc bytes (the room that must exist before the segment is used:
// see "Disk space" in doc.go), fdatasync, rename, fsync the directory (etcd
// cut(); ARCHITECTURE.md, crash-consistency rule 2). The segment is
// returned mapped.
func createSegment(fs vfs.FS, dir string, base, size, alloc int64) (_ *segment, err error) {
	path := filepath.Join(dir, segmentName(base))
	if _, err := fs.Stat(path); err == nil {
		return nil, fmt.Errorf("create segment %s: %w", path, os.ErrExist)
	}
	tmp := path + tmpSuffix
	f, err := fs.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", tmp, err)
	}
	var mapping vfs.Mapping
	renamed := false
	defer func() {
		if err != nil {
			// Leave nothing behind, so the creation can be retried (a
			// failed directory fsync would otherwise leave a segment file
			// that blocks every later attempt).
			if mapping != nil {
				_ = mapping.Unmap()
			}
			_ = f.Close()
			if renamed {
				_ = fs.Remove(path)
			} else {
				_ = fs.Remove(tmp)
			}
		}
	}()
	if err := f.Truncate(size); err != nil {
		return nil, fmt.Errorf("size segment %s: %w", tmp, err)
	}
	alloc = min(size, (alloc+allocPage-1)/allocPage*allocPage)
	ok, err := f.Allocate(0, alloc)
	if err != nil {
		return nil, fmt.Errorf("preallocate segment %s: %w", tmp, err)
	}
	if !ok {
		alloc = size
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("sync segment %s: %w", tmp, err)
	}
	if mapping, err = f.Map(int(size)); err != nil {
		return nil, fmt.Errorf("map segment %s: %w", tmp, err)
	}
	if err := fs.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("rename segment %s: %w", tmp, err)
	}
	renamed = true
	if err := fs.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("sync dir after creating %s: %w", path, err)
	}
	// Reopen by the final name, so errors (and fault injection) name the
	// segment, not the .tmp it was created as.
	g, err := fs.OpenReadWrite(path)
	if err != nil {
		return nil, fmt.Errorf("reopen segment %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		_ = g.Close()
		return nil, fmt.Errorf("close segment %s: %w", tmp, err)
	}
	f = g
	seg := &segment{base: base, size: size, path: path, mapping: mapping, data: mapping.Bytes(), file: f}
	seg.allocated.Store(alloc)
	return seg, nil
}

// openSegment opens and maps an existing segment file. The file stays open
// (recovery uses it for hole detection, the appender and the flusher for
// the active segment); release closes it.
func openSegment(fs vfs.FS, dir string, base int64) (*segment, error) {
	path := filepath.Join(dir, segmentName(base))
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("stat segment %s: %w", path, err)
	}
	size := st.Size()
	if size > MaxSegmentSize {
		_ = f.Close()
		return nil, fmt.Errorf("%w: segment %s is %d bytes, more than %d", ErrCorrupt, path, size, MaxSegmentSize)
	}
	s := &segment{base: base, size: size, path: path, file: f}
	if size > 0 {
		m, err := f.Map(int(size))
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("map segment %s: %w", path, err)
		}
		s.mapping, s.data = m, m.Bytes()
	}
	return s, nil
}

// zeroChunk is compared against to find non-zero bytes quickly.
var zeroChunk = make([]byte, 64<<10)

// nonZeroSpan returns the first non-zero byte at or after from in data and
// one past the last one; ok is false when data[from:] is all zeros. When f
// is not nil its holes (SEEK_DATA/SEEK_HOLE) are skipped without reading
// them, so checking the unused tail of a big preallocated segment is cheap.
// The regions are listed before any is read: reading faults pages (and
// read-ahead) into the page cache, which SEEK_DATA would then report as
// data.
func nonZeroSpan(f vfs.File, data []byte, from int64) (first, end int64, ok bool, err error) {
	size := int64(len(data))
	regions := [][2]int64{{from, size}}
	if f != nil {
		regions = regions[:0]
		for off := from; off < size; {
			start, err := f.SeekData(off)
			if err != nil {
				return 0, 0, false, err
			}
			if start < 0 || start >= size {
				break
			}
			start = max(start, off)
			stop, err := f.SeekHole(start)
			if err != nil {
				return 0, 0, false, err
			}
			if stop <= start || stop > size {
				stop = size
			}
			regions = append(regions, [2]int64{start, stop})
			off = stop
		}
	}
	first, end = -1, -1
	for _, r := range regions {
		lo, hi := r[0], r[1]
		if lo >= hi {
			continue
		}
		if i := firstNonZero(data[lo:hi]); i >= 0 {
			if first < 0 {
				first = lo + int64(i)
			}
			end = lo + int64(lastNonZero(data[lo:hi])) + 1
		}
	}
	return first, end, first >= 0, nil
}

func firstNonZero(b []byte) int {
	for i := 0; i < len(b); i += len(zeroChunk) {
		chunk := b[i:min(i+len(zeroChunk), len(b))]
		if bytes.Equal(chunk, zeroChunk[:len(chunk)]) {
			continue
		}
		for j, c := range chunk {
			if c != 0 {
				return i + j
			}
		}
	}
	return -1
}

func lastNonZero(b []byte) int {
	for hi := len(b); hi > 0; hi -= len(zeroChunk) {
		lo := max(hi-len(zeroChunk), 0)
		chunk := b[lo:hi]
		if bytes.Equal(chunk, zeroChunk[:len(chunk)]) {
			continue
		}
		for j := len(chunk) - 1; j >= 0; j-- {
			if chunk[j] != 0 {
				return lo + j
			}
		}
	}
	return -1
}

// allocator prepares the next segment in the background (etcd
// file_pipeline, RocketMQ AllocateMappedFileService) so that a roll only
// swaps pointers. At most one request is outstanding: the appender takes a
// result and, when it is a segment, immediately asks for the following
// one; after a failure the next append that needs a segment asks again.
//
// It also allocates blocks ahead of the write position in the active
// segment when grow is signalled (Log.growActive), off the append path.
type allocator struct {
	fs       vfs.FS
	dir      string
	size     int64
	reserve  int64 // bytes of a new segment allocated at creation
	log      zerolog.Logger
	requests chan int64       // base of the segment wanted; cap 1
	results  chan allocResult // cap 1
	grow     chan struct{}    // cap 1: allocate ahead in the active segment
	growFn   func()
	// prepared is the segment created last and not yet taken (for Room).
	prepared atomic.Pointer[segment]
	// failures counts consecutive failed creations; only run touches it.
	failures int
}

type allocResult struct {
	seg *segment
	err error
}

func newAllocator(fs vfs.FS, dir string, size, reserve int64, log zerolog.Logger, growFn func()) *allocator {
	return &allocator{fs: fs, dir: dir, size: size, reserve: reserve, log: log, growFn: growFn,
		requests: make(chan int64, 1), results: make(chan allocResult, 1), grow: make(chan struct{}, 1)}
}

// run serves requests until stop is closed.
func (a *allocator) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case base := <-a.requests:
			seg, err := a.runOnce(base)
			if seg != nil {
				a.prepared.Store(seg)
			}
			a.results <- allocResult{seg: seg, err: err}
		case <-a.grow:
			a.growFn()
		}
	}
}

// runOnce creates the segment starting at base. While creations keep
// failing (a full disk: every append that needs the segment asks again)
// only the first failure, and every 100th, is logged as an error.
func (a *allocator) runOnce(base int64) (*segment, error) {
	start := time.Now()
	seg, err := createSegment(a.fs, a.dir, base, a.size, a.reserve)
	if err != nil {
		a.failures++
		ev := a.log.Debug()
		if a.failures%100 == 1 {
			ev = a.log.Error()
		}
		ev.Err(err).Int64("base", base).Int("failures", a.failures).
			Msg("preallocating next segment failed; appends that need it are refused until it succeeds")
		return nil, err
	}
	if a.failures > 0 {
		a.log.Info().Int64("base", base).Int("failures", a.failures).Msg("next segment preallocated again; appends resume")
		a.failures = 0
	}
	a.log.Debug().Int64("base", base).Dur("took", time.Since(start)).Msg("next segment preallocated")
	return seg, nil
}

// kickGrow asks for blocks ahead of the write position (coalesced).
func (a *allocator) kickGrow() {
	select {
	case a.grow <- struct{}{}:
	default:
	}
}

// request asks for the segment starting at base.
func (a *allocator) request(base int64) { a.requests <- base }

// take waits for the segment requested last, which must start at base.
func (a *allocator) take(base int64) (*segment, error) {
	r := <-a.results
	a.prepared.Store(nil)
	if r.err != nil {
		return nil, r.err
	}
	if r.seg.base != base {
		err := fmt.Errorf("commitlog: preallocated segment starts at %d, want %d", r.seg.base, base)
		_ = r.seg.release()
		return nil, err
	}
	return r.seg, nil
}

// discard removes a prepared segment nobody took (after run has returned).
// It was never written, so removing it loses nothing.
func (a *allocator) discard() error {
	select {
	case r := <-a.results:
		if r.seg == nil {
			return nil
		}
		err := r.seg.release()
		if rerr := a.fs.Remove(r.seg.path); rerr != nil && err == nil {
			err = rerr
		}
		if serr := a.fs.SyncDir(a.dir); serr != nil && err == nil {
			err = serr
		}
		return err
	default:
		return nil
	}
}

// discardReserve removes the reserved segments (after run has returned):
// they were never written, so removing them loses nothing.
func (l *Log) discardReserve() error {
	if len(l.reserve) == 0 {
		return nil
	}
	var errs []error
	for _, seg := range l.reserve {
		errs = append(errs, seg.release(), l.fs.Remove(seg.path))
	}
	l.reserve = nil
	errs = append(errs, l.fs.SyncDir(l.opts.Dir))
	return errors.Join(errs...)
}
