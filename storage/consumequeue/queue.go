package consumequeue

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// DefaultEntriesPerFile is RocketMQ's mappedFileSizeConsumeQueue / 20.
const DefaultEntriesPerFile = 300_000

// maxEntriesPerFile keeps a file under 2 GiB.
const maxEntriesPerFile = math.MaxInt32 / EntrySize

// slowSync is the msync duration above which Flush logs a warning.
const slowSync = time.Second

const (
	tmpSuffix = ".tmp"
	// noneDirty is Queue.dirtyFrom when nothing awaits a Flush.
	noneDirty = math.MaxInt64
)

// Options configures a Queue.
type Options struct {
	// Dir is the queue's directory, <data>/consumequeue/<topic>/<queueId>/.
	// It is created if missing. Required.
	Dir string
	// EntriesPerFile is the number of 20-byte entries per data file
	// (default 300 000, i.e. 6 000 000-byte sparse files whose blocks are
	// reserved as the queue grows). It must not change for an existing
	// queue. Tests use tiny values to force rolls.
	EntriesPerFile int
	// Logger receives warnings about recovery and slow syncs (default: no
	// logging).
	Logger zerolog.Logger
	// FS is the file system (default the operating system's; tests wrap
	// it to inject errors or to record crash images).
	FS vfs.FS
}

// withDefaults fills zero fields with their defaults and validates.
func (o Options) withDefaults() (Options, error) {
	if o.EntriesPerFile == 0 {
		o.EntriesPerFile = DefaultEntriesPerFile
	}
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	return o, o.Validate()
}

// Validate reports an unusable option. Zero values that have defaults are
// accepted.
func (o Options) Validate() error {
	if o.Dir == "" {
		return fmt.Errorf("%w: Dir is required", ErrInvalidOptions)
	}
	if o.EntriesPerFile < 0 || o.EntriesPerFile > maxEntriesPerFile {
		return fmt.Errorf("%w: EntriesPerFile %d outside 1..%d", ErrInvalidOptions, o.EntriesPerFile, maxEntriesPerFile)
	}
	return nil
}

// Queue is the ConsumeQueue of one (topic, queueId). One goroutine calls
// the mutators (Put, TruncateFrom, TruncateByPhysical, DeleteBelowPhysical);
// they are serialised anyway. Reads (Get, Read, LastEntry, MinOffset,
// MaxOffset) and Flush are safe concurrently with them and with each other.
type Queue struct {
	dir            string
	fs             vfs.FS
	entriesPerFile int64
	fileSize       int
	log            zerolog.Logger

	// writeMu serialises the mutators and Close. Holding it, a mutator may
	// read files and the mappings without mu, because only holders of both
	// locks change them.
	writeMu sync.Mutex
	// mu guards files, the mappings and closed: readers hold it shared
	// while they touch a mapping; structural changes and in-place
	// overwrites hold it exclusively.
	mu     sync.RWMutex
	files  []*dataFile // contiguous, ascending by first
	closed bool

	minOffset atomic.Int64
	storedMin atomic.Bool  // minOffset was read from or written to MINOFFSET
	maxOffset atomic.Int64 // published after the entry below it is written
	dirtyFrom atomic.Int64 // lowest offset written since the last Flush, or noneDirty
}

// Open opens the queue in opts.Dir, creating the directory if needed, and
// recovers MinOffset and MaxOffset from the files (see doc.go).
func Open(opts Options) (*Queue, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := createDir(opts.FS, opts.Dir); err != nil {
		return nil, fmt.Errorf("consumequeue: create %s: %w", opts.Dir, err)
	}
	q := &Queue{
		dir:            opts.Dir,
		fs:             opts.FS,
		entriesPerFile: int64(opts.EntriesPerFile),
		fileSize:       opts.EntriesPerFile * EntrySize,
		log:            opts.Logger.With().Str("component", "consumequeue").Str("dir", opts.Dir).Logger(),
	}
	q.dirtyFrom.Store(noneDirty)
	if err := q.load(); err != nil {
		for _, f := range q.files {
			f.unmap()
		}
		return nil, fmt.Errorf("consumequeue: open %s: %w", opts.Dir, err)
	}
	return q, nil
}

// HasStoredMin reports whether the minimum offset comes from MINOFFSET
// (retention or a reset moved it) rather than from the first data file.
func (q *Queue) HasStoredMin() bool { return q.storedMin.Load() }

// MinOffset returns the smallest readable offset.
func (q *Queue) MinOffset() int64 { return q.minOffset.Load() }

// MaxOffset returns the next offset to write; entries [MinOffset,
// MaxOffset) are readable.
func (q *Queue) MaxOffset() int64 { return q.maxOffset.Load() }

// fileFor returns the data file holding logical offset off, or nil. The
// caller holds mu or writeMu.
func (q *Queue) fileFor(off int64) *dataFile {
	if len(q.files) == 0 || off < q.files[0].first {
		return nil
	}
	i := (off - q.files[0].first) / q.entriesPerFile
	if i >= int64(len(q.files)) {
		return nil
	}
	return q.files[i]
}

// entryAt returns the entry at off, or an empty entry when no file holds
// it. The caller holds mu or writeMu.
func (q *Queue) entryAt(off int64) Entry {
	f := q.fileFor(off)
	if f == nil {
		return Entry{}
	}
	return f.entryAt(off)
}

// Put writes e at offset. offset == MaxOffset appends (rolling to a new
// file when needed); offset < MaxOffset overwrites in place, as an
// idempotent re-dispatch after a crash does; offset > MaxOffset is ErrGap
// and offset < MinOffset ErrOffsetTooSmall. An appended entry's
// CommitLogOffset must exceed the previous entry's (ErrInvalidEntry).
func (q *Queue) Put(offset int64, e Entry) error {
	if !e.valid() {
		return fmt.Errorf("%w: put %d: %+v", ErrInvalidEntry, offset, e)
	}
	q.writeMu.Lock()
	defer q.writeMu.Unlock()
	if q.closed {
		return ErrClosed
	}
	minOffset, maxOffset := q.minOffset.Load(), q.maxOffset.Load()
	switch {
	case offset < minOffset:
		return fmt.Errorf("%w: put %d, min %d", ErrOffsetTooSmall, offset, minOffset)
	case offset > maxOffset:
		return fmt.Errorf("%w: put %d, max %d", ErrGap, offset, maxOffset)
	case offset < maxOffset:
		return q.overwrite(offset, e)
	}

	if prev := q.entryAt(offset - 1); !prev.IsEmpty() && prev.CommitLogOffset >= e.CommitLogOffset {
		return fmt.Errorf("%w: put %d: commit log offset %d not above previous %d",
			ErrInvalidEntry, offset, e.CommitLogOffset, prev.CommitLogOffset)
	}
	f := q.fileFor(offset)
	if f == nil {
		var err error
		if f, err = q.roll(offset); err != nil {
			return fmt.Errorf("consumequeue: put %d: %w", offset, err)
		}
	}
	// Blocks first: a write through the mapping into a hole of a full
	// disk would be a SIGBUS; fallocate reports ENOSPC as an error.
	if err := f.reserve((offset - f.first + 1) * EntrySize); err != nil {
		return fmt.Errorf("consumequeue: put %d: %w", offset, err)
	}
	e.Encode(f.data[(offset-f.first)*EntrySize:])
	q.maxOffset.Store(offset + 1) // publish only after the bytes are in place
	q.markDirty(offset)
	return nil
}

// overwrite rewrites the entry at offset < MaxOffset. Readers are excluded
// for the copy so that none sees a torn entry; an identical entry is left
// alone.
func (q *Queue) overwrite(offset int64, e Entry) error {
	f := q.fileFor(offset)
	if f == nil {
		return fmt.Errorf("%w: no file holds offset %d below max %d", ErrCorrupt, offset, q.maxOffset.Load())
	}
	if f.entryAt(offset) == e {
		return nil
	}
	q.mu.Lock()
	e.Encode(f.data[(offset-f.first)*EntrySize:])
	q.mu.Unlock()
	q.markDirty(offset)
	return nil
}

// roll creates the data file that starts at offset's file boundary. The
// caller holds writeMu.
func (q *Queue) roll(offset int64) (*dataFile, error) {
	first := offset - offset%q.entriesPerFile
	if n := len(q.files); n > 0 && q.files[n-1].first+q.entriesPerFile != first {
		return nil, fmt.Errorf("%w: new file at %d does not follow the last file at %d",
			ErrCorrupt, first, q.files[n-1].first)
	}
	f, err := createDataFile(q.fs, q.dir, first, q.fileSize)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.files = append(q.files, f)
	q.mu.Unlock()
	return f, nil
}

// markDirty lowers dirtyFrom to offset.
func (q *Queue) markDirty(offset int64) {
	for {
		cur := q.dirtyFrom.Load()
		if offset >= cur || q.dirtyFrom.CompareAndSwap(cur, offset) {
			return
		}
	}
}

// Get returns the entry at offset: ErrOffsetTooSmall below MinOffset,
// ErrOffsetOutOfRange at or beyond MaxOffset.
func (q *Queue) Get(offset int64) (Entry, error) {
	var buf [1]Entry
	if _, err := q.Read(offset, buf[:]); err != nil {
		return Entry{}, err
	}
	return buf[0], nil
}

// Read copies up to len(dst) entries starting at offset into dst and
// returns how many it copied. It fails like Get when offset itself is not
// readable, and with ErrCorrupt (after the n good entries) on an empty or
// invalid entry below MaxOffset.
func (q *Queue) Read(offset int64, dst []Entry) (int, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return 0, ErrClosed
	}
	// Loaded under the read lock: truncation and retention change them
	// only under the write lock, so they match the files we see.
	minOffset, maxOffset := q.minOffset.Load(), q.maxOffset.Load()
	if offset < minOffset {
		return 0, fmt.Errorf("%w: read %d, min %d", ErrOffsetTooSmall, offset, minOffset)
	}
	if offset >= maxOffset {
		return 0, fmt.Errorf("%w: read %d, max %d", ErrOffsetOutOfRange, offset, maxOffset)
	}
	n := int(min(int64(len(dst)), maxOffset-offset))
	for i := 0; i < n; {
		off := offset + int64(i)
		f := q.fileFor(off)
		if f == nil {
			return i, fmt.Errorf("%w: no file holds offset %d below max %d", ErrCorrupt, off, maxOffset)
		}
		for pos := (off - f.first) * EntrySize; i < n && pos < int64(len(f.data)); pos += EntrySize {
			e := decodeEntry(f.data[pos:])
			if !e.valid() {
				return i, fmt.Errorf("%w: entry %d below max %d is %+v", ErrCorrupt, offset+int64(i), maxOffset, e)
			}
			dst[i] = e
			i++
		}
	}
	return n, nil
}

// LastEntry returns the entry at MaxOffset-1, or false when the queue has
// no readable entry.
func (q *Queue) LastEntry() (Entry, bool) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	maxOffset := q.maxOffset.Load()
	if q.closed || maxOffset <= q.minOffset.Load() {
		return Entry{}, false
	}
	e := q.entryAt(maxOffset - 1)
	return e, e.valid()
}

// Flush msyncs every entry written since the last Flush. It may run
// concurrently with Put.
func (q *Queue) Flush() error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return ErrClosed
	}
	return q.flushLocked()
}

// flushLocked syncs [dirtyFrom, MaxOffset). The caller holds mu (shared or
// exclusive). On failure the range stays dirty.
func (q *Queue) flushLocked() error {
	from := q.dirtyFrom.Swap(noneDirty)
	if from == noneDirty {
		return nil
	}
	if err := q.syncRange(from, q.maxOffset.Load()); err != nil {
		q.markDirty(from)
		return fmt.Errorf("consumequeue: flush: %w", err)
	}
	return nil
}

// syncRange msyncs the entries [from, to) that are still mapped. The
// caller holds mu or writeMu.
func (q *Queue) syncRange(from, to int64) error {
	start := time.Now()
	for _, f := range q.files {
		lo, hi := max(from, f.first), min(to, f.first+q.entriesPerFile)
		if lo >= hi {
			continue
		}
		if err := f.m.Sync(int((lo-f.first)*EntrySize), int((hi-f.first)*EntrySize)); err != nil {
			return fmt.Errorf("msync %s: %w", f.path, err)
		}
	}
	if took := time.Since(start); took > slowSync {
		q.log.Warn().Dur("took", took).Int64("from", from).Int64("to", to).Msg("slow consume queue msync")
	}
	return nil
}

// Close flushes and unmaps the queue. It is idempotent; every other method
// returns ErrClosed afterwards (MinOffset and MaxOffset keep their last
// values).
func (q *Queue) Close() error {
	q.writeMu.Lock()
	defer q.writeMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	err := q.flushLocked()
	for _, f := range q.files {
		err = errors.Join(err, f.unmap())
	}
	q.files = nil
	return err
}

// Remove closes the queue and deletes its directory (topic deletion).
func (q *Queue) Remove() error {
	err := q.Close()
	if rmErr := q.fs.RemoveAll(q.dir); rmErr != nil {
		return errors.Join(err, fmt.Errorf("consumequeue: remove %s: %w", q.dir, rmErr))
	}
	return errors.Join(err, q.fs.SyncDir(filepath.Dir(q.dir)))
}
